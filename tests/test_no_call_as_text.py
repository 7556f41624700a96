"""No call leaves as text: tools whose arguments need not be an object are refused at the door,
a reply cut inside a call is never an answer (on every dialect, streamed or not), a call object
with extra keys or spelled as code, as a keyed object or as ReAct writes it is a call in disguise,
and so is a structured answer that is a call to an offered tool."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from test_disguise import ANSWER, ASK, FAMILIES, TOOLS, _model
from test_serve import post

from localtools import Model, ScriptedBackend, Tool, ToolDefinitionError
from localtools.families._parse import disguised_calls, first_disguise
from localtools.grammar import Grammar
from localtools.serve._app import ServerConfig, create_app
from localtools.tools._schema import spec_problems

# -- 1. parameters that are no object schema, refused at the door ---------------------------------

_NOT_OBJECTS: list[Any] = [{"type": "array"}, {"type": "string"}, {"type": ["object", "array"]}, {"type": ["object", "null"]},
                           {"enum": [1, 2]}, {"const": "x"}]


def _non_object_parameters(seed: int) -> dict[str, Any]:
    """A parameters schema whose top level names no type, but that resolves to one that admits
    arguments that are no object: through a chain of ``$ref``s, a branch of ``anyOf``/``oneOf``,
    or an ``allOf`` that says so."""
    rng = random.Random(seed)
    leaf = rng.choice(_NOT_OBJECTS)
    hops = rng.randint(1, 3)
    defs: dict[str, Any] = {}
    for i in range(hops):
        defs[f"D{i}"] = {"$ref": f"#/$defs/D{i + 1}"} if i < hops - 1 else leaf
    how = rng.choice(["ref", "anyOf", "oneOf", "allOf"])
    target = {"$ref": "#/$defs/D0"}
    if how == "ref":
        return {"$defs": defs, **target}
    if how == "allOf":
        return {"$defs": defs, "allOf": [leaf]}
    return {"$defs": defs, how: [{"type": "object", "properties": {}}, target]}


@pytest.mark.parametrize("seed", range(24))
def test_parameters_that_resolve_to_no_object_are_refused_by_every_dialect(seed: int) -> None:
    params = _non_object_parameters(seed)
    assert spec_problems({"name": "f", "parameters": params}), params
    with pytest.raises(ToolDefinitionError):
        Tool.from_schema({"name": "f", "parameters": params}, lambda **_: None)
    app = create_app(Model(ScriptedBackend([]), family="qwen2.5"), ServerConfig(model_name="m"))
    bodies = {
        "/v1/chat/completions": {"messages": ASK, "tool_choice": "required",
                                 "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]},
        "/v1/responses": {"input": "go", "tool_choice": "required",
                          "tools": [{"type": "function", "name": "f", "parameters": params}]},
        "/v1/messages": {"model": "m", "max_tokens": 50, "messages": ASK, "tool_choice": {"type": "any"},
                         "tools": [{"name": "f", "input_schema": params}]},
    }
    for path, body in bodies.items():
        res = post(app, body, path)
        assert res.status_code == 400, (path, res.text)
        assert "object" in json.dumps(res.json()), res.text


@pytest.mark.parametrize("params", [
    {"$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}}, "$ref": "#/$defs/A"},
    {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object"}]},
    {"allOf": [{"type": "object"}, {"properties": {"a": {"type": "string"}}}]},
    {"properties": {"a": {"type": "string"}}},
    {"type": "object"},
])
def test_parameters_that_resolve_to_an_object_are_taken(params: dict[str, Any]) -> None:
    assert spec_problems({"name": "f", "parameters": params}) == []


# -- 2. a reply cut inside a call is never an answer ------------------------------------------------


class _EngineStops(ScriptedBackend):
    """An engine that applies the family's stop strings wherever they occur, inside a call too
    (as an engine's server does with the ``stop`` it was sent)."""

    def generate(self, prompt: Any, *, stop: Any = (), **kwargs: Any) -> Any:
        return super().generate(prompt, stop=[*stop, "<|im_end|>"], **kwargs)


_ECHO: dict[str, Any] = {"type": "function", "function": {"name": "echo", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
_CUT = ['<tool_call>\n{"name": "echo", "arguments": {"text": "a<|im_end|>b"}}\n</tool_call>',
        '{"name": "echo", "arguments": {"text": "a<|im_end|>b"}}',
        '```json\n{"name": "echo", "arguments": {"text": "x<|im_end|>"}}\n```']


@pytest.mark.parametrize("reply", _CUT)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
def test_a_call_an_engine_cut_at_a_stop_string_never_leaves_as_text(reply: str, stream: bool, path: str) -> None:
    app = create_app(Model(_EngineStops([reply] * 4), family="qwen2.5"), ServerConfig(model_name="m"))
    tools: list[dict[str, Any]] = [_ECHO] if path == "/v1/chat/completions" else \
        [{"type": "function", "name": "echo", "parameters": _ECHO["function"]["parameters"]}] if path == "/v1/responses" \
        else [{"name": "echo", "input_schema": _ECHO["function"]["parameters"]}]
    body: dict[str, Any] = {"tools": tools, "stream": stream}
    body.update({"input": "go"} if path == "/v1/responses" else {"messages": ASK})
    if path == "/v1/messages":
        body.update({"model": "m", "max_tokens": 200})
    res = post(app, body, path)
    # A cut call is answered as max_tokens is (finish_reason "length", no call), never as its text.
    assert res.status_code == 200, res.text
    # No piece of the call in any text the client reads (the call's JSON would be escaped there).
    assert '\\"arguments\\"' not in res.text and "<tool_call>" not in res.text and "```" not in res.text, res.text


def test_a_call_cut_at_a_stop_string_is_cut_as_by_max_tokens_in_the_library() -> None:
    from localtools import GenerationTruncated

    model = Model(_EngineStops([_CUT[0]] * 4), family="qwen2.5")
    with pytest.raises(GenerationTruncated, match="stop string") as caught:
        model.chat(ASK, [_ECHO], tool_choice="required")
    assert caught.value.stop == "<|im_end|>"


# -- 3. call objects with other keys, and calls spelled otherwise ----------------------------------

_EXTRA_KEYS = ["description", "type", "id", "reason", "thought", "explanation"]


@pytest.mark.parametrize("seed", range(30))
def test_a_call_object_with_any_other_key_is_a_call(seed: int) -> None:
    rng = random.Random(seed)
    extra = {k: rng.choice(["d", "Looks up a customer.", 1]) for k in rng.sample(_EXTRA_KEYS, rng.randint(1, 3))}
    call = {"name": "get_customer", "arguments": {"customer_id": "cust-1001"}, **extra}
    items = list(call.items())
    rng.shuffle(items)
    text = rng.choice(["{}", "Sure: {}", "```json\n{}\n```"]).format(json.dumps(dict(items)))
    assert disguised_calls(text, ["get_customer"]) == [("get_customer", {"customer_id": "cust-1001"})], text
    assert first_disguise(text, ["get_customer"]) is not None


@pytest.mark.parametrize("text", [
    # A tool's definition echoed back: its parameters hold a schema, with or without a description.
    '{"name": "get_customer", "description": "Look up.", "parameters": {"type": "object", "properties": {}}}',
    '{"name": "get_customer", "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, '
    '"required": ["customer_id"]}}',
    '{"type": "function", "function": {"name": "get_customer", "description": "d", "parameters": {"type": "object"}}}',
    '{"get_customer": {"type": "object", "properties": {}}}',
    # A tool named in prose calls nothing.
    "You can use get_customer() to look customers up.",
    "get_customer(customer_id) takes the id.",
    "Action: search\nAction Input: {\"q\": 1}",
    # Tags naming a tool nobody offered, or a name with no arguments after it.
    "<name>search</name><arguments>{\"q\": 1}</arguments>",
    "The tool is <name>get_customer</name>.",
])
def test_echoed_definitions_and_prose_are_no_calls(text: str) -> None:
    assert first_disguise(text, ["get_customer"]) is None and disguised_calls(text, ["get_customer"]) == []


def _spelled(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A call to get_customer spelled as code, as a keyed object, as ReAct or as tags, in some wrapping."""
    args: dict[str, Any] = rng.choice([{"customer_id": "cust-1001"}, {"customer_id": "cust-1001", "verbose": True},
                                       {"customer_id": "客户-1001"}])
    shape = rng.choice(["code", "keyed", "react", "tagged"])
    if shape == "code":
        quote = rng.choice(['"', "'"])
        parts = [f"{k}{rng.choice(['=', ' = '])}" + (repr(v) if not isinstance(v, str) else f"{quote}{v}{quote}")
                 for k, v in args.items()]
        body = f"get_customer({', '.join(parts)})"
    elif shape == "keyed":
        body = json.dumps({"get_customer": args}, ensure_ascii=rng.random() < 0.5)
    elif shape == "tagged":
        name_tag, args_tag = rng.choice(["name", "Function", "tool_name"]), rng.choice(["arguments", "parameters"])
        gap = rng.choice(["", "\n", " "])
        close = rng.choice([f"</{args_tag}>", ""])
        body = f"<{name_tag}>get_customer</{name_tag}>{gap}<{args_tag}>{gap}{json.dumps(args)}{gap}{close}"
    else:
        action = rng.choice(["Action", "action", "ACTION"])
        body = f"{action}: {rng.choice(['get_customer', '`get_customer`'])}\n{action} Input: {json.dumps(args)}"
    wrap = rng.choice(["{}", "Let me look. {}", "{}\nThat gets the plan.", "```python\n{}\n```", "Thought: I should.\n{}"])
    return wrap.format(body), args


@pytest.mark.parametrize("seed", range(60))
def test_calls_spelled_as_code_keyed_react_or_tags_are_read_as_calls(seed: int) -> None:
    text, args = _spelled(random.Random(seed))
    found = first_disguise(text, ["get_customer"])
    assert found is not None and found[1] == "get_customer", text
    assert disguised_calls(text, ["get_customer"]) == [("get_customer", args)], text
    # To a tool nobody offered they are text (a word before parentheses is no call).
    assert disguised_calls(text, ["other_tool"]) == []


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(3))
def test_spelled_calls_are_decoded_again_on_every_family(family: str, seed: int) -> None:
    text, _ = _spelled(random.Random(seed))
    seen: list[Grammar | None] = []
    model, admitted = _model(family, text, seen)
    result = model.chat(ASK, TOOLS, tool_choice="auto", thinking=False)
    if not admitted[0]:
        pytest.skip(f"{family}'s grammar bars this spelling outright")
    assert (result.content, result.disguise_retries, result.tool_calls) == (ANSWER, 1, [])


# -- 4. a structured answer that is a call --------------------------------------------------------

_ANSWER_SCHEMA = {"type": "object"}


@pytest.mark.parametrize("spelling", [
    {"name": "get_customer", "arguments": {"customer_id": "cust-1001"}},
    {"tool": "get_customer", "input": {"customer_id": "cust-1001"}},
    {"get_customer": {"customer_id": "cust-1001"}},
    {"type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-1001"}'}},
])
def test_a_structured_answer_that_calls_an_offered_tool_is_a_call_in_disguise(spelling: dict[str, Any]) -> None:
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    backend = ScriptedBackend([json.dumps(spelling), call])
    result = Model(backend, family="qwen2.5").chat(ASK, TOOLS, answer_schema=_ANSWER_SCHEMA)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_customer", {"customer_id": "cust-1001"})]
    # The grammar reads a bare call object as a call itself; any other spelling is decoded again.
    assert result.disguise_retries == (0 if "name" in spelling else 1) and result.content == ""


def test_a_structured_answer_with_a_name_is_still_an_answer() -> None:
    answer = json.dumps({"name": "Ada Lovelace", "arguments": {"plan": "pro"}})
    result = Model(ScriptedBackend([answer]), family="qwen2.5").chat(ASK, TOOLS, answer_schema=_ANSWER_SCHEMA)
    assert result.content == answer and not result.tool_calls and result.disguise_retries == 0


# -- 9. errors name the schema's path and keyword, never what the model wrote --------------------

#: Keywords the grammar leaves to the check, with a value that breaks each.
_UNCHECKED = [({"type": "integer", "multipleOf": 7}, 3), ({"type": "array", "uniqueItems": True}, [1, 1]),
              ({"type": "number", "multipleOf": 0.5}, 0.3)]


@pytest.mark.parametrize("seed", range(12))
def test_a_422_names_the_schema_path_never_a_key_the_model_wrote(seed: int) -> None:
    rng = random.Random(seed)
    schema, bad = rng.choice(_UNCHECKED)
    key = "".join(rng.choice("zqxjк中é_-") for _ in range(8)) + "-model-key"
    where = rng.choice(["additionalProperties", "patternProperties"])
    params: dict[str, Any] = {"type": "object", where: schema if where == "additionalProperties" else {".*": schema}}
    reply = "<tool_call>\n" + json.dumps({"name": "f", "arguments": {key: bad}}, ensure_ascii=False) + "\n</tool_call>"
    backend = ScriptedBackend([reply] * 3)
    app = create_app(Model(backend, family="qwen2.5", strict_schema=False), ServerConfig(model_name="m"))
    res = post(app, {"messages": ASK, "tool_choice": "required",
                     "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]})
    if res.status_code == 200:
        pytest.skip("the grammar enforced this keyword itself")
    assert res.status_code == 422, res.text
    message = res.json()["error"]["message"]
    assert key not in res.text and "model-key" not in res.text, message
    assert f"#/{where}" in message, message


@pytest.mark.parametrize("reply", [
    '{"name": "zq_madeup_tool", "arguments": "{not json"}',
    '{"name": "zq_madeup_tool", "arguments": [1, 2]}',
    '<tool_call>\n{"name": "zq_madeup_tool", "arguments": "oops"}\n</tool_call>',
])
def test_free_output_errors_do_not_quote_the_tool_the_model_named(reply: str) -> None:
    from localtools import ToolCallParseError

    with pytest.raises(ToolCallParseError) as caught:
        Model(ScriptedBackend([reply]), family="qwen2.5").chat(ASK, TOOLS, constrained=False)
    assert "zq_madeup" not in str(caught.value)
