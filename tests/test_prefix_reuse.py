"""Between turns of a conversation only the new tokens of the prompt are evaluated; the reply is
the one a cold evaluation of the same prompt gives."""

from __future__ import annotations

import pytest
from conftest import BACKENDS, load_once

from localtools import Model

QUESTION = "What subscription plan is customer cust-1001 using?"
TOOL = {"type": "function", "function": {"name": "get_customer", "description": "Look up a customer record by id.",
                                         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}},
                                                        "required": ["customer_id"]}}}


def second_turn(model: Model) -> tuple[list[dict], int]:
    """A first turn (a call), then the messages of the second: the call and its result."""
    messages = [{"role": "user", "content": QUESTION}]
    first = model.chat(messages, [TOOL], tool_choice="required", max_tokens=64)
    assert first.tool_calls
    call = first.tool_calls[0]
    return [*messages, first.message(),
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": '{"plan": "pro", "name": "Ada"}'}], \
        first.prompt_tokens


@pytest.mark.model
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_second_turn_reuses_the_first_and_replies_as_a_cold_prompt_does(backend: str) -> None:
    model = load_once("qwen2.5-coder-0.5b", backend)
    messages, first_prompt = second_turn(model)
    warm = model.chat(messages, [TOOL], max_tokens=48)
    reused = getattr(model.backend, "reused_tokens", None)
    model.backend.drop_prompt_cache()
    cold = model.chat(messages, [TOOL], max_tokens=48)
    assert warm.raw == cold.raw and warm.content
    assert warm.prompt_tokens == cold.prompt_tokens > first_prompt
    if reused is not None:  # the transformers backend says how much it took from the cache
        assert reused >= first_prompt - 8
        assert model.backend.reused_tokens == 0  # type: ignore[attr-defined]
