"""SGLang as a backend: its native ``POST /generate`` with our prompt as ``input_ids`` and our
grammar in ``sampling_params.ebnf`` (GBNF, compiled by xgrammar).

The prompt is tokenized here (see ``LocallyTokenized``) and special tokens are kept in the reply.
SGLang streams the whole reply so far in each chunk (``--incremental-streaming-output`` makes it
send deltas); both are read. It refuses sampling keys it does not know, so only set ones are sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from .._errors import EngineError
from ..grammar import Grammar
from ._remote import EngineReply, LocallyTokenized

__all__ = ["SGLangBackend"]

_CONTEXT = (
    re.compile(r"input \((?P<prompt>\d+) tokens\) is longer than the model's context length \((?P<limit>\d+) tokens\)"),
    re.compile(r"maximum context length of (?P<limit>\d+) tokens\. You requested a total of \d+ tokens: "
               r"(?P<prompt>\d+) tokens from the input"),
)


class SGLangBackend(LocallyTokenized):
    """Drives a running SGLang server at ``url``."""

    name = "sglang"
    default_concurrency: ClassVar[int] = 32
    default_url: ClassVar[str] = "http://127.0.0.1:30000"
    start_hint: ClassVar[str] = "Start it with: python -m sglang.launch_server --model-path MODEL --port 30000"
    context_patterns: ClassVar[tuple[re.Pattern[str], ...]] = _CONTEXT
    grammar_engine: ClassVar[str] = "SGLang's xgrammar backend"
    _deltas = False

    def _describe(self) -> None:
        info = self._get("/server_info")
        self.version = str(info.get("version", "")) if isinstance(info, dict) else ""
        # Started with --incremental-streaming-output, it sends each chunk's new text only.
        self._deltas = bool(info.get("incremental_streaming_output")) if isinstance(info, dict) else False
        self.served_model, self.n_ctx = self._served()
        if self.n_ctx is None and isinstance(info, dict) and isinstance(info.get("context_length"), int):
            self.n_ctx = int(info["context_length"])

    def _request(self, ids: list[int], grammar: Grammar | None, *, max_tokens: int, temperature: float, top_p: float,
                 seed: int | None, stop: Sequence[str], repeat_penalty: float) -> tuple[str, dict[str, Any]]:
        sampling: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "stop": list(stop),
            "repetition_penalty": repeat_penalty,
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
        }
        if seed is not None:
            sampling["sampling_seed"] = seed
        if grammar is not None:
            sampling["ebnf"] = grammar.to_gbnf()
        return "/generate", {"input_ids": ids, "sampling_params": sampling, "stream": True}

    def _top_logprobs(self, ids: list[int], k: int) -> list[tuple[int, float, str | None]]:
        # logprob_start_len -1: log-probabilities for the generated token only, none for the prompt.
        body = self._post("/generate", {
            "input_ids": ids, "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True, "top_logprobs_num": k, "logprob_start_len": -1, "stream": False})
        try:
            # Each entry: [log-probability, token id, its text or null].
            return [(int(entry[1]), float(entry[0]), None) for entry in body["meta_info"]["output_top_logprobs"][0]]
        except (KeyError, IndexError, TypeError, ValueError):
            raise EngineError(f"{self.engine} gave no output_top_logprobs for top_logprobs_num={k}: {str(body)[:200]}",
                              engine=self.engine) from None

    def _read(self, event: dict[str, Any], reply: EngineReply) -> bool:
        meta = event.get("meta_info") or {}
        text, ids = str(event.get("text") or ""), [int(t) for t in event.get("output_ids") or []]
        count = meta.get("completion_tokens")
        # The text so far in each chunk, or each chunk's own (the server says which); versions differ
        # on the ids alike, so they count as the whole so far when there are as many as generated.
        reply.text = reply.text + text if self._deltas else text
        reply.tokens = ids if isinstance(count, int) and len(ids) >= count else reply.tokens + ids
        if isinstance(count, int):
            reply.completion_tokens = count
        if isinstance(meta.get("prompt_tokens"), int):
            reply.prompt_tokens = int(meta["prompt_tokens"])
        if isinstance(meta.get("cached_tokens"), int):
            reply.cached_tokens = int(meta["cached_tokens"])
        finish = meta.get("finish_reason")
        if not isinstance(finish, dict):
            return False
        kind = finish.get("type")
        if kind == "length":
            reply.ended = "length"
        elif kind == "stop":
            reply.ended = "stop" if isinstance(finish.get("matched"), str) else "eog"
        else:  # "abort": a grammar it could not compile, a request it refused
            status = finish.get("status_code")
            self._refused("/generate", status if isinstance(status, int) else 500,
                          json.dumps({"error": {"message": str(finish.get("message") or finish)}}))
        return True

