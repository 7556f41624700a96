"""Grammar expressions: the nodes a rule is made of, and what a grammar is to its renderers.

``_expr.Grammar`` holds named rules of these; ``_render`` and ``_text`` read any ``Rules``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Alt", "Any_", "Chars", "Expr", "Lit", "Ref", "Repeat", "Rules", "Seq", "Text", "Until", "alt", "rewrite",
           "seq"]


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
    #: Nor does it open like a call object whatever the name in it (``{"name": "x", "arguments"``,
    #: or ``"parameters"``, in any JSON whitespace): a call in disguise (``_text.DISGUISE``).
    disguise: bool = False


@dataclass(frozen=True)
class Until:
    """Any text up to and including the first ``marker``: a model's reasoning up to its end tag,
    a raw parameter value up to its closing tag. Including the marker keeps it one Lark terminal
    that nothing can extend once the marker is read."""

    marker: str

    def __post_init__(self) -> None:
        if not self.marker:
            raise ValueError("Until needs a non-empty marker")


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


Expr = Lit | Ref | Chars | Any_ | Text | Until | Seq | Alt | Repeat


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
    seen: set[Expr] = set()  # a set, not a scan of ``out``: an enum of thousands stays linear
    for o in options:
        for x in o.options if isinstance(o, Alt) else (o,):
            if x not in seen:
                seen.add(x)
                out.append(x)
    if Lit("") in out and len(out) > 1:
        # An empty alternative reads better (and parses everywhere) as an optional group.
        return Repeat(alt(*(x for x in out if x != Lit(""))), 0, 1)
    return out[0] if len(out) == 1 else Alt(tuple(out))


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
    if isinstance(e, (Text, Until)):
        return True
    if isinstance(e, Seq):
        return any(_has_text(i) for i in e.items)
    if isinstance(e, Alt):
        return any(_has_text(i) for i in e.options)
    if isinstance(e, Repeat):
        return _has_text(e.item)
    return False

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


class Rules(Protocol):
    """Named rules from a root, as the renderers and the text expansion use them (``Grammar``)."""

    rules: dict[str, Expr]
    root: str

    def add(self, name: str, expr: Expr) -> Ref: ...

    def unique_name(self, base: str) -> str: ...

    def reachable(self) -> list[str]: ...

    def lowered(self) -> Rules: ...

    def with_rules(self, rules: dict[str, Expr]) -> Rules: ...
