"""``option``: an optional argument a call left out whose name the conversation speaks of
(``spoken_options``) asked of the model, and taken when it only adds that argument with a
grounded value that is not its default (``adds_option``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._errors import GenerationTruncated
from ...backends._base import Generation
from .._decide import Decision, DecisionPoint, adds_option, conversation_text, fork, said, spoken_options
from .._reading import plain
from ._base import as_json
from ._turn import Turn

__all__ = ["Option"]


def requiring(spec: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A tool's spec with ``key`` among its required arguments."""
    function = dict(spec["function"])
    parameters = dict(function.get("parameters") or {})
    parameters["required"] = [*parameters.get("required", ()), key]
    function["parameters"] = parameters
    return {**spec, "function": function}


@dataclass(frozen=True)
class Option:
    """An optional argument the conversation names, asked of the model."""

    switch: tuple[str, ...] = ("option",)
    distribution: bool = True
    reads: str = "what the user and system wrote (the options' names), the conversation (their values)"
    changes: str = "the reply decoded again with one more optional argument"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """Each option decoded again from where the calls could take it, with it required of
        that tool and the same number of calls. Not on a streamed turn: what streamed would be
        written again."""
        whole, messages = turn.whole, turn.messages
        if turn.run.live is not None or not whole.can_call:
            return gen
        calls = [(c.name, c.arguments) for c in whole.parse(gen.text).tool_calls]
        conversation = conversation_text(messages)
        # What was asked names an option; a key in a tool's result is no request for it.
        for name, key in spoken_options(calls, whole.schemas, plain(said(messages, ("user", "system")))):
            asked = [requiring(spec, key) if spec["function"]["name"] == name else spec for spec in turn.specs]
            forced = turn.later("required", (len(calls), len(calls)), tools=asked)
            at = None if forced.grammar is None else fork(turn.next_tokens, gen.tokens, gen.text, forced.grammar)
            if at is None:
                continue
            try:
                attempt = turn.answer(forced, penalties=turn.penalties[:1], reply=at[0])
            except GenerationTruncated:
                continue
            tried = [(c.name, c.arguments) for c in whole.parse(attempt.text).tool_calls]
            taken = adds_option(calls, tried, name, key, whole.schemas.get(name) or {}, conversation)
            added = next((args[key] for n, args in tried if n == name and key in args), None) if taken else None
            turn.made.append(Decision(DecisionPoint.OPTION, None, None, taken, len(calls), gen.text, f"{name}.{key}",
                                      after=None if added is None else as_json(added)))
            if taken:
                gen, calls = attempt, tried
        return gen
