"""Streaming: the events of a turn join to the turn ``chat`` returns, text arrives while the reply
is generated, and nothing that may still become a call is shown as text."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sampler import sample

from localtools import (
    Agent,
    ChatResult,
    GenerationTruncated,
    Model,
    ReasoningDelta,
    RunDone,
    ScriptedBackend,
    StepDone,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    ToolResult,
    TurnDone,
    UsageError,
    families,
)
from localtools.backends._base import TextFeed
from localtools.examples import get_customer

FAMILIES = sorted(families())
QUESTION = [{"role": "user", "content": "What plan is cust-1001 on?"}]
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_customer", "description": "Look up a customer.", "parameters": {
        "type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}},
    {"type": "function", "function": {"name": "convert", "description": "Convert an amount.", "parameters": {
        "type": "object", "properties": {"amount": {"type": "number"}, "unit": {"enum": ["kg", "lb"]},
                                         "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
        "required": ["amount", "unit"]}}},
]


def joined(events: list[Any]) -> dict[str, Any]:
    """What a client reassembles from the events."""
    calls: dict[int, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, ToolCallStarted):
            assert e.index not in calls, "a call started twice"
            calls[e.index] = {"id": e.id, "name": e.name, "arguments": "", "done": False}
        elif isinstance(e, ToolCallDelta):
            calls[e.index]["arguments"] += e.arguments
        elif isinstance(e, ToolCallDone):
            assert not calls[e.index]["done"]
            calls[e.index]["done"] = True
            assert calls[e.index]["id"] == e.call.id and calls[e.index]["name"] == e.call.name
    assert all(c["done"] for c in calls.values())
    return {
        "content": "".join(e.text for e in events if isinstance(e, TextDelta)),
        "reasoning": "".join(e.text for e in events if isinstance(e, ReasoningDelta)),
        "calls": [(calls[i]["id"], calls[i]["name"], calls[i]["arguments"]) for i in sorted(calls)],
    }


def assert_same_turn(events: list[Any], result: ChatResult) -> None:
    assert isinstance(events[-1], TurnDone) and events[-1].result is result
    assert sum(isinstance(e, TurnDone) for e in events) == 1
    got = joined(events)
    assert got["content"] == result.content
    assert got["reasoning"] == result.reasoning
    assert got["calls"] == [(c.id, c.name, c.to_openai()["function"]["arguments"]) for c in result.tool_calls]


def streamed(model: Model, **options: Any) -> tuple[list[Any], ChatResult]:
    events = list(model.stream(QUESTION, TOOLS, **options))
    final = events[-1]
    assert isinstance(final, TurnDone)
    return events, final.result


@settings(derandomize=True, database=None, deadline=None, max_examples=240)
@given(family=st.sampled_from(FAMILIES), choice=st.sampled_from(["auto", "auto", "required", "none", "convert"]),
       thinking=st.sampled_from([None, True, False]), stop=st.sampled_from([(), ("plan",), ("e",)]),
       rng=st.randoms(use_true_random=False))
def test_streamed_events_join_to_the_turn_chat_returns(family: str, choice: str, thinking: bool | None,
                                                        stop: tuple[str, ...], rng: random.Random) -> None:
    if thinking and not families()[family].reasoning_start:
        thinking = None
    replies: list[str] = []

    def reply(prompt: Any, grammar: Any) -> str:
        replies.append(sample(grammar, rng))
        return replies[-1]

    model = Model(ScriptedBackend([reply, lambda p, g: replies[0]]), family=family)
    options: dict[str, Any] = {"tool_choice": choice, "thinking": thinking, "stop": stop, "max_tokens": 100_000,
               "retry_repeat_penalties": ()}
    events, result = streamed(model, **options)
    assert_same_turn(events, result)
    # The same reply without streaming is the same turn (call ids are drawn afresh unless the
    # reply spells them).
    plain = model.chat(QUESTION, TOOLS, **options)
    assert (plain.content, plain.reasoning, plain.finish_reason) == (result.content, result.reasoning,
                                                                     result.finish_reason)
    assert [(c.name, c.arguments) for c in plain.tool_calls] == [(c.name, c.arguments) for c in result.tool_calls]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("reply", [
    "The plan is pro.",
    "  Plan:\n\n\n\npro {\"name\": 1} and [x] <b>bold</b> `code`  \n",
    "Here you go: ```json\n{\"name\": \"get_customer\"}\n```",
    "A long answer. " * 20,
])
def test_free_output_streams_the_same_turn(family: str, reply: str) -> None:
    model = Model(ScriptedBackend([reply]), family=family)
    try:
        events, result = streamed(model, constrained=False)
    except Exception as exc:  # the tolerant parser may refuse a half call; chat refuses it alike
        with pytest.raises(type(exc)):
            Model(ScriptedBackend([reply]), family=family).chat(QUESTION, TOOLS, constrained=False)
        return
    assert_same_turn(events, result)


def test_text_arrives_while_the_reply_is_generated() -> None:
    log: list[tuple[str, str]] = []
    backend = ScriptedBackend(["The customer cust-1001 is on the pro plan, and has been for years."])
    generate = backend.generate

    def spy(*args: Any, on_text: Any = None, **kwargs: Any) -> Any:
        def seen(piece: str) -> None:
            log.append(("generated", piece))
            on_text(piece)
        return generate(*args, on_text=seen if on_text else None, **kwargs)

    backend.generate = spy  # type: ignore[method-assign]
    model = Model(backend, family="qwen2.5")
    result = model.chat(QUESTION, TOOLS, on_event=lambda e: log.append(("event", type(e).__name__)))
    kinds = [k for k, _ in log]
    first_text = log.index(("event", "TextDelta"))
    assert first_text < 8, log[:10]  # within a couple of characters of the first one
    assert kinds[first_text:].count("generated") > 40  # most of the reply came after it
    assert result.content.startswith("The customer")


def test_a_call_is_sent_whole_once_the_turn_is_over_and_never_as_text() -> None:
    reply = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    log: list[str] = []
    backend = ScriptedBackend([reply])
    generate = backend.generate

    def spy(*args: Any, on_text: Any, **kwargs: Any) -> Any:
        def seen(piece: str) -> None:
            log.append("generated")
            on_text(piece)
        return generate(*args, on_text=seen, **kwargs)

    backend.generate = spy  # type: ignore[method-assign,assignment]
    events: list[Any] = []

    def seen_event(event: Any) -> None:
        events.append(event)
        log.append(type(event).__name__)

    result = Model(backend, family="qwen2.5").chat(QUESTION, TOOLS, on_event=seen_event)
    events.append(TurnDone(result))
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert [type(e) for e in events] == [ToolCallStarted, ToolCallDelta, ToolCallDone, TurnDone]
    assert [e.arguments for e in events if isinstance(e, ToolCallDelta)] == ['{"customer_id": "cust-1001"}']
    # Checked before it was sent: nothing of it went out while it was being written.
    started = log.index("ToolCallStarted")
    assert "generated" not in log[started:] and log.count("generated") > 20
    assert_same_turn(events, result)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_streams_a_call_that_joins_to_the_parsed_one(family: str) -> None:
    arguments = {"amount": 12.5, "unit": "kg", "tags": ["a \"quoted\" tag", "中文 😀"]}
    # The template's rendering of the call in the history, after the prompt it answers.
    prompt = Model(ScriptedBackend([]), family=family).render(QUESTION, TOOLS).text
    history: list[dict[str, Any]] = [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1abcdefg", "type": "function", "function": {"name": "convert", "arguments": json.dumps(arguments)}}]}]
    rendered = Model(ScriptedBackend([]), family=family).render(history, TOOLS, add_generation_prompt=False).text
    reply = rendered[len(prompt):] if rendered.startswith(prompt) else None
    model = Model(ScriptedBackend([lambda p, g: _written_call(family, g, reply)]), family=family)
    events, result = streamed(model, tool_choice="convert", thinking=False)
    assert [c.arguments for c in result.tool_calls] == [arguments]
    assert_same_turn(events, result)


def _written_call(family: str, grammar: Any, rendered: str | None) -> str:
    """The call as the family's own template writes it, cut to what the grammar takes."""
    from localtools.grammar import matches

    if rendered:
        for end in range(len(rendered), 0, -1):
            if matches(grammar, rendered[:end]):
                return rendered[:end]
    pytest.skip(f"{family}'s template does not write the call where the reply begins")


