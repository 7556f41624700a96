from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import tc

from localtools import (
    Agent,
    CallOutcome,
    Full,
    Model,
    Pick,
    ResultContext,
    ScriptedBackend,
    Summarize,
    Tool,
    Truncate,
    UsageError,
    tool,
)
from localtools.agent._agent import CITE_HINT

ORDER = {"id": "o-1", "status": "shipped", "customer": {"name": "Ada", "email": "ada@example.com", "api_key": "sk-123"},
         "lines": [{"sku": "A-7", "qty": 2, "price": 9.5}, {"sku": "B-2", "qty": 1, "price": 3.0}]}


def get_order(order_id: str) -> dict:
    """Look up an order.

    Args:
        order_id: The order id.
    """
    return ORDER


def run(tools: list[Any], replies: list[str], **kw: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies)
    return Agent(Model(backend, family="qwen2.5"), tools, **kw).run("Where is order o-1?"), backend


def test_truncate_cuts_to_the_models_token_count_and_keeps_the_whole_result_in_the_trace() -> None:
    result, backend = run([Tool.from_function(get_order, result=Truncate(tokens=40))], [tc("get_order", order_id="o-1"), "ok"])
    call = result.trace[0].calls[0]
    whole = json.dumps(ORDER)
    assert call.full_result == whole
    # The scripted backend counts a token a character: exactly 40 of the result, then the note.
    assert call.result == whole[:40] + f"\n[... result cut to 40 of its {len(whole)} tokens]"
    assert result.messages[2]["content"] == call.result and whole not in backend.prompts[1].text


def test_a_result_within_the_budget_is_untouched() -> None:
    result, _ = run([Tool.from_function(get_order, result=Truncate(tokens=10_000))], [tc("get_order", order_id="o-1"), "ok"])
    assert result.trace[0].calls[0].full_result is None
    assert result.trace[0].calls[0].result == json.dumps(ORDER, ensure_ascii=False)


def test_pick_keeps_named_fields_through_objects_and_lists() -> None:
    policy = Pick("status", "customer.name", "lines.sku")
    result, _ = run([get_order], [tc("get_order", order_id="o-1"), "ok"], result=policy)
    assert json.loads(result.messages[2]["content"]) == {
        "status": "shipped", "customer": {"name": "Ada"}, "lines": [{"sku": "A-7"}, {"sku": "B-2"}]}
    ctx = ResultContext(Tool.from_function(get_order), None, len)  # type: ignore[arg-type]
    assert policy("plain text", ctx) == "plain text"
    assert json.loads(policy(json.dumps([{"status": 1, "x": 2}]), ctx)) == [{"status": 1}]
    with pytest.raises(UsageError):
        Pick()


def test_a_tool_policy_wins_over_the_agents() -> None:
    tools = [Tool.from_function(get_order, result=Full())]
    result, _ = run(tools, [tc("get_order", order_id="o-1"), "ok"], result=Pick("id"))
    assert result.trace[0].calls[0].full_result is None


def test_summarize_may_be_async_and_its_failure_is_the_calls_error() -> None:
    async def summary(text: str, ctx: ResultContext) -> str:
        await asyncio.sleep(0)
        return f"{ctx.tool.name} says: {json.loads(text)['status']}"

    result, _ = run([get_order], [tc("get_order", order_id="o-1"), "ok"], result=Summarize(summary))
    assert result.messages[2]["content"] == "get_order says: shipped"

    def broken(text: str, ctx: ResultContext) -> str:
        raise RuntimeError("summariser down")

    result, _ = run([get_order], [tc("get_order", order_id="o-1"), "ok"], result=Summarize(broken))
    call = result.trace[0].calls[0]
    assert call.outcome is CallOutcome.RAISED and "summariser down" in call.result


def test_cited_results_have_short_ids_the_answer_can_cite() -> None:
    @tool
    def weather(city: str) -> str:
        """Weather.

        Args:
            city: Where.
        """
        return f"sunny in {city}"

    replies = [tc("weather", city="Oslo") + "\n" + tc("weather", city="Rome"), tc("get_order", order_id="o-1"),
               "Oslo is sunny [r1], Rome too [r2]; the order shipped [r3]. [r9] is no result."]
    result, backend = run([weather, get_order], replies, cite=True)
    assert [c.ref for s in result.trace for c in s.calls] == ["r1", "r2", "r3"]
    assert result.messages[0]["role"] == "system" and result.messages[3]["content"] == "[r1] sunny in Oslo"
    assert CITE_HINT in backend.prompts[0].text
    assert {ref: c.arguments for ref, c in result.citations.items()} == {
        "r1": {"city": "Oslo"}, "r2": {"city": "Rome"}, "r3": {"order_id": "o-1"}}
    # Without cite, nothing changes in the prompt.
    plain, backend = run([get_order], [tc("get_order", order_id="o-1"), "ok"])
    assert CITE_HINT not in backend.prompts[0].text and plain.citations == {} and plain.trace[0].calls[0].ref is None


def test_redaction_masks_secrets_before_the_model_and_the_trace_see_them() -> None:
    result, backend = run([get_order], [tc("get_order", order_id="o-1"), "ok"], redact=True)
    content = json.loads(result.messages[2]["content"])
    assert content["customer"] == {"name": "Ada", "email": "ada@example.com", "api_key": "[redacted]"}
    assert "sk-123" not in backend.prompts[1].text
    assert "sk-123" not in json.dumps([c.__dict__ for s in result.trace for c in s.calls])

    def hide_email(text: str, t: Tool) -> str:
        return text.replace("ada@example.com", "<email>")

    result, _ = run([get_order], [tc("get_order", order_id="o-1"), "ok"], redact=hide_email)
    assert "<email>" in result.messages[2]["content"] and "sk-123" in result.messages[2]["content"]
