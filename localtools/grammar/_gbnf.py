"""Reading GBNF files (``grammars/*.gbnf``) into ``Grammar`` objects."""

from __future__ import annotations

import json
import re

from ._expr import Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, alt, seq

__all__ = ["parse_gbnf"]


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<define>::=)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<chars>\[(?:[^\]\\]|\\.)*\])
  | (?P<name>[a-zA-Z][a-zA-Z0-9-]*)
  | (?P<brace>\{\s*\d+\s*(?:,\s*\d*\s*)?\})
  | (?P<op>[()|*+?.])
    """,
    re.VERBOSE,
)


def _unescape(body: str) -> str:
    # GBNF escapes are JSON's plus \xNN; both map onto Python's unicode_escape safely here.
    return json.loads('"' + re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", body) + '"')


def parse_gbnf(text: str, *, placeholders: dict[str, Expr] | None = None) -> Grammar:
    """Read a GBNF file into a ``Grammar``; names in ``placeholders`` are substituted."""
    placeholders = placeholders or {}
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            line = text.count("\n", 0, pos) + 1
            raise ValueError(f"GBNF syntax error at line {line}: {text[pos:pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append((kind, m.group()))
    grammar = Grammar()
    i = 0

    def rule_start(j: int) -> bool:
        return j + 1 < len(tokens) and tokens[j][0] == "name" and tokens[j + 1][0] == "define"

    def parse_alt() -> Expr:
        nonlocal i
        options = [parse_seq()]
        while i < len(tokens) and tokens[i] == ("op", "|"):
            i += 1
            options.append(parse_seq())
        return alt(*options)

    def parse_seq() -> Expr:
        nonlocal i
        items: list[Expr] = []
        while i < len(tokens) and not rule_start(i) and tokens[i] not in (("op", "|"), ("op", ")")):
            items.append(parse_postfix())
        return seq(*items)

    def parse_postfix() -> Expr:
        nonlocal i
        e = parse_atom()
        while i < len(tokens):
            kind, val = tokens[i]
            if (kind, val) == ("op", "*"):
                e = Repeat(e, 0, None)
            elif (kind, val) == ("op", "+"):
                e = Repeat(e, 1, None)
            elif (kind, val) == ("op", "?"):
                e = Repeat(e, 0, 1)
            elif kind == "brace":
                nums = val.strip("{} ").split(",")
                lo = int(nums[0])
                hi = lo if len(nums) == 1 else (int(nums[1]) if nums[1].strip() else None)
                e = Repeat(e, lo, hi)
            else:
                break
            i += 1
        return e

    def parse_atom() -> Expr:
        nonlocal i
        kind, val = tokens[i]
        i += 1
        if kind == "string":
            return Lit(_unescape(val[1:-1]))
        if kind == "chars":
            return Chars(val[1:-1])
        if kind == "name":
            return placeholders.get(val, Ref(val))
        if (kind, val) == ("op", "."):
            return Any_()
        if (kind, val) == ("op", "("):
            e = parse_alt()
            if i >= len(tokens) or tokens[i] != ("op", ")"):
                raise ValueError("GBNF syntax error: missing ')'")
            i += 1
            return e
        raise ValueError(f"GBNF syntax error: unexpected {val!r}")

    while i < len(tokens):
        if not rule_start(i):
            raise ValueError(f"GBNF syntax error: expected 'name ::=' but found {tokens[i][1]!r}")
        name = tokens[i][1]
        i += 2
        grammar.rules[name] = parse_alt()
    return grammar
