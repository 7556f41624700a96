"""Other tool-calling stacks on the bench's cases, scored on what their clients get back.

A peer takes OpenAI-shaped messages and tools and returns an OpenAI-shaped assistant message. Only
its ``tool_calls`` field counts as calls: a call written into ``content`` is, to a client, no call.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .._errors import LocalToolsError, MissingDependency, UsageError
from ..families._parse import decode_arguments
from ..model._decide import Decisions
from ..model._model import Model

__all__ = ["LlamaCppPythonPeer", "ModelPeer", "NativePeer", "OpenAIPeer", "Peer", "PeerError", "PeerReply",
           "calls_from_message", "parse_peer"]


class PeerError(LocalToolsError):
    """A peer could not be reached or set up (a failed case is not an error)."""


@dataclass
class PeerReply:
    message: dict[str, Any]
    latency: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Prompt processing and decode time where the peer reports them; ``None`` when it does not.
    prompt_seconds: float | None = None
    decode_seconds: float | None = None
    #: Why the peer gave no message for this case (an HTTP error, an exception in its handler).
    error: str = ""
    #: The text the model wrote, where the peer sees it (our own modes, the native peer).
    raw: str = ""
    #: Turns generated again because a call broke its schema (our constrained modes), and whether
    #: the call was refused in the end (``SchemaViolation``).
    repairs: int = 0
    refused: bool = False
    #: Times the turn was decoded again because its text read as a call (our constrained modes).
    disguises_caught: int = 0
    #: The decisions made on the model's probabilities (our modes that decide): point, share, taken, argument.
    decisions: list[dict[str, Any]] = field(default_factory=list)


class Peer(Protocol):
    #: Shown as the mode's backend, e.g. ``llama-cpp-python`` or ``openai:http://127.0.0.1:8080/v1``.
    name: str
    #: The model it answers with, as it names it.
    model: str
    #: The tool_choice values it supports; the bench skips the others.
    tool_choices: tuple[str, ...]

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, tool_choice: str,
             max_tokens: int) -> PeerReply: ...


def calls_from_message(message: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The ``tool_calls`` of an OpenAI-shaped message as (name, arguments), and what was wrong with them."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = (call or {}).get("function") or {}
        name, raw = function.get("name"), function.get("arguments")
        if not isinstance(name, str):
            return calls, f"tool_calls[{index}] has no function name"
        try:
            arguments = decode_arguments(raw)
        except ValueError as exc:
            return calls, f"tool_calls[{index}] ({name}): arguments are {exc}"
        calls.append((name, arguments))
    return calls, ""


class LlamaCppPythonPeer:
    """llama-cpp-python's own ``chatml-function-calling`` chat handler on the same GGUF, in process.

    Its handler writes ``functions.NAME:`` and constrains the arguments with the tool's schema; it
    has no ``required`` tool_choice, and it lists the tools only inside a system message. When it
    writes a call it asks llama.cpp for ``max_tokens=None`` (until the context is full), so the peer
    holds each of its completions to the bench's ``max_tokens``: a looping call then costs what it
    costs the bench's own modes. Prompt and decode times come from llama.cpp's perf counters.
    """

    name = "llama-cpp-python"
    tool_choices: tuple[str, ...] = ("auto",)

    def __init__(self, path: str | Path, *, model: str | None = None, n_ctx: int = 4096, n_gpu_layers: int = 0,
                 n_threads: int | None = None) -> None:
        from ..backends.llama_cpp import _import, open_llama

        self._llama_cpp = _import()
        self.model = model or Path(path).stem
        # Loaded as our backend loads it, so a CPU whose AMX kernels crash runs the peer too.
        self.llm, _ = open_llama(path, chat_format="chatml-function-calling", n_ctx=n_ctx, n_gpu_layers=n_gpu_layers,
                                 n_threads=n_threads)
        self._max_tokens = 256
        unbounded = self.llm.create_completion

        def bounded(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("max_tokens") is None:
                kwargs["max_tokens"] = self._max_tokens
            return unbounded(*args, **kwargs)

        self.llm.create_completion = bounded

    def _perf(self) -> tuple[float, float] | None:
        # llama.cpp's own counters: the handler makes several completions per reply and streams none.
        try:
            data = self._llama_cpp.llama_perf_context(self.llm._ctx.ctx)
            return data.t_p_eval_ms / 1000, data.t_eval_ms / 1000
        except (AttributeError, TypeError):
            return None

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, tool_choice: str,
             max_tokens: int) -> PeerReply:
        self.llm.reset()  # every reply pays its own prompt, as the bench's own modes do
        self._max_tokens = max_tokens
        before = self._perf()
        start = time.perf_counter()
        try:
            response = self.llm.create_chat_completion(messages=messages, tools=tools, tool_choice=tool_choice,
                                                       temperature=0.0, max_tokens=max_tokens)
        except (ValueError, RuntimeError, KeyError, AssertionError) as exc:
            return PeerReply({}, time.perf_counter() - start, error=f"{type(exc).__name__}: {exc}")
        latency = time.perf_counter() - start
        after = self._perf()
        usage = response.get("usage") or {}
        reply = PeerReply(dict(response["choices"][0]["message"]), latency,
                          usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        if before is not None and after is not None:
            reply.prompt_seconds, reply.decode_seconds = after[0] - before[0], after[1] - before[1]
        return reply


class ModelPeer:
    """One of our own modes as a peer: a ``Model``, free or constrained, in process. The bench asks
    every mode, ours and the others, through this one interface."""

    tool_choices: tuple[str, ...] = ("auto", "required", "none")

    def __init__(self, model: Model, *, constrained: bool, name: str | None = None,
                 decisions: Decisions | None = None) -> None:
        self._model, self.constrained, self.decisions = model, constrained, decisions
        self.name = name or model.backend.name
        self.model = model.name

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, tool_choice: str,
             max_tokens: int) -> PeerReply:
        from .._errors import DisguisedCall, GenerationTruncated, SchemaViolation, ToolCallParseError

        # Modes share a backend's prompt cache; each must pay for its own prompt for the times to compare.
        self._model.backend.drop_prompt_cache()
        start = time.perf_counter()
        try:
            reply = self._model.chat(messages, tools, tool_choice=tool_choice, constrained=self.constrained,
                                     max_tokens=max_tokens, decisions=self.decisions)
        except (ToolCallParseError, GenerationTruncated) as exc:
            refused = isinstance(exc, SchemaViolation)
            return PeerReply({"role": "assistant", "content": exc.raw}, time.perf_counter() - start,
                             error=f"{type(exc).__name__}: {str(exc)[:200]}", raw=exc.raw,
                             repairs=exc.repairs if isinstance(exc, SchemaViolation) else 0, refused=refused,
                             disguises_caught=exc.retries if isinstance(exc, DisguisedCall) else 0)
        return PeerReply(reply.message(), reply.latency, reply.prompt_tokens, reply.completion_tokens,
                         reply.prompt_seconds, reply.decode_seconds, raw=reply.raw, repairs=reply.schema_repairs,
                         disguises_caught=reply.disguise_retries,
                         decisions=[{"point": str(d.point), "share": d.share, "taken": d.taken, "argument": d.argument,
                                     "before": d.before, "after": d.after}
                                    for d in reply.decisions])


class NativePeer(ModelPeer):
    """The model's own chat template (the one in its GGUF), free decoding on llama.cpp, and calls read
    by the tolerant parser (tags, fenced or bare JSON): what llama-server --jinja or llama-cpp-python
    give once their text is parsed generously. It is the bar constrained decoding must clear.
    """

    name = "native"
    tool_choices: tuple[str, ...] = ("auto",)

    def __init__(self, path: str | Path, *, model: str | None = None, n_ctx: int = 4096, n_gpu_layers: int = 0) -> None:
        from .._errors import TemplateError
        from ..backends.llama_cpp import LlamaCppBackend

        name = model or Path(path).stem
        backend = LlamaCppBackend(path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers)
        try:
            own = Model(backend, template="model")
        except TemplateError as exc:
            raise PeerError(f"--peer native on {name}: {exc}") from None
        # The model's prompt exactly as its own template writes it: none of our family's hints.
        own.family = dataclasses.replace(own.family, parallel_hint="", result_hint="")
        super().__init__(own, constrained=False, name="native")
        self.model = name


class OpenAIPeer:
    """Any OpenAI-compatible server (llama-server --jinja, Ollama, vLLM, ``localtools serve``) through
    the ``openai`` SDK, as a client sees it: only the returned ``tool_calls`` count as calls.

    llama-server's non-standard ``timings`` field, when present, gives prompt and decode time.
    """

    tool_choices = ("auto", "required")

    def __init__(self, base_url: str, *, model: str | None = None, timeout: float = 600.0) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependency("the openai peer needs the openai SDK: pip install 'localtools[bench]'") from exc
        self._openai = openai
        self.name = f"openai:{base_url}"
        self.client = openai.OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "none"),
                                    timeout=timeout, max_retries=0)
        try:
            self.model = model or self.client.models.list().data[0].id
        except openai.APIConnectionError as exc:
            raise PeerError(f"no OpenAI-compatible server answers at {base_url}: {exc}") from None
        except (openai.APIStatusError, IndexError) as exc:
            raise PeerError(f"{base_url}/models gave no model to ask for ({exc}); name one as openai:URL#MODEL") from None

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, tool_choice: str,
             max_tokens: int) -> PeerReply:
        start = time.perf_counter()
        try:
            # Plain dicts, as a client would send them; the SDK's TypedDicts describe the same shape.
            create: Any = self.client.chat.completions.create
            response = create(model=self.model, messages=messages, tools=tools, tool_choice=tool_choice,
                              temperature=0.0, max_tokens=max_tokens)
        except self._openai.APIConnectionError as exc:
            raise PeerError(f"lost the server at {self.client.base_url}: {exc}") from None
        except self._openai.APIStatusError as exc:
            return PeerReply({}, time.perf_counter() - start, error=f"HTTP {exc.status_code}: {str(exc.message)[:200]}")
        latency = time.perf_counter() - start
        data = response.model_dump()
        usage = data.get("usage") or {}
        reply = PeerReply(data["choices"][0]["message"], latency, usage.get("prompt_tokens") or 0,
                          usage.get("completion_tokens") or 0)
        timings = data.get("timings")
        if isinstance(timings, dict) and "prompt_ms" in timings and "predicted_ms" in timings:
            reply.prompt_seconds, reply.decode_seconds = timings["prompt_ms"] / 1000, timings["predicted_ms"] / 1000
        return reply


def parse_peer(spec: str) -> tuple[str, str, str | None]:
    """``llama-cpp-python``, ``native`` or ``openai:URL[#MODEL]`` as (kind, url, model)."""
    if spec in ("llama-cpp-python", "native"):
        return spec, "", None
    if spec.startswith("openai:"):
        url, _, model = spec[len("openai:"):].partition("#")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--peer {spec!r}: expected openai:http://HOST:PORT/v1 (optionally #MODEL)")
        return "openai", url, model or None
    raise UsageError(f"--peer {spec!r}: expected llama-cpp-python, native or openai:URL[#MODEL]")
