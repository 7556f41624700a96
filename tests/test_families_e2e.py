"""Every family end to end on the scripted backend: a call in the family's own syntax (drawn from
the request's grammar), run by the agent, its result rendered back by the family's template and
paired to its call id, then the answer."""

from __future__ import annotations

import random
from typing import Any

import pytest
from sampler import sample

from localtools import Agent, Model, ScriptedBackend, Tool, families, get_family
from localtools.grammar import call_shape

seen: list[dict[str, Any]] = []


def lookup(city: str, days: int = 1) -> dict[str, Any]:
    """Weather for a city over some days."""
    seen.append({"city": city, "days": days})
    return {"city": city, "forecast": "sunny"}


@pytest.mark.parametrize("family", sorted(families()))
def test_call_result_answer_in_every_family(family: str) -> None:
    fam = get_family(family)
    tool = Tool.from_function(lookup)
    model = Model(ScriptedBackend([]), family=family)
    # The call: any string of the grammar for tool_choice="required" (the agent forces the first turn).
    fmt = model.reply_format([tool], "required")
    assert fmt.grammar is not None
    call_text = sample(fmt.grammar, random.Random(family))
    text_open = call_shape(fam).text_open if fam.call_style == "pattern" else ""
    model.backend = backend = ScriptedBackend([call_text, f"{text_open}It is sunny."])
    seen.clear()
    result = Agent(model, [tool], tool_choice="required", thinking=False).run("Weather in Oslo?")
    assert result.answer == "It is sunny."
    assert len(seen) >= 1, call_text
    calls = [c for step in result.trace for c in step.calls]
    assert [c.name for c in calls] == ["lookup"] * len(seen)
    # The result went back in the history, paired to the call's id, and the template rendered it.
    results = [m for m in result.messages if m["role"] == "tool"]
    ids = [c["id"] for m in result.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert [m["tool_call_id"] for m in results] == ids
    assert "sunny" in backend.prompts[1].text