def test_a_cut_call_is_generated_again_when_streaming_too() -> None:
    # No call was sent before its turn was over, so a cut one is retried as chat() retries it.
    reply = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    backend = ScriptedBackend([reply, reply, reply])
    events: list[Any] = []
    with pytest.raises(GenerationTruncated):
        Model(backend, family="qwen2.5").chat(QUESTION, TOOLS, max_tokens=50, on_event=events.append)
    assert len(backend.prompts) == 3 and backend.repeat_penalties == [1.0, 1.1, 1.3]
    assert not [e for e in events if isinstance(e, ToolCallStarted | ToolCallDelta | ToolCallDone)]


@pytest.mark.parametrize(("family", "reply", "options"), [
    ("qwen2.5", 'Hello there. <tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>',
     {}),
    ("qwen3", '<think>\nI think A.\n</think>\n\n<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": '
              '"cust-1001"}}\n</tool_call>', {"thinking": True}),
])
def test_a_turn_cut_after_any_of_it_streamed_is_not_generated_again(family: str, reply: str,
                                                                     options: dict[str, Any]) -> None:
    backend = ScriptedBackend([reply, "Hello there, friend."])
    events: list[Any] = []
    with pytest.raises(GenerationTruncated):
        Model(backend, family=family).chat(QUESTION, TOOLS, max_tokens=len(reply) - 30, on_event=events.append,
                                           **options)
    assert len(backend.prompts) == 1 and events
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert (text, reasoning) in (("Hello there.", ""), ("", "I think A."))
    assert not [e for e in events if isinstance(e, ToolCallDone)]


