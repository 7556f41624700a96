"""A call the conversation already made and answered is not made again: the model is told to use
the result it has (an agent framework that runs its own loop, such as smolagents, otherwise sees
the same call until its step limit)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localtools import Model, ScriptedBackend
from localtools._errors import SchemaViolation
from localtools.examples import get_customer
from localtools.model._stream import ToolCallStarted, TurnDone

CALL = '<tool_call>\n{{"name": "get_customer", "arguments": {{"customer_id": "{}"}}}}\n</tool_call>'


def history(customer: str = "cust-1001", arguments: Any = None) -> list[dict[str, Any]]:
    arguments = json.dumps({"customer_id": customer}) if arguments is None else arguments
    return [{"role": "user", "content": f"Plan of {customer}?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_customer", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"plan": "pro"}'}]


@pytest.mark.parametrize("arguments", [None, {"customer_id": "cust-1001"}], ids=["json text", "a dict"])
def test_an_answered_call_made_again_is_sent_back_and_the_model_answers(arguments: Any) -> None:
    model = Model(ScriptedBackend([CALL.format("cust-1001"), "The plan is pro."]), family="qwen2.5")
    result = model.chat(history(arguments=arguments), [get_customer])
    assert result.tool_calls == [] and result.content == "The plan is pro." and result.schema_repairs == 1
    second = "".join(t for t, _ in model.backend.prompts[1].segments)  # type: ignore[attr-defined]
    assert "already made" in second


def test_a_call_with_other_arguments_is_a_new_call() -> None:
    model = Model(ScriptedBackend([CALL.format("cust-1002")]), family="qwen2.5")
    result = model.chat(history(), [get_customer])
    assert [c.arguments for c in result.tool_calls] == [{"customer_id": "cust-1002"}] and result.schema_repairs == 0


def test_a_call_whose_result_never_came_is_no_repeat() -> None:
    unanswered = history()[:2]
    model = Model(ScriptedBackend([CALL.format("cust-1001")]), family="qwen2.5")
    assert model.chat(unanswered, [get_customer]).tool_calls


def test_repeat_calls_allows_it_for_a_tool_one_polls() -> None:
    model = Model(ScriptedBackend([CALL.format("cust-1001")]), family="qwen2.5")
    assert model.chat(history(), [get_customer], repeat_calls=True).tool_calls


def test_a_model_that_keeps_repeating_gets_a_typed_error_naming_the_repeat() -> None:
    model = Model(ScriptedBackend([CALL.format("cust-1001")] * 3), family="qwen2.5")
    with pytest.raises(SchemaViolation) as caught:
        model.chat(history(), [get_customer], tool_choice="required")
    assert [v.keyword for v in caught.value.violations] == ["repeat"]


def test_a_streamed_repeat_is_never_sent() -> None:
    model = Model(ScriptedBackend([CALL.format("cust-1001"), CALL.format("cust-1002")]), family="qwen2.5")
    events = list(model.stream(history(), [get_customer]))
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert len(started) == 1
    done = events[-1]
    assert isinstance(done, TurnDone) and done.result.tool_calls[0].arguments == {"customer_id": "cust-1002"}


def test_over_the_server_a_client_loop_gets_the_answer_not_the_same_call() -> None:
    from test_serve import app_with, post

    app, _ = app_with([CALL.format("cust-1001"), "The plan is pro."])
    tool = {"type": "function", "function": get_customer.spec()["function"]}
    res = post(app, {"messages": history(), "tools": [tool]})
    assert res.status_code == 200, res.text
    message = res.json()["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == "The plan is pro."


#: Ways agents that keep their history as text write a call they made: a ReAct "Action:" blob, a
#: Python literal of call dicts with ids (smolagents' "Calling tools:"), a fenced JSON call, the
#: family's own tag.
TEXT_CALLS = [
    'Action:\n{{"name": "get_customer", "arguments": {{"customer_id": "{}"}}}}',
    "Calling tools:\n[{{'id': 'call_8f59264b', 'type': 'function', 'function': {{'name': 'get_customer', "
    "'arguments': {{'customer_id': '{}'}}}}}}]",
    'I will look it up.\n```json\n{{"arguments": {{"customer_id": "{}"}}, "name": "get_customer"}}\n```',
    CALL,
]


def text_history(written: str, customer: str, parts: bool = False) -> list[dict[str, Any]]:
    said, observed = written.format(customer), 'Observation:\n{"plan": "pro"}'
    return [{"role": "user", "content": f"Plan of {customer}?"},
            {"role": "assistant", "content": [{"type": "text", "text": said}] if parts else said},
            {"role": "user", "content": [{"type": "text", "text": observed}] if parts else observed}]


@pytest.mark.parametrize("written", TEXT_CALLS, ids=["action", "python literal", "fenced", "tag"])
def test_a_call_written_in_the_history_as_text_and_answered_is_not_made_again(written: str) -> None:
    # smolagents sends its calls as assistant text and their results as user messages: the model
    # that writes the same call again is told it has the result, as with a tool message.
    for customer in ("cust-1001", "C-77", "ada lovelace"):
        model = Model(ScriptedBackend([CALL.format(customer), "The plan is pro."]), family="qwen2.5")
        result = model.chat(text_history(written, customer), [get_customer])
        assert result.tool_calls == [] and result.content == "The plan is pro." and result.schema_repairs == 1


@pytest.mark.parametrize("written", TEXT_CALLS, ids=["action", "python literal", "fenced", "tag"])
def test_over_the_server_a_text_history_in_content_parts_gets_the_answer(written: str) -> None:
    from test_serve import app_with, post

    app, _ = app_with([CALL.format("cust-1001"), "The plan is pro."])
    tool = {"type": "function", "function": get_customer.spec()["function"]}
    res = post(app, {"messages": text_history(written, "cust-1001", parts=True), "tools": [tool],
                     "tool_choice": "auto"})
    assert res.status_code == 200, res.text
    message = res.json()["choices"][0]["message"]
    assert not message.get("tool_calls") and message["content"] == "The plan is pro."


@pytest.mark.parametrize("written", TEXT_CALLS, ids=["action", "python literal", "fenced", "tag"])
def test_a_call_written_as_text_with_no_reply_after_it_or_other_arguments_is_no_repeat(written: str) -> None:
    unanswered = text_history(written, "cust-1001")[:2]
    model = Model(ScriptedBackend([CALL.format("cust-1001")]), family="qwen2.5")
    assert model.chat(unanswered, [get_customer]).tool_calls
    model = Model(ScriptedBackend([CALL.format("cust-1002")]), family="qwen2.5")
    result = model.chat(text_history(written, "cust-1001"), [get_customer])
    assert [c.arguments for c in result.tool_calls] == [{"customer_id": "cust-1002"}] and result.schema_repairs == 0


#: Each way qwen2.5's grammar writes the repeated call: tagged, fenced, bare.
FORMS = [CALL, '```json\n{{"name": "get_customer", "arguments": {{"customer_id": "{}"}}}}\n```',
         '{{"name": "get_customer", "arguments": {{"customer_id": "{}"}}}}']
FINAL = {"type": "function", "function": {"name": "final_answer", "description": "Give the final answer.", "parameters": {
    "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}
FINAL_CALL = '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "pro"}}\n</tool_call>'


@pytest.mark.parametrize("form", range(len(FORMS)))
@pytest.mark.parametrize("family", ["qwen2.5", "chatml", "smollm2"])
def test_under_auto_a_model_that_keeps_repeating_ends_in_its_own_answer(form: int, family: str) -> None:
    repeat = FORMS[form].format("cust-1001")
    model = Model(ScriptedBackend([repeat] * 3 + ["The plan is pro."]), family=family)
    result = model.chat(history(), [get_customer])
    assert result.tool_calls == [] and result.content == "The plan is pro." and result.schema_repairs == 2
    assert [d.point for d in result.decisions if d.point == "repeat"] == ["repeat"]
    # The answer was decoded under the text branch alone, after reading why the repeat was refused.
    last = model.backend.grammars[-1]  # type: ignore[attr-defined]
    assert last is not None and "calls" not in last.rules
    assert "already made" in "".join(t for t, _ in model.backend.prompts[-1].segments)  # type: ignore[attr-defined]


@pytest.mark.parametrize("form", range(len(FORMS)))
def test_a_repeat_beside_a_new_call_leaves_the_new_call(form: int) -> None:
    both = FORMS[form].format("cust-1001") + "\n" + CALL.format("cust-1002")
    model = Model(ScriptedBackend([both] * 3), family="qwen2.5")
    result = model.chat(history(), [get_customer])
    assert [c.arguments for c in result.tool_calls] == [{"customer_id": "cust-1002"}]
    assert result.schema_repairs == 2


@pytest.mark.parametrize("form", range(len(FORMS)))
def test_under_required_the_turn_ends_in_a_call_to_another_tool(form: int) -> None:
    """smolagents asks for a call every step (required) and ends with its final_answer tool."""
    repeat = FORMS[form].format("cust-1001")
    model = Model(ScriptedBackend([repeat] * 3 + [FINAL_CALL]), family="qwen2.5")
    result = model.chat(history(), [get_customer, FINAL], tool_choice="required")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("final_answer", {"answer": "pro"})]
    last = model.backend.grammars[-1]  # type: ignore[attr-defined]
    from localtools.grammar import matches
    assert last is not None and not matches(last, repeat) and matches(last, FINAL_CALL)


def test_over_the_server_a_required_client_gets_its_final_answer_not_a_422() -> None:
    from test_serve import app_with, post

    app, _ = app_with([CALL.format("cust-1001")] * 3 + [FINAL_CALL])
    tools = [{"type": "function", "function": get_customer.spec()["function"]}, FINAL]
    res = post(app, {"messages": history(), "tools": tools, "tool_choice": "required"})
    assert res.status_code == 200, res.text
    calls = res.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["final_answer"]


def later_request(earlier: list[dict[str, Any]], again: str = "I changed the plan. What is the plan of cust-1001 now?"
                  ) -> list[dict[str, Any]]:
    """A conversation whose first request was answered, then a new request from the user."""
    return [*earlier, {"role": "assistant", "content": "The plan is pro."}, {"role": "user", "content": again}]


@pytest.mark.parametrize("again", ["What is it now?", "现在呢？再查一次。", "Vuelve a mirarlo, por favor."])
def test_a_new_request_may_make_an_earlier_requests_call_again(again: str) -> None:
    # What the tool reads may have changed since the first request: the same call is a new call.
    for earlier in (history(), text_history(TEXT_CALLS[0], "cust-1001"), text_history(TEXT_CALLS[1], "cust-1001")):
        model = Model(ScriptedBackend([CALL.format("cust-1001")]), family="qwen2.5")
        result = model.chat(later_request(earlier, again), [get_customer])
        assert [c.arguments for c in result.tool_calls] == [{"customer_id": "cust-1001"}], earlier
        assert result.schema_repairs == 0


def test_within_the_new_request_its_own_answered_call_is_still_a_repeat() -> None:
    asked = later_request(history())
    asked += [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-1001"}'}}]},
        {"role": "tool", "tool_call_id": "c2", "content": '{"plan": "team"}'}]
    model = Model(ScriptedBackend([CALL.format("cust-1001"), "The plan is team now."]), family="qwen2.5")
    result = model.chat(asked, [get_customer])
    assert result.tool_calls == [] and result.content == "The plan is team now." and result.schema_repairs == 1


def test_observations_kept_as_user_messages_do_not_start_a_new_request() -> None:
    # Action, Observation, another Action, its Observation: the first call is still answered.
    steps = text_history(TEXT_CALLS[0], "cust-1001")
    steps += [{"role": "assistant", "content": TEXT_CALLS[0].format("cust-1002")},
              {"role": "user", "content": 'Observation:\n{"plan": "free"}'}]
    model = Model(ScriptedBackend([CALL.format("cust-1001"), "Pro and free."]), family="qwen2.5")
    result = model.chat(steps, [get_customer])
    assert result.tool_calls == [] and result.schema_repairs == 1


def test_over_the_server_a_client_asking_again_in_a_later_turn_gets_the_call() -> None:
    from test_serve import app_with, post

    app, _ = app_with([CALL.format("cust-1001")])
    tool = {"type": "function", "function": get_customer.spec()["function"]}
    res = post(app, {"messages": later_request(history()), "tools": [tool]})
    assert res.status_code == 200, res.text
    calls = res.json()["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"customer_id": "cust-1001"}]
