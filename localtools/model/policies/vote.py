"""``samples``: self-consistency. The reply and ``Decisions.samples - 1`` replies drawn under the
same grammar vote on their calls; the most common answer wins, the first reply breaking ties."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...backends._base import Generation
from ...families._parse import ToolCall, call_key
from .._decide import Decision, DecisionPoint
from ._turn import Turn
from .guess import refusal

__all__ = ["Vote"]


def required_of(arguments: Mapping[str, Any], schema: Any) -> dict[str, Any]:
    """``arguments`` less the ones ``schema`` does not require (all of them without a schema)."""
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if not isinstance(required, list):
        return dict(arguments)
    return {k: v for k, v in arguments.items() if k in required}


@dataclass(frozen=True)
class Vote:
    """The calls most replies agree on."""

    switch: tuple[str, ...] = ("samples",)
    distribution: bool = False
    reads: str = "replies drawn at the settings' temperature and top_p; the call share, under guess and fit"
    changes: str = "the reply: the earliest of the most common answer"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """A vote of ``gen`` and the replies drawn under the turn's format (a set of call keys
        over their required arguments; "no call" is one answer). A sample cut inside a call does
        not vote, nor one whose calls ``guess`` or ``fit`` would answer in text (``refusal``): a
        draw never brings back a call the turn refused. Drawing stops once no answer could catch
        the leading one with every draw left (greedy and two draws that agree settle five): the
        same winner, fewer decodes. Not on a streamed turn: a drawn text answer would stream as
        it is written."""
        decisions, whole, fmt, run = turn.decisions, turn.whole, turn.fmt, turn.run
        if decisions.samples <= 1 or run.live is not None:
            return gen
        refused = refusal(turn)

        def answer(parsed: list[ToolCall]) -> tuple[str, ...]:
            # Compared as the turn would give them (a repeat, an argument ground leaves out), by
            # their required arguments: the vote settles which calls, with which required values;
            # the optional ones are the winning reply's (the first reply's when it is among the
            # winners, with what option and ground gave it).
            calls = turn.settle(parsed)
            return tuple(sorted(call_key(c.name, required_of(c.arguments, whole.schemas.get(c.name)))
                                for c in calls))

        replies, answers = [gen], [answer(whole.parse(gen.text).tool_calls)]
        for i in range(decisions.samples - 1):
            counts = [*sorted(Counter(answers).values(), reverse=True), 0]
            if counts[0] > counts[1] + (decisions.samples - 1 - i):
                break
            drawn = run.generate(turn.prompt, grammar=fmt.grammar, max_tokens=turn.max_tokens, stop=list(fmt.stop),
                                 repeat_penalty=1.0, sampling={"temperature": decisions.temperature,
                                                               "top_p": decisions.top_p, "seed": i})
            if drawn.finish_reason == "length" and fmt.cut_inside_call(drawn.text):
                continue
            parsed = whole.parse(drawn.text).tool_calls
            if refused is not None and parsed and refused([(c.name, c.arguments) for c in parsed]):
                continue
            replies.append(drawn)
            answers.append(answer(parsed))
        votes = Counter(answers)
        most = max(votes.values())
        chosen = replies[next(i for i, a in enumerate(answers) if votes[a] == most)]
        turn.made.append(Decision(DecisionPoint.VOTE, most / len(replies), None, chosen is not gen, len(replies)))
        return chosen
