"""``form``: the reply's calls as the family's parallel form (one list) or as single calls,
decided where the calls open on the list's share against ``Decisions.form``, and decoded (again)
in the form chosen when it is not the one written."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..._errors import GenerationTruncated
from ...backends._base import Generation, Parting
from ...families._reply import ReplyFormat
from ...grammar import matches
from .._decide import DecisionPoint, decide, fork
from ._turn import Turn

__all__ = ["Form"]


def _forming(turn: Turn) -> bool:
    # The grammar admits the list beside the single calls (``forms``) only where the family has one.
    return turn.forms is not None and turn.whole.can_call


def _apart(turn: Turn) -> tuple[ReplyFormat, ReplyFormat]:
    """The reply's formats as one list and as single calls: what the decision chooses between
    (built once a turn)."""
    if turn.apart is None:
        fam = turn.family
        turn.apart = turn.variant("required", only=fam.parallel_forms), turn.variant("required", only=fam.call_forms)
    return turn.apart


@dataclass(frozen=True)
class Form:
    """The calls as one list or as single calls, on the list's share where they open."""

    switch: tuple[str, ...] = ("form",)
    distribution: bool = True
    reads: str = "the next-token distribution where the calls open, against the list and single-call grammars"
    changes: str = "the calls' form: the reply decoded again from where they open; the form later calls are written in"

    def ahead(self, turn: Turn) -> None:
        """A reply that begins a single call stops there (``Parting``): the form is decided
        before the call is written, not after it is written whole and then again as a list. Not
        while it could still be a list, or text; not on a streamed turn."""
        if not _forming(turn) or not turn.fmt.can_call or turn.run.live is not None:
            return
        lists, single = _apart(turn)
        words = turn.variant("none").grammar if turn.fmt.tool_choice == "auto" else None
        away = tuple(g for g in (lists.grammar, words) if g is not None)
        if lists.grammar is not None and single.grammar is not None:
            turn.parting = Parting(into=single.grammar, away=away)

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """The whole reply in the form chosen; ``gen`` may have stopped where it parted into a
        single call (``Generation.parted``): it is then gone on from under the turn's format when
        the single form stands. Later calls are written in the forms the reply is in."""
        if not _forming(turn):
            return gen
        gen, chosen = self._decided(turn, gen, *_apart(turn))
        if chosen is not None:
            turn.later = partial(turn.variant, only=chosen)
        return gen

    @staticmethod
    def _decided(turn: Turn, gen: Generation, lists: ReplyFormat, single: ReplyFormat
                 ) -> tuple[Generation, tuple[str, ...] | None]:
        """The whole reply and the forms it is in (``None``: no calls, or undecided)."""
        fam, whole, decisions, made = turn.family, turn.whole, turn.decisions, turn.made
        singles = fam.call_forms

        def whole_(reply: Generation) -> Generation:
            return turn.answer(turn.fmt, reply=reply.tokens) if reply.parted else reply

        if turn.run.streamed or lists.grammar is None or single.grammar is None or decisions.form is None or \
                (not gen.parted and not whole.parse(gen.text).tool_calls):
            return whole_(gen), None
        written = fam.parallel_forms if not gen.parted and matches(lists.grammar, gen.text) else singles
        source = turn.next_tokens
        at = fork(source, gen.tokens, gen.text, single.grammar if written is fam.parallel_forms else lists.grammar)
        if at is None:
            return whole_(gen), written
        made.append(decide(source, turn.prompt, DecisionPoint.FORM, decisions.form, lists.grammar, single.grammar,
                           decisions, reply=at[0], text=at[1], whole=gen.text))
        chosen = fam.parallel_forms if made[-1].taken else singles
        if chosen == written:
            return whole_(gen), written
        try:
            again = turn.answer(lists if made[-1].taken else single, penalties=turn.penalties[:1], reply=at[0])
        except GenerationTruncated:
            return whole_(gen), written
        return (again, chosen) if whole.parse(again.text).tool_calls else (whole_(gen), written)
