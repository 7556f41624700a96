"""`localtools serve`'s Anthropic Messages endpoint without weights: request translation, the
message and stream shapes, pairing of tool results, refusals in Anthropic's error shape, and no
500 for any body. The same server answers chat completions (test_serve.py); the anthropic SDK
against it on real weights is in test_serve_clients.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serve import CALL, app_with, post

from localtools.grammar._match import matches

WEATHER = {"name": "get_weather", "description": "Weather in a city.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
NOTE = {"name": "save_note", "description": "Save a note.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}
USER = [{"role": "user", "content": "Weather in Paris?"}]
URL = "/v1/messages"


def ask(replies: list[Any], body: dict[str, Any], **config: Any) -> tuple[Any, Any]:
    app, backend = app_with(replies, **config)
    return post(app, {"model": "claude-anything", "max_tokens": 256, **body}, URL), backend


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) records of a server-sent event stream."""
    out = []
    for record in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in record.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def joined(records: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """A stream's records put back together as the message they stand for."""
    message: dict[str, Any] = {}
    for event, data in records:
        assert event == data["type"]
        if event == "message_start":
            message = {**data["message"], "content": []}
        elif event == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append({**data["content_block"], "_json": ""})
        elif event == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            key = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "_json"}[delta["type"]]
            block[key] += delta["partial_json" if key == "_json" else key]
        elif event == "content_block_stop":
            block = message["content"][data["index"]]
            if block["type"] == "tool_use":
                block["input"] = json.loads(block["_json"])
        elif event == "message_delta":
            message.update(data["delta"])
            message["usage"] = data["usage"]
    for block in message["content"]:
        block.pop("_json")
    return message


def test_a_call_is_a_tool_use_block_and_the_stop_reason_says_so() -> None:
    res, backend = ask([CALL], {"messages": USER, "tools": [WEATHER, NOTE]})
    assert res.status_code == 200
    body = res.json()
    assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "scripted-model"
    assert body["id"].startswith("msg_") and body["stop_reason"] == "tool_use" and body["stop_sequence"] is None
    (use,) = body["content"]
    assert use["type"] == "tool_use" and use["name"] == "get_weather" and use["input"] == {"city": "Paris"}
    assert body["usage"]["output_tokens"] == len(CALL) and body["usage"]["input_tokens"] > 0
    assert backend.grammars[0] is not None and "save_note" in backend.prompts[0].text


def test_a_text_answer_ends_its_turn_or_at_a_stop_sequence() -> None:
    res, _ = ask(["Sunny all day."], {"messages": USER, "system": "Be brief."})
    body = res.json()
    assert body["content"] == [{"type": "text", "text": "Sunny all day."}]
    assert body["stop_reason"] == "end_turn"
    res, _ = ask(["Sunny. STOP and more"], {"messages": USER, "stop_sequences": ["STOP", "never"]})
    body = res.json()
    assert body["content"] == [{"type": "text", "text": "Sunny."}]
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "STOP")
    res, _ = ask(["a long answer that runs on"], {"messages": USER, "max_tokens": 5})
    assert res.json()["stop_reason"] == "max_tokens"


def test_system_tool_use_and_tool_result_reach_the_prompt_in_order_and_errors_read_as_errors() -> None:
    history = [*USER, {"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_2", "name": "save_note", "input": {"text": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny, 21 C"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "disk full", "is_error": True},
            {"type": "text", "text": "And tomorrow?"}]}]
    res, backend = ask(["Sunny."], {"messages": history, "tools": [WEATHER, NOTE],
                                    "system": [{"type": "text", "text": "You are terse."}]})
    assert res.status_code == 200, res.text
    prompt = backend.prompts[0].text
    order = ["You are terse.", "Weather in Paris?", "Let me look.", '"city": "Paris"', "sunny, 21 C",
             "Error: disk full", "And tomorrow?"]
    assert all(part in prompt for part in order), prompt
    assert [prompt.index(part) for part in order] == sorted(prompt.index(part) for part in order)


