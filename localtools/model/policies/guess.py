"""``guess`` and ``fit``: under tool_choice "auto", calls that are a guess (``guessed``) made on a
call share under ``Decisions.guess``, or calls only to tools the conversation never speaks of
(``unfit``) made on a share under ``Decisions.fit``, answered in text instead; a model that
writes the call again is told why it may not make it and answers again (``ask``). Their rule
(``stranger``) also judges a further call (``more``) and a drawn one (``samples``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._errors import GenerationTruncated
from ...backends._base import Generation
from ...families._parse import first_disguise
from .._decide import Decision, DecisionPoint, Decisions, Grounds, asking, decide, refusing
from ._turn import Turn

__all__ = ["Guess", "call_share", "refusal", "stranger"]

#: What a text answer after a refused guess may not open with: JSON, which would be the call again.
_JSON_OPENINGS = ("{", "[")
#: Where text holds a call object: its keys.
_CALL_TELLS = ('"name":', '"arguments":', '"parameters":', "'name':", "'arguments':")


def stranger(decisions: Decisions, grounds: Grounds, calls: list[tuple[str, dict[str, Any]]], share: float | None,
             earlier: list[tuple[str, dict[str, Any]]], reply: str) -> Decision | None:
    """Further calls (after the ``earlier`` calls of ``reply``) judged as a turn's first calls are
    (``Guess``): a guess on a share under ``decisions.guess``, or calls only to tools nobody
    spoke of on a share under ``decisions.fit``, are refused: the decision that says so."""
    if share is None or not calls:
        return None
    before = len(earlier)
    if decisions.guess is not None and share < (guess := grounds.threshold(decisions.guess, decisions)) and \
            grounds.guessed(calls):
        return Decision(DecisionPoint.GUESS, share, guess, True, before, reply)
    if decisions.fit is not None and share < (fit := grounds.threshold(decisions.fit, decisions)) and \
            (strangers := grounds.unfit(calls, earlier)):
        return Decision(DecisionPoint.FIT, share, fit, True, before, reply, ", ".join(strangers))
    return None


def call_share(turn: Turn) -> float | None:
    """The turn's call share: the one a decision of this turn read (call, guess, fit), else read."""
    share = next((d.share for d in turn.made if d.point in (DecisionPoint.CALL, DecisionPoint.GUESS, DecisionPoint.FIT)
                  and d.share is not None), None)
    if share is None:
        share = decide(turn.next_tokens, turn.prompt, DecisionPoint.CALL, 0.0, turn.variant("required").grammar,
                       turn.variant("none").grammar, turn.decisions).share
    return share


def refusal(turn: Turn) -> Callable[[list[tuple[str, dict[str, Any]]]], bool] | None:
    """Whether ``guess`` or ``fit`` would answer calls in text on this turn's call share
    (``stranger``'s rule), the share read once, when a call first needs it; ``None`` where
    neither judges this turn (not under tool_choice "auto", or no distribution to read)."""
    decisions, grounds = turn.decisions, turn.grounds
    if turn.source is None or grounds is None or turn.whole.tool_choice != "auto" or \
            (decisions.guess is None and decisions.fit is None):
        return None
    share: list[float | None] = []

    def refused(calls: list[tuple[str, dict[str, Any]]]) -> bool:
        if not share:
            share.append(call_share(turn))
        return stranger(decisions, grounds, calls, share[0], [], "") is not None

    return refused


@dataclass(frozen=True)
class Guess:
    """A guess, or calls only to tools nobody spoke of, on too little of the model's belief:
    answered in text."""

    switch: tuple[str, ...] = ("guess", "fit")
    distribution: bool = True
    reads: str = "the call share; the conversation's values and words against the calls' values and tools"
    changes: str = "calls to a text answer (decoded again under the text branch; told why, where it calls again)"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """The share is the call decision's when one was made."""
        whole, made, decisions, grounds = turn.whole, turn.made, turn.decisions, turn.grounds
        assert grounds is not None  # guess and fit read them
        # Not on a streamed turn: the text decoded after a refusal would stream before it is read.
        if turn.run.live is not None or whole.tool_choice != "auto" or not whole.can_call:
            return gen
        calls = [(c.name, c.arguments) for c in whole.parse(gen.text).tool_calls]
        if not calls:
            return gen
        guess = decisions.guess is not None and grounds.guessed(calls)
        strangers = grounds.unfit(calls) if decisions.fit is not None else []
        if not guess and not strangers:
            return gen
        share = call_share(turn)
        guessing = unfitting = False
        if guess:
            assert decisions.guess is not None
            threshold = grounds.threshold(decisions.guess, decisions)
            guessing = share is not None and share < threshold
            made.append(Decision(DecisionPoint.GUESS, share, threshold, guessing, len(calls), gen.text))
        if strangers:
            assert decisions.fit is not None
            # A tool the user never spoke of, called on too little of the model's belief: no call at all.
            threshold = grounds.threshold(decisions.fit, decisions)
            unfitting = share is not None and share < threshold
            made.append(Decision(DecisionPoint.FIT, share, threshold, unfitting, len(calls), gen.text,
                                 ", ".join(strangers)))
        if not guessing and not unfitting:
            return gen
        # Text that opens as JSON here is the call again, whatever its spelling; one that
        # goes on to a call object's keys is stopped there rather than decoded to its end.
        text = turn.variant("none").barring(_JSON_OPENINGS)
        try:
            answer = turn.answer(text, penalties=turn.penalties[:1], tells=_CALL_TELLS)
        except GenerationTruncated:
            return gen
        if answer.stop not in _CALL_TELLS and first_disguise(answer.text, whole.tool_names) is None:
            return answer
        # A model that has settled on a call is told why it may not make it (the tools do not do
        # what was asked, or the values are not given) and writes its answer again, in its own
        # words and the user's language. Still a call: the calls stand, as greedy wrote them.
        missing = [] if unfitting else grounds.unheld(calls)
        what = ", ".join(f"{name}.{key}" for name, key in missing) or ", ".join(strangers)
        told = None
        if not turn.thought:
            try:
                note = turn.reprompt(asking(missing) if missing else refusing(strangers))
                told = turn.answer(turn.variant("none").barring(_JSON_OPENINGS), prompt=note,
                                   penalties=turn.penalties[:1], tells=_CALL_TELLS)
            except GenerationTruncated:
                told = None
        if told is not None and told.stop not in _CALL_TELLS and first_disguise(told.text, whole.tool_names) is None:
            made.append(Decision(DecisionPoint.ASK, None, None, True, len(missing or strangers), answer.text, what,
                                 before=json.dumps(answer.text, ensure_ascii=False),
                                 after=json.dumps(told.text, ensure_ascii=False)))
            return told
        made.append(Decision(DecisionPoint.ASK, None, None, False, len(missing or strangers), answer.text, what))
        return gen
