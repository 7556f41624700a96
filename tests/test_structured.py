"""Structured output: an answer that is no call is one JSON value under the asked schema, decoded
under that schema's grammar and checked as a call's arguments are, in every path (whole and
streamed, with and without tools)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from localtools import Model, ScriptedBackend
from localtools._errors import SchemaViolation, UnsupportedSchema, UsageError
from localtools.examples import get_customer
from localtools.grammar import build_grammar, matches
from localtools.model._stream import TextDelta, TurnDone

PLAN: dict[str, Any] = {"type": "object", "properties": {"plan": {"enum": ["pro", "free"]}, "seats": {"type": "integer", "minimum": 1}},
        "required": ["plan"], "additionalProperties": False}
#: uniqueItems is the check's, not the grammar's: a repeated tag passes the grammar.
TAGS: dict[str, Any] = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["tags"], "additionalProperties": False}
CALL = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
SCHEMAS: list[dict[str, Any]] = [PLAN, TAGS, {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
           {"type": "string", "enum": ["yes", "no"]}, {"anyOf": [{"type": "integer"}, {"type": "null"}]},
           {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                             "note": {"type": "string", "maxLength": 8}}, "required": ["when"],
            "additionalProperties": False}]


def qwen(replies: list[str]) -> Model:
    return Model(ScriptedBackend(replies), family="qwen2.5")


@pytest.mark.parametrize("family", ["qwen2.5", "llama3", "mistral", "functionary-v3.2", "gemma"])
@pytest.mark.parametrize("choice", ["auto", "none"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_instance_of_the_schema_is_an_answer_and_text_is_not(family: str, choice: str, data: st.DataObject) -> None:
    schema = data.draw(st.sampled_from(SCHEMAS))
    model = Model(ScriptedBackend([]), family=family)
    grammar = build_grammar(model.family, [get_customer.spec()], choice, answer_schema=schema)
    opening = model.reply_format([get_customer], choice, answer_schema=schema).text_open
    value = data.draw(from_schema(schema))
    assert matches(grammar, opening + json.dumps(value)), (schema, value)
    assert not matches(grammar, opening + "The plan is pro.")
    assert not matches(grammar, opening + json.dumps(value) + " and more")


@pytest.mark.parametrize(("schema", "bad"), [(PLAN, {"plan": "gold"}), (PLAN, {"plan": "pro", "seats": 0}),
                                             (PLAN, {"seats": 2}), (PLAN, {"plan": "pro", "extra": 1}),
                                             (SCHEMAS[2], [1, 2, 3, 4]), (SCHEMAS[2], [1.5]), (SCHEMAS[3], "maybe")])
def test_the_grammar_refuses_what_the_schema_refuses(schema: dict[str, Any], bad: Any) -> None:
    grammar = build_grammar(qwen([]).family, [], "auto", answer_schema=schema)
    assert not matches(grammar, json.dumps(bad))


def test_calls_stay_calls_beside_a_structured_answer() -> None:
    family = qwen([]).family
    auto = build_grammar(family, [get_customer.spec()], "auto", answer_schema=PLAN)
    assert matches(auto, CALL) and matches(auto, '{"plan": "pro"}')
    # A call after the answer is no answer: the answer is one JSON value.
    assert not matches(auto, '{"plan": "pro"}\n' + CALL)
    required = build_grammar(family, [get_customer.spec()], "required", answer_schema=PLAN)
    assert matches(required, CALL) and not matches(required, '{"plan": "pro"}')


def test_a_structured_answer_comes_back_as_its_json() -> None:
    model = qwen(['{"plan": "pro", "seats": 3}'])
    result = model.chat([{"role": "user", "content": "Plan?"}], answer_schema=PLAN)
    assert json.loads(result.content) == {"plan": "pro", "seats": 3} and result.finish_reason == "stop"
    assert model.backend.grammars[0] is not None  # type: ignore[attr-defined]


def test_with_tools_the_model_may_call_first_then_answer_in_the_schema() -> None:
    model = qwen([CALL, '{"plan": "pro"}'])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Plan of cust-1001?"}]
    first = model.chat(messages, [get_customer], answer_schema=PLAN)
    assert [c.name for c in first.tool_calls] == ["get_customer"]
    messages += [first.message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": '{"plan": "pro"}'}]
    second = model.chat(messages, [get_customer], answer_schema=PLAN)
    assert json.loads(second.content) == {"plan": "pro"}


def test_what_only_the_check_sees_is_told_to_the_model_and_answered_again() -> None:
    model = qwen(['{"tags": ["a", "a"]}', '{"tags": ["a", "b"]}'])
    result = model.chat([{"role": "user", "content": "Tags?"}], answer_schema=TAGS)
    assert json.loads(result.content) == {"tags": ["a", "b"]} and result.schema_repairs == 1
    # The second prompt holds the first answer and what was wrong with it, as the user's words.
    second = "".join(text for text, _ in model.backend.prompts[1].segments)  # type: ignore[attr-defined]
    assert '{"tags": ["a", "a"]}' in second and "/tags" in second and "unique" in second


def test_an_answer_still_wrong_after_the_repairs_is_a_schema_violation() -> None:
    model = qwen(['{"tags": ["a", "a"]}'] * 2)
    with pytest.raises(SchemaViolation) as caught:
        model.chat([{"role": "user", "content": "Tags?"}], answer_schema=TAGS, schema_retries=1)
    assert caught.value.violations[0].pointer == "/tags" and caught.value.violations[0].keyword == "uniqueItems"


def test_a_streamed_structured_answer_is_sent_only_once_it_passes() -> None:
    model = qwen(['{"tags": ["x", "x"]}', '{"tags": ["x", "y"]}'])
    events = list(model.stream([{"role": "user", "content": "Tags?"}], answer_schema=TAGS))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == '{"tags": ["x", "y"]}'
    done = events[-1]
    assert isinstance(done, TurnDone) and done.result.content == text


def test_a_streamed_turn_is_checked_once_for_its_gate_and_its_repairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream's gate and the repair loop read one verdict per answer and per call."""
    from localtools.model import _model, _stream

    seen: list[str] = []

    def counted(real: Any, what: str) -> Any:
        def wrapper(*args: Any) -> Any:
            seen.append(what)
            return real(*args)
        return wrapper

    monkeypatch.setattr(_stream, "answer_violations", counted(_stream.answer_violations, "answer"))
    monkeypatch.setattr(_model, "violations", counted(_model.violations, "call"))
    model = qwen(['{"tags": ["x", "x"]}', '{"tags": ["x", "y"]}'])
    list(model.stream([{"role": "user", "content": "Tags?"}], answer_schema=TAGS))
    assert seen == ["answer", "answer"]  # the refused answer, then its repair: each once
    seen.clear()
    def tag(*tags: str) -> str:
        return '<tool_call>\n{"name": "tag", "arguments": ' + json.dumps({"tags": list(tags)}) + '}\n</tool_call>'

    tool = {"type": "function", "function": {"name": "tag", "parameters": TAGS}}
    events = list(qwen([tag("x", "x"), tag("x", "y")]).stream([{"role": "user", "content": "Tag it"}], [tool],
                                                             tool_choice="required"))
    done = events[-1]
    assert isinstance(done, TurnDone) and done.result.tool_calls[0].arguments == {"tags": ["x", "y"]}
    assert seen.count("call") == 2  # the refused call, then its repair: each once


