"""Recording fakes of the engines' HTTP APIs, as httpx transports: one token per character.

Each fake answers from a script of replies and records every request it got, so a test can check
what was sent (token ids, grammar field, special-token switches) and how the answer was read.
A fake's ``obey_grammar=False`` behaves like an engine that ignores the constraint: it answers its
script whatever the grammar says (the scripted replies are then the "unconstrained" output).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from localtools import get_family

#: Special tokens of the fake vocabulary: parsed as one id each only where special parsing is on.
SPECIAL = {"<|im_start|>": 200_001, "<|im_end|>": 200_002, "<tool_call>": 200_003, "</tool_call>": 200_004}
_BY_ID = {v: k for k, v in SPECIAL.items()}
#: Control tokens, whose text llama.cpp leaves out of what it streams (Qwen's call tags are not ones).
CONTROL = {SPECIAL["<|im_start|>"], SPECIAL["<|im_end|>"]}
#: Qwen's own chat template, as an engine serving a Qwen model reports it.
QWEN_TEMPLATE = get_family("qwen2.5").template_source()


def encode(text: str, special: bool) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(text):
        hit = next((s for s in SPECIAL if special and text.startswith(s, i)), None)
        if hit:
            out.append(SPECIAL[hit])
            i += len(hit)
        else:
            out.append(ord(text[i]))
            i += 1
    return out


def decode(tokens: Iterable[int]) -> str:
    return "".join(_BY_ID.get(t) or chr(t) for t in tokens)


class CharTokenizer:
    """A local tokenizer for the vLLM and SGLang fakes (the same vocabulary)."""

    def __init__(self) -> None:
        self.bos_token, self.eos_token = "", "<|im_end|>"
        self.metadata: dict[str, Any] = {"general.name": "fake", "tokenizer.chat_template": QWEN_TEMPLATE}

    def encode(self, text: str, special: bool) -> list[int]:
        return encode(text, special)

    def decode(self, tokens: list[int]) -> str:
        return decode(tokens)


def _sse(events: Iterable[dict[str, Any]], done: bool = False) -> bytes:
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    return (body + ("data: [DONE]\n\n" if done else "")).encode()


class _Fake:
    def __init__(self, replies: Iterable[str], *, n_ctx: int = 4096, status: int = 200, error: dict[str, Any] | None = None,
                 cut_stream: bool = False, next_tokens: dict[str, float] | None = None) -> None:
        self.replies = list(replies)
        #: The next token's log-probabilities the engine gives, by the token's text (one token each).
        self.next_tokens = next_tokens or {}
        self.n_ctx = n_ctx
        #: A status and error body every generation request gets instead of a reply.
        self.status, self.error = status, error
        #: End the stream before its last event, as an engine that died mid-reply.
        self.cut_stream = cut_stream
        self.requests: list[tuple[str, Any]] = []

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.url.path, body))
        return self.answer(request.url.path, body)

    def answer(self, path: str, body: Any) -> httpx.Response:
        raise NotImplementedError

    def generations(self) -> list[Any]:
        return [b for p, b in self.requests if p in ("/completion", "/v1/completions", "/generate")]

    def _top(self, k: int) -> list[tuple[int, float]]:
        """The ``k`` best (token id, log-probability) pairs of ``next_tokens``."""
        pairs = [(encode(text, True), logprob) for text, logprob in self.next_tokens.items()]
        assert all(len(ids) == 1 for ids, _ in pairs), "each next token is one token"
        return sorted(((ids[0], logprob) for ids, logprob in pairs), key=lambda p: -p[1])[:k]

    def _reply(self, max_tokens: int, stop: list[str]) -> tuple[str, str]:
        """The next scripted reply as the engine would end it: (text, how it ended)."""
        text = self.replies.pop(0)
        ended = "eos"
        hits = [i for s in stop if (i := text.find(s)) >= 0]
        if hits:
            text, ended = text[: min(hits)], "word"
        if len(text) > max_tokens:
            text, ended = text[:max_tokens], "limit"
        return text, ended


class FakeLlamaServer(_Fake):
    """llama-server's /props, /health, /tokenize, /detokenize and streamed /completion."""

    def __init__(self, replies: Iterable[str] = (), *, slots: int = 4, build: str = "b1234-fake", **kw: Any) -> None:
        super().__init__(replies, **kw)
        self.slots, self.build = slots, build

    def answer(self, path: str, body: Any) -> httpx.Response:
        if path == "/props":
            return httpx.Response(200, json={
                "default_generation_settings": {"n_ctx": self.n_ctx}, "total_slots": self.slots,
                "model_path": "/models/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf", "model_alias": "",
                "chat_template": QWEN_TEMPLATE, "bos_token": "", "eos_token": "<|im_end|>", "build_info": self.build})
        if path == "/health":
            return httpx.Response(200, json={"status": "ok"})
        if path == "/tokenize":
            return httpx.Response(200, json={"tokens": encode(body["content"], body.get("parse_special", True))})
        if path == "/detokenize":
            return httpx.Response(200, json={"content": decode(body["tokens"])})
        if path != "/completion":
            return httpx.Response(404, json={"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
        if self.error is not None:
            return httpx.Response(self.status, json={"error": self.error})
        text, ended = self._reply(body["n_predict"], body.get("stop", []))
        # As the server does: the end token is streamed and counted too; a token that ends inside
        # a character is counted but never streamed (its text comes with the next one: here every
        # character beyond the BMP is two tokens); control tokens stream as empty text.
        streamed = [*encode(text, True), *([SPECIAL["<|im_end|>"]] if ended == "eos" else [])]
        events: list[dict[str, Any]] = [{"content": "" if t in CONTROL else decode([t]), "tokens": [t], "stop": False}
                                        for t in streamed]
        predicted = len(streamed) + sum(t > 0xFFFF and t not in _BY_ID for t in streamed)
        final = {"content": "", "tokens": [], "stop": True, "stop_type": ended, "tokens_predicted": predicted,
                 "timings": {"prompt_ms": 12.5, "predicted_ms": 40.0, "cache_n": 3}}
        if not self.cut_stream:
            events.append(final)
        return httpx.Response(200, content=_sse(events), headers={"content-type": "text/event-stream"})


class FakeVLLM(_Fake):
    """vLLM's /version, /v1/models and streamed /v1/completions; ``ignores`` lists request fields it
    ignores without a word (as vLLM ≥ 0.12 does with ``guided_grammar``)."""

    def __init__(self, replies: Iterable[str] = (), *, version: str = "0.34.0", model: str = "qwen-fake", **kw: Any) -> None:
        super().__init__(replies, **kw)
        self.version, self.model = version, model

    def answer(self, path: str, body: Any) -> httpx.Response:
        if path == "/version":
            return httpx.Response(200, json={"version": self.version})
        if path == "/health":
            return httpx.Response(200)
        if path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": self.model, "max_model_len": self.n_ctx}]})
        if path != "/v1/completions":
            return httpx.Response(404, json={"detail": "Not Found"})
        if self.error is not None:
            return httpx.Response(self.status, json={"error": self.error})
        if body.get("logprobs") and not body.get("stream"):
            # One token with its top log-probabilities, keyed as return_tokens_as_token_ids makes them.
            assert body["return_tokens_as_token_ids"] and body["max_tokens"] == 1
            top = {f"token_id:{t}": lp for t, lp in self._top(body["logprobs"])}
            first = next(iter(top), "")
            return httpx.Response(200, json={"choices": [{"index": 0, "text": "", "finish_reason": "length", "logprobs": {
                "tokens": [first], "token_logprobs": [top.get(first)], "top_logprobs": [top], "text_offset": [0]}}]})
        text, ended = self._reply(body["max_tokens"], body.get("stop", []))
        ids = encode(text, True)
        chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "text": decode([t]), "token_ids": [t],
                                                      "finish_reason": None}]} for t in ids]
        finish = {"eos": ("stop", None), "word": ("stop", "STOP"), "limit": ("length", None)}[ended]
        chunks.append({"choices": [{"index": 0, "text": "", "token_ids": [], "finish_reason": finish[0],
                                    "stop_reason": finish[1]}]})
        chunks.append({"choices": [], "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids),
                                                "prompt_tokens_details": {"cached_tokens": 2}}})
        return httpx.Response(200, content=_sse(chunks[:-2] if self.cut_stream else chunks, done=not self.cut_stream),
                              headers={"content-type": "text/event-stream"})


