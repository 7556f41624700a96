"""``held``: under tool_choice "auto", a text answer to the user's request decoded again as a
call, taken when the call is the request in its own words (``Grounds.holds``): the mirror of
``guess`` and ``fit``."""

from __future__ import annotations

from dataclasses import dataclass

from ...backends._base import Generation
from .._decide import Decision, DecisionPoint
from ._turn import Turn

__all__ = ["Held"]


@dataclass(frozen=True)
class Held:
    """A text answer to the request, decoded again as a call and taken when it is the request."""

    switch: tuple[str, ...] = ("held",)
    distribution: bool = True
    reads: str = "the last user message's words, the offered tools' names and descriptions, the call's values"
    changes: str = "a text answer to a call"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """Not after a refused guess or unfit call (that text is the answer), nor once a tool has
        answered (a final answer is text: ``Grounds.asked`` is empty), nor on a streamed turn."""
        whole, made, grounds = turn.whole, turn.made, turn.grounds
        assert grounds is not None  # held reads them
        if turn.run.live is not None or whole.tool_choice != "auto" or not whole.can_call or not grounds.asked or \
                any(d.taken and d.point in (DecisionPoint.GUESS, DecisionPoint.FIT) for d in made) or \
                whole.parse(gen.text).tool_calls:
            return gen
        if (again := turn.as_call(turn.later("required"))) is None:
            return gen
        attempt, calls = again
        taken = grounds.holds(calls)
        made.append(Decision(DecisionPoint.HELD, None, None, taken, len(calls), gen.text,
                             ", ".join(dict.fromkeys(name for name, _ in calls))))
        return attempt if taken else gen
