"""A small grammar form shared by every mask engine, a reader for GBNF files, and GBNF output.

Family grammar files (``grammars/*.gbnf``) and the rules built from tool schemas both become
``Grammar`` objects; each mask engine gets its rendering of the same object: GBNF (llama.cpp,
xgrammar), Lark (llguidance) or one regular expression (outlines_core, when nothing recurses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from ._errors import GrammarNotRegular

__all__ = [
    "Alt", "Any_", "Chars", "Expr", "Grammar", "GrammarNotRegular", "Lit", "Ref", "Repeat", "Seq", "Text",
    "alt", "parse_gbnf", "rewrite", "seq",
]


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Chars:
    """A character class in GBNF/regex syntax without brackets, e.g. ``^"\\\\\\x00-\\x1f``."""

    body: str


@dataclass(frozen=True)
class Any_:
    """Any single character."""


@dataclass(frozen=True)
class Text:
    """A non-empty text answer that can never be mistaken for a call.

    It never contains any of ``markers`` (the openings of the family's call forms that may follow
    text, such as ``<tool_call>``), does not open with whitespace, a control character or a
    backtick, and does not open with any string in ``avoid`` (the opening of a bare JSON call to a
    known tool, such as ``{"name": "get_customer"``). Other text that opens with "{" (a model
    echoing a JSON tool result, say) stays text. GBNF and the matcher get it as rules (one per
    automaton state); Lark gets it as one terminal, which llguidance's Earley parser needs.
    """

    markers: tuple[str, ...]
    avoid: tuple[str, ...] = ()


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Expr, ...]


@dataclass(frozen=True)
class Repeat:
    item: Expr
    min: int = 0
    max: int | None = None


Expr = Lit | Ref | Chars | Any_ | Text | Seq | Alt | Repeat


def seq(*items: Expr) -> Expr:
    flat: list[Expr] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        elif isinstance(it, Lit) and it.text == "":
            continue
        else:
            flat.append(it)
    # Adjacent literals merge, which keeps the rendered grammar readable.
    merged: list[Expr] = []
    for it in flat:
        prev = merged[-1] if merged else None
        if isinstance(it, Lit) and isinstance(prev, Lit):
            merged[-1] = Lit(prev.text + it.text)
        else:
            merged.append(it)
    if not merged:
        return Lit("")
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


def alt(*options: Expr) -> Expr:
    out: list[Expr] = []
    for o in options:
        for x in o.options if isinstance(o, Alt) else (o,):
            if x not in out:
                out.append(x)
    if Lit("") in out and len(out) > 1:
        # An empty alternative reads better (and parses everywhere) as an optional group.
        return Repeat(alt(*(x for x in out if x != Lit(""))), 0, 1)
    return out[0] if len(out) == 1 else Alt(tuple(out))