class FakeSGLang(_Fake):
    """SGLang's /server_info, /v1/models and streamed /generate, with whole-so-far chunks (its
    default) or deltas (``incremental=True``, as ``--incremental-streaming-output``);
    ``new_ids_only``: the whole text so far but each chunk's own ids, as some versions send."""

    def __init__(self, replies: Iterable[str] = (), *, incremental: bool = False, new_ids_only: bool = False,
                 **kw: Any) -> None:
        super().__init__(replies, **kw)
        self.incremental, self.new_ids_only = incremental, new_ids_only

    def answer(self, path: str, body: Any) -> httpx.Response:
        if path == "/server_info":
            return httpx.Response(200, json={"version": "0.5.23", "context_length": self.n_ctx,
                                             "incremental_streaming_output": self.incremental})
        if path == "/health":
            return httpx.Response(200)
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "qwen-fake", "max_model_len": self.n_ctx}]})
        if path != "/generate":
            return httpx.Response(404, json={"detail": "Not Found"})
        if self.error is not None:
            return httpx.Response(self.status, json={"error": self.error})
        sampling = body["sampling_params"]
        if body.get("return_logprob") and not body.get("stream"):
            assert sampling["max_new_tokens"] == 1 and body["logprob_start_len"] == -1
            top = [[lp, t, None] for t, lp in self._top(body["top_logprobs_num"])]
            return httpx.Response(200, json={"text": "", "output_ids": [top[0][1]] if top else [], "meta_info": {
                "output_top_logprobs": [top], "output_token_logprobs": [top[:1]], "finish_reason": {"type": "length"}}})
        text, ended = self._reply(sampling["max_new_tokens"], sampling.get("stop", []))
        ids = encode(text, True)

        def chunks() -> Iterator[dict[str, Any]]:
            for n in range(1, len(ids) + 1):
                part = ids[n - 1:n] if self.incremental else ids[:n]
                yield {"text": decode(part), "output_ids": ids[n - 1:n] if self.new_ids_only else part,
                       "meta_info": {"prompt_tokens": len(body["input_ids"]), "completion_tokens": n, "cached_tokens": 1,
                                     "finish_reason": None}}
            finish = {"eos": {"type": "stop", "matched": 200_002}, "word": {"type": "stop", "matched": "STOP"},
                      "limit": {"type": "length", "length": len(ids)}}[ended]
            yield {"text": "" if self.incremental else decode(ids), "output_ids": [] if self.incremental else ids,
                   "meta_info": {"prompt_tokens": len(body["input_ids"]), "completion_tokens": len(ids),
                                 "cached_tokens": 1, "finish_reason": finish}}

        events = list(chunks())
        return httpx.Response(200, content=_sse(events[:-1] if self.cut_stream else events, done=not self.cut_stream),
                              headers={"content-type": "text/event-stream"})
