"""Property tests with fixed seeds and bounded example counts (hypothesis, derandomized).

- Random request bodies against the server in process: every answer is 200, 400, 401, 413 or 503
  with OpenAI's error JSON, never a 500, and /health stays ok.
- Random tool schemas, for every family and tool_choice: strings generated from the grammar are
  read back as calls whose arguments the schema accepts, and what the grammar forces after any
  prefix of one (fast-forward) is what that string goes on with.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sampler import sample

from localtools import Model, ScriptedBackend, UnsupportedSchema, families
from localtools.families._parse import disguised_calls
from localtools.grammar import build_grammar, continuation, matches
from localtools.serve._app import ServerConfig, create_app

FUZZ = settings(derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAMILIES = sorted(families())

# -- JSON Schemas the grammar enforces in full (keywords it leaves to the validator are left out) --

_names = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=6))
# Request text may hold lone surrogates ("\ud800" is valid JSON, but not Unicode text).
_texts = st.lists(st.characters() | st.sampled_from(["\ud800", "\udfff"]), max_size=30).map("".join)
_leaf = st.one_of(
    st.sampled_from([{"type": t} for t in ("string", "integer", "number", "boolean", "null")]),
    st.lists(_scalars, min_size=1, max_size=4, unique_by=json.dumps).map(lambda v: {"enum": v}),
    _scalars.map(lambda v: {"const": v}),
    st.tuples(st.integers(0, 3), st.integers(0, 4)).map(
        lambda b: {"type": "string", "minLength": min(b), "maxLength": max(b)}),
    st.lists(st.sampled_from(["string", "integer", "boolean", "null"]), min_size=2, max_size=3, unique=True).map(
        lambda t: {"type": t}),
)


def _object(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    def build(props: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
        required = data.draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
        if data.draw(st.booleans()):
            schema["additionalProperties"] = False
        return schema

    return st.tuples(st.dictionaries(_names, inner, max_size=4), st.data()).map(lambda t: build(*t))


_schemas = st.recursive(_leaf, lambda inner: st.one_of(
    _object(inner),
    st.tuples(inner, st.integers(0, 2), st.integers(0, 3)).map(
        lambda t: {"type": "array", "items": t[0], "minItems": min(t[1], t[2]), "maxItems": max(t[1], t[2])}),
    st.lists(inner, min_size=2, max_size=3).map(lambda s: {"anyOf": s}),
), max_leaves=8)
_parameters = st.dictionaries(_names, _schemas, min_size=0, max_size=4).flatmap(
    lambda props: st.lists(st.sampled_from(sorted(props)), unique=True).map(
        lambda req: {"type": "object", "properties": props, "required": req}) if props
    else st.just({"type": "object", "properties": {}}))


@settings(FUZZ, max_examples=400)  # 20 families: about 20 examples each
@given(family=st.sampled_from(FAMILIES), parameters=_parameters, other=_parameters,
       choice=st.sampled_from(["auto", "required", "named"]), rng=st.randoms(use_true_random=False))
def test_strings_from_the_grammar_parse_to_calls_the_schema_accepts(
        family: str, parameters: dict[str, Any], other: dict[str, Any], choice: str, rng: random.Random) -> None:
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": n, "description": "", "parameters": p}}
             for n, p in (("first", parameters), ("second.tool", other))]
    tool_choice = "first" if choice == "named" else choice
    try:
        grammar = build_grammar(families()[family], tools, tool_choice)
    except UnsupportedSchema:
        event("unsupported schema")
        return  # a schema the grammar says it cannot express, by name: not a failure
    text = sample(grammar, rng)
    assert matches(grammar, text), text
    model = Model(ScriptedBackend([text]), family=family)
    # Thinking off: the grammar sampled from is the answer's alone (reasoning has its own tests).
    result = model.chat([{"role": "user", "content": "go"}], tools, tool_choice=tool_choice, max_tokens=100_000,
                        retry_repeat_penalties=(), thinking=False)
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    if choice != "auto":
        assert result.tool_calls, text
    if choice == "named":
        assert {c.name for c in result.tool_calls} == {"first"}
    for call in result.tool_calls:
        jsonschema.validate(call.arguments, offered[call.name])
    assert result.tool_calls or result.content
    event(f"{len(result.tool_calls)} calls")



_OTHER_CHARS = "\"{}[],: \n<>abz019_-"


@settings(FUZZ, max_examples=300)
@given(family=st.sampled_from(FAMILIES), parameters=_parameters, choice=st.sampled_from(["auto", "required", "named"]),
       parallel=st.booleans(), rng=st.randoms(use_true_random=False), data=st.data())
def test_forced_text_is_what_every_string_goes_on_with(family: str, parameters: dict[str, Any], choice: str,
                                                      parallel: bool, rng: random.Random, data: st.DataObject) -> None:
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": n, "description": "", "parameters": p}}
                                   for n, p in (("first", parameters), ("first_other", {"type": "object"}))]
    try:
        grammar = build_grammar(families()[family], tools, "first" if choice == "named" else choice, parallel)
    except UnsupportedSchema:
        return
    text = sample(grammar, rng)
    cut = data.draw(st.integers(0, len(text)))
    forced, ends = continuation(grammar, text[:cut])
    # Sound for this string: it goes on with the forced text, and ends there when told so.
    assert text[cut:].startswith(forced), (text[:cut], forced)
    assert not ends or text[:cut] + forced == text
    # Forced: no other first character keeps the text in the language.
    if forced:
        event("forced")
        for other in _OTHER_CHARS.replace(forced[0], ""):
            assert not matches(grammar, text[:cut] + other, prefix=True), (text[:cut], forced, other)
    if ends:
        event("must end")
        assert matches(grammar, text[:cut] + forced)

# -- request bodies --------------------------------------------------------------------------------

_json = st.recursive(_scalars | _texts | st.floats(allow_nan=False), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "system", "assistant", "tool", "developer", "bot"])},
                                 optional={"content": st.one_of(st.text(max_size=30), _json,
                                                                st.just([{"type": "text", "text": "hi"}])),
                                           "tool_call_id": st.text(max_size=5),
                                           "tool_calls": _json})
_tool = st.one_of(
    _parameters.map(lambda p: {"type": "function", "function": {"name": "f", "parameters": p}}),
    st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {}, optional={"name": st.text(max_size=10) | _json, "parameters": _json, "description": _json})}),
    _json,
)
_well_formed = st.fixed_dictionaries(
    {"messages": st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": _texts}),
                          min_size=1, max_size=2)},
    optional={"tools": st.lists(_parameters, max_size=2).map(
        lambda ps: [{"type": "function", "function": {"name": f"t{i}", "parameters": p}} for i, p in enumerate(ps)]),
        "tool_choice": st.sampled_from(["auto", "none", "required"]), "stream": st.booleans(),
        "max_tokens": st.integers(1, 400), "stop": st.text(min_size=1, max_size=3)})
_bodies = st.one_of(
    _well_formed,
    _json,
    st.fixed_dictionaries({"messages": st.lists(_message, max_size=3) | _json}, optional={
        "tools": st.lists(_tool, max_size=2) | _json,
        "tool_choice": st.sampled_from(["auto", "none", "required"]) | _json
        | st.just({"type": "function", "function": {"name": "f"}}),
        "max_tokens": st.integers(-5, 10_000) | _json, "temperature": st.floats(-1, 3) | _json,
        "stream": st.booleans() | _json, "stop": st.text(max_size=4) | _json, "n": _json,
        "parallel_tool_calls": _json, "seed": _json, "top_p": _json, "response_format": _json,
    }),
)


def _any_reply(prompt: Any, grammar: Any) -> str:
    return sample(grammar, random.Random(len(prompt.text))) if grammar is not None else "ok"


@settings(FUZZ, max_examples=200)
@given(body=_bodies, as_bytes=st.booleans())
def test_random_request_bodies_never_get_a_500(body: Any, as_bytes: bool) -> None:
    backend = ScriptedBackend([_any_reply] * 4)  # room for the retries after a cut call
    app = create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="m", max_body_bytes=64 * 1024))
    content = json.dumps(body).encode() if not as_bytes else json.dumps(body)[:-1].encode() + b"\xff"

    async def go() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                     base_url="http://t") as client:
            res = await client.post("/v1/chat/completions", content=content,
                                    headers={"content-type": "application/json"})
            return res, await client.get("/health")

    res, health = asyncio.run(go())
    assert res.status_code in (200, 400, 401, 413, 503), res.text
    if res.status_code != 200:
        error = res.json()["error"]
        assert isinstance(error["message"], str) and error["message"] and error["type"]
        event(f"status {res.status_code} {error['code']}: {error['message'][:50]}" if error["code"] == "invalid_value"
              else f"status {res.status_code} {error['code']}")
    else:
        event("status 200")
        assert res.text.startswith("data: ") or res.json()["object"] == "chat.completion"
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_the_sampler_reaches_both_branches_of_auto() -> None:
    """The property above is only as good as the sampler: under auto it writes text and calls."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    grammar = build_grammar(families()["qwen2.5"], tools, "auto")
    kinds = set()
    for seed in range(40):
        result = Model(ScriptedBackend([sample(grammar, random.Random(seed))]), family="qwen2.5").chat(
            [{"role": "user", "content": "go"}], tools, max_tokens=100_000, retry_repeat_penalties=())
        kinds.add("call" if result.tool_calls else "text")
    assert kinds == {"call", "text"}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_grammar_can_be_sampled(family: str) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    grammar = build_grammar(families()[family], tools, "required")
    text = sample(grammar, random.Random(0))
    assert matches(grammar, text) and text