def test_text_before_a_call_streams_and_the_opening_tag_does_not() -> None:
    reply = 'Let me check. <tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    events, result = streamed(Model(ScriptedBackend([reply]), family="qwen2.5"))
    assert joined(events)["content"] == "Let me check." == result.content
    assert "<" not in joined(events)["content"]
    assert_same_turn(events, result)


def test_reasoning_streams_apart_from_the_answer() -> None:
    reply = "<think>\nThe tool has the plan.\n</think>\n\n" \
            '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    events, result = streamed(Model(ScriptedBackend([reply]), family="qwen3"), thinking=True)
    assert joined(events)["reasoning"] == "The tool has the plan." == result.reasoning
    assert not [e for e in events if isinstance(e, TextDelta)]
    first_call = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_call])
    assert_same_turn(events, result)


def test_a_reasoning_budget_streams_the_thought_then_the_answer() -> None:
    thought = "<think>\nA very long thought that goes on"
    model = Model(ScriptedBackend([thought + " and on and on</think>", "The plan is pro."]), family="qwen3")
    events, result = streamed(model, thinking=True, reasoning_budget=len(thought))
    assert result.reasoning == "A very long thought that goes on"
    assert result.attempts == 2 and result.content == "The plan is pro."
    assert_same_turn(events, result)


def test_stop_strings_are_never_streamed() -> None:
    events, result = streamed(Model(ScriptedBackend(["Plan: pro. END and more"]), family="qwen2.5"),
                              stop=["END"], tool_choice="none")
    assert joined(events)["content"] == "Plan: pro." == result.content
    assert_same_turn(events, result)


