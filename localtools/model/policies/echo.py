"""``echo`` and ``told``: a text answer that writes a message of the conversation back (it opens
with the first ``ECHO_CHARS`` characters of a user's message or of the model's own earlier
answer: ``echoed``), or
that writes an offered tool as code instead of calling it (``told``), answers nothing; under
tool_choice "auto" the turn is decoded again as a call (to the tools it wrote, for ``told``),
taken unless it repeats a call already made for the current request (its result is there: the
loop would refuse it) or ``guess`` or ``fit`` would refuse it on the turn's call share."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...backends._base import Generation
from ...families._parse import call_key
from .._decide import Decision, DecisionPoint, echoed, told
from .._history import answered_calls
from ._turn import Turn
from .guess import call_share, stranger

__all__ = ["Echo"]


@dataclass(frozen=True)
class Echo:
    """A text answer that writes a message back, or a tool as code, decoded again as a call."""

    switch: tuple[str, ...] = ("echo", "told")
    distribution: bool = False
    reads: str = ("the text answer's opening words against each user message's and the model's earlier answers'; "
                  "the offered tools it writes as code; with guess or fit, the call share")
    changes: str = "a text answer that repeats a message, or tells how to call a tool, to a call"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """Not on a streamed turn, nor where the reply has calls or the text is not an echo."""
        whole = turn.whole
        if turn.run.live is not None or whole.tool_choice != "auto" or not whole.can_call:
            return gen
        reply = whole.parse(gen.text)
        if reply.tool_calls:
            return gen
        text = reply.content or ""
        point, about, asked = DecisionPoint.ECHO, echoed(text, turn.messages) if turn.decisions.echo else None, None
        if about is not None:
            asked = turn.later("required")
        elif turn.decisions.told and (names := told(text, whole.tool_names)):
            point, about = DecisionPoint.TOLD, ", ".join(names)
            asked = turn.later("required", tools=[s for s in turn.specs if s["function"]["name"] in names])
        if asked is None or about is None or (again := turn.as_call(asked)) is None:
            return gen
        attempt, calls = again
        answered = answered_calls(turn.messages, frozenset(whole.tool_names))
        if any(call_key(*c) in answered for c in calls):
            turn.made.append(Decision(point, None, None, False, len(calls), gen.text, about))
            return gen
        refused = None
        if calls and turn.grounds is not None and turn.source is not None:
            refused = stranger(turn.decisions, turn.grounds, calls, call_share(turn), [], gen.text)
        taken = bool(calls) and refused is None
        turn.made.append(Decision(point, None, None, taken, len(calls), gen.text, about,
                                  before=json.dumps(gen.text, ensure_ascii=False),
                                  after=json.dumps(attempt.text, ensure_ascii=False) if taken else None))
        if refused is not None:
            turn.made.append(refused)
        return attempt if taken else gen

