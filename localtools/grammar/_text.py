"""The ``Text`` node (a text answer that can never be mistaken for a call) and the ``Until`` node
(any text through a marker), each as rules (GBNF, the matcher's reference), as one Lark terminal
(llguidance), and read in one pass (the matcher)."""

from __future__ import annotations

from ._chars import _class_escape, _regex_char
from ._expr import Chars, Expr, Grammar, Lit, Ref, Repeat, Text, Until, alt, seq

__all__ = ["expand_text", "expand_until", "text_ends", "text_terminal", "until_end", "until_terminal"]


def _lit(s: str) -> str:
    return "".join(_regex_char(ch) for ch in s)


def until_terminal(node: Until) -> str:
    # Ends with the marker and holds it nowhere else.
    m = _lit(node.marker)
    return f"/(?s:.*){m}/ & ~/(?s:.*){m}(?s:.+)/"


def until_end(node: Until, text: str, pos: int) -> int | None:
    """Where an ``Until`` starting at ``pos`` ends (just past its marker), if the marker occurs."""
    i = text.find(node.marker, pos)
    return None if i < 0 else i + len(node.marker)


def expand_until(g: Grammar, node: Until) -> Expr:
    """Rules for an ``Until`` node: one per automaton state of its marker; completing the marker ends it."""
    auto = _Markers((node.marker,))
    for i, state in enumerate(auto.states):
        auto.names[state] = g.add(g.unique_name(f"until-{i}"), Lit("")).name
    for state in auto.states:
        last = [Lit(ch) for ch in auto.chars if auto.step(state, ch) is None]
        g.add(auto.rule(state), alt(*_text_edges(auto, state, set()), *last))
    return Ref(auto.rule(""))


def text_terminal(text: Text) -> str:
    # llguidance terminals take & (and) and ~ (not): one lexeme instead of a rule per character.
    lit = _lit
    parts = ["/(?s:.+)/", "~/[\\x{0}-\\x{20}\\x{60}](?s:.*)/"]
    markers = [lit(m) for m in text.markers if m]
    if markers:
        found = markers[0] if len(markers) == 1 else f"(?:{'|'.join(markers)})"
        parts.append(f"~/(?s:.*){found}(?s:.*)/")
    if text.avoid:
        parts.append(f"~/(?:{'|'.join(lit(a) for a in text.avoid)})(?s:.*)/")
    return " & ".join(parts)

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
        #: Each state's rule name, given when the rules are added (unique within their grammar).
        self.names: dict[str, str] = {}

    def step(self, state: str, ch: str) -> str | None:
        s = state + ch
        if any(s.endswith(m) for m in self.markers):
            return None
        while s and s not in self.states:
            s = s[1:]
        return s

    def rule(self, state: str) -> str:
        return self.names[state]


def _text_edges(auto: _Markers, state: str, exclude: set[str], extra_class: str = "") -> list[Expr]:
    """Moves out of ``state`` on every character but ``exclude`` (and ``extra_class``)."""
    special = sorted({ch for ch in auto.chars if auto.step(state, ch) != ""} - exclude)
    options: list[Expr] = [seq(Chars("^" + _class_escape("".join(sorted(set(special) | exclude))) + extra_class), Ref(auto.rule("")))]
    for ch in special:
        nxt = auto.step(state, ch)
        if nxt is not None:  # None would complete a marker
            options.append(seq(Lit(ch), Ref(auto.rule(nxt))))
    return options


def expand_text(g: Grammar, text: Text) -> Expr:
    """Rules for a ``Text`` node: one per automaton state of the markers, plus a trie over ``avoid``."""
    auto = _Markers(text.markers)
    # Openings that begin like no text can (whitespace, a control character, a backtick) are
    # barred already; a trie branch for them would let text open so after all.
    avoid = tuple(a for a in text.avoid if a and a[0] > " " and a[0] != "`")
    for i, state in enumerate(auto.states):  # names first: every state's rule refers to others
        auto.names[state] = g.add(g.unique_name(f"text-{i}"), Lit("")).name
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
    # No text opens with whitespace or a control character, even one a marker starts with.
    opening_space = {c for c in auto.chars if c <= " " and auto.step("", c) != ""}
    first = _text_edges(auto, "", {*openers, "`", *opening_space}, "\\x00-\\x20")
    return alt(*first, *branches("", "", openers))

def text_ends(node: Text, text: str, pos: int) -> frozenset[int]:
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