# -- no path returns a call as text --------------------------------------------------------------

_MARKERS = sorted({m for fam in families().values() for m in (fam.call_start, fam.call_end, *fam.stop) if m}
                  | {"```", '{"name": "first", "arguments": {}}', "[", "]"})
_DIALECTS = ["/v1/chat/completions", "/v1/responses", "/v1/messages"]


def _body(path: str, tools: list[dict[str, Any]], choice: str, stream: bool) -> dict[str, Any]:
    if path == "/v1/chat/completions":
        return {"messages": [{"role": "user", "content": "go"}], "tools": tools, "tool_choice": choice, "stream": stream}
    if path == "/v1/responses":
        return {"input": "go", "stream": stream, "tool_choice": choice,
                "tools": [{"type": "function", **t["function"]} for t in tools]}
    return {"model": "m", "max_tokens": 4000, "stream": stream, "messages": [{"role": "user", "content": "go"}],
            "tool_choice": {"type": {"auto": "auto", "required": "any"}[choice]},
            "tools": [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in tools]}


def _read_texts(value: Any) -> list[str]:
    """Every string a client reads in a response body, outside the tools it sent and the calls."""
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str) and any(k in kind for k in ("function_call", "tool_use", "input_json")):
            return []  # a call, or a piece of one, in the dialect's own shape
        return [s for k, v in value.items() if k not in ("tools", "tool_calls", "arguments", "input") for s in _read_texts(v)]
    if isinstance(value, list):
        return [s for v in value for s in _read_texts(v)]
    return [value] if isinstance(value, str) else []


