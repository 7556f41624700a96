"""The OpenTelemetry observer: a real Agent on the scripted backend, its spans caught by the SDK's
in-memory exporter on a local TracerProvider (the global one is never touched)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from conftest import tc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from localtools import (
    Agent,
    CallOutcome,
    MaxStepsExceeded,
    MissingDependency,
    Model,
    RetryLimitExceeded,
    ScriptedBackend,
    TextDelta,
    Tool,
    tool,
)
from localtools.agent._otel import OTEL_HINT, OpenTelemetry
from localtools.families._prompt import Prompt
from localtools.grammar import Grammar

CUSTOMERS = {"cust-1001": {"plan": "pro"}, "cust-2002": {"plan": "free"}}
CONTENT_WORDS = ("cust-1001", "Be brief.", "The plan is pro.", '"plan"')
CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


@tool
def get_customer(customer_id: str) -> dict:
    """Look up a customer.

    Args:
        customer_id: The id.
    """
    return CUSTOMERS[customer_id]


def traced(replies: Sequence[Any], tools: list[Any], *, agent_name: str | None = "support",
           capture_content: bool = False, **options: Any) -> tuple[Agent, InMemorySpanExporter, OpenTelemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OpenTelemetry(provider, agent_name=agent_name, capture_content=capture_content)
    model = Model(ScriptedBackend(list(replies)), family="qwen2.5")
    return Agent(model, tools, observers=[observer], **options), exporter, observer


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        out.setdefault(span.name, []).append(span)
    return out


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def assert_well_formed(spans: Sequence[ReadableSpan]) -> None:
    """Each span starts no later than it ends, and each child lies inside its parent."""
    ids = {span_id(s): s for s in spans}
    for span in spans:
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time, span.name
        parent = ids.get(parent_id(span) or 0)
        if parent is not None:
            assert parent.start_time is not None and parent.end_time is not None
            assert parent.start_time <= span.start_time and span.end_time <= parent.end_time, span.name


def test_a_run_is_an_agent_span_over_its_chat_and_tool_spans() -> None:
    agent, exporter, observer = traced([tc("get_customer", customer_id="cust-1001"), "The plan is pro."], [get_customer])
    result = agent.run("What plan is cust-1001 on?")
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert sorted(named) == ["chat scripted", "execute_tool get_customer", "invoke_agent support"]
    [run] = named["invoke_agent support"]
    chats, [call] = named["chat scripted"], named["execute_tool get_customer"]
    assert len(chats) == 2
    assert run.parent is None and run.kind is SpanKind.INTERNAL
    assert all(parent_id(s) == span_id(run) for s in [*chats, call])
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id if run.context else 0}
    assert run.attributes is not None and dict(run.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "localtools",
        "gen_ai.agent.name": "support",
        "gen_ai.request.model": "scripted",
        "localtools.run.id": result.run_id,
        "gen_ai.usage.input_tokens": sum(s.prompt_tokens for s in result.trace),
        "gen_ai.usage.output_tokens": sum(s.completion_tokens for s in result.trace),
        "localtools.steps": 2,
    }
    assert run.status.status_code is StatusCode.UNSET
    for chat, step, reason in zip(chats, result.trace, ["tool_calls", "stop"], strict=True):
        assert chat.kind is SpanKind.CLIENT and chat.status.status_code is StatusCode.UNSET
        attributes = dict(chat.attributes or {})
        assert attributes["gen_ai.operation.name"] == "chat" and attributes["gen_ai.request.model"] == "scripted"
        assert attributes["gen_ai.usage.input_tokens"] == step.prompt_tokens > 0
        assert attributes["gen_ai.usage.output_tokens"] == step.completion_tokens > 0
        assert attributes["gen_ai.response.finish_reasons"] == (reason,)
        assert attributes["localtools.step"] == step.step
        assert "gen_ai.response.time_to_first_chunk" not in attributes  # arun does not stream
    attributes = dict(call.attributes or {})
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_customer",
        "gen_ai.tool.call.id": result.messages[1]["tool_calls"][0]["id"],
        "gen_ai.tool.type": "function",
        "localtools.tool.outcome": "ok",
        "localtools.tool.cached": False,
        "localtools.tool.attempts": 1,
    }
    assert call.status.status_code is StatusCode.UNSET
    assert_well_formed(spans)
    # In order: the first turn, its call, the answer.
    assert chats[0].end_time <= call.start_time and call.end_time <= chats[1].start_time  # type: ignore[operator]
    assert not observer._runs


def test_without_an_agent_name_the_run_span_is_plain_invoke_agent() -> None:
    agent, exporter, _ = traced(["Hello."], [get_customer], agent_name=None)
    agent.run("hi")
    [run] = by_name(exporter.get_finished_spans())["invoke_agent"]
    assert "gen_ai.agent.name" not in (run.attributes or {})


def test_a_tool_that_raises_is_an_error_span_and_the_run_goes_on() -> None:
    agent, exporter, _ = traced([tc("get_customer", customer_id="nobody"), "No such customer."], [get_customer])
    assert agent.run("plan of nobody?").answer == "No such customer."
    named = by_name(exporter.get_finished_spans())
    [call] = named["execute_tool get_customer"]
    assert call.status.status_code is StatusCode.ERROR
    assert (call.attributes or {})["error.type"] == "raised"
    assert (call.attributes or {})["localtools.tool.outcome"] == CallOutcome.RAISED
    # The error message quotes the tool's arguments: content, left out by default.
    assert "nobody" not in (call.status.description or "")
    assert named["invoke_agent support"][0].status.status_code is StatusCode.UNSET


def test_invalid_arguments_name_the_outcome() -> None:
    agent, exporter, _ = traced([tc("get_customer", customer="x"), "Sorry."], [get_customer], constrained=False)
    agent.run("plan?")
    [call] = by_name(exporter.get_finished_spans())["execute_tool get_customer"]
    assert call.status.status_code is StatusCode.ERROR
    assert (call.attributes or {})["error.type"] == "invalid_arguments"


@pytest.mark.parametrize("capture_content", [False, True])
def test_a_run_that_fails_is_an_error_span_with_its_type(capture_content: bool) -> None:
    def ping(n: int) -> int:
        """Ping."""
        return n

    agent, exporter, observer = traced([tc("ping", n=i) for i in range(10)], [ping], max_steps=3,
                                       capture_content=capture_content)
    with pytest.raises(MaxStepsExceeded):
        agent.run("loop")
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    [run] = named["invoke_agent support"]
    assert run.status.status_code is StatusCode.ERROR
    assert (run.attributes or {})["error.type"] == "MaxStepsExceeded"
    assert (run.attributes or {})["localtools.steps"] == 3
    assert len(named["chat scripted"]) == 3 and len(named["execute_tool ping"]) == 3
    assert all(s.status.status_code is StatusCode.UNSET for s in named["chat scripted"])
    if capture_content:
        assert "max_steps=3" in (run.status.description or "")
        assert [e.name for e in run.events] == ["exception"]
        assert str((run.events[0].attributes or {})["exception.type"]).endswith("MaxStepsExceeded")
    else:  # the message may quote content: the type alone, and no exception event
        assert run.status.description == "MaxStepsExceeded" and not run.events
    assert_well_formed(spans)
    assert not observer._runs


def test_unusable_turns_are_error_chat_spans_up_to_the_one_that_ends_the_run() -> None:
    agent, exporter, _ = traced(["<tool_call>\n{oops\n</tool_call>"] * 3, [get_customer], constrained=False, max_retries=2)
    with pytest.raises(RetryLimitExceeded):
        agent.run("plan?")
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    chats = named["chat scripted"]
    # Two turns fed back, and the third, which raised before its step ended.
    assert [(s.attributes or {})["localtools.step"] for s in chats] == [1, 2, 3]
    assert all(s.status.status_code is StatusCode.ERROR for s in chats)
    assert {(s.attributes or {})["error.type"] for s in chats} == {"ToolCallParseError"}
    assert "oops" not in str([s.status.description for s in spans])
    assert (named["invoke_agent support"][0].attributes or {})["error.type"] == "RetryLimitExceeded"
    assert_well_formed(spans)


def test_a_call_cut_by_max_tokens_is_a_generation_truncated_chat_span() -> None:
    call = tc("get_customer", customer_id="cust-1001")
    # max_tokens cuts the call on its first try and both retries; the next turn answers.
    agent, exporter, _ = traced([call, call, call, "The plan is pro."], [get_customer], max_tokens=40)
    agent.run("plan?")
    chats = by_name(exporter.get_finished_spans())["chat scripted"]
    assert [s.status.status_code for s in chats] == [StatusCode.ERROR, StatusCode.UNSET]
    assert (chats[0].attributes or {})["error.type"] == "GenerationTruncated"


def test_interleaved_runs_of_one_agent_keep_their_spans_apart() -> None:
    barrier = asyncio.Barrier(2)

    async def lookup(customer_id: str) -> str:
        """Look up a customer, once the other run is looking one up too."""
        await barrier.wait()
        return json.dumps(CUSTOMERS[customer_id])

    def reply(prompt: Prompt, grammar: Grammar | None) -> str:
        if "<tool_response>" in prompt.text:
            return "free." if "cust-2002" in prompt.text else "pro."
        return tc("lookup", customer_id="cust-2002" if "cust-2002" in prompt.text else "cust-1001")

    agent, exporter, observer = traced([reply] * 4, [Tool.from_function(lookup, timeout=5)])

    async def both() -> list[Any]:
        return list(await asyncio.gather(agent.arun("Plan of cust-1001?"), agent.arun("Plan of cust-2002?")))

    results = asyncio.run(both())
    assert [r.answer for r in results] == ["pro.", "free."]
    spans = exporter.get_finished_spans()
    runs = by_name(spans)["invoke_agent support"]
    assert len(runs) == 2 and len(spans) == 2 * 4
    for result in results:
        [run] = [s for s in runs if (s.attributes or {})["localtools.run.id"] == result.run_id]
        children = [s for s in spans if parent_id(s) == span_id(run)]
        assert sorted(s.name for s in children) == ["chat scripted", "chat scripted", "execute_tool lookup"]
        assert all(s.context and run.context and s.context.trace_id == run.context.trace_id for s in children)
        [call] = [s for s in children if s.name == "execute_tool lookup"]
        assert (call.attributes or {})["gen_ai.tool.call.id"] == result.messages[1]["tool_calls"][0]["id"]
        tokens = sum(s.prompt_tokens for s in result.trace)
        assert (run.attributes or {})["gen_ai.usage.input_tokens"] == tokens
    assert_well_formed(spans)
    assert not observer._runs


def test_content_is_left_out_by_default() -> None:
    agent, exporter, _ = traced([tc("get_customer", customer_id="cust-1001"), "The plan is pro."], [get_customer],
                                system="Be brief.")
    agent.run("What plan is cust-1001 on?")
    for span in exporter.get_finished_spans():
        attributes = dict(span.attributes or {})
        assert not CONTENT_KEYS & set(attributes), span.name
        assert not [w for w in CONTENT_WORDS if w in str(attributes) or w in (span.status.description or "")], span.name


def test_capture_content_records_messages_arguments_and_results() -> None:
    agent, exporter, _ = traced([tc("get_customer", customer_id="cust-1001"), "The plan is pro."], [get_customer],
                                capture_content=True, system="Be brief.")
    result = agent.run("What plan is cust-1001 on?")
    named = by_name(exporter.get_finished_spans())
    run = dict(named["invoke_agent support"][0].attributes or {})
    assert json.loads(str(run["gen_ai.input.messages"])) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "What plan is cust-1001 on?"}]},
    ]
    assert json.loads(str(run["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "The plan is pro."}], "finish_reason": "stop"}]
    call_id = result.messages[2]["tool_calls"][0]["id"]  # after the system message and the question
    first, second = (dict(s.attributes or {}) for s in named["chat scripted"])
    assert json.loads(str(first["gen_ai.output.messages"])) == [{
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": call_id, "name": "get_customer", "arguments": {"customer_id": "cust-1001"}}],
        "finish_reason": "tool_calls",
    }]
    assert json.loads(str(second["gen_ai.output.messages"]))[0]["parts"] == [{"type": "text", "content": "The plan is pro."}]
    call = dict(named["execute_tool get_customer"][0].attributes or {})
    assert json.loads(str(call["gen_ai.tool.call.arguments"])) == {"customer_id": "cust-1001"}
    assert call["gen_ai.tool.call.result"] == '{"plan": "pro"}'


def test_capture_content_puts_error_messages_on_error_spans() -> None:
    agent, exporter, _ = traced([tc("get_customer", customer_id="nobody"), "No."], [get_customer], capture_content=True)
    agent.run("plan of nobody?")
    [call] = by_name(exporter.get_finished_spans())["execute_tool get_customer"]
    assert call.status.description == "raised"  # CallTrace.error for a tool that raised
    assert "KeyError: 'nobody'" in str((call.attributes or {})["gen_ai.tool.call.result"])


def test_a_streamed_run_has_the_same_spans_and_a_time_to_first_chunk() -> None:
    agent, exporter, observer = traced([tc("get_customer", customer_id="cust-1001"), "The plan is pro."], [get_customer])

    async def go() -> list[Any]:
        return [event async for event in agent.astream("What plan is cust-1001 on?")]

    asyncio.run(go())
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    assert [len(named[n]) for n in ("invoke_agent support", "chat scripted", "execute_tool get_customer")] == [1, 2, 1]
    for chat in named["chat scripted"]:
        first_chunk = (chat.attributes or {})["gen_ai.response.time_to_first_chunk"]
        assert isinstance(first_chunk, float) and 0 <= first_chunk <= ((chat.end_time or 0) - (chat.start_time or 0)) / 1e9
    assert_well_formed(spans)
    assert not observer._runs


def test_leaving_a_stream_early_ends_the_run_and_the_turn_it_was_in() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = OpenTelemetry(provider)
    backend = ScriptedBackend(["x" * 400], seconds_per_token=0.002)
    agent = Agent(Model(backend, family="qwen2.5"), [get_customer], tool_choice="none", observers=[observer])

    async def go() -> None:
        stream = agent.astream("plan?")
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()  # type: ignore[attr-defined]

    asyncio.run(go())
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    [run], [chat] = named["invoke_agent"], named["chat scripted"]
    for span in (run, chat):
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "GeneratorExit"
    assert_well_formed(spans)
    assert not observer._runs


def test_the_run_span_is_a_child_of_the_span_current_where_it_runs() -> None:
    agent, exporter, _ = traced(["Hello."], [get_customer])
    tracer = agent.observers[0]._tracer  # type: ignore[attr-defined]
    with tracer.start_as_current_span("request") as request:
        agent.run("hi")
    [run] = by_name(exporter.get_finished_spans())["invoke_agent support"]
    assert parent_id(run) == request.get_span_context().span_id


def test_with_no_provider_it_uses_the_global_one() -> None:
    observer = OpenTelemetry()
    agent = Agent(Model(ScriptedBackend(["Hello."]), family="qwen2.5"), [get_customer], observers=[observer])
    assert agent.run("hi").answer == "Hello."
    assert not observer._runs


def test_an_error_inside_the_observer_never_reaches_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    agent, _, observer = traced(["Hello."], [get_customer])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("exporter down")

    monkeypatch.setattr(observer, "_start_run", broken)
    assert agent.run("hi").answer == "Hello."


def test_without_opentelemetry_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(MissingDependency, match=OTEL_HINT.replace("[", r"\[").replace("]", r"\]")) as info:
        OpenTelemetry()
    assert isinstance(info.value, ImportError)
