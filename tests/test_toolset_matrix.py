"""The twenty tool sets × every family × every tool_choice, on the scripted backend.

The real-model tests show that the grammar path works on real weights; this matrix shows it for
every combination, in milliseconds: a reply drawn at random from the grammar the backend is given
must come back as calls the schemas accept, as many and as named as the tool_choice asks.
"""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest
from sampler import sample
from toolsets import TOOLSETS

from localtools import Model, ScriptedBackend, families
from localtools.grammar import Grammar

FAMILIES = sorted(families())
#: (tool_choice, parallel_tool_calls); "named" is the set's last tool.
CHOICES = [("required", True), ("required", False), ("auto", True), ("named", True), ("none", True)]


def _reply(seed: int) -> Any:
    def write(prompt: Any, grammar: Grammar | None) -> str:
        return "A plain answer." if grammar is None else sample(grammar, random.Random(seed))
    return write


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("label", "tools", "question"), TOOLSETS, ids=[t[0] for t in TOOLSETS])
def test_every_tool_set_gives_valid_calls_in_every_family_and_tool_choice(
        family: str, label: str, tools: list[dict[str, Any]], question: str) -> None:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    last = tools[-1]["function"]["name"]
    messages = [{"role": "user", "content": question}]
    for n, (choice, parallel) in enumerate(CHOICES):
        tool_choice = last if choice == "named" else choice
        # Thinking off: the grammar sampled from is the answer's alone (reasoning has its own tests).
        result = Model(ScriptedBackend([_reply(n)]), family=family).chat(
            messages, tools, tool_choice=tool_choice, parallel_tool_calls=parallel, thinking=False,
            max_tokens=100_000, retry_repeat_penalties=())
        where = (choice, parallel, result.raw)
        for call in result.tool_calls:
            assert call.name in schemas, where
            jsonschema.validate(call.arguments, schemas[call.name])
        if choice == "none":
            assert not result.tool_calls and result.content, where
        elif choice != "auto":
            assert result.tool_calls and result.finish_reason == "tool_calls", where
        if choice == "named":
            assert {c.name for c in result.tool_calls} == {last}, where
        if not parallel:
            assert len(result.tool_calls) == 1, where