@settings(FUZZ, max_examples=80)
@given(family=st.sampled_from(["qwen2.5", "smollm2", "hermes", "llama3", "mistral", "phi4-mini", "gemma"]),
       parameters=_parameters, choice=st.sampled_from(["auto", "required"]), path=st.sampled_from(_DIALECTS),
       stream=st.booleans(), rng=st.randoms(use_true_random=False), cut=st.integers(0, 400))
def test_no_reply_reaches_a_client_as_text_holding_a_call(family: str, parameters: dict[str, Any], choice: str,
                                                          path: str, stream: bool, rng: random.Random, cut: int) -> None:
    """Schemas and replies drawn (strings holding every family's markers), and an engine that may
    stop anywhere (a stop string that is a piece of the reply): every dialect answers 200 with no
    call's text in what the client reads, or a typed 4xx/502; never a 500."""
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "first", "description": "", "parameters": parameters}}]
    try:
        grammar = build_grammar(families()[family], tools, choice)
    except UnsupportedSchema:
        return
    reply = sample(grammar, rng, pieces=_MARKERS)
    # A third of the replies are not cut; the others at a stop string that is a piece of the reply.
    piece = reply[cut % max(len(reply), 1):][:3] if cut % 3 else ""

    class Engine(ScriptedBackend):
        def generate(self, prompt: Any, *, stop: Any = (), **kwargs: Any) -> Any:
            return super().generate(prompt, stop=[*stop, *([piece] if piece else [])], **kwargs)
    app = create_app(Model(Engine([reply] * 4), family=family), ServerConfig(model_name="m"))
    res = asyncio.run(_post(app, path, _body(path, tools, choice, stream)))
    assert res.status_code in (200, 400, 422, 502), res.text
    event(f"{res.status_code}")
    if res.status_code != 200 or not res.text:
        return
    # SSE lines end at "\n" only: a JSON string may hold U+2028, which str.splitlines breaks at.
    lines = [line[len("data: "):].rstrip("\r") for line in res.text.split("\n") if line.startswith("data: ")] \
        if stream else [res.text]
    read = [s for line in lines if line != "[DONE]" for s in _read_texts(json.loads(line))]
    fam = families()[family]
    for text in read:
        assert fam.call_start not in text, (text, reply)
        assert not disguised_calls(text, ["first"]), (text, reply)


async def _post(app: Any, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://t") as client:
        return await client.post(path, json=body)
