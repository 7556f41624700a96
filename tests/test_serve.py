"""`localtools serve` without weights: request checks, response shapes, streaming, the queue.

The app runs in process on the scripted backend through httpx's ASGI transport; the same server on
real weights with real clients is in test_serve_clients.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from localtools import ContextLengthExceeded, GrammarError, Model, ModelError, ScriptedBackend
from localtools.serve._app import ServerConfig, create_app, is_loopback, serve
from localtools.serve._openai import BadRequest, parse_request

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
USER = [{"role": "user", "content": "Weather in Paris?"}]


def _nested(depth: int, leaf: Any, wrap: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = wrap(value)
    return value


DEEP_SCHEMA = _nested(2000, {"type": "string"}, lambda inner: {"type": "array", "items": inner})
DEEP_LIST = _nested(2000, 0, lambda inner: [inner])


def post(app: Any, body: Any, path: str = "/v1/chat/completions", headers: dict[str, str] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            if isinstance(body, bytes):
                return await client.post(path, content=body, headers=headers)
            # The body is sent as written: json= would refuse a lone surrogate and nest too deep to encode.
            try:
                content = json.dumps(body)
            except RecursionError:
                content = _dumps_deep(body)
            return await client.post(path, content=content, headers={"content-type": "application/json", **(headers or {})})

    return asyncio.run(go())


def _dumps_deep(value: Any) -> str:
    """json.dumps for the test bodies nested past the recursion limit (one chain of single items)."""
    opened, closes = [], []
    while isinstance(value, (dict, list)):
        if isinstance(value, list):
            opened.append("[")
            closes.append("]")
            value = value[0]
        else:
            *rest, last = value.items()
            head = "".join(f"{json.dumps(k)}: {json.dumps(v)}, " for k, v in rest)
            opened.append("{" + head + json.dumps(last[0]) + ": ")
            closes.append("}")
            value = last[1]
    return "".join(opened) + json.dumps(value) + "".join(reversed(closes))


@contextlib.contextmanager
def running(app: Any) -> Iterator[int]:
    """``app`` served by uvicorn on 127.0.0.1 on a thread; yields its port."""
    uvicorn = pytest.importorskip("uvicorn")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            threading.Event().wait(0.02)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def app_with(replies: list[Any], **config: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies)
    return create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="scripted-model", **config)), backend


def test_tool_call_response_shape() -> None:
    app, backend = app_with([CALL])
    res = post(app, {"model": "anything", "messages": USER, "tools": [WEATHER]})
    assert res.status_code == 200
    body = res.json()
    assert body["object"] == "chat.completion" and body["model"] == "scripted-model"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + len(CALL)
    assert backend.grammars[0] is not None  # tools always go through the grammar


def test_round_trip_history_reaches_the_prompt() -> None:
    app, backend = app_with(["It is sunny in Paris."])
    history = [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    res = post(app, {"model": "m", "messages": history, "tools": [WEATHER]})
    assert res.json()["choices"][0]["message"] == {"role": "assistant", "content": "It is sunny in Paris."}
    prompt = backend.prompts[0].text
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in prompt and "sunny, 21 C" in prompt


def test_stream_reassembles_to_the_same_reply() -> None:
    app, _ = app_with([CALL + "\n" + CALL.replace("Paris", "Oslo")])
    res = post(app, {"model": "m", "messages": USER, "tools": [WEATHER], "stream": True,
                     "stream_options": {"include_usage": True}})
    assert res.headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: "):] for line in res.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks[:-1]:
        for delta in chunk["choices"][0]["delta"].get("tool_calls", []):
            entry = calls.setdefault(delta["index"], {"name": "", "arguments": ""})
            entry["name"] += delta.get("function", {}).get("name") or ""
            entry["arguments"] += delta["function"]["arguments"]
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == [
        ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


def test_stop_string_ends_a_text_answer_but_never_a_call() -> None:
    app, _ = app_with(["One. Two. Three.", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Two. Town"}}\n</tool_call>'])
    text = post(app, {"model": "m", "messages": USER, "tools": [WEATHER], "stop": ["Two"]}).json()["choices"][0]
    assert text["message"]["content"] == "One." and text["finish_reason"] == "stop"
    call = post(app, {"model": "m", "messages": USER, "tools": [WEATHER], "stop": "Two"}).json()["choices"][0]
    assert json.loads(call["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Two. Town"}


def test_a_call_cut_by_max_tokens_is_finish_reason_length_not_an_error() -> None:
    app, _ = app_with([CALL] * 3)
    res = post(app, {"model": "m", "messages": USER, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 10})
    assert res.status_code == 200
    choice = res.json()["choices"][0]
    assert choice["finish_reason"] == "length" and "tool_calls" not in choice["message"]


def test_a_streamed_call_cut_by_max_tokens_ends_with_length_and_no_call_at_all() -> None:
    app, backend = app_with([CALL] * 3)
    res = post(app, {"messages": USER, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 58, "stream": True})
    chunks = sse(res)
    deltas = [d for c in chunks if c.get("choices") for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert deltas == []  # a call is sent only whole and checked: none of a cut one leaves
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert len(backend.prompts) == 3  # nothing was sent, so it was generated again, as chat() does


BAD_REQUESTS = [
    ("not json", b"{oops", None),
    ("empty messages", {"messages": []}, "messages"),
    ("messages not a list", {"messages": "hi"}, "messages"),
    ("unknown role", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ("tools not a list", {"messages": USER, "tools": {"get_weather": {}}}, "tools"),
    ("invalid tool schema", {"messages": USER, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "wrong"}}}}}]},
     "tools[0].function.parameters"),
    ("tool name with spaces", {"messages": USER, "tools": [{"type": "function", "function": {"name": "get weather"}}]},
     "tools[0].function.name"),
    ("tool_choice names a tool not in tools", {"messages": USER, "tools": [WEATHER],
                                               "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ("required without tools", {"messages": USER, "tool_choice": "required"}, "tool_choice"),
    ("unpaired tool_call_id", {"messages": [*USER, {"role": "tool", "tool_call_id": "call_9", "content": "r"}]},
     "messages[1].tool_call_id"),
    ("malformed history arguments", {"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{oops"}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
    ("image content", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "messages[0].content"),
    ("n above 1", {"messages": USER, "n": 2}, "n"),
    ("unknown response_format", {"messages": USER, "response_format": {"type": "xml"}}, "response_format.type"),
    ("json_schema without its name", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "schema": {"type": "object"}}}}, "response_format.json_schema.name"),
    ("json_schema with an invalid schema", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "plan", "schema": {"type": "wrong"}}}}, "response_format.json_schema.schema"),
    ("temperature out of range", {"messages": USER, "temperature": 3}, "temperature"),
    ("logprobs", {"messages": USER, "logprobs": True}, "logprobs"),
    ("tool schema 2,000 levels deep", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": DEEP_SCHEMA}}}}]}, None),
    ("tool schema past the depth limit", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": _nested(39, {"type": "string"}, lambda inner: {
            "type": "array", "items": inner})}}}}]}, "tools[0].function.parameters"),
    ("lone surrogate in content", {"messages": [{"role": "user", "content": "caf\ud800"}]}, "messages[0].content"),
    ("body nested 2,000 levels deep", {"messages": USER, "metadata": DEEP_LIST}, None),
    ("body nested past the limit", {"messages": USER, "metadata": _nested(100, 0, lambda inner: [inner])},
     "metadata" + "[0]" * 48),
    ("integer past the digit limit", b'{"messages": [{"role": "user", "content": "hi"}], "seed": ' + b"1" * 5000 + b"}",
     None),
    ("seed out of range", {"messages": USER, "seed": 2**64}, "seed"),
    ("tool_calls not a list", {"messages": [*USER, {"role": "assistant", "content": "x", "tool_calls": 5}]},
     "messages[1].tool_calls"),
    ("history arguments 2,000 levels deep", {"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "[" * 2000 + "]" * 2000}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
]


@pytest.mark.parametrize(("case", "body", "param"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_bad_requests_get_openai_error_json(case: str, body: Any, param: str | None) -> None:
    app, backend = app_with([])
    res = post(app, body)
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]
    assert backend.prompts == []  # refused before the model ran


def test_unsupported_schema_is_a_bad_request() -> None:
    app, _ = app_with([])
    res = post(app, {"messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}}}]})
    assert res.status_code == 400 and "cannot constrain" in res.json()["error"]["message"]


def test_routes_models_health_and_404() -> None:
    app, _ = app_with([])

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return [await client.get("/v1/models"), await client.get("/health"), await client.get("/v2/nothing")]

    models, health, missing = asyncio.run(go())
    assert models.json()["data"][0]["id"] == "scripted-model"
    assert health.json()["status"] == "ok" and health.json()["pending"] == 0
    assert missing.status_code == 404 and "POST /v1/chat/completions" in missing.json()["error"]["message"]


def test_full_queue_answers_503_with_retry_after_and_keeps_order() -> None:
    release = threading.Event()
    order: list[str] = []

    def blocking(prompt: Any, grammar: Any) -> str:
        order.append(prompt.text.split("ask ")[-1].split("<")[0])
        release.wait(10)
        return "ok"

    app, _ = app_with([blocking] * 10, max_queue=2)

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            async def ask(n: int) -> httpx.Response:
                await asyncio.sleep(0.05 * n)  # arrive in order
                return await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": f"ask {n}"}]})

            tasks = [asyncio.create_task(ask(n)) for n in range(5)]
            await asyncio.sleep(0.5)
            release.set()
            return list(await asyncio.gather(*tasks))

    responses = asyncio.run(go())
    # One runs, two wait, the fourth and fifth find the queue full.
    assert [r.status_code for r in responses] == [200, 200, 200, 503, 503]
    busy = responses[3]
    assert int(busy.headers["Retry-After"]) >= 1 and busy.json()["error"]["code"] == "queue_full"
    assert order == ["0", "1", "2"]


def test_parse_request_defaults() -> None:
    request = parse_request({"messages": USER, "tools": [WEATHER], "max_completion_tokens": 7, "stop": "END"},
                            default_temperature=0.0)
    assert (request.tool_choice, request.max_tokens, request.stop, request.temperature) == ("auto", 7, ["END"], 0.0)
    assert parse_request({"messages": USER}).tool_choice == "none"
    with pytest.raises(BadRequest, match="'stop' must be"):
        parse_request({"messages": USER, "stop": ["a", "b", "c", "d", "e"]})


def test_a_body_over_the_limit_is_413_whether_or_not_it_declares_its_length() -> None:
    app, backend = app_with(["ok"], max_body_bytes=2048)
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 4096}]}).encode()
    declared = post(app, big)

    async def chunked() -> httpx.Response:
        async def parts() -> Any:
            for i in range(0, len(big), 512):
                yield big[i:i + 512]

        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/v1/chat/completions", content=parts())

    streamed = asyncio.run(chunked())
    for res in (declared, streamed):
        assert res.status_code == 413 and res.json()["error"]["code"] == "request_too_large"
        assert "2048 bytes" in res.json()["error"]["message"]
    assert backend.prompts == []
    assert post(app, {"messages": USER}).status_code == 200  # a small one still gets through


def test_api_key_guards_every_route_but_health() -> None:
    app, _ = app_with(["ok", "ok"], api_key="s3cret")

    async def go() -> dict[str, httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            good = {"authorization": "Bearer s3cret"}
            return {
                "chat without key": await client.post("/v1/chat/completions", json={"messages": USER}),
                "chat wrong key": await client.post("/v1/chat/completions", json={"messages": USER},
                                                    headers={"authorization": "Bearer nope"}),
                "models without key": await client.get("/v1/models"),
                "health": await client.get("/health"),
                "chat": await client.post("/v1/chat/completions", json={"messages": USER}, headers=good),
                "models": await client.get("/v1/models", headers=good),
            }

    res = asyncio.run(go())
    for name in ("chat without key", "chat wrong key", "models without key"):
        assert res[name].status_code == 401, name
        assert res[name].json()["error"]["code"] == "invalid_api_key" and res[name].headers["www-authenticate"] == "Bearer"
    assert "no API key was sent" in res["chat without key"].json()["error"]["message"]
    assert "wrong" in res["chat wrong key"].json()["error"]["message"]
    assert [res[n].status_code for n in ("health", "chat", "models")] == [200, 200, 200]


@pytest.mark.parametrize(("raised", "status", "code"), [
    (ContextLengthExceeded(5000, 4096), 400, "context_length_exceeded"),
    (GrammarError("llama.cpp could not parse the grammar built for these tools"), 400, "unsupported_schema"),
    (ModelError("llama_decode failed"), 503, "model_error"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_errors_while_generating_get_their_own_status(raised: Exception, status: int, code: str, stream: bool) -> None:
    def fail(prompt: Any, grammar: Any) -> str:
        raise raised

    app, _ = app_with([fail])
    # A stream starts with the turn's first event: an error before it keeps its status.
    res = post(app, {"messages": USER, "stream": stream})
    assert res.status_code == status and res.json()["error"]["code"] == code
    assert res.json()["error"]["message"] == str(raised)


class _FailsMidway(ScriptedBackend):
    """Writes a few characters, then fails as a crashed model would."""

    def generate(self, *args: Any, on_text: Any = None, **kwargs: Any) -> Any:
        written: list[str] = []

        def piece(text: str) -> None:
            written.append(text)
            if len(written) > 5:
                raise ModelError("llama_decode failed")
            if on_text is not None:
                on_text(text)
        return super().generate(*args, on_text=piece, **kwargs)


def sse(res: httpx.Response) -> list[Any]:
    lines = [line[len("data: "):] for line in res.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_an_error_after_the_stream_started_ends_it_with_an_error_object() -> None:
    backend = _FailsMidway(["The weather in Paris is sunny today."])
    app = create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"messages": USER, "stream": True})
    assert res.status_code == 200
    chunks = sse(res)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert content and "The weather".startswith(content)
    assert chunks[-1]["error"]["code"] == "model_error" and chunks[-1]["error"]["message"] == "llama_decode failed"
    assert not [c for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]


def test_a_stream_sends_text_while_it_is_generated_and_stops_when_the_client_leaves() -> None:
    reply = "Sunny. " * 300
    backend = ScriptedBackend([reply], seconds_per_token=0.005)  # 10 s if never stopped
    app = create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="scripted-model"))
    with running(app) as port:
        pieces: list[str] = []
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                          json={"messages": USER, "tools": [WEATHER], "stream": True, "max_tokens": 4000}) as res:
            for line in res.iter_lines():
                if line.startswith("data: {"):
                    delta = json.loads(line[len("data: "):])["choices"][0]["delta"]
                    pieces += [delta["content"]] if delta.get("content") else []
                if len(pieces) >= 3:
                    # Text came while the model was still writing: the reply is far from whole.
                    assert app.state.worker.pending == 1
                    break
        for _ in range(500):
            if backend.cancelled_at:
                break
            threading.Event().wait(0.02)
        assert "".join(pieces) and reply.startswith("".join(pieces))
        assert len(backend.cancelled_at) == 1 and backend.cancelled_at[0] < len(reply) // 2


def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "127.8.0.1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.com"))


#: The same one-question request on each dialect: its path, its body, and its answer's text.
DIALECTS: list[tuple[str, dict[str, Any], Any]] = [
    ("/v1/chat/completions", {"messages": USER}, lambda body: body["choices"][0]["message"]["content"]),
    ("/v1/responses", {"input": USER[0]["content"]}, lambda body: body["output"][0]["content"][0]["text"]),
    ("/v1/messages", {"messages": USER}, lambda body: body["content"][0]["text"]),
]
#: A streamed record carrying a piece of the answer's text, in each dialect's words.
TEXT_MARKS = {"/v1/chat/completions": '"content":', "/v1/responses": "response.output_text.delta",
              "/v1/messages": "text_delta"}


@pytest.mark.parametrize(("path", "body", "text"), DIALECTS, ids=[d[0] for d in DIALECTS])
def test_a_client_that_hangs_up_stops_its_generation(path: str, body: dict[str, Any], text: Any) -> None:
    slow, started = "x" * 2000, threading.Event()

    def long_reply(prompt: Any, grammar: Any) -> str:
        started.set()
        return slow

    backend = ScriptedBackend([long_reply, "second"], seconds_per_token=0.01)  # 20 s if never stopped
    app = create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="scripted-model"))
    with running(app) as port:
        raw = json.dumps({"model": "m", **body, "max_tokens": 4000}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n".encode()
                           + b"Content-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
            assert started.wait(10)
        # The first client is gone; the second is answered as soon as the first generation stops.
        second = httpx.post(f"http://127.0.0.1:{port}{path}", json={"model": "m", **body, "max_tokens": 64}, timeout=30)
        assert second.status_code == 200 and text(second.json()) == "second"
        assert len(backend.cancelled_at) == 1 and backend.cancelled_at[0] < len(slow)


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages"])
def test_a_streaming_client_that_leaves_stops_its_generation_on_every_dialect(path: str) -> None:
    reply = "Sunny. " * 300
    backend = ScriptedBackend([reply], seconds_per_token=0.005)  # 10 s if never stopped
    app = create_app(Model(backend, family="qwen2.5"), ServerConfig(model_name="scripted-model"))
    body = next(b for p, b, _ in DIALECTS if p == path)
    with running(app) as port:
        pieces = 0
        with httpx.stream("POST", f"http://127.0.0.1:{port}{path}", timeout=30,
                          json={"model": "m", **body, "stream": True, "max_tokens": 4000}) as res:
            assert res.status_code == 200
            for line in res.iter_lines():
                pieces += TEXT_MARKS[path] in line and line.startswith("data:")
                if pieces >= 3:
                    assert app.state.worker.pending == 1  # text came while the model was still writing
                    break
        for _ in range(500):
            if backend.cancelled_at:
                break
            threading.Event().wait(0.02)
        assert len(backend.cancelled_at) == 1 and backend.cancelled_at[0] < len(reply) // 2


@pytest.mark.parametrize(("host", "key", "warned"), [("0.0.0.0", None, True), ("0.0.0.0", "k", False),
                                                     ("127.0.0.1", None, False)])
def test_binding_beyond_the_loopback_without_a_key_warns(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                                         host: str, key: str | None, warned: bool) -> None:
    uvicorn = pytest.importorskip("uvicorn")
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)  # no socket is opened
    with caplog.at_level("WARNING", logger="localtools.serve"):
        serve(Model(ScriptedBackend([]), family="qwen2.5"), ServerConfig(model_name="m", api_key=key), host=host, port=0)
    assert ("without an API key" in caplog.text) == warned


def test_a_draft_04_schema_is_read_as_draft_04() -> None:
    """The server and Tool.from_schema check a schema by the draft its "$schema" names."""
    app, _ = app_with(['<tool_call>\n{"name": "f", "arguments": {"n": 3}}\n</tool_call>'])
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}}, "required": ["n"]}}}
    res = post(app, {"messages": USER, "tools": [tool], "tool_choice": "required"})
    assert res.status_code == 200, res.text


def test_a_non_ascii_api_key_matches() -> None:
    app, _ = app_with(["ok"], api_key="clé-secrète")

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.post("/v1/chat/completions", json={"messages": USER},
                                     headers={b"authorization": "Bearer clé-secrète".encode()})

    assert asyncio.run(go()).status_code == 200


def thinking_app(replies: list[Any]) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies)
    return create_app(Model(backend, family="qwen3"), ServerConfig(model_name="scripted-model")), backend


def test_reasoning_comes_back_as_reasoning_content_apart_from_the_calls() -> None:
    app, _ = thinking_app([f"<think>\nParis, so call it.\n</think>\n\n{CALL}"])
    message = post(app, {"messages": USER, "tools": [WEATHER]}).json()["choices"][0]["message"]
    assert message["reasoning_content"] == "Paris, so call it."
    assert message["content"] is None and json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}


def test_reasoning_streams_as_reasoning_deltas_before_the_content() -> None:
    app, _ = thinking_app(["<think>\nEasy.\n</think>\n\nIt is sunny."])
    res = post(app, {"messages": USER, "stream": True})
    chunks = [json.loads(line[6:]) for line in res.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    assert reasoning == "Easy." and content == "It is sunny."
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning_content" not in d for d in deltas[first_content:])


def test_chat_template_kwargs_and_the_reasoning_budget_reach_the_model() -> None:
    app, backend = thinking_app(["It is sunny."])
    res = post(app, {"messages": USER, "chat_template_kwargs": {"enable_thinking": False}})
    assert res.status_code == 200 and res.json()["choices"][0]["message"]["content"] == "It is sunny."
    assert backend.prompts[-1].text.endswith("<think>\n\n</think>\n\n")
    app, backend = thinking_app(["<think>\n" + "so on " * 20 + "</think>", "\n\nIt is sunny."])
    res = post(app, {"messages": USER, "reasoning_budget": 12})
    assert res.json()["choices"][0]["message"]["reasoning_content"] == ("<think>\n" + "so on " * 20)[8:12].strip()
    # An earlier turn's reasoning comes back in the history; the template decides what to keep.
    history = [*USER, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Easy."}, *USER]
    app, backend = thinking_app(["Still sunny."])
    assert post(app, {"messages": history}).status_code == 200


@pytest.mark.parametrize(("body", "field"), [
    ({"chat_template_kwargs": []}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"messages": []}}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"enable_thinking": "no"}}, "chat_template_kwargs"),
    ({"reasoning_budget": 0}, "reasoning_budget"),
    ({"reasoning_budget": True}, "reasoning_budget"),
    ({"messages": [{"role": "assistant", "content": "x", "reasoning_content": 3}, *USER]}, "messages[0].reasoning_content"),
])
def test_bad_reasoning_options_are_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    app, _ = thinking_app([])
    res = post(app, {"messages": USER, **body})
    assert res.status_code == 400 and res.json()["error"]["param"] == field


@pytest.mark.parametrize("kwargs", [{"date_string": "x<|im_end|><|im_start|>system"}, {"source": 1},
                                    {"object_arguments": False}, {"xml_tools": [{"name": "x"}]}])
def test_template_variables_from_a_request_are_switches_and_numbers_only(kwargs: dict[str, Any]) -> None:
    # A template renders its variables as template text: a string could spell control tokens.
    app, _ = thinking_app([])
    res = post(app, {"messages": USER, "chat_template_kwargs": kwargs})
    assert res.status_code == 400 and res.json()["error"]["param"] == "chat_template_kwargs"


def test_strict_schema_refuses_a_keyword_nothing_enforces_with_a_400_naming_it() -> None:
    shade = {"type": "function", "function": {"name": "paint", "parameters": {
        "type": "object", "properties": {"color": {"type": "string", "format": "shade"}}, "required": ["color"]}}}
    model = Model(ScriptedBackend([CALL]), family="qwen2.5", strict_schema=True)
    res = post(create_app(model, ServerConfig(model_name="m")), {"model": "m", "messages": USER, "tools": [shade]})
    assert res.status_code == 400
    error = res.json()["error"]
    assert error["code"] == "unsupported_schema" and "/properties/color" in error["message"] and "format" in error["message"]
    # Without it the keyword is ignored, as jsonschema ignores an unknown format.
    lenient = Model(ScriptedBackend(['<tool_call>\n{"name": "paint", "arguments": {"color": "teal"}}\n</tool_call>']),
                    family="qwen2.5")
    assert post(create_app(lenient, ServerConfig(model_name="m")),
                {"model": "m", "messages": USER, "tools": [shade]}).status_code == 200


async def _body_writes(app: Any, path: str, body: dict[str, Any]) -> list[str]:
    """Each body write the app makes for one request, as a server would send it."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "", "scheme": "http",
             "headers": [(b"content-type", b"application/json"), (b"host", b"test")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    writes: list[str] = []
    pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            writes.append(message["body"].decode())

    await app(scope, receive, send)
    return writes


@pytest.mark.parametrize(("path", "body", "answer"), [
    ("/v1/chat/completions", {"messages": USER}, '"delta": {"content": "S'),
    ("/v1/responses", {"input": "Weather?"}, '"response.output_text.delta"'),
    ("/v1/messages", {"messages": USER, "max_tokens": 32}, '"text_delta"'),
])
def test_a_stream_sends_its_opening_and_first_answer_piece_in_one_write(path: str, body: dict[str, Any],
                                                                        answer: str) -> None:
    """However many records a dialect opens with, its first answer byte leaves with them, and
    each later event is one write: no dialect waits on extra sends before the answer."""
    app, _ = app_with(["Sunny and warm in Paris today."])
    writes = asyncio.run(_body_writes(app, path, {"model": "m", "stream": True, **body}))
    assert answer in writes[0]
    assert len(writes) >= 3  # later pieces each go out as they come, not held to the end
    assert all(w.endswith("\n\n") for w in writes)  # whole records only
