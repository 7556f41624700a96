"""``localtools serve``: an OpenAI-compatible chat-completions endpoint on one local model.

A model in this process answers one request at a time (llama.cpp contexts are not thread-safe); a
serving engine behind the model (``--backend llama-server``, ``vllm``, ``sglang``) gets as many at
once as it batches. The rest wait in a first-come, first-served queue of bounded length, and a
request that finds it full gets a 503 with ``Retry-After``. Tool calls are always grammar-constrained, so ``tool_choice`` is enforced
and every returned call parses and matches its tool's schema.

A request never gets a 500: a bad one gets a 400 naming the field (``code`` says which check), a
missing or wrong API key a 401, a body over the limit a 413, a full queue or a model that failed
while generating a 503. A client that hangs up stops its generation within a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .._errors import (
    ContextLengthExceeded,
    DisguisedCall,
    EngineError,
    EngineIgnoredGrammar,
    EngineUnavailable,
    GenerationCancelled,
    GenerationTruncated,
    GrammarError,
    LocalToolsError,
    MissingDependency,
    ModelError,
    SchemaViolation,
    TemplateError,
    ToolCallParseError,
    ToolDefinitionError,
    UsageError,
)
from .._model import Model
from .._stream import StreamEvent, relay
from .._turn import ChatResult
from ._openai import BadRequest, ChatRequest, ChunkWriter, completion_body, error_body, new_completion_id, parse_request

__all__ = ["ServerConfig", "create_app", "serve"]

log = logging.getLogger("localtools.serve")
SERVE_HINT = "pip install 'localtools[serve]'"


@dataclass
class ServerConfig:
    #: The model id clients see in /v1/models and in every response.
    model_name: str
    #: Requests that may wait behind the ones being answered; one more gets a 503.
    max_queue: int = 16
    #: Requests answered at once; ``None``: one for a model in this process, as many as the engine
    #: batches for an engine backend (its ``concurrency``).
    concurrency: int | None = None
    #: Used when a request sets none (OpenAI's default temperature is 1.0; greedy suits small models).
    default_max_tokens: int = 1024
    default_temperature: float = 0.0
    #: Largest request body in bytes; a larger one gets a 413 before it is read whole.
    max_body_bytes: int = 4 * 1024 * 1024
    #: When set, every route but /health needs ``Authorization: Bearer <api_key>`` (401 otherwise).
    api_key: str | None = None


#: (status, code) per error class; the first class an error is an instance of wins.
_STATUS: tuple[tuple[type[LocalToolsError], int, str], ...] = (
    # A call that still breaks its schema after the repairs: never handed out, as a call or as text.
    (SchemaViolation, 422, "schema_violation"),
    # A text answer that still holds a call after the retries: no answer, and no call was run.
    (DisguisedCall, 422, "disguised_call"),
    (ContextLengthExceeded, 400, "context_length_exceeded"),
    (GrammarError, 400, "unsupported_schema"),
    (TemplateError, 400, "template_error"),
    (ToolDefinitionError, 400, "invalid_tool"),
    (UsageError, 400, "invalid_value"),
    (ModelError, 503, "model_error"),
    (EngineUnavailable, 503, "engine_unavailable"),
    (EngineIgnoredGrammar, 502, "engine_ignored_grammar"),
    (EngineError, 502, "engine_error"),
)


def error_status(exc: LocalToolsError) -> tuple[int, str]:
    """The HTTP status and OpenAI error ``code`` for an error raised while answering a request."""
    for kind, status, code in _STATUS:
        if isinstance(exc, kind):
            return status, code
    return 400, "invalid_request"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _QueueFull(Exception):
    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after


class _Worker:
    """Runs model calls ``concurrency`` at a time on as many threads, in arrival order."""

    def __init__(self, max_queue: int, concurrency: int = 1) -> None:
        if concurrency < 1:
            raise UsageError(f"concurrency must be at least 1, not {concurrency}")
        self.max_queue = max_queue
        self.concurrency = concurrency
        self.pending = 0
        self.served = 0
        self.rejected = 0
        self._avg_seconds = 1.0
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="localtools-model")

    async def run(self, job: Callable[[], ChatResult]) -> ChatResult:
        if self.pending >= self.max_queue + self.concurrency:
            self.rejected += 1
            # The wait the queue ahead would take at the recent pace.
            raise _QueueFull(max(1, round(self.pending * self._avg_seconds / self.concurrency)))
        self.pending += 1
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool, self._timed, job)
            self.served += 1
            return result
        finally:
            self.pending -= 1

    def _timed(self, job: Callable[[], ChatResult]) -> ChatResult:
        started = time.perf_counter()
        try:
            return job()
        finally:
            self._avg_seconds = 0.8 * self._avg_seconds + 0.2 * (time.perf_counter() - started)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _chat(model: Model, request: ChatRequest, cancel: threading.Event,
          on_event: Callable[[StreamEvent], None] | None) -> ChatResult:
    if cancel.is_set():  # the client left while this request waited in the queue
        raise GenerationCancelled("the client disconnected before its turn")
    return model.chat(
        request.messages,
        request.tools,
        tool_choice=request.tool_choice,
        parallel_tool_calls=request.parallel_tool_calls,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=request.stop,
        cancel=cancel.is_set,
        thinking=request.thinking,
        reasoning_budget=request.reasoning_budget,
        template_kwargs=request.template_kwargs,
        on_event=on_event,
    )


def _answer(model: Model, request: ChatRequest, cancel: threading.Event,
            on_event: Callable[[StreamEvent], None] | None = None) -> ChatResult:
    """Model output is never an HTTP error: a call cut by max_tokens comes back as finish_reason 'length'."""
    try:
        return _chat(model, request, cancel, on_event)
    except GenerationTruncated as exc:
        log.info("a call was cut at max_tokens=%d; answering with finish_reason 'length'", exc.max_tokens)
        return ChatResult(content="", finish_reason="length", prompt_tokens=0, completion_tokens=request.max_tokens)
    except (SchemaViolation, DisguisedCall):
        raise  # a call nobody may run: a 422, never its text
    except ToolCallParseError as exc:
        # Constrained output always parses; reaching this is a bug here, and the text is still the model's.
        log.error("constrained output did not parse: %s", exc)
        return ChatResult(content=exc.raw, finish_reason="stop")


def create_app(model: Model, config: ServerConfig) -> Any:
    """The ASGI app (Starlette) serving ``model``."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError as exc:
        raise MissingDependency(f"localtools serve needs starlette and uvicorn: {SERVE_HINT}") from exc

    can = model.backend.capabilities
    engine = can.remote
    if config.concurrency is not None and config.concurrency > 1 and not engine:
        raise UsageError(f"concurrency {config.concurrency} needs an engine backend (--backend llama-server, vllm or "
                         f"sglang): the {model.backend.name} backend runs the model in this process, one request at a "
                         "time (a llama.cpp context is not thread-safe)")
    concurrency = config.concurrency or (can.concurrency if engine else 1)
    worker = _Worker(config.max_queue, concurrency)

    def error(status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None, headers: dict[str, str] | None = None) -> Response:
        return JSONResponse(error_body(message, kind=kind, param=param, code=code), status_code=status, headers=headers)

    def refused(http: Request) -> Response | None:
        """A 401 when an API key is set and the request does not carry it."""
        if config.api_key is None:
            return None
        given = http.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        # Header values arrive decoded as latin-1: back to the bytes sent, to compare with the key's UTF-8.
        sent = token.strip().encode("latin-1", errors="replace")
        if scheme.lower() == "bearer" and secrets.compare_digest(sent, config.api_key.encode("utf-8")):
            return None
        what = "no API key was sent" if not given else "the API key is wrong"
        return error(401, f"{what}: send 'Authorization: Bearer <key>' (the key given to serve --api-key)",
                     kind="authentication_error", code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})

    async def read_body(http: Request) -> bytes | Response:
        limit = config.max_body_bytes
        too_large = error(413, f"the request body is over this server's limit of {limit} bytes "
                          "(serve --max-body-bytes)", code="request_too_large")
        declared = http.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return too_large
        chunks, size = [], 0
        async for chunk in http.stream():
            size += len(chunk)
            if size > limit:
                return too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def watch_disconnect(http: Request, cancel: threading.Event) -> None:
        while not await http.is_disconnected():
            await asyncio.sleep(0.05)
        cancel.set()

    async def chat_completions(http: Request) -> Response:
        if (denied := refused(http)) is not None:
            return denied
        raw = await read_body(http)
        if not isinstance(raw, bytes):
            return raw
        try:
            body = json.loads(raw)
        except ValueError as exc:  # not JSON, not UTF-8, or an integer past Python's digit limit
            return error(400, f"the request body is not JSON: {exc}")
        except RecursionError:
            return error(400, "the request body nests arrays and objects too deeply to read", code="too_deep")
        try:
            request = parse_request(body, default_max_tokens=config.default_max_tokens,
                                    default_temperature=config.default_temperature)
            # Grammar and prompt problems (an unsupported schema, a template that refuses the
            # message order) are the request's fault; find them before queueing.
            model.reply_format(request.tools, request.tool_choice, request.parallel_tool_calls)
            model.render(request.messages, request.tools)
        except BadRequest as exc:
            return error(400, str(exc), param=exc.param, code=exc.code)
        except LocalToolsError as exc:
            status, code = error_status(exc)
            return error(status, str(exc), code=code)
        cancel = threading.Event()
        watcher = asyncio.create_task(watch_disconnect(http, cancel))
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[StreamEvent] = asyncio.Queue()

        def emit(event: StreamEvent) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        job = asyncio.ensure_future(worker.run(lambda: _answer(model, request, cancel, emit if request.stream else None)))
        # A stream its client left is not read to its end: its error (the cancel) is retrieved here.
        job.add_done_callback(lambda done: done.cancelled() or done.exception())
        relayed = relay(events, job)
        streaming = False
        try:
            if request.stream:
                # The stream starts with the first event; what fails before it keeps its HTTP status.
                first = await anext(relayed, None)
                if first is not None:
                    streaming = True
                    return StreamingResponse(stream(request, job, relayed, cancel, watcher, first),
                                             media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            result = await job
        except _QueueFull as full:
            return busy(full)
        except (GenerationCancelled, LocalToolsError) as exc:
            return failed(exc)
        finally:
            # However this ends (this handler cancelled at shutdown, say), nothing may go on
            # generating for it; a stream that started ends it itself.
            if not streaming:
                await relayed.aclose()
                cancel.set()
                watcher.cancel()
                job.cancel()
        completion_id = new_completion_id()
        if not request.stream:
            return JSONResponse(completion_body(result, model=config.model_name, completion_id=completion_id))
        return StreamingResponse(stream(request, job, relayed, cancel, watcher), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    def busy(full: _QueueFull) -> Response:
        return error(503, f"the server is busy: {worker.pending} requests are ahead; retry after {full.retry_after} s",
                     kind="server_busy", code="queue_full", headers={"Retry-After": str(full.retry_after)})

    def failed(exc: GenerationCancelled | LocalToolsError) -> Response:
        if isinstance(exc, GenerationCancelled):
            log.info("the client disconnected; its generation was stopped")
            return error(400, "the client disconnected", code="client_disconnected")
        status, code = error_status(exc)
        kind = "server_error" if status >= 500 else "invalid_request_error"
        return error(status, str(exc), kind=kind, code=code)

    async def stream(request: ChatRequest, job: asyncio.Future[ChatResult], relayed: AsyncGenerator[StreamEvent, None],
                     cancel: threading.Event, watcher: asyncio.Task[None],
                     first: StreamEvent | None = None) -> AsyncIterator[str]:
        """Server-sent events as the turn is generated; an error after the first one ends the
        stream with an OpenAI error object, as OpenAI's own streams do."""
        writer = ChunkWriter(model=config.model_name, completion_id=new_completion_id())

        def sse(chunk: dict[str, Any]) -> str:
            return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"

        async def chunks() -> AsyncIterator[dict[str, Any]]:
            if first is not None and (chunk := writer.event(first)) is not None:
                yield chunk
            async for event in relayed:
                if (chunk := writer.event(event)) is not None:
                    yield chunk

        try:
            yield sse(writer.opening())
            try:
                async for chunk in chunks():
                    yield sse(chunk)
                result = job.result()
            except (GenerationCancelled, LocalToolsError) as exc:
                body = json.loads(bytes(failed(exc).body))
                yield sse(body)
            else:
                for chunk in writer.closing(result, include_usage=request.include_usage):
                    yield sse(chunk)
            yield "data: [DONE]\n\n"
        finally:
            await relayed.aclose()
            cancel.set()
            watcher.cancel()

    async def models(http: Request) -> Response:
        if (denied := refused(http)) is not None:
            return denied
        return JSONResponse({"object": "list", "data": [
            {"id": config.model_name, "object": "model", "created": 0, "owned_by": "localtools"}]})

    async def health(http: Request) -> Response:
        body: dict[str, Any] = {"status": "ok", "model": config.model_name, "family": model.family.name,
                                "backend": model.backend.name, "concurrency": worker.concurrency,
                                "pending": worker.pending, "served": worker.served, "rejected": worker.rejected}
        if model.backend.capabilities.remote:
            # An engine behind the model: this server is as healthy as it is.
            engine = await asyncio.get_running_loop().run_in_executor(None, model.backend.health)
            if engine is None:
                return JSONResponse(body)
            body["engine"] = engine
            if not engine.get("ok"):
                body["status"] = "engine_unavailable"
                return JSONResponse(body, status_code=503)
        return JSONResponse(body)

    async def not_found(http: Request, exc: Exception) -> Response:
        return error(404, f"no route {http.method} {http.url.path}; this server has POST /v1/chat/completions, "
                     "GET /v1/models and GET /health", code="not_found")

    async def crashed(http: Request, exc: Exception) -> Response:
        log.exception("request failed", exc_info=exc)
        return error(500, f"internal error: {type(exc).__name__}: {exc}", kind="server_error")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        worker.close()

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={404: not_found, 405: not_found, 500: crashed},
        lifespan=lifespan,
    )
    app.state.worker = worker
    return app


def serve(model: Model, config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000,
          on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted."""
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependency(f"localtools serve needs uvicorn: {SERVE_HINT}") from exc
    if config.api_key is None and not is_loopback(host):
        log.warning("serving on %s without an API key: anyone who can reach this address can use the model "
                    "(set serve --api-key KEY)", host)
    app = create_app(model, config)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets)
            bound = server.servers[0].sockets[0].getsockname() if server.servers else (host, port)
            on_ready(f"http://{bound[0]}:{bound[1]}/v1")

        server.startup = startup  # type: ignore[method-assign]
    server.run()