def test_leaving_the_stream_early_stops_the_generation() -> None:
    backend = ScriptedBackend(["x" * 400], seconds_per_token=0.002)
    stream = Model(backend, family="qwen2.5").stream(QUESTION, TOOLS, tool_choice="none")
    assert isinstance(next(stream), TextDelta)
    stream.close()
    assert backend.cancelled_at and backend.cancelled_at[0] < 400


def test_stream_raises_what_chat_raises() -> None:
    model = Model(ScriptedBackend([]), family="qwen2.5")
    with pytest.raises(UsageError, match="no replies left"):
        list(model.stream(QUESTION, TOOLS))
    with pytest.raises(UsageError, match="on_event"):
        list(model.stream(QUESTION, TOOLS, on_event=print))


@pytest.mark.parametrize(("texts", "final", "stop", "sent"), [
    (["Hel", "Hello wor", "Hello world"], "Hello world", (), ["Hel", "lo wor", "ld"]),
    # A stop string arriving in pieces is never sent, nor what follows it.
    (["Hel", "Hello <", "Hello <|im", "Hello <|im_end|> x"], "Hello ", ("<|im_end|>",), ["Hel", "lo "]),
    # A decoder shows a character whose bytes have not all come as U+FFFD, then the character.
    (["caf", "caf\ufffd", "café!"], "café!", (), ["caf", "é!"]),
])
def test_the_text_feed_holds_back_what_may_still_change(texts: list[str], final: str, stop: tuple[str, ...],
                                                        sent: list[str]) -> None:
    got: list[str] = []
    feed = TextFeed(got.append, stop)
    for text in texts:
        feed.grow(text)
    feed.end(final)
    assert got == sent and "".join(got) == final


def test_agent_astream_gives_the_run_arun_gives() -> None:
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    answer = "Ada Lovelace is on the pro plan."

    async def go() -> tuple[list[Any], Any]:
        streamed_agent = Agent(Model(ScriptedBackend([call, answer]), family="qwen2.5"), [get_customer])
        events = [e async for e in streamed_agent.astream("What plan is cust-1001 on?")]
        plain = await Agent(Model(ScriptedBackend([call, answer]), family="qwen2.5"), [get_customer]).arun(
            "What plan is cust-1001 on?")
        return events, plain

    events, plain = asyncio.run(go())
    kinds = [type(e).__name__ for e in events]
    first_turn = kinds.index("TurnDone")
    assert kinds[0] == "ToolCallStarted" and kinds[first_turn - 1] == "ToolCallDone"
    assert set(kinds[1:first_turn - 1]) == {"ToolCallDelta"}
    assert kinds[first_turn + 1:first_turn + 3] == ["ToolResult", "StepDone"]
    assert kinds[-2:] == ["StepDone", "RunDone"]
    result = events[-1].result
    assert isinstance(events[-1], RunDone) and result.answer == plain.answer == answer
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer
    tool_result = next(e for e in events if isinstance(e, ToolResult))
    assert tool_result.call.ok and "pro" in tool_result.call.result
    # The same conversation, call ids aside.
    def strip_ids(messages: list[dict[str, Any]]) -> str:
        return str(messages).replace(result.messages[1]["tool_calls"][0]["id"], "ID").replace(
            plain.messages[1]["tool_calls"][0]["id"], "ID")
    assert strip_ids(result.messages) == strip_ids(plain.messages)
    assert sum(isinstance(e, StepDone) for e in events) == 2


def test_agent_astream_reports_an_unusable_turn_and_goes_on() -> None:
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    answer = "The plan is pro."

    async def go() -> list[Any]:
        # max_tokens cuts the call on its first try and both retries (repeat penalties 1.1, 1.3).
        agent = Agent(Model(ScriptedBackend([call, call, call, answer]), family="qwen2.5"), [get_customer],
                      max_tokens=40)
        return [e async for e in agent.astream("plan?")]

    events = asyncio.run(go())
    failed = [e.step for e in events if isinstance(e, StepDone) and e.step.error]
    assert failed and "max_tokens" in (failed[0].error or "")
    assert isinstance(events[-1], RunDone) and events[-1].result.answer == answer


