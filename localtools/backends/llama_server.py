"""llama.cpp's ``llama-server`` as a backend: its raw ``/completion`` endpoint takes our prompt as
token ids and our grammar as GBNF, and batches many requests over its ``--parallel`` slots.

Its chat endpoint is not used: it renders its own template and refuses a grammar together with
tools. Tokenizing goes through its ``/tokenize`` (``parse_special`` off for message text), so no
local copy of the model is needed; the family comes from the model name, ``family=`` or the chat
template the server reports. The reply's text is the streamed ``content``: the server sends it
only in whole characters (a token ending inside one is sent with the next, and its id is never
streamed) and leaves control tokens out, as the llama-cpp backend's detokenizer does.

Under a grammar no control token is picked but an end and those the grammar writes whole: the
server's GBNF reads ``<|im_start|>`` as its text, while ``content`` leaves it out, so a reply could
take a grammar's text branch on a token the reply never shows. The others are barred with
``logit_bias``: the vocabulary's control tokens where a local copy of the weights is given (its
GGUF header), else those the prompts' template text holds (found through ``/tokenize``). A
control token the grammar writes whole (a call marker) is sent as ``preserved_tokens``, so that
``content`` keeps it (known as the others are: without a local copy, one the prompts' template
text never held is left out of ``content`` and the reply is refused, ``EngineIgnoredGrammar``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from .._errors import ContextLengthExceeded, EngineError
from .._types import Prompt
from ..grammar import Grammar
from ._decode import PENALTY_WINDOW, unwritten
from ._remote import EngineReply, RemoteBackend

__all__ = ["LlamaServerBackend"]

_CONTEXT = (re.compile(r"\((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<limit>\d+) tokens\)"),)


#: Template segments remembered as read (``_learn_controls``) before the memory starts again.
_SEGMENTS_KEPT = 4096


class LlamaServerBackend(RemoteBackend):
    """Drives a running ``llama-server`` (llama.cpp) at ``url``.

    Greedy decoding matches the llama-cpp backend's, token for token where the engine computes the
    same logits: the same prompt tokens, the same grammar, and llama-server's sampler checks the
    best token against the grammar before masking, as ours does. One difference: llama-server's
    repeat penalty also counts the prompt's last tokens (ours counts the reply's only); it is off
    (1.0) unless a call cut by ``max_tokens`` is retried.
    """

    name = "llama-server"
    default_url: ClassVar[str] = "http://127.0.0.1:8080"
    context_patterns: ClassVar[tuple[re.Pattern[str], ...]] = _CONTEXT
    start_hint: ClassVar[str] = ("Start it with: llama-server -m MODEL.gguf --host 127.0.0.1 --port 8080 --parallel 4 "
                                 "(localtools engines build llama-server builds one from llama.cpp's sources)")
    grammar_engine: ClassVar[str] = "llama.cpp's GBNF sampler, in the server"
    #: Whether the next request is to evaluate its whole prompt (``drop_prompt_cache``).
    _fresh = False
    gives_next_tokens: ClassVar[bool] = True
    #: The vocabulary's control tokens but its ends, with their text: from the local GGUF, read
    #: when first needed, or learnt from the prompts' template text (``_learn_controls``).
    _vocab_controls: list[tuple[int, str]] | None = None
    _learnt: dict[int, str]
    _asked: set[int]
    #: Template text already read for control tokens: the same few segments open every prompt.
    _read_segments: set[str]
    _lock: threading.Lock

    def _describe_controls(self) -> None:
        self._learnt, self._asked, self._read_segments, self._lock = {}, set(), set(), threading.Lock()

    def _describe(self) -> None:
        props = self._get("/props")
        self.version = str(props.get("build_info", ""))
        settings = props.get("default_generation_settings") or {}
        n_ctx = settings.get("n_ctx")
        self.n_ctx = int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None
        slots = props.get("total_slots")
        self.concurrency = int(slots) if isinstance(slots, int) and slots > 0 else self.default_concurrency
        self.bos_token = str(props.get("bos_token") or "")
        self.eos_token = str(props.get("eos_token") or "")
        model_path = str(props.get("model_path") or "")
        self.metadata = {
            # The alias defaults to the path the server was started with.
            "general.name": Path(str(props.get("model_alias") or model_path)).name.removesuffix(".gguf"),
            "tokenizer.chat_template": str(props.get("chat_template_tool_use") or props.get("chat_template") or ""),
        }
        if self.model_path is not None and self.model_path.is_file():
            from ..host._gguf import read_metadata

            # A local copy of the weights names the architecture too; the server's answers win.
            self.metadata = {**read_metadata(self.model_path), **{k: v for k, v in self.metadata.items() if v}}
        self._describe_controls()

    def _top_logprobs(self, ids: list[int], k: int) -> list[tuple[int, float, str | None]]:
        # n_probs: log-probabilities over the whole vocabulary before sampling; the prompt cache keeps the prefix.
        body = self._post("/completion", {"prompt": ids, "n_predict": 1, "n_probs": k, "temperature": 0.0,
                                          "top_k": 0, "min_p": 0.0, "stream": False, "cache_prompt": True})
        steps = body.get("completion_probabilities") if isinstance(body, dict) else None
        if not steps or not isinstance(steps[0], dict):
            raise EngineError(f"{self.engine} gave no completion_probabilities for n_probs", engine=self.engine)
        return [(int(t["id"]), float(t["logprob"]), str(t.get("token") or "")) for t in steps[0].get("top_logprobs") or []]

    def reply_text(self, reply: Sequence[int]) -> str:
        """The text of ``reply`` (``NextTokens``), from the server's ``/detokenize``."""
        return str(self._post("/detokenize", {"tokens": list(reply)}).get("content") or "") if reply else ""

    def drop_prompt_cache(self) -> None:
        """Have the next request evaluate its whole prompt (the server keeps a prefix per slot);
        a benchmark that compares prompt processing asks for this."""
        self._fresh = True

    def tokenize(self, prompt: Prompt) -> list[int]:
        """The prompt's ids; without a local copy of the weights, its template text's control tokens are learnt too."""
        ids = super().tokenize(prompt)
        if not self._local_controls():
            for text, is_data in prompt.segments:
                if text and not is_data:
                    self._learn_controls(text)
        return ids

    def _local_controls(self) -> bool:
        """Whether the control tokens come from a local copy of the weights (read once)."""
        if self._vocab_controls is None and self.model_path is not None and self.model_path.is_file():
            from ..host._gguf import read_controls

            self._vocab_controls = read_controls(self.model_path)
        return self._vocab_controls is not None

    def _learn_controls(self, text: str) -> None:
        """The control tokens template text holds: ids its special-parsing tokens have that its
        plain tokens lack, each kept when its text alone is that one id only with special parsing."""
        with self._lock:
            if text in self._read_segments:
                return
            if len(self._read_segments) >= _SEGMENTS_KEPT:  # a bound, were tool sets template text
                self._read_segments.clear()
            self._read_segments.add(text)
        found = set(self._tokens.segment(text, special=True)) - set(self._tokens.segment(text, special=False))
        with self._lock:
            new = found - self._asked
            self._asked |= new
        for token in new:
            piece = self.reply_text([token])
            if piece and self._tokens.segment(piece, special=True) == [token] and \
                    self._tokens.segment(piece, special=False) != [token]:
                with self._lock:
                    self._learnt[token] = piece

    def _barred(self, literals: frozenset[str], stop: Sequence[str]) -> list[int]:
        """The control tokens a reply under a grammar never holds: all known but the ends (the
        end-of-turn token, the stop strings) and those whose text the grammar writes whole
        (``literals``: ``Grammar.literals``)."""
        ends = {self.eos_token, *stop}
        return unwritten([(t, text) for t, text in self._known_controls() if text not in ends], literals)

    def _known_controls(self) -> list[tuple[int, str]]:
        if self._local_controls():
            return list(self._vocab_controls or ())
        with self._lock:
            return list(self._learnt.items())

    def _written(self, literals: frozenset[str]) -> list[str]:
        """The known control tokens (as ``_barred`` knows them) whose text the grammar writes whole
        (a call marker such as ``[TOOL_CALLS]``; ``literals``: ``Grammar.literals``): the server
        streams their text only when asked (``preserved_tokens``)."""
        return sorted({text for _, text in self._known_controls() if text in literals})

    def _encode(self, text: str, special: bool) -> list[int]:
        body = self._post("/tokenize", {"content": text, "add_special": False, "parse_special": special})
        return [int(t) for t in body.get("tokens", [])]

    def _request(self, ids: list[int], grammar: Grammar | None, *, max_tokens: int, temperature: float, top_p: float,
                 seed: int | None, stop: Sequence[str], repeat_penalty: float) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            # Token ids: the server adds no BOS to them (the template wrote it where the model wants one).
            "prompt": ids,
            "n_predict": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            # The server's other samplers default on (top_k 40, min_p 0.05): off, as in process.
            "top_k": 0,
            "min_p": 0.0,
            "typical_p": 1.0,
            "seed": seed if seed is not None else 0,
            "repeat_penalty": repeat_penalty,
            "repeat_last_n": PENALTY_WINDOW,
            "stop": list(stop),
            "stream": True,
            "return_tokens": True,
            "cache_prompt": not self._fresh,
            # Pings while a long prompt is read: a cancel is seen before the first token, and
            # the silence timeout measures the engine, not the prompt's length.
            "sse_ping_interval": 2,
        }
        self._fresh = False
        if grammar is not None:
            body["grammar"] = grammar.to_gbnf()
            literals = grammar.literals()  # walked once for both
            if barred := self._barred(literals, stop):
                body["logit_bias"] = [[t, False] for t in barred]
            if written := self._written(literals):
                # Streamed content leaves control tokens out, a call marker the grammar writes too.
                body["preserved_tokens"] = written
        return "/completion", body

    def _read(self, event: dict[str, Any], reply: EngineReply) -> bool:
        reply.tokens += [int(t) for t in event.get("tokens") or []]
        reply.text += str(event.get("content") or "")
        if not event.get("stop"):
            return False
        stop_type = str(event.get("stop_type"))
        reply.ended = {"eos": "eog", "word": "stop", "limit": "length"}.get(stop_type, "eog")
        if event.get("truncated"):
            reply.ended = "length"
        predicted = event.get("tokens_predicted")
        if isinstance(predicted, int):
            # The server counts (and streams) the end-of-generation token; it is not part of the reply.
            reply.completion_tokens = predicted - (stop_type == "eos")
        if stop_type == "eos" and reply.tokens:
            reply.tokens.pop()
        timings = event.get("timings") or {}
        if isinstance(timings.get("prompt_ms"), int | float):
            reply.prompt_seconds = float(timings["prompt_ms"]) / 1000
        if isinstance(timings.get("predicted_ms"), int | float):
            reply.decode_seconds = float(timings["predicted_ms"]) / 1000
        if isinstance(timings.get("cache_n"), int):
            reply.cached_tokens = int(timings["cache_n"])
        return True

    def _context_error(self, message: str, body: Any) -> ContextLengthExceeded | None:
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
            n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
            if isinstance(n_prompt, int) and isinstance(n_ctx, int):
                return ContextLengthExceeded(n_prompt, n_ctx)
        return super()._context_error(message, body)