@pytest.mark.parametrize(("body", "param"), [
    ({"messages": USER, "max_tokens": None}, "max_tokens"),
    ({"messages": USER, "max_tokens": 0}, "max_tokens"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}]},
     "messages[0].content[0].tool_use_id"),
    ({"messages": USER, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"messages": USER, "tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ({"messages": USER, "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "nope"}}}}]},
     "tools[0].input_schema"),
    ({"messages": USER, "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "other"}}, "tool_choice.name"),
    ({"messages": USER, "tool_choice": {"type": "any"}}, "tool_choice"),
    ({"messages": USER, "top_k": 5}, "top_k"),
    ({"messages": USER, "thinking": {"type": "enabled", "budget_tokens": -1}}, "thinking.budget_tokens"),
    ({"messages": USER, "temperature": 1.5}, "temperature"),
    ({"messages": USER, "stop_sequences": [""]}, "stop_sequences"),
])
def test_what_cannot_be_honoured_gets_a_400_in_anthropics_shape_naming_it(body: dict[str, Any], param: str) -> None:
    res, backend = ask(["never"], body)
    assert res.status_code == 400, res.text
    error = res.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert param.split(".")[0].split("[")[0] in error["error"]["message"]
    assert backend.prompts == []


def test_tool_choice_any_tool_and_none_and_one_call_at_a_time() -> None:
    two = CALL + "\n" + CALL.replace("Paris", "Oslo")
    res, backend = ask([two], {"messages": USER, "tools": [WEATHER, NOTE], "tool_choice": {"type": "any"}})
    assert [b["input"]["city"] for b in res.json()["content"]] == ["Paris", "Oslo"]
    res, backend = ask([CALL], {"messages": USER, "tools": [WEATHER, NOTE],
                                "tool_choice": {"type": "tool", "name": "get_weather",
                                                "disable_parallel_tool_use": True}})
    assert res.json()["stop_reason"] == "tool_use"
    grammar = backend.grammars[0]
    assert grammar is not None and matches(grammar, CALL) and not matches(grammar, two)
    res, backend = ask(["Plain words."], {"messages": USER, "tools": [WEATHER], "tool_choice": {"type": "none"}})
    assert res.json()["content"] == [{"type": "text", "text": "Plain words."}]


@pytest.mark.parametrize("reply", [CALL + "\n" + CALL.replace("Paris", "Oslo"), "Sunny in Paris, 21 C.",
                                   "<think>The user wants weather.</think>" + CALL])
def test_the_stream_joins_to_the_message_the_same_request_gets_whole(reply: str) -> None:
    body = {"messages": USER, "tools": [WEATHER]}
    family = "qwen3" if reply.startswith("<think>") else "qwen2.5"
    whole = _ask_family(family, [reply], body).json()
    streamed = _ask_family(family, [reply], {**body, "stream": True})
    assert streamed.headers["content-type"].startswith("text/event-stream")
    records = events(streamed.text)
    assert records[0][0] == "message_start" and records[-1][0] == "message_stop"
    message = joined(records)
    # Ids are new each turn; everything else is the same.
    def unnamed(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert all(b["id"].startswith("call_") for b in content if b["type"] == "tool_use")
        return [{k: v for k, v in b.items() if k != "id"} for b in content]

    assert unnamed(message["content"]) == unnamed(whole["content"]) and message["stop_reason"] == whole["stop_reason"]
    assert message["usage"]["output_tokens"] == whole["usage"]["output_tokens"]


def _ask_family(family: str, replies: list[Any], body: dict[str, Any]) -> Any:
    from localtools import Model, ScriptedBackend
    from localtools.serve._app import ServerConfig, create_app

    app = create_app(Model(ScriptedBackend(replies), family=family), ServerConfig(model_name="scripted-model"))
    return post(app, {"model": "m", "max_tokens": 256, **body}, URL)


def test_a_call_that_breaks_its_schema_never_streams_and_ends_in_an_error_event() -> None:
    tool = {"name": "tag", "input_schema": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}, "required": ["tags"]}}
    broken = '<tool_call>\n{"name": "tag", "arguments": {"tags": ["a", "a"]}}\n</tool_call>'
    res, _ = ask([broken] * 3, {"messages": USER, "tools": [tool], "tool_choice": {"type": "any"}, "stream": True})
    records = events(res.text) if res.status_code == 200 else []
    if res.status_code == 200:
        assert records[-1][0] == "error" and records[-1][1]["error"]["type"] == "invalid_request_error"
        assert not any(e == "content_block_start" and d["content_block"]["type"] == "tool_use" for e, d in records)
    else:
        assert res.status_code == 422 and res.json()["type"] == "error"
    assert '"a", "a"' not in res.text