@pytest.mark.parametrize("quiet", [False, True])
def test_cli_run_shows_the_run_as_it_happens(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                             quiet: bool) -> None:
    import localtools.cli as cli
    from localtools.cli import _common

    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    replies = ["<think>\nLook it up.\n</think>\n\n" + call, "<think>\nGot it.\n</think>\n\nAda is on [b]pro[/b]."]
    monkeypatch.setattr(_common, "load_model", lambda args: Model(ScriptedBackend(replies), family="qwen3"))
    argv = ["run", "What plan is cust-1001 on?", "--tools", "localtools.examples:get_customer", "--think"]
    assert cli.main(argv + (["--quiet"] if quiet else [])) == 0
    out = capsys.readouterr().out.splitlines()
    if quiet:
        assert out == ["Ada is on [b]pro[/b]."]
        return
    assert out == ["… Look it up.", '→ get_customer({"customer_id": "cust-1001"})',
                   '← {"name": "Ada Lovelace", "plan": "pro", "status": "active"}', "… Got it.",
                   "Ada is on [b]pro[/b]."]


def test_leaving_agent_astream_early_stops_its_generation_at_once() -> None:
    backend = ScriptedBackend(["x" * 400, "second"], seconds_per_token=0.002)
    agent = Agent(Model(backend, family="qwen2.5"), [get_customer], tool_choice="none")

    async def go() -> str:
        stream = agent.astream("plan?")
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()  # type: ignore[attr-defined]
        # Stopped before aclose returned: the next run never shares the backend with it.
        assert backend.cancelled_at and backend.cancelled_at[0] < 400
        return (await agent.arun("again")).answer

    assert asyncio.run(go()) == "second"


@pytest.mark.model
@pytest.mark.parametrize("backend", ["llama-cpp", "transformers"])
def test_on_real_weights_the_stream_joins_to_the_same_turn_as_chat(models: Any, backend: str) -> None:
    from localtools.examples import get_customer as customer_tool

    model = models("qwen2.5-coder-0.5b", backend)
    question = [{"role": "user", "content": "What subscription plan is customer cust-1001 using?"}]
    for tools, options in (([customer_tool], {}), ([], {"max_tokens": 40})):
        model.chat(question, tools, **options)  # the prompt cached, for both turns below alike
        plain = model.chat(question, tools, **options)
        events = list(model.stream(question, tools, **options))
        result = events[-1].result
        assert_same_turn(events, result)
        assert (result.content, result.finish_reason) == (plain.content, plain.finish_reason)
        assert [(c.name, c.arguments) for c in result.tool_calls] == [(c.name, c.arguments) for c in plain.tool_calls]
        assert len(events) > 3  # in pieces, not whole


@pytest.mark.parametrize("parameters", [
    {"type": "object", "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "string"}},
     "anyOf": [{"properties": {}, "additionalProperties": {"type": "integer"}}]},
])
def test_arguments_that_may_repeat_a_key_come_whole(parameters: dict[str, Any]) -> None:
    tool = {"type": "function", "function": {"name": "f", "description": "", "parameters": parameters}}
    reply = '<tool_call>\n{"name": "f", "arguments": {"k": 1, "k": 2}}\n</tool_call>'
    model = Model(ScriptedBackend([reply]), family="qwen2.5")
    events: list[Any] = list(model.stream(QUESTION, [tool], tool_choice="required"))
    result = events[-1].result
    assert result.tool_calls[0].arguments == {"k": 2}
    assert [e.arguments for e in events if isinstance(e, ToolCallDelta)] == ['{"k": 2}']
    assert_same_turn(events, result)