@dataclass
class Grammar:
    """Named rules; ``root`` is where matching starts."""

    rules: dict[str, Expr] = field(default_factory=dict)
    root: str = "root"

    def add(self, name: str, expr: Expr) -> Ref:
        self.rules[name] = expr
        return Ref(name)

    def unique_name(self, base: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", base).strip("-").lower() or "r"
        name, i = base, 1
        while name in self.rules:
            i += 1
            name = f"{base}-{i}"
        return name

    def reachable(self) -> list[str]:
        """Rule names reachable from the root, in first-visit order."""
        seen: list[str] = []
        stack = [self.root]
        while stack:
            name = stack.pop(0)
            if name in seen:
                continue
            if name not in self.rules:
                raise KeyError(f"grammar rule {name!r} is referenced but not defined")
            seen.append(name)
            stack.extend(_refs(self.rules[name]))
        return seen

    def lowered(self) -> Grammar:
        """This grammar with every ``Text`` node spelled out as plain rules."""
        if not any(_has_text(e) for e in self.rules.values()):
            return self
        g = Grammar(dict(self.rules), self.root)
        expansions: dict[Text, Expr] = {}

        def lower(e: Expr) -> Expr | None:
            if isinstance(e, Text):
                if e not in expansions:
                    expansions[e] = _expand_text(g, e)
                return expansions[e]
            return None

        for name in list(self.rules):
            g.rules[name] = rewrite(self.rules[name], lower)
        return g

    def to_gbnf(self) -> str:
        """llama.cpp's GBNF, reachable rules only, root first."""
        g = self.lowered()
        return "\n".join(f"{name} ::= {_gbnf(g.rules[name], top=True)}" for name in g.reachable()) + "\n"

    def to_lark(self) -> str:
        """Lark as llguidance reads it: ``start`` first, rule names made Lark-safe.

        llguidance lexes greedily: a free-text terminal never ends while the next character could
        extend it, so nothing can follow one. Whatever a grammar lets follow text (calls after a
        preamble) is left out here; the language is the same otherwise, and a subset of the GBNF's.
        """
        self = self._text_last()
        names = self.reachable()
        safe: dict[str, str] = {}
        for name in names:
            base = "r_" + re.sub(r"[^a-z0-9_]", "_", name.lower())
            candidate, i = base, 1
            while candidate in safe.values():
                i += 1
                candidate = f"{base}_{i}"
            safe[name] = candidate
        terminals: dict[Text, str] = {}
        lines = [f"start: {safe[self.root]}"]
        lines += [f"{safe[name]}: {_lark(self.rules[name], safe, terminals, top=True)}" for name in names]
        lines += [f"{name}: {_text_terminal(text)}" for text, name in terminals.items()]
        return "\n".join(lines) + "\n"

    def _text_last(self) -> Grammar:
        texts = {n for n, e in self.rules.items() if isinstance(e, Text)}

        def cut(e: Expr) -> Expr | None:
            if isinstance(e, Seq):
                first = e.items[0]
                if isinstance(first, Text) or (isinstance(first, Ref) and first.name in texts):
                    return first
            return None

        return Grammar({n: rewrite(e, cut) for n, e in self.rules.items()}, self.root)

    def to_regex(self) -> str:
        """One regular expression (Rust ``regex`` syntax) for the whole language.

        Raises ``GrammarNotRegular`` when a rule refers to itself (free-form JSON values, recursive
        ``$ref`` schemas): those need a CFG engine.
        """
        g = self.lowered()
        return _regex(Ref(g.root), g.rules, ())


def _refs(e: Expr) -> list[str]:
    if isinstance(e, Ref):
        return [e.name]
    if isinstance(e, Seq):
        return [r for it in e.items for r in _refs(it)]
    if isinstance(e, Alt):
        return [r for it in e.options for r in _refs(it)]
    if isinstance(e, Repeat):
        return _refs(e.item)
    return []


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


def _regex_char(ch: str) -> str:
    # Alphanumerics stay as they are; everything else is a code-point escape, which means the same
    # inside and outside a class and never clashes with Lark's "/" delimiters.
    return ch if ch.isascii() and ch.isalnum() else f"\\x{{{ord(ch):X}}}"


def _class_items(body: str) -> tuple[bool, list[tuple[str, str]]]:
    """A GBNF class body as (negated, [(low, high), ...])."""
    negate = body.startswith("^")
    chars = _class_chars(body[1:] if negate else body)
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(chars):
        if j + 2 < len(chars) and chars[j + 1] == "-":
            ranges.append((chars[j], chars[j + 2]))
            j += 3
        else:
            ranges.append((chars[j], chars[j]))
            j += 1
    return negate, ranges


def _regex_class(body: str) -> str:
    negate, ranges = _class_items(body)
    inner = "".join(_regex_char(a) if a == b else f"{_regex_char(a)}-{_regex_char(b)}" for a, b in ranges)
    return f"[{'^' if negate else ''}{inner}]"


def _regex_repeat(inner: str, lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return inner + "*"
    if (lo, hi) == (1, None):
        return inner + "+"
    if (lo, hi) == (0, 1):
        return inner + "?"
    return f"{inner}{{{lo},{'' if hi is None else hi}}}"


def _lark(e: Expr, names: dict[str, str], terminals: dict[Text, str], top: bool = False) -> str:
    if isinstance(e, Text):
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


def rewrite(e: Expr, change: Callable[[Expr], Expr | None]) -> Expr:
    """``e`` with every node for which ``change`` returns an expression replaced by it, bottom-up
    through sequences, alternatives and repeats elsewhere."""
    new = change(e)
    if new is not None:
        return new
    if isinstance(e, Seq):
        return seq(*(rewrite(i, change) for i in e.items))
    if isinstance(e, Alt):
        return alt(*(rewrite(i, change) for i in e.options))
    if isinstance(e, Repeat):
        return Repeat(rewrite(e.item, change), e.min, e.max)
    return e


def _has_text(e: Expr) -> bool:
    if isinstance(e, Text):
        return True
    if isinstance(e, Seq):
        return any(_has_text(i) for i in e.items)
    if isinstance(e, Alt):
        return any(_has_text(i) for i in e.options)
    if isinstance(e, Repeat):
        return _has_text(e.item)
    return False


def _text_terminal(text: Text) -> str:
    # llguidance terminals take & (and) and ~ (not): one lexeme instead of a rule per character.
    def lit(s: str) -> str:
        return "".join(_regex_char(ch) for ch in s)

    parts = ["/(?s:.+)/", "~/[\\x{0}-\\x{20}\\x{60}](?s:.*)/"]
    markers = [lit(m) for m in text.markers if m]
    if markers:
        found = markers[0] if len(markers) == 1 else f"(?:{'|'.join(markers)})"
        parts.append(f"~/(?s:.*){found}(?s:.*)/")
    if text.avoid:
        parts.append(f"~/(?:{'|'.join(lit(a) for a in text.avoid)})(?s:.*)/")
    return " & ".join(parts)


_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _class_escape(chars: str) -> str:
    # GBNF engines refuse a raw newline inside a class; control characters go escaped.
    return "".join("\\" + c if c in "]\\^-[" else _CONTROL_ESCAPES.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x20 else c)
                   for c in chars)


class _Markers:
    """The automaton that finds any of ``markers`` in a text (Aho-Corasick, on prefixes).

    A state is the longest suffix of the text read so far that is a proper prefix of a marker;
    ``step`` returns ``None`` when a marker is complete. With one marker these are KMP's states.
    """

    def __init__(self, markers: tuple[str, ...]) -> None:
        self.markers = tuple(m for m in markers if m)
        prefixes = {m[:i] for m in self.markers for i in range(len(m))} | {""}
        self.states = sorted(prefixes, key=lambda p: (len(p), p))
        self.chars = sorted({ch for m in self.markers for ch in m})

    def step(self, state: str, ch: str) -> str | None:
        s = state + ch
        if any(s.endswith(m) for m in self.markers):
            return None
        while s and s not in self.states:
            s = s[1:]
        return s

    def rule(self, state: str) -> str:
        return f"text-{self.states.index(state)}"


def _text_edges(auto: _Markers, state: str, exclude: set[str], extra_class: str = "") -> list[Expr]:
    """Moves out of ``state`` on every character but ``exclude`` (and ``extra_class``)."""
    special = sorted({ch for ch in auto.chars if auto.step(state, ch) != ""} - exclude)
    options: list[Expr] = [seq(Chars("^" + _class_escape("".join(sorted(set(special) | exclude))) + extra_class), Ref("text-0"))]
    for ch in special:
        nxt = auto.step(state, ch)
        if nxt is not None:  # None would complete a marker
            options.append(seq(Lit(ch), Ref(auto.rule(nxt))))
    return options


def _expand_text(g: Grammar, text: Text) -> Expr:
    """Rules for a ``Text`` node: one per automaton state of the markers, plus a trie over ``avoid``."""
    auto = _Markers(text.markers)
    # Openings that begin like no text can (whitespace, a control character, a backtick) are
    # barred already; a trie branch for them would let text open so after all.
    avoid = tuple(a for a in text.avoid if a and a[0] > " " and a[0] != "`")
    for state in auto.states:
        g.add(auto.rule(state), Repeat(alt(*_text_edges(auto, state, set())), 0, 1))
    # A trie over the openings to avoid, tracking the markers' state as it goes: leaving it
    # early is free text; completing an opening (or a marker) is impossible.
    nodes: dict[str, Ref] = {}

    def node(prefix: str, state: str) -> Expr:
        if prefix in nodes:
            return nodes[prefix]
        ref = g.add(g.unique_name("text-open"), Lit(""))
        nodes[prefix] = ref
        children = sorted({a[len(prefix)] for a in avoid if a.startswith(prefix) and len(a) > len(prefix)})
        g.rules[ref.name] = Repeat(alt(*_text_edges(auto, state, set(children)), *branches(prefix, state, children)), 0, 1)
        return ref

    def branches(prefix: str, state: str, chars: list[str]) -> list[Expr]:
        out: list[Expr] = []
        for ch in chars:
            nxt = auto.step(state, ch)
            if nxt is not None and prefix + ch not in avoid:
                out.append(seq(Lit(ch), node(prefix + ch, nxt)))
        return out

    openers = sorted({a[0] for a in avoid})
    first = _text_edges(auto, "", {*openers, "`"}, "\\x00-\\x20")
    return alt(*first, *branches("", "", openers))


# -- reading GBNF ----------------------------------------------------------------------------------
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


# -- matching (tests and the scripted backend check text against a grammar with this) ------------
def _class_chars(body: str) -> list[str]:
    """The characters of a class body with escapes resolved (``-`` stays as written)."""
    items: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                items.append(chr(int(body[i + 2 : i + 4], 16)))
                i += 4
                continue
            if nxt == "u":
                items.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            items.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
            continue
        items.append(c)
        i += 1
    return items


def _class_match(body: str, ch: str) -> bool:
    negate, ranges = _class_items(body)
    return any(a <= ch <= b for a, b in ranges) != negate


def matches(grammar: Grammar, text: str) -> bool:
    """Whether ``text`` is in the language of ``grammar`` (a set-of-positions matcher).

    The walk keeps its own stack (deep recursion would need the interpreter's recursion limit
    raised, for every thread at once), and reads a ``Text`` node in one pass: spelled out as rules
    it would cost time quadratic in the text's length.
    """
    rules = grammar.rules

    def leaf(e: Expr, pos: int) -> frozenset[int] | None:
        if isinstance(e, Text):
            return _text_ends(e, text, pos)
        if isinstance(e, Lit):
            return frozenset((pos + len(e.text),)) if text.startswith(e.text, pos) else frozenset()
        if isinstance(e, Chars):
            return frozenset((pos + 1,)) if pos < len(text) and _class_match(e.body, text[pos]) else frozenset()
        if isinstance(e, Any_):
            return frozenset((pos + 1,)) if pos < len(text) else frozenset()
        return None

    memo: dict[tuple[int, int], frozenset[int]] = {}
    stack: list[tuple[tuple[int, int], Generator[tuple[Expr, int], frozenset[int], set[int]]]] = []
    start = rules[grammar.root]
    value = leaf(start, 0)
    if value is None:
        memo[(id(start), 0)] = frozenset()  # an entry while in progress guards against left recursion
        stack.append(((id(start), 0), _ends(start, 0, rules)))
    while stack:
        key, walk = stack[-1]
        try:
            sub, pos = walk.send(value) if value is not None else next(walk)
        except StopIteration as done:
            value = memo[key] = frozenset(done.value)
            stack.pop()
            continue
        value = leaf(sub, pos)
        if value is not None:
            continue
        sub_key = (id(sub), pos)
        if sub_key in memo:
            value = memo[sub_key]
            continue
        memo[sub_key] = frozenset()
        stack.append((sub_key, _ends(sub, pos, rules)))
    assert value is not None
    return len(text) in value


def _text_ends(node: Text, text: str, pos: int) -> frozenset[int]:
    """Where a ``Text`` answer starting at ``pos`` may end: it is not empty, opens with no
    whitespace, control character, backtick or ``avoid`` string, and holds no marker whole."""
    if pos >= len(text) or text[pos] <= " " or text[pos] == "`":
        return frozenset()
    last = len(text)
    for marker in node.markers:
        if marker and (i := text.find(marker, pos)) >= 0:
            last = min(last, i + len(marker) - 1)
    for opening in node.avoid:
        if opening and text.startswith(opening, pos):
            last = min(last, pos + len(opening) - 1)
    return frozenset(range(pos + 1, last + 1))


def _ends(e: Expr, pos: int, rules: dict[str, Expr]) -> Generator[tuple[Expr, int], frozenset[int], set[int]]:
    """The end positions of ``e`` matched from ``pos``; asks ``matches`` for each part's ends."""
    if isinstance(e, Ref):
        return set((yield rules[e.name], pos))
    if isinstance(e, Seq):
        current = {pos}
        for item in e.items:
            after: set[int] = set()
            for p in current:
                after |= yield item, p
            current = after
            if not current:
                break
        return current
    if isinstance(e, Alt):
        out: set[int] = set()
        for option in e.options:
            out |= yield option, pos
        return out
    if isinstance(e, Repeat):
        out, current, count = ({pos} if e.min == 0 else set()), {pos}, 0
        while current and (e.max is None or count < e.max):
            after = set()
            for p in current:
                after |= yield e.item, p
            current = after - current
            count += 1
            if count >= e.min:
                out |= current
        return out
    raise TypeError(f"cannot match {e!r}; lower the grammar first")
