"""`localtools serve`'s OpenAI Responses endpoint without weights: input items in, output items
and stream events out, call ids paired, previous_response_id, refusals, no 500 for any body. The
openai SDK's Responses client against it on real weights is in test_serve_clients.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serve import CALL, app_with, post

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
URL = "/v1/responses"


def ask(replies: list[Any], body: dict[str, Any], app: Any = None) -> tuple[Any, Any]:
    backend = None
    if app is None:
        app, backend = app_with(replies)
    return post(app, {"model": "gpt-anything", **body}, URL), backend


def events(text: str) -> list[dict[str, Any]]:
    out = []
    for record in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in record.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        out.append(data)
    return out


def test_a_call_is_a_function_call_item_with_json_arguments() -> None:
    res, backend = ask([CALL], {"input": "Weather in Paris?", "tools": [WEATHER], "instructions": "Be brief."})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["object"] == "response" and body["status"] == "completed" and body["id"].startswith("resp_")
    (item,) = body["output"]
    assert item["type"] == "function_call" and item["name"] == "get_weather"
    assert json.loads(item["arguments"]) == {"city": "Paris"} and item["call_id"].startswith("call_")
    assert body["usage"]["output_tokens"] == len(CALL) and body["instructions"] == "Be brief."
    assert "Be brief." in backend.prompts[0].text and backend.grammars[0] is not None


def test_function_call_output_pairs_by_call_id_and_reaches_the_prompt() -> None:
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"}]
    res, backend = ask(["It is sunny."], {"input": items, "tools": [WEATHER]})
    body = res.json()
    assert body["output"][0]["content"][0] == {"type": "output_text", "text": "It is sunny.", "annotations": []}
    prompt = backend.prompts[0].text
    assert prompt.index('"city": "Paris"') < prompt.index("sunny, 21 C")
    bad, _ = ask(["x"], {"input": [*items[:1], {"type": "function_call_output", "call_id": "call_9", "output": "x"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[1].call_id"


def test_previous_response_id_continues_a_kept_response_and_store_false_keeps_none() -> None:
    app, backend = app_with([CALL, "Sunny in Paris.", "Sunny."])
    first = post(app, {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER]}, URL).json()
    call = first["output"][0]
    second = post(app, {"model": "m", "previous_response_id": first["id"], "tools": [WEATHER],
                        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "21 C"}]}, URL)
    assert second.status_code == 200, second.text
    assert second.json()["previous_response_id"] == first["id"]
    prompt = backend.prompts[1].text
    assert "Weather in Paris?" in prompt and prompt.index("get_weather") < prompt.index("21 C")
    unkept = post(app, {"model": "m", "input": "Hi", "store": False}, URL).json()
    again = post(app, {"model": "m", "input": "more", "previous_response_id": unkept["id"]}, URL)
    assert again.status_code == 400 and again.json()["error"]["param"] == "previous_response_id"


@pytest.mark.parametrize(("body", "param"), [
    ({"input": []}, "input"),
    ({"input": 7}, "input"),
    ({"input": [{"role": "robot", "content": "x"}]}, "input[0].role"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
    ({"input": [{"type": "web_search_call"}]}, "input[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": {"type": "nope"}}]}, "tools[0]"),
    ({"input": "x", "tool_choice": "required"}, "tool_choice"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"minimum": "1"}}}},
     "text.format.schema"),
    ({"input": "x", "text": {"format": {"type": "grammar"}}}, "text.format.type"),
    ({"input": "x", "include": ["reasoning.encrypted_content"]}, "include"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "x", "previous_response_id": "resp_nope"}, "previous_response_id"),
])
def test_what_cannot_be_honoured_gets_a_400_naming_it(body: dict[str, Any], param: str) -> None:
    res, backend = ask(["never"], body)
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert error["type"] == "invalid_request_error" and (error["param"] or "").startswith(param)
    assert backend.prompts == []


@pytest.mark.parametrize("reply", [CALL + "\n" + CALL.replace("Paris", "Oslo"), "Sunny in Paris, 21 C."])
def test_the_stream_joins_to_the_response_the_same_request_gets_whole(reply: str) -> None:
    body = {"input": "Weather in Paris?", "tools": [WEATHER]}
    whole, _ = ask([reply], body)
    streamed, _ = ask([reply], {**body, "stream": True})
    records = events(streamed.text)
    assert [r["sequence_number"] for r in records] == list(range(1, len(records) + 1))
    assert records[0]["type"] == "response.created" and records[-1]["type"] == "response.completed"
    final = records[-1]["response"]
    text = "".join(r["delta"] for r in records if r["type"] == "response.output_text.delta")
    arguments = "".join(r["delta"] for r in records if r["type"] == "response.function_call_arguments.delta")

    def shape(output: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(i["type"], i.get("name") or i["content"][0]["text"]) for i in output]

    assert shape(final["output"]) == shape(whole.json()["output"])
    assert text + arguments == "".join(i.get("arguments", "") or i["content"][0]["text"] for i in final["output"])
    added = [r["item"]["type"] for r in records if r["type"] == "response.output_item.added"]
    done = [r["item"]["type"] for r in records if r["type"] == "response.output_item.done"]
    assert added == done == [i["type"] for i in final["output"]]


def test_a_thought_is_a_reasoning_item_before_the_answer() -> None:
    from localtools import Model, ScriptedBackend
    from localtools.serve._app import ServerConfig, create_app

    app = create_app(Model(ScriptedBackend(["<think>Paris is in France.</think>" + CALL] * 2), family="qwen3"),
                     ServerConfig(model_name="m"))
    body = {"model": "m", "input": "Weather in Paris?", "tools": [WEATHER], "reasoning": {"effort": "medium"}}
    whole = post(app, body, URL).json()
    assert [i["type"] for i in whole["output"]] == ["reasoning", "function_call"]
    assert whole["output"][0]["summary"][0]["text"] == "Paris is in France."
    records = events(post(app, {**body, "stream": True}, URL).text)
    thought = "".join(r["delta"] for r in records if r["type"] == "response.reasoning_summary_text.delta")
    assert thought == "Paris is in France."


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=12)
_items = st.lists(st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "other"]),
    "role": st.sampled_from(["user", "assistant", "system", "developer", "tool"]), "content": _json | st.text(max_size=6),
    "call_id": st.sampled_from(["c1", "c2"]) | _json, "name": st.sampled_from(["get_weather"]) | _json,
    "arguments": st.sampled_from(['{"city": "x"}', "{", "[]"]) | _json, "output": _json, "summary": _json}), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(input_=st.text(max_size=8) | _items | _json,
       extra=st.dictionaries(st.sampled_from(["tools", "tool_choice", "instructions", "reasoning", "text", "store",
                                              "max_output_tokens", "stream", "previous_response_id", "temperature"]),
                             _json, max_size=3))
def test_no_body_gets_a_500(input_: Any, extra: dict[str, Any]) -> None:
    res, _ = ask(["Fine."] * 2, {"input": input_, "tools": [WEATHER], **extra})
    assert res.status_code in (200, 400, 422), res.text
    if res.status_code != 200:
        assert res.json()["error"]["message"]
