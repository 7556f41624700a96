"""A ``Grammar`` for each mask engine: GBNF (llama.cpp, xgrammar), Lark (llguidance) or one
regular expression (outlines_core, when nothing recurses)."""

from __future__ import annotations

import json
import re

from .._errors import GrammarNotRegular
from ._chars import _regex_char, _regex_class
from ._nodes import Alt, Any_, Chars, Expr, Lit, Ref, Repeat, Rules, Seq, Text, Until, rewrite
from ._text import text_terminal, until_terminal

__all__ = ["MAX_REGEX", "to_gbnf", "to_lark", "to_regex"]


def to_gbnf(grammar: Rules) -> str:
    """llama.cpp's GBNF, reachable rules only, root first."""
    if grammar.root != "root":
        # GBNF engines start at the rule named "root", whatever comes first.
        raise ValueError(f"a grammar rendered as GBNF needs its start rule named 'root', not {grammar.root!r}")
    g = grammar.lowered()
    return "\n".join(f"{name} ::= {_gbnf(g.rules[name], top=True)}" for name in g.reachable()) + "\n"


def to_lark(grammar: Rules) -> str:
    """Lark as llguidance reads it (see ``Grammar.to_lark``)."""
    g = _text_last(grammar)
    names = g.reachable()
    safe: dict[str, str] = {}
    for name in names:
        base = "r_" + re.sub(r"[^a-z0-9_]", "_", name.lower())
        candidate, i = base, 1
        while candidate in safe.values():
            i += 1
            candidate = f"{base}_{i}"
        safe[name] = candidate
    terminals: dict[Text | Until, str] = {}
    lines = [f"start: {safe[g.root]}"]
    lines += [f"{safe[name]}: {_lark(g.rules[name], safe, terminals, top=True)}" for name in names]
    lines += [f"{name}: {text_terminal(node) if isinstance(node, Text) else until_terminal(node)}"
              for node, name in terminals.items()]
    return "\n".join(lines) + "\n"

def _text_last(grammar: Rules) -> Rules:
    texts = {n for n, e in grammar.rules.items() if isinstance(e, Text)}

    def cut(e: Expr) -> Expr | None:
        if isinstance(e, Seq):
            first = e.items[0]
            if isinstance(first, Text) or (isinstance(first, Ref) and first.name in texts):
                return first
        return None

    return grammar.with_rules({n: rewrite(e, cut) for n, e in grammar.rules.items()})

#: The longest regular expression ``to_regex`` writes: each rule is spelled where it is used, so a
#: rule used twice a level (a free value's levels) doubles the text each level.
MAX_REGEX = 4_000_000


def to_regex(grammar: Rules) -> str:
    """One regular expression (Rust ``regex`` syntax) for the whole language; ``GrammarNotRegular``
    when a rule refers to itself, or would be spelled longer than ``MAX_REGEX`` characters."""
    g = grammar.lowered()
    _regex_length(Ref(g.root), g.rules, {}, ())
    return _regex(Ref(g.root), g.rules, ())


def _regex_length(e: Expr, rules: dict[str, Expr], known: dict[str, int], stack: tuple[str, ...]) -> int:
    """About how long ``_regex`` spells ``e`` (each rule measured once), before it spells anything."""
    if isinstance(e, Ref):
        if e.name in stack:
            raise GrammarNotRegular(f"rule {e.name!r} refers to itself ({' -> '.join((*stack, e.name))})")
        if e.name not in known:
            known[e.name] = 4 + _regex_length(rules[e.name], rules, known, (*stack, e.name))
            if known[e.name] > MAX_REGEX:
                raise GrammarNotRegular(f"rule {e.name!r} would take more than {MAX_REGEX} characters as one regular "
                                        f"expression ({' -> '.join((*stack, e.name))})")
        return known[e.name]
    if isinstance(e, (Seq, Alt)):
        return 4 + sum(_regex_length(it, rules, known, stack) for it in (e.items if isinstance(e, Seq) else e.options))
    if isinstance(e, Repeat):
        return 12 + _regex_length(e.item, rules, known, stack)
    return 8 * len(e.text) if isinstance(e, Lit) else len(e.body) + 2 if isinstance(e, Chars) else 8

def _gbnf_string(text: str) -> str:
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _gbnf(e: Expr, top: bool = False) -> str:
    if isinstance(e, Lit):
        return _gbnf_string(e.text)
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Chars):
        return f"[{e.body}]"
    if isinstance(e, Any_):
        return "."
    if isinstance(e, Seq):
        body = " ".join(_gbnf(it) for it in e.items)
        return body if top else f"({body})"
    if isinstance(e, Alt):
        body = " | ".join(_gbnf(it, top=True) for it in e.options)
        return body if top else f"({body})"
    if isinstance(e, Repeat):
        inner = _gbnf(e.item)
        if (e.min, e.max) == (0, None):
            return inner + "*"
        if (e.min, e.max) == (1, None):
            return inner + "+"
        if (e.min, e.max) == (0, 1):
            return inner + "?"
        upper = "" if e.max is None else str(e.max)
        return f"{inner}{{{e.min},{upper}}}"
    raise TypeError(e)

def _regex_repeat(inner: str, lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return inner + "*"
    if (lo, hi) == (1, None):
        return inner + "+"
    if (lo, hi) == (0, 1):
        return inner + "?"
    return f"{inner}{{{lo},{'' if hi is None else hi}}}"

def _lark(e: Expr, names: dict[str, str], terminals: dict[Text | Until, str], top: bool = False) -> str:
    if isinstance(e, (Text, Until)):
        return terminals.setdefault(e, f"TEXT_{len(terminals) + 1}")
    if isinstance(e, Lit):
        return json.dumps(e.text, ensure_ascii=False) if e.text else '""'
    if isinstance(e, Ref):
        return names[e.name]
    if isinstance(e, Chars):
        return f"/{_regex_class(e.body)}/"
    if isinstance(e, Any_):
        return "/(?s:.)/"
    if isinstance(e, Seq):
        body = " ".join(_lark(it, names, terminals) for it in e.items)
        return body if top else f"({body})"
    if isinstance(e, Alt):
        body = " | ".join(_lark(it, names, terminals, top=True) for it in e.options)
        return body if top else f"({body})"
    if isinstance(e, Repeat):
        return _regex_repeat(f"({_lark(e.item, names, terminals, top=True)})", e.min, e.max)
    raise TypeError(e)


def _regex(e: Expr, rules: dict[str, Expr], stack: tuple[str, ...]) -> str:
    if isinstance(e, Lit):
        return "".join(_regex_char(ch) for ch in e.text)
    if isinstance(e, Ref):
        if e.name in stack:
            raise GrammarNotRegular(f"rule {e.name!r} refers to itself ({' -> '.join((*stack, e.name))})")
        return f"(?:{_regex(rules[e.name], rules, (*stack, e.name))})"
    if isinstance(e, Chars):
        return _regex_class(e.body)
    if isinstance(e, Any_):
        return "(?s:.)"
    if isinstance(e, Seq):
        return "".join(_regex(it, rules, stack) for it in e.items)
    if isinstance(e, Alt):
        return "(?:" + "|".join(_regex(it, rules, stack) for it in e.options) + ")"
    if isinstance(e, Repeat):
        return _regex_repeat(f"(?:{_regex(e.item, rules, stack)})", e.min, e.max)
    raise TypeError(e)
