"""The ``Text`` node (a text answer that can never be mistaken for a call) and the ``Until`` node
(any text through a marker), each as rules (GBNF, the matcher's reference), as one Lark terminal
(llguidance), and read in one pass (the matcher)."""

from __future__ import annotations

import re

from ._chars import _class_escape, _regex_char
from ._nodes import Chars, Expr, Lit, Ref, Repeat, Rules, Text, Until, alt, seq

__all__ = ["DISGUISE", "expand_text", "expand_until", "text_ends", "text_terminal", "until_end", "until_terminal"]

_JSON_WS = " \t\n\r"
_W = "[ \t\n\r]*"
#: How a call object opens, whatever its name: what a text answer under "auto" never opens with.
DISGUISE = re.compile(rf'\{{{_W}"name"{_W}:{_W}"(?:[^"\\]|\\.)*"{_W},{_W}"(?:arguments|parameters)"', re.DOTALL)
_DISGUISE_KEYS = ('arguments"', 'parameters"')


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


def expand_until(g: Rules, node: Until) -> Expr:
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
    if text.disguise:
        w = "[\\x{20}\\x{9}\\x{A}\\x{D}]*"
        q = lit('"')
        keys = "|".join(lit(k) for k in _DISGUISE_KEYS)
        parts.append(f"~/{lit('{')}{w}{lit(chr(34) + 'name' + chr(34))}{w}{lit(':')}{w}{q}(?:[^\\x{{22}}\\x{{5C}}]|\\x{{5C}}(?s:.))*{q}"
                     f"{w}{lit(',')}{w}{q}(?:{keys})(?s:.*)/")
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


def _disguise_step(state: str, ch: str) -> str | None:
    """The call-object opening's automaton: the next state, "" once the text left the opening
    (free), ``None`` when it completed it (barred)."""
    if state == "0":
        return "{" if ch == "{" else ""
    if state in ("{", ":", "v", ",", "k") and ch in _JSON_WS:
        return state
    if state == "{":
        return "n:1" if ch == '"' else ""
    if state.startswith("n:"):
        i = int(state[2:])
        word = 'name"'
        if ch != word[i - 1]:
            return ""
        return ":" if i == len(word) else f"n:{i + 1}"
    if state == ":":
        return "v" if ch == ":" else ""
    if state == "v":
        return "s" if ch == '"' else ""
    if state == "s":
        return "," if ch == '"' else ("e" if ch == "\\" else "s")
    if state == "e":
        return "s"
    if state == ",":
        return "k" if ch == "," else ""
    if state == "k":
        return "k:" if ch == '"' else ""
    if state.startswith("k:"):
        word = state[2:] + ch
        if word in _DISGUISE_KEYS:
            return None
        return f"k:{word}" if any(k.startswith(word) for k in _DISGUISE_KEYS) else ""
    return ""


def _disguise_chars(state: str) -> set[str]:
    """The characters that move the opening's automaton other than its default from ``state``."""
    if state == "s":
        return {'"', "\\"}
    if state == "e":
        return set()
    if state.startswith("k:"):
        read = state[2:]
        return {k[len(read)] for k in _DISGUISE_KEYS if k.startswith(read) and len(k) > len(read)}
    return set(_JSON_WS) | set('{"name:,')


_OTHER = "\uffff"  # stands for every character no automaton names


def expand_text(g: Rules, text: Text) -> Expr:
    """Rules for a ``Text`` node: one per automaton state of the markers, and one per state of the
    openings it may not have (the ``avoid`` strings, a call object's when ``disguise``) crossed with
    the markers' state, until the text has left every such opening."""
    auto = _Markers(text.markers)
    # Openings that begin like no text can (whitespace, a control character, a backtick) are
    # barred already; a branch for them would let text open so after all.
    avoid = tuple(a for a in text.avoid if a and a[0] > " " and a[0] != "`")
    for i, state in enumerate(auto.states):  # names first: every state's rule refers to others
        auto.names[state] = g.add(g.unique_name(f"text-{i}"), Lit("")).name
    for state in auto.states:
        g.add(auto.rule(state), Repeat(alt(*_text_edges(auto, state, set())), 0, 1))
    # A state of the opening: (what of an avoid string was read, or None once none can follow;
    # the disguise automaton's state, "" once left; the markers' state).
    Opening = tuple[str | None, str, str]
    names: dict[Opening, Ref] = {}

    def step(state: Opening, ch: str) -> Opening | Ref | None:
        read, dis, mark = state
        nxt_mark = auto.step(mark, ch if ch != _OTHER else "\x00")
        if nxt_mark is None:
            return None
        nxt_read = None
        if read is not None and ch != _OTHER:
            if read + ch in avoid:
                return None
            if any(a.startswith(read + ch) for a in avoid):
                nxt_read = read + ch
        nxt_dis = ""
        if dis:
            moved = _disguise_step(dis, ch if ch != _OTHER else "\x00")
            if moved is None:
                return None
            nxt_dis = moved
        if nxt_read is None and not nxt_dis:
            return Ref(auto.rule(nxt_mark))
        return (nxt_read, nxt_dis, nxt_mark)

    def rule(state: Opening, first: bool) -> Ref:
        if state in names:
            return names[state]
        ref = g.add(g.unique_name("text-open"), Lit(""))
        names[state] = ref
        read, dis, _ = state
        special = {a[len(read)] for a in avoid if read is not None and a.startswith(read) and len(a) > len(read)}
        special |= _disguise_chars(dis) if dis else set()
        special |= {ch for ch in auto.chars}
        if first:
            special = {c for c in special if c > " " and c != "`"}
        options: list[Expr] = []
        rest = step(state, _OTHER)
        # A character that goes where any other would joins the class: fewer rules for the engines.
        explicit = {ch: nxt for ch in sorted(special) if (nxt := step(state, ch)) != rest}
        for ch, nxt in explicit.items():
            if nxt is not None:
                options.append(seq(Lit(ch), nxt if isinstance(nxt, Ref) else rule(nxt, False)))
        if rest is not None:
            excluded = _class_escape("".join(sorted(set(explicit) | ({"`"} if first else set()))))
            cls = Chars("^" + excluded + ("\\x00-\\x20" if first else ""))
            options.append(seq(cls, rest if isinstance(rest, Ref) else rule(rest, False)))
        g.rules[ref.name] = alt(*options) if first else Repeat(alt(*options), 0, 1)
        return ref

    return rule(("" if avoid else None, "0" if text.disguise else "", ""), True)

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
    if node.disguise and (m := DISGUISE.match(text, pos)):
        last = min(last, m.end() - 1)
    return frozenset(range(pos + 1, last + 1))