def test_the_api_key_may_come_as_x_api_key_and_errors_before_reading_are_anthropic_shaped() -> None:
    app, _ = app_with(["Hi."] * 2, api_key="sekret", max_body_bytes=4096)
    body = {"model": "m", "max_tokens": 16, "messages": USER}
    assert post(app, body, URL, headers={"x-api-key": "sekret"}).status_code == 200
    assert post(app, body, URL, headers={"authorization": "Bearer sekret"}).status_code == 200
    wrong = post(app, body, URL, headers={"x-api-key": "nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    big = post(app, {**body, "system": "x" * 5000}, URL, headers={"x-api-key": "sekret"})
    assert big.status_code == 413 and big.json()["error"]["type"] == "request_too_large"
    bad = post(app, b"{not json", URL, headers={"x-api-key": "sekret", "content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["type"] == "error"


def test_count_tokens_is_the_prompt_the_model_would_read() -> None:
    app, backend = app_with([])
    body = {"model": "m", "messages": USER, "tools": [WEATHER], "system": "Be brief."}
    res = post(app, body, "/v1/messages/count_tokens")
    assert res.status_code == 200
    from localtools import Model

    model = Model(backend, family="qwen2.5")
    prompt = model.render([{"role": "system", "content": "Be brief."}, *USER],
                          [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                                             "parameters": WEATHER["input_schema"]}}])
    assert res.json() == {"input_tokens": len(backend.tokenize(prompt))}
    assert backend.prompts == []  # counted, not generated


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=12)
_blocks = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "image"])},
                                         optional={"text": _json, "id": _json, "name": _json, "input": _json,
                                                   "tool_use_id": st.sampled_from(["toolu_1", "x"]) | _json,
                                                   "content": _json, "is_error": _json, "thinking": _json}),
                   max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]),
                                                "content": st.text(max_size=8) | _blocks}), max_size=4) | _json,
       extra=st.dictionaries(st.sampled_from(["tools", "tool_choice", "system", "thinking", "stop_sequences",
                                              "temperature", "max_tokens", "stream", "top_p"]), _json, max_size=3))
def test_no_body_gets_a_500(messages: Any, extra: dict[str, Any]) -> None:
    app, _ = app_with(["Fine."] * 4)
    res = post(app, {"model": "m", "max_tokens": 8, "messages": messages, **extra}, URL)
    assert res.status_code in (200, 400, 422), res.text
    body = res.json() if not res.headers["content-type"].startswith("text/event-stream") else None
    if res.status_code != 200:
        assert body is not None and body["type"] == "error" and body["error"]["message"]


def test_count_tokens_answers_a_template_that_refuses_with_a_4xx() -> None:
    from localtools import Model, ScriptedBackend
    from localtools.serve import ServerConfig, create_app

    model = Model(ScriptedBackend([]), family="qwen2.5",
                  template="{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message first') }}"
                           "{% endif %}{{ messages[0]['content'] }}")
    app = create_app(model, ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": USER}, "/v1/messages/count_tokens")
    assert 400 <= res.status_code < 500 and "system message first" in res.json()["error"]["message"]
    fine = post(app, {"model": "m", "messages": USER, "system": "Be brief."}, "/v1/messages/count_tokens")
    assert fine.status_code == 200 and fine.json()["input_tokens"] == len("Be brief.")
