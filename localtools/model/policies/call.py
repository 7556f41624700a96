"""``call``: under tool_choice "auto", call or text decided on the model's share for a call
against ``Decisions.call``, before the reply is written; the reply is then written under the
chosen branch's grammar alone."""

from __future__ import annotations

from dataclasses import dataclass

from ...backends._base import Generation
from .._decide import DecisionPoint, decide
from ._turn import Turn

__all__ = ["Call"]


@dataclass(frozen=True)
class Call:
    """Call or text, on the call branch's share of the model's first token."""

    switch: tuple[str, ...] = ("call",)
    distribution: bool = True
    reads: str = "the next-token distribution where the reply opens, against the call and text branches' grammars"
    changes: str = "the format the reply is written in: calls alone, or text alone"

    def ahead(self, turn: Turn) -> None:
        """The turn's format: the branch chosen."""
        decisions, fmt = turn.decisions, turn.fmt
        if decisions.call is None or fmt.tool_choice != "auto" or not fmt.can_call:
            return
        call, text = turn.variant("required"), turn.variant("none")
        turn.made.append(decide(turn.next_tokens, turn.prompt, DecisionPoint.CALL, decisions.call, call.grammar,
                                text.grammar, decisions))
        turn.fmt = call if turn.made[-1].taken else text

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """Decided before the reply was written: the reply stands."""
        return gen
