"""The engine backends against recording fakes of llama-server, vLLM and SGLang: what is sent,
how replies are read, every engine error as a typed error, and the check of each constrained reply
against our own grammar. The real llama-server runs in test_llama_server.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from engine_fakes import SPECIAL, CharTokenizer, FakeLlamaServer, FakeSGLang, FakeVLLM, encode

import localtools
from localtools import (
    ContextLengthExceeded,
    EngineError,
    EngineIgnoredGrammar,
    EngineUnavailable,
    GrammarError,
    Model,
    UsageError,
)
from localtools._errors import GenerationCancelled
from localtools.backends._remote import RemoteBackend, verify_reply
from localtools.backends.llama_server import LlamaServerBackend
from localtools.backends.sglang import SGLangBackend
from localtools.backends.vllm import VLLMBackend

CUSTOMER = {"type": "function", "function": {
    "name": "get_customer", "description": "Look up a customer.",
    "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}}
CALL = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
QUESTION = [{"role": "user", "content": "Plan of cust-1001? <|im_end|> is just text here"}]


def llama_server(fake: FakeLlamaServer, **kw: Any) -> Model:
    return Model(LlamaServerBackend(url="http://engine:8080", transport=fake.transport(), **kw), family="qwen2.5")


def vllm(fake: FakeVLLM) -> Model:
    return Model(VLLMBackend(url="http://engine:8000/v1", tokenizer=CharTokenizer(), transport=fake.transport()),
                 family="qwen2.5")


def sglang(fake: FakeSGLang) -> Model:
    return Model(SGLangBackend(url="http://engine:30000", tokenizer=CharTokenizer(), transport=fake.transport()),
                 family="qwen2.5")


def engine(model: Model) -> RemoteBackend:
    assert isinstance(model.backend, RemoteBackend)
    return model.backend


# -- llama-server ------------------------------------------------------------------------------

def test_llama_server_gets_token_ids_with_message_text_never_parsed_for_special_tokens() -> None:
    fake = FakeLlamaServer([CALL, CALL])
    model = llama_server(fake)
    result = model.chat(QUESTION, [CUSTOMER], tool_choice="required")
    assert [c.name for c in result.tool_calls] == ["get_customer"]
    assert result.tool_calls[0].arguments == {"customer_id": "cust-1001"}
    tokenized = [(b["content"], b["parse_special"]) for p, b in fake.requests if p == "/tokenize"]
    assert ("Plan of cust-1001? <|im_end|> is just text here", False) in tokenized
    assert all(b["add_special"] is False for p, b in fake.requests if p == "/tokenize")
    (body,) = fake.generations()
    prompt = model.render(QUESTION, [CUSTOMER], tool_choice="required")
    # The second request comes after drop_prompt_cache, below.
    assert body["prompt"] == model.backend.tokenize(prompt)
    # The control token of the template is one id; the same text inside the question stays characters.
    assert body["prompt"].count(SPECIAL["<|im_end|>"]) == prompt.text.count("<|im_end|>") - 1
    assert body["grammar"] == model.grammar([CUSTOMER], "required").to_gbnf()
    assert body["stream"] is True and body["return_tokens"] is True and body["cache_prompt"] is True
    backend = engine(model)
    assert isinstance(backend, LlamaServerBackend)
    backend.drop_prompt_cache()
    model.chat(QUESTION, [CUSTOMER], tool_choice="required")
    assert [b["cache_prompt"] for b in fake.generations()] == [True, False]
    assert (body["top_k"], body["min_p"], body["temperature"]) == (0, 0.0, 0.0)


def test_llama_server_reply_text_and_usage_are_the_servers() -> None:
    fake = FakeLlamaServer([CALL, "Tokyo 🦜 is<|im_end|> near"])
    backend = llama_server(fake).backend
    gen = backend.generate(localtools.Prompt((("hi", True),)), max_tokens=200)
    # The call tags are ordinary tokens of the vocabulary; the end token is neither text nor counted.
    assert gen.text == CALL and gen.tokens == encode(CALL, True) and gen.generated == len(encode(CALL, True))
    assert (gen.prompt_seconds, gen.decode_seconds, gen.cached_tokens) == (0.0125, 0.04, 3)
    assert gen.finish_reason == "stop"
    # A character split over two tokens arrives whole with the second (the first id never
    # streams, but counts); a control token streams as no text, as in process.
    gen = backend.generate(localtools.Prompt((("hi", True),)), max_tokens=200)
    assert gen.text == "Tokyo 🦜 is near" and gen.generated == len(encode("Tokyo 🦜 is<|im_end|> near", True)) + 1


def test_llama_server_describes_itself_and_detects_the_family_from_its_template() -> None:
    fake = FakeLlamaServer([], slots=6, n_ctx=2048)
    backend = LlamaServerBackend(url="http://engine:8080/", transport=fake.transport())
    assert (backend.version, backend.n_ctx, backend.concurrency) == ("b1234-fake", 2048, 6)
    assert backend.eos_token == "<|im_end|>"
    assert Model(backend).family.name == "qwen2.5"
    assert Model(backend).name == "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
    assert backend.health() == {"ok": True, "detail": "llama-server b1234-fake at http://engine:8080 is healthy"}


def test_load_takes_an_engine_without_weights() -> None:
    fake = FakeLlamaServer([CALL])
    # A catalog name that is not downloaded names the family; no download happens for an engine.
    model = localtools.load("qwen2.5-coder-1.5b", backend="llama-server", url="http://engine:8080",
                            transport=fake.transport())
    assert model.family.name == "qwen2.5" and isinstance(model.backend, LlamaServerBackend)
    with pytest.raises(UsageError, match="takes no option n_gpu_layers"):
        localtools.load(backend="llama-server", url="http://engine:8080", transport=fake.transport(), n_gpu_layers=1)
    with pytest.raises(localtools.ModelError, match="no file or directory at"):
        localtools.load("/nowhere/model.gguf", backend="llama-server", url="http://engine:8080",
                        transport=fake.transport())


def test_max_tokens_cut_and_stop_strings_as_in_process() -> None:
    fake = FakeLlamaServer(["Hello there, friend", "Hello STOP more"])
    model = llama_server(fake)
    cut = model.chat(QUESTION, tool_choice="none", max_tokens=5)
    assert (cut.content, cut.finish_reason) == ("Hello", "length")
    stopped = model.chat(QUESTION, max_tokens=50, stop=["STOP"])
    assert (stopped.content, stopped.finish_reason) == ("Hello", "stop")
    # The request's stop string; the family's do not apply under the grammar (the engine ends a
    # text answer at its end-of-turn token; inside a call they are an argument's characters).
    assert fake.generations()[1]["stop"] == ["STOP"]


def test_a_prompt_over_the_engines_context_is_refused_before_it_is_sent() -> None:
    fake = FakeLlamaServer(["never"], n_ctx=16)
    with pytest.raises(ContextLengthExceeded, match="more than the context of 16"):
        llama_server(fake).chat(QUESTION)
    assert fake.generations() == []


def test_the_engines_own_context_refusal_is_a_context_error() -> None:
    error = {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096,
             "message": "request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it"}
    with pytest.raises(ContextLengthExceeded, match="5000 tokens, more than the context of 4096"):
        llama_server(FakeLlamaServer(status=400, error=error)).chat(QUESTION)


@pytest.mark.parametrize(("status", "error", "kind", "words"), [
    (401, {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}, EngineError, "--engine-api-key"),
    (503, {"code": 503, "message": "Loading model", "type": "unavailable_error"}, EngineUnavailable, "still loading"),
    (400, {"code": 400, "message": "Failed to parse grammar", "type": "invalid_request_error"}, GrammarError, "grammar"),
    (500, {"code": 500, "message": "out of memory", "type": "server_error"}, EngineError, "out of memory"),
])
def test_engine_refusals_are_typed_errors(status: int, error: dict[str, Any], kind: type[Exception], words: str) -> None:
    with pytest.raises(kind, match=words) as caught:
        llama_server(FakeLlamaServer(status=status, error=error)).chat(QUESTION)
    if isinstance(caught.value, EngineError):
        assert caught.value.status == status and "b1234-fake" in caught.value.engine


def test_an_engine_that_cannot_be_reached_says_how_to_start_one() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with pytest.raises(EngineUnavailable, match=r"cannot reach llama-server at http://engine:8080.*llama-server -m"):
        LlamaServerBackend(url="http://engine:8080", transport=httpx.MockTransport(refuse))


def test_an_engine_that_goes_silent_or_dies_mid_reply_is_unavailable() -> None:
    fake = FakeLlamaServer([CALL])
    backend = LlamaServerBackend(url="http://engine:8080", transport=fake.transport(), timeout=7)
    prompt = localtools.Prompt((("hi", True),))

    def silent(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    backend._client._transport = httpx.MockTransport(silent)
    with pytest.raises(EngineUnavailable, match="sent nothing for 7 s"):
        backend.generate(prompt)
    cut = FakeLlamaServer([CALL], cut_stream=True)
    with pytest.raises(EngineUnavailable, match="ended its reply stream before the reply did"):
        llama_server(cut).backend.generate(prompt)


def test_cancel_stops_reading_the_stream() -> None:
    asked = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(GenerationCancelled):
        llama_server(FakeLlamaServer(["a long reply that goes on"])).chat(QUESTION, cancel=cancel)
    assert len(asked) == 4


def test_a_reply_the_grammar_cannot_produce_is_caught() -> None:
    # An engine that ignored the grammar: under tool_choice="required" it answered in prose.
    fake = FakeLlamaServer(["Sure! The plan is pro."])
    with pytest.raises(EngineIgnoredGrammar, match="llama-server b1234-fake at http://engine:8080 replied with text "
                       "the request's grammar cannot produce") as caught:
        llama_server(fake).chat(QUESTION, [CUSTOMER], tool_choice="required")
    assert caught.value.raw == "Sure! The plan is pro."
    # An unknown tool name is as much a violation as prose.
    bad = CALL.replace("get_customer", "delete_customer")
    with pytest.raises(EngineIgnoredGrammar):
        llama_server(FakeLlamaServer([bad])).chat(QUESTION, [CUSTOMER])


def test_a_streamed_reply_is_checked_before_any_of_it_is_passed_on() -> None:
    events: list[Any] = []
    # A call to a tool that was not offered: read unchecked, its start would be streamed.
    bad = CALL.replace("get_customer", "delete_customer")
    with pytest.raises(EngineIgnoredGrammar):
        llama_server(FakeLlamaServer([bad])).chat(QUESTION, [CUSTOMER], on_event=events.append)
    assert events == []
    # A reply within the grammar streams as it arrives, and joins to the turn.
    for fake in (llama_server(FakeLlamaServer([CALL])), vllm(FakeVLLM([CALL])), sglang(FakeSGLang([CALL]))):
        events = []
        result = fake.chat(QUESTION, [CUSTOMER], on_event=events.append)
        pieces = "".join(e.arguments for e in events if isinstance(e, localtools.ToolCallDelta))
        assert pieces == result.tool_calls[0].to_openai()["function"]["arguments"] == '{"customer_id": "cust-1001"}'
        assert isinstance(events[0], localtools.ToolCallStarted) and events[0].id == result.tool_calls[0].id


def test_verify_reply_takes_prefixes_only_of_cut_replies() -> None:
    grammar = Model(localtools.ScriptedBackend([]), family="qwen2.5").grammar([CUSTOMER], "required")
    verify_reply(grammar, CALL, "eog", engine="e")
    for i in range(len(CALL)):
        verify_reply(grammar, CALL[:i], "length", engine="e")
        verify_reply(grammar, CALL[:i], "stop", engine="e")
    with pytest.raises(EngineIgnoredGrammar, match="the reply ended"):
        verify_reply(grammar, CALL[:-3], "eog", engine="e")
    with pytest.raises(EngineIgnoredGrammar, match=r"was cut \(length\)"):
        verify_reply(grammar, CALL[:20] + "}", "length", engine="e")
    verify_reply(None, "anything at all", "eog", engine="e")


# -- vLLM --------------------------------------------------------------------------------------

def test_vllm_request_shape() -> None:
    fake = FakeVLLM([CALL])
    model = vllm(fake)
    result = model.chat(QUESTION, [CUSTOMER], tool_choice="get_customer", seed=7)
    assert result.tool_calls[0].arguments == {"customer_id": "cust-1001"}
    (body,) = fake.generations()
    assert body["model"] == "qwen-fake"
    assert body["prompt"] == model.backend.tokenize(model.render(QUESTION, [CUSTOMER], tool_choice="get_customer"))
    assert body["structured_outputs"] == {"grammar": model.grammar([CUSTOMER], "get_customer").to_gbnf()}
    assert "guided_grammar" not in body  # removed in vLLM 0.12, now ignored without a word
    assert (body["add_special_tokens"], body["skip_special_tokens"], body["spaces_between_special_tokens"]) == (
        False, False, False)
    assert body["stream_options"] == {"include_usage": True} and body["seed"] == 7
    assert (result.prompt_tokens, result.completion_tokens) == (len(body["prompt"]), len(encode(CALL, True)))
    assert engine(model).n_ctx == 4096 and engine(model).version == "0.34.0"


def test_vllm_ignoring_the_grammar_is_caught() -> None:
    with pytest.raises(EngineIgnoredGrammar, match=r"vllm 0\.34\.0"):
        vllm(FakeVLLM(["I think the plan is pro."])).chat(QUESTION, [CUSTOMER], tool_choice="required")


def test_vllm_finish_reasons_and_context_refusal() -> None:
    model = vllm(FakeVLLM(["abcdefgh", "abc STOP def"]))
    assert model.chat(QUESTION, max_tokens=3).finish_reason == "length"
    assert model.chat(QUESTION, stop=["STOP"]).content == "abc"
    message = ("This model's maximum context length is 4096 tokens. However, your prompt contains at least 5000 input "
               "tokens, which exceeds this limit even without any output tokens.")
    fake = FakeVLLM(status=400, error={"message": message, "type": "BadRequestError", "code": 400})
    model = vllm(fake)
    engine(model).n_ctx = None  # as if it did not say: the engine's own refusal is read
    with pytest.raises(ContextLengthExceeded, match="5000 tokens, more than the context of 4096"):
        model.chat(QUESTION)


def test_vllm_needs_a_local_tokenizer() -> None:
    with pytest.raises(UsageError, match="tokenizer=PATH"):
        VLLMBackend(url="http://engine:8000", transport=FakeVLLM().transport())


def test_vllm_asks_for_the_model_named_and_refuses_one_it_does_not_serve() -> None:
    fake = FakeVLLM()
    with pytest.raises(EngineError, match="serves no model 'other'; it serves: qwen-fake"):
        VLLMBackend(url="http://engine:8000", tokenizer=CharTokenizer(), served_model="other", transport=fake.transport())


# -- SGLang ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("incremental", "new_ids_only"), [(False, False), (True, False), (False, True)])
def test_sglang_reads_whole_so_far_and_delta_streams(incremental: bool, new_ids_only: bool) -> None:
    fake = FakeSGLang([CALL, CALL], incremental=incremental, new_ids_only=new_ids_only)
    model = sglang(fake)
    result = model.chat(QUESTION, [CUSTOMER], tool_choice="required")
    assert result.raw == CALL and result.tool_calls[0].name == "get_customer"
    body = fake.generations()[0]
    sampling = body["sampling_params"]
    assert body["input_ids"] == model.backend.tokenize(model.render(QUESTION, [CUSTOMER], tool_choice="required"))
    assert sampling["ebnf"] == model.grammar([CUSTOMER], "required").to_gbnf()
    assert sampling["skip_special_tokens"] is False and "sampling_seed" not in sampling
    assert result.completion_tokens == len(encode(CALL, True))
    assert engine(model).generate(localtools.Prompt((("x", True),))).tokens == encode(CALL, True)


def test_sglang_errors() -> None:
    with pytest.raises(EngineIgnoredGrammar, match=r"sglang 0\.5\.23"):
        sglang(FakeSGLang(["prose, not a call"])).chat(QUESTION, [CUSTOMER], tool_choice="required")
    message = "The input (5000 tokens) is longer than the model's context length (4096 tokens)."
    model = sglang(FakeSGLang(status=400, error={"message": message}))
    engine(model).n_ctx = None
    with pytest.raises(ContextLengthExceeded, match="5000 tokens, more than the context of 4096"):
        model.chat(QUESTION)
    with pytest.raises(EngineUnavailable, match="ended its reply stream"):
        sglang(FakeSGLang([CALL], cut_stream=True)).chat(QUESTION)


def test_ollama_is_refused_with_the_reason() -> None:
    with pytest.raises(UsageError, match="takes no grammar"):
        localtools.load(backend="ollama")


def test_the_cli_takes_the_backends_load_takes(capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import build_parser

    parser = build_parser()
    for name in (*localtools.BACKENDS, *localtools.ENGINES, "tests.probe_backends:Healthy"):
        assert parser.parse_args(["render", "hi", "--backend", name]).backend == name
    with pytest.raises(SystemExit):
        parser.parse_args(["render", "hi", "--backend", "olama"])
    assert "unknown backend 'olama'" in capsys.readouterr().err


def test_a_kept_alive_connection_the_engine_closed_is_tried_again_once() -> None:
    fake = FakeLlamaServer([CALL, CALL])
    dropped: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        # The engine closed the idle connection: the first request on it gets no answer.
        if request.url.path in ("/tokenize", "/completion") and request.url.path not in dropped:
            dropped.append(request.url.path)
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return fake(request)

    model = Model(LlamaServerBackend(url="http://engine:8080", transport=httpx.MockTransport(flaky)), family="qwen2.5")
    assert model.chat(QUESTION, [CUSTOMER]).tool_calls
    assert dropped == ["/tokenize", "/completion"]

    def closed(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/completion":
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return fake(request)

    model.backend._client._transport = httpx.MockTransport(closed)  # type: ignore[attr-defined]
    with pytest.raises(EngineUnavailable, match="dropped the connection on /completion"):
        model.chat(QUESTION, [CUSTOMER])


def test_the_cli_asks_for_the_engines_address_and_refuses_engine_options_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main

    assert main(["run", "hi", "--backend", "llama-server"]) == 2
    assert "--backend llama-server needs --engine-url URL" in capsys.readouterr().err
    assert main(["run", "hi", "--engine-url", "http://127.0.0.1:1"]) == 2
    assert "--engine-url only apply to an engine backend" in capsys.readouterr().err
    # Nothing listens there: the engine's absence is a typed error with the way to start one.
    assert main(["run", "hi", "--backend", "llama-server", "--engine-url", "http://127.0.0.1:9"]) == 2
    assert "cannot reach llama-server at http://127.0.0.1:9" in capsys.readouterr().err


def test_answers_of_an_unknown_shape_are_engine_errors() -> None:
    def odd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=["not", "an", "object"])

    with pytest.raises(EngineError, match="answered in a shape this backend does not know"):
        LlamaServerBackend(url="http://engine:8080", transport=httpx.MockTransport(odd))
    fake = FakeLlamaServer([CALL])
    backend = LlamaServerBackend(url="http://engine:8080", transport=fake.transport())

    def odd_tokens(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"tokens": "abc"}) if request.url.path == "/tokenize" else fake(request)

    backend._client._transport = httpx.MockTransport(odd_tokens)
    with pytest.raises(EngineError, match="shape"):
        backend.generate(localtools.Prompt((("hi", True),)))


def test_a_cancel_is_seen_while_the_engine_only_pings() -> None:
    fake = FakeLlamaServer()

    def pinging(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/completion":
            return fake(request)
        return httpx.Response(200, content=b": ping\n\n" * 50, headers={"content-type": "text/event-stream"})

    backend = LlamaServerBackend(url="http://engine:8080", transport=httpx.MockTransport(pinging))
    asked: list[int] = []

    def cancel() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(GenerationCancelled):
        backend.generate(localtools.Prompt((("hi", True),)), cancel=cancel)
    assert len(asked) == 4


def test_serve_runs_one_request_at_a_time_in_process() -> None:
    from localtools.serve import ServerConfig, create_app

    model = Model(localtools.ScriptedBackend([]), family="qwen2.5")
    with pytest.raises(UsageError, match="concurrency 4 needs an engine backend"):
        create_app(model, ServerConfig(model_name="m", concurrency=4))
    assert create_app(model, ServerConfig(model_name="m")).state.worker.concurrency == 1
    over = llama_server(FakeLlamaServer(slots=6))
    assert create_app(over, ServerConfig(model_name="m")).state.worker.concurrency == 6
    assert create_app(over, ServerConfig(model_name="m", concurrency=2)).state.worker.concurrency == 2


def test_the_token_cache_holds_a_bounded_amount_of_text() -> None:
    from localtools.backends._remote import TokenCache

    calls: list[str] = []

    def encode(text: str, special: bool) -> list[int]:
        calls.append(text)
        return [len(text)]

    cache = TokenCache(encode, max_chars=10)
    for text in ("aaaa", "bbbb", "aaaa", "cccc", "bbbb"):
        cache.segment(text, special=False)
    # "bbbb" was the least recently used when "cccc" came in, so it was tokenized again.
    assert calls == ["aaaa", "bbbb", "cccc", "bbbb"]


def test_llama_server_is_started_on_the_loopback_with_repacking_off_where_amx_would_crash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from localtools.host import _machine
    from localtools.host._engines import llama_server_command

    monkeypatch.setattr(_machine, "cpu_flags", lambda: frozenset({"avx2", "amx_tile", "amx_int8"}))
    cmd = llama_server_command(Path("/bin/llama-server"), Path("m.gguf"), port=8080, parallel=4, n_ctx=2048)
    assert cmd[:3] == ["/bin/llama-server", "-m", "m.gguf"] and "--no-repack" in cmd
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("-c") + 1] == str(4 * 2048)
    monkeypatch.setattr(_machine, "cpu_flags", lambda: frozenset({"avx2"}))
    assert "--no-repack" not in llama_server_command(Path("s"), Path("m"), port=1)


def test_starting_llama_server_on_a_port_in_use_is_refused(tmp_path: Any) -> None:
    import socket

    from localtools.host._engines import running_llama_server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UsageError, match=f"port {port} on 127.0.0.1 is in use"), \
                running_llama_server(tmp_path / "m.gguf", binary=tmp_path / "llama-server", port=port):
            pass


def test_a_binary_that_cannot_start_is_a_typed_error(tmp_path: Any) -> None:
    from localtools.host._engines import running_llama_server

    binary = tmp_path / "llama-server"
    binary.write_text("not a program")
    binary.chmod(0o755)
    with pytest.raises(EngineUnavailable, match="cannot start"), running_llama_server(tmp_path / "m.gguf", binary=binary):
        pass


def test_an_engine_with_a_tokenizer_given_downloads_no_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools.host import _catalog

    def no_download(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing is to be downloaded")

    monkeypatch.setattr(_catalog, "pull", no_download)
    assert not _catalog.catalog()["qwen2.5-coder-1.5b"].cached or pytest.skip("the 1.5B model is cached here")
    model = localtools.load("qwen2.5-coder-1.5b", backend="vllm", url="http://engine:8000", tokenizer=CharTokenizer(),
                            transport=FakeVLLM().transport())
    assert model.family.name == "qwen2.5" and isinstance(model.backend, VLLMBackend)


# -- the next token's distribution (decisions) over vLLM and SGLang ----------------------------

NEXT = {"<tool_call>": -0.1, "T": -2.5, "<|im_end|>": -6.0, "I": -3.0}


@pytest.mark.parametrize("make", [vllm, sglang], ids=["vllm", "sglang"])
def test_vllm_and_sglang_give_the_next_tokens_distribution_by_token_id(make: Any) -> None:
    from localtools.backends._base import NextTokens

    fake = (FakeVLLM if make is vllm else FakeSGLang)([], next_tokens=NEXT)
    backend = engine(make(fake))
    assert backend.capabilities.next_tokens
    assert isinstance(backend, NextTokens)
    prompt = make(fake).render(QUESTION)
    got = backend.next_tokens(prompt, encode("<tool_call>\n", True), k=3)
    assert [(c.token, c.text, c.logprob, c.end) for c in got] == [
        (SPECIAL["<tool_call>"], "<tool_call>", -0.1, False), (ord("T"), "T", -2.5, False), (ord("I"), "I", -3.0, False)]
    assert backend.next_tokens(prompt, k=4)[-1].end  # the end of turn, as the model's tokenizer reads eos
    sent = fake.generations()[0]
    ids = backend.tokenize(prompt) + encode("<tool_call>\n", True)
    if make is vllm:
        assert sent["prompt"] == ids and sent["logprobs"] == 3 and sent["max_tokens"] == 1
        assert sent["return_tokens_as_token_ids"] and not sent["add_special_tokens"]
    else:
        assert sent["input_ids"] == ids and sent["top_logprobs_num"] == 3 and sent["return_logprob"]
    assert backend.reply_text(encode(CALL, True)) == CALL


@pytest.mark.parametrize("make", [vllm, sglang], ids=["vllm", "sglang"])
def test_call_or_text_is_decided_on_the_engines_probabilities(make: Any) -> None:
    from localtools import Decisions
    from localtools.model._decide import DecisionPoint

    kind = FakeVLLM if make is vllm else FakeSGLang
    # The call opening holds e^-0.1 of e^-0.1 + e^-2.5 + e^-3 (about 0.88) of what fits either branch.
    called = make(kind([CALL], next_tokens=NEXT)).chat(QUESTION, [CUSTOMER], decisions=Decisions(call=0.8))
    assert called.tool_calls and called.decisions[0].point is DecisionPoint.CALL and called.decisions[0].taken
    assert called.decisions[0].share == pytest.approx(0.88, abs=0.01)
    text = make(kind(["The plan is pro."], next_tokens=NEXT)).chat(QUESTION, [CUSTOMER], decisions=Decisions(call=0.95))
    assert not text.tool_calls and text.content == "The plan is pro." and not text.decisions[0].taken


@pytest.mark.parametrize("make", [vllm, sglang], ids=["vllm", "sglang"])
def test_an_engine_without_top_logprobs_is_a_typed_error(make: Any) -> None:
    from localtools.backends._remote import LocallyTokenized

    fake = (FakeVLLM if make is vllm else FakeSGLang)([])  # its distribution is empty
    backend = engine(make(fake))
    assert isinstance(backend, LocallyTokenized)
    with pytest.raises(EngineError, match="log-probabilities"):
        backend.next_tokens(make(fake).render(QUESTION))