def test_free_decoding_cannot_promise_a_structured_answer() -> None:
    with pytest.raises(UsageError, match="constrained"):
        qwen(["{}"]).chat([{"role": "user", "content": "x"}], answer_schema=PLAN, constrained=False)


def test_strict_schema_refuses_an_answer_schema_nothing_enforces() -> None:
    model = Model(ScriptedBackend(["{}"]), family="qwen2.5", strict_schema=True)
    with pytest.raises(UnsupportedSchema, match="answer"):
        model.chat([{"role": "user", "content": "x"}], answer_schema={"type": "object", "propertyNames": {"$ref": "#/nope"}})


# --- the server: response_format (chat completions) and text.format (Responses) -------------------

def _app(replies: list[str]) -> tuple[Any, ScriptedBackend]:
    from test_serve import app_with

    return app_with(replies)


def _post(app: Any, body: dict[str, Any], path: str) -> Any:
    from test_serve import post

    return post(app, body, path)


JSON_SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "tags", "schema": TAGS, "strict": True}}


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_answer_in_the_schema_and_only_a_checked_answer_leaves(stream: bool) -> None:
    app, backend = _app(['{"tags": ["a", "a"]}', '{"tags": ["a", "b"]}'])
    res = _post(app, {"messages": [{"role": "user", "content": "Tags?"}], "response_format": JSON_SCHEMA_FORMAT,
                      "stream": stream}, "/v1/chat/completions")
    assert res.status_code == 200, res.text
    if stream:
        chunks = [json.loads(line[6:]) for line in res.text.splitlines() if line.startswith("data: {")]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    else:
        content = res.json()["choices"][0]["message"]["content"]
    assert json.loads(content) == {"tags": ["a", "b"]}
    assert len(backend.grammars) == 2 and all(g is not None for g in backend.grammars)


def test_an_answer_that_stays_wrong_is_a_422_that_carries_no_answer() -> None:
    app, _ = _app(['{"tags": ["a", "a"]}'] * 3)
    res = _post(app, {"messages": [{"role": "user", "content": "Tags?"}], "response_format": JSON_SCHEMA_FORMAT},
                "/v1/chat/completions")
    assert res.status_code == 422 and res.json()["error"]["code"] == "schema_violation"
    assert '"a", "a"' not in res.text


def test_json_object_asks_for_any_object() -> None:
    app, backend = _app(['{"anything": [1, 2]}'])
    res = _post(app, {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}},
                "/v1/chat/completions")
    assert res.status_code == 200 and json.loads(res.json()["choices"][0]["message"]["content"]) == {"anything": [1, 2]}
    grammar = backend.grammars[0]
    assert grammar is not None and not matches(grammar, '"a string"') and not matches(grammar, "plain text")


def test_responses_text_format_answers_in_the_schema_and_echoes_the_format() -> None:
    fmt = {"type": "json_schema", "name": "plan", "schema": PLAN, "strict": True}
    app, _ = _app(['{"plan": "free"}'])
    res = _post(app, {"model": "m", "input": "Plan?", "text": {"format": fmt}}, "/v1/responses")
    assert res.status_code == 200, res.text
    body = res.json()
    assert json.loads(body["output"][0]["content"][0]["text"]) == {"plan": "free"}
    assert body["text"]["format"] == fmt
