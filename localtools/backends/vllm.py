"""vLLM as a backend: ``POST /v1/completions`` with our prompt as token ids and our grammar in
``structured_outputs.grammar`` (GBNF, which its xgrammar backend reads as EBNF).

The prompt is tokenized here (see ``LocallyTokenized``); special tokens are kept in the reply
(``skip_special_tokens`` off) so the family's markers reach the parser, and no BOS is added to the
ids (``add_special_tokens`` off: the template wrote it where the model wants one). vLLM dropped the
old ``guided_grammar`` field in v0.12 and now ignores it without a word; every reply is checked
against the grammar here, so an engine that ignores the constraint is caught.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from .._errors import EngineError
from ..grammar import Grammar
from ._remote import EngineReply, LocallyTokenized

__all__ = ["VLLMBackend"]

#: vLLM's wordings of a prompt over the context (the numbers: prompt tokens, context).
_CONTEXT = (
    re.compile(r"maximum context length is (?P<limit>\d+) tokens\. However, your prompt contains (?:at least )?"
               r"(?P<prompt>\d+) input tokens"),
    re.compile(r"decoder prompt \(length (?P<prompt>\d+)\).*maximum model length of (?P<limit>\d+)"),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens\. However, you requested \d+ tokens \((?P<prompt>\d+) "
               r"in the messages"),
)


class VLLMBackend(LocallyTokenized):
    """Drives a running vLLM OpenAI-compatible server at ``url`` (``served_model``: the id to
    ask for; default the first it serves)."""

    name = "vllm"
    default_concurrency: ClassVar[int] = 32
    default_url: ClassVar[str] = "http://127.0.0.1:8000"
    start_hint: ClassVar[str] = "Start it with: vllm serve MODEL --host 127.0.0.1 --port 8000"
    context_patterns: ClassVar[tuple[re.Pattern[str], ...]] = _CONTEXT
    grammar_engine: ClassVar[str] = "vLLM's structured outputs (xgrammar, falling back to guidance)"

    def _describe(self) -> None:
        version = self._get("/version")
        self.version = str(version.get("version", "")) if isinstance(version, dict) else ""
        self.served_model, self.n_ctx = self._served()

    def _request(self, ids: list[int], grammar: Grammar | None, *, max_tokens: int, temperature: float, top_p: float,
                 seed: int | None, stop: Sequence[str], repeat_penalty: float) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.served_model,
            "prompt": ids,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "stop": list(stop),
            "repetition_penalty": repeat_penalty,
            "add_special_tokens": False,
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
            "include_stop_str_in_output": False,
            "return_token_ids": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if seed is not None:
            body["seed"] = seed
        if grammar is not None:
            body["structured_outputs"] = {"grammar": grammar.to_gbnf()}
        return "/v1/completions", body

    def _top_logprobs(self, ids: list[int], k: int) -> list[tuple[int, float, str | None]]:
        # Its log-probabilities are the model's own (vLLM's default logprobs_mode, raw_logprobs),
        # keyed "token_id:N" when asked so: ids, never a token's text to map back.
        body = self._post("/v1/completions", {
            "model": self.served_model, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "logprobs": k,
            "return_tokens_as_token_ids": True, "add_special_tokens": False, "skip_special_tokens": False,
            "stream": False})
        try:
            top = body["choices"][0]["logprobs"]["top_logprobs"][0]
            return [(int(str(key).removeprefix("token_id:")), float(logprob), None) for key, logprob in top.items()]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise EngineError(f"{self.engine} gave no top_logprobs keyed by token id for logprobs={k} "
                              f"(return_tokens_as_token_ids): {str(body)[:200]}", engine=self.engine) from None

    def _read(self, event: dict[str, Any], reply: EngineReply) -> bool:
        usage = event.get("usage")
        if isinstance(usage, dict):
            reply.prompt_tokens = _int(usage.get("prompt_tokens"), reply.prompt_tokens)
            reply.completion_tokens = _int(usage.get("completion_tokens"), reply.completion_tokens)
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict):
                reply.cached_tokens = _int(details.get("cached_tokens"), 0) or 0
        choices = event.get("choices") or []
        if not choices:
            return False
        choice = choices[0]
        reply.text = reply.text + str(choice.get("text") or "")
        reply.tokens += [int(t) for t in choice.get("token_ids") or []]
        finish = choice.get("finish_reason")
        if finish is None:
            return False
        if finish == "length":
            reply.ended = "length"
        elif finish == "stop":
            # A stop string is named in stop_reason; an end token is an id or nothing.
            reply.ended = "stop" if isinstance(choice.get("stop_reason"), str) else "eog"
        else:
            raise EngineError(f"{self.engine} ended the reply with finish_reason {finish!r}", engine=self.engine)
        return True



def _int(value: Any, default: int | None) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else default
