"""``localtools serve``: one local model behind OpenAI chat completions (``/v1/chat/completions``),
the OpenAI Responses API (``/v1/responses``) and the Anthropic Messages API (``/v1/messages``);
each dialect translates (``_openai``, ``_responses``, ``_anthropic``), the queue, limits,
cancellation and the grammar path are this module's.

A model in this process answers one request at a time (llama.cpp contexts are not thread-safe); a
serving engine behind the model (``--backend llama-server``, ``vllm``, ``sglang``) gets as many at
once as it batches. The rest wait in a first-come, first-served queue of bounded length, and a
request that finds it full gets a 503 with ``Retry-After``. Tool calls are always grammar-constrained, so ``tool_choice`` is enforced
and every returned call parses and matches its tool's schema.

A request never gets a 500: a bad one gets a 400 naming the field (``code`` says which check), a
missing or wrong API key a 401, a body over the limit a 413, a full queue or a model that failed
while generating a 503. A client that hangs up stops its generation within a token.

A request's checks (its schemas, their grammar, the prompt) run on a thread, never on the event
loop, and the grammar's build under ``max_build_seconds``: a hostile schema gets its 400 (naming
the schema path and the limit) in that time while /health and every other client are answered.
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
from typing import TYPE_CHECKING, Any

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
from ..grammar import build_budget
from ..model._model import Model
from ..model._stream import StreamEvent, relay
from ..model._turn import ChatResult
from ._anthropic import Messages, parse_messages
from ._decisions import read_decisions
from ._dialect import Dialect, EventWriter
from ._openai import BadRequest, ChatCompletions, ChatRequest
from ._responses import Responses

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

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
    #: Seconds a request's tool schemas may take to build into its grammar; past them a 400
    #: (``unsupported_schema``) names the schema path the build reached and the limit.
    max_build_seconds: float = 5.0
    #: What a request's ``decisions`` profile is read for (``resolve_decisions``): the catalog name
    #: or weights' path the model was loaded from (``None``: ``model_name``), and the family and
    #: template it was loaded with, if it was told them.
    model_source: str | None = None
    family: str | None = None
    template: str | None = None


#: (status, code) per error class; the first class an error is an instance of wins.
_STATUS: tuple[tuple[type[LocalToolsError], int, str], ...] = (
    # A call that still breaks its schema after the repairs: never handed out, as a call or as text.
    (SchemaViolation, 422, "schema_violation"),
    # A text answer that still holds a call after the retries: no answer, and no call was run.
    (DisguisedCall, 422, "disguised_call"),
    # A reply that could not be read (it left the grammar, nested past what the parser reads, or
    # free output held a broken call): the model's text is never sent as the answer in its place.
    (ToolCallParseError, 502, "unreadable_reply"),
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
        answer_schema=request.answer_schema,
        decisions=request.decisions,
    )


def _answer(model: Model, request: ChatRequest, cancel: threading.Event,
            on_event: Callable[[StreamEvent], None] | None = None) -> ChatResult:
    """Model output is never an HTTP error: a call cut by max_tokens comes back as finish_reason 'length'."""
    try:
        return _chat(model, request, cancel, on_event)
    except GenerationTruncated as exc:
        log.info("a call was cut at max_tokens=%d; answering with finish_reason 'length'", exc.max_tokens)
        return ChatResult(content="", finish_reason="length", prompt_tokens=0, completion_tokens=request.max_tokens)
    except ToolCallParseError as exc:
        # A call nobody may run, or a reply that could not be read as the grammar reads it: a typed
        # error (422, 502), never the model's text as the answer: it may hold a call.
        if not isinstance(exc, SchemaViolation | DisguisedCall):
            log.error("the reply did not parse: %s", exc)
        raise


def create_app(model: Model, config: ServerConfig) -> Any:
    """The ASGI app (Starlette) serving ``model``."""
    try:
        from starlette.applications import Starlette
        from starlette.routing import Route
    except ImportError as exc:
        raise MissingDependency(f"localtools serve needs starlette and uvicorn: {SERVE_HINT}") from exc

    can = model.backend.capabilities
    if config.concurrency is not None and config.concurrency > 1 and not can.remote:
        raise UsageError(f"concurrency {config.concurrency} needs an engine backend (--backend llama-server, vllm or "
                         f"sglang): the {model.backend.name} backend runs the model in this process, one request at a "
                         "time (a llama.cpp context is not thread-safe)")
    worker = _Worker(config.max_queue, config.concurrency or (can.concurrency if can.remote else 1))
    routes = _Routes(model, config, worker)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        yield
        worker.close()

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", routes.chat_completions, methods=["POST"]),
            Route("/chat/completions", routes.chat_completions, methods=["POST"]),
            Route("/v1/responses", routes.responses, methods=["POST"]),
            Route("/v1/messages", routes.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", routes.count_tokens, methods=["POST"]),
            Route("/v1/models", routes.models, methods=["GET"]),
            Route("/models", routes.models, methods=["GET"]),
            Route("/health", routes.health, methods=["GET"]),
        ],
        exception_handlers={404: routes.not_found, 405: routes.not_found, 500: routes.crashed},
        lifespan=lifespan,
    )
    app.state.worker = worker
    return app


_CHAT, _MESSAGES = ChatCompletions(), Messages()


@dataclass
class _Body:
    """A request's body, read as JSON."""

    value: Any


class _Routes:
    """The handlers of one app, a method each; what they share (the model, the settings, the
    queue) is here. A chat request goes: ``admitted`` (key, body size, JSON) -> ``parse_request``
    and the checks that need no generation -> ``answered`` (queued, then one JSON reply or a
    stream of events)."""

    def __init__(self, model: Model, config: ServerConfig, worker: _Worker) -> None:
        from starlette.responses import JSONResponse, StreamingResponse

        self.model, self.config, self.worker = model, config, worker
        #: The Responses dialect keeps this server's responses for previous_response_id.
        self._responses = Responses()
        self._json, self._streaming = JSONResponse, StreamingResponse

    def error(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
              code: str | None = None, headers: dict[str, str] | None = None, dialect: Dialect = _CHAT) -> Response:
        body = dialect.error_body(status, message, kind=kind, param=param, code=code)
        return self._json(body, status_code=status, headers=headers)

    def refused(self, http: Request, dialect: Dialect = _CHAT) -> Response | None:
        """A 401 when an API key is set and the request does not carry it (``Authorization:
        Bearer KEY``, or ``x-api-key: KEY`` as Anthropic's clients send it)."""
        if self.config.api_key is None:
            return None
        given = http.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        key = self.config.api_key.encode("utf-8")
        # Header values arrive decoded as latin-1: back to the bytes sent, to compare with the key's UTF-8.
        sent = [token.strip()] if scheme.lower() == "bearer" else []
        if "x-api-key" in http.headers:
            sent.append(http.headers["x-api-key"].strip())
        if any(secrets.compare_digest(s.encode("latin-1", errors="replace"), key) for s in sent):
            return None
        what = "no API key was sent" if not given and "x-api-key" not in http.headers else "the API key is wrong"
        return self.error(401, f"{what}: send 'Authorization: Bearer <key>' or 'x-api-key: <key>' (the key given to "
                          "serve --api-key)", kind="authentication_error", code="invalid_api_key",
                          headers={"WWW-Authenticate": "Bearer"}, dialect=dialect)

    async def read_body(self, http: Request, dialect: Dialect = _CHAT) -> bytes | Response:
        limit = self.config.max_body_bytes
        too_large = self.error(413, f"the request body is over this server's limit of {limit} bytes "
                               "(serve --max-body-bytes)", code="request_too_large", dialect=dialect)
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

    async def admitted(self, http: Request, dialect: Dialect) -> _Body | Response:
        """The request's JSON body, or the response that refuses it (key, size, not JSON)."""
        if (denied := self.refused(http, dialect)) is not None:
            return denied
        raw = await self.read_body(http, dialect)
        if not isinstance(raw, bytes):
            return raw
        try:
            return _Body(json.loads(raw))
        except ValueError as exc:  # not JSON, not UTF-8, or an integer past Python's digit limit
            return self.error(400, f"the request body is not JSON: {exc}", dialect=dialect)
        except RecursionError:
            return self.error(400, "the request body nests arrays and objects too deeply to read", code="too_deep",
                              dialect=dialect)

    async def request(self, http: Request, dialect: Dialect, parse: Callable[[Any], ChatRequest] | None = None, *,
                      render: bool = True) -> ChatRequest | Response:
        """The request, read and checked as far as it can be without generating, or the error;
        ``render=False`` leaves the prompt to the caller (it renders it once, and answers its errors)."""
        body = await self.admitted(http, dialect)
        if not isinstance(body, _Body):
            return body

        def checked() -> ChatRequest:
            # One budget for reading the schemas' patterns and building their grammar.
            with build_budget(self.config.max_build_seconds):
                request = parse(body.value) if parse is not None else dialect.parse(
                    body.value, default_max_tokens=self.config.default_max_tokens,
                    default_temperature=self.config.default_temperature)
                # The same field on every dialect (a profile may read a calibration file: off the loop).
                config = self.config
                request.decisions = read_decisions(body.value.get("decisions"), config.model_source or config.model_name,
                                                   family=config.family, template=config.template)
                # Grammar and prompt problems (an unsupported schema, a template that refuses the
                # message order) are the request's fault; find them before queueing.
                self.model.reply_format(request.tools, request.tool_choice, request.parallel_tool_calls)
            if render:
                self.model.render(request.messages, request.tools)
            return request

        try:
            # On a thread: a schema that takes its whole budget to build holds no other client.
            return await asyncio.to_thread(checked)
        except BadRequest as exc:
            return self.error(400, str(exc), param=exc.param, code=exc.code, dialect=dialect)
        except LocalToolsError as exc:
            status, code = error_status(exc)
            return self.error(status, str(exc), code=code, dialect=dialect)
        except RecursionError:
            return self.error(400, "the request nests its schemas or messages too deeply to read", code="too_deep",
                              dialect=dialect)

    async def chat_completions(self, http: Request) -> Response:
        request = await self.request(http, _CHAT)
        return request if not isinstance(request, ChatRequest) else await self.answered(http, request, _CHAT)

    async def responses(self, http: Request) -> Response:
        request = await self.request(http, self._responses)
        return request if not isinstance(request, ChatRequest) else await self.answered(http, request, self._responses)

    async def messages(self, http: Request) -> Response:
        request = await self.request(http, _MESSAGES)
        return request if not isinstance(request, ChatRequest) else await self.answered(http, request, _MESSAGES)

    async def count_tokens(self, http: Request) -> Response:
        """``POST /v1/messages/count_tokens``: the prompt's tokens, as the model would read them."""
        request = await self.request(http, _MESSAGES, lambda body: parse_messages(body, need_max_tokens=False),
                                     render=False)
        if not isinstance(request, ChatRequest):
            return request
        def count() -> list[int]:
            prompt = self.model.render(request.messages, request.tools, parallel_tool_calls=request.parallel_tool_calls,
                                       tool_choice=request.tool_choice, thinking=request.thinking)
            return self.model.backend.tokenize(prompt)

        try:
            ids = await asyncio.to_thread(count)
        except LocalToolsError as exc:
            return self.failed(exc, _MESSAGES)
        return self._json({"input_tokens": len(ids)})

    async def answered(self, http: Request, request: ChatRequest, dialect: Dialect) -> Response:
        """The turn for ``request``, queued: one JSON reply, or server-sent events as it is generated."""
        cancel = threading.Event()
        watcher = asyncio.create_task(_watch_disconnect(http, cancel))
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[StreamEvent] = asyncio.Queue()

        def emit(event: StreamEvent) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        job = asyncio.ensure_future(self.worker.run(
            lambda: _answer(self.model, request, cancel, emit if request.stream else None)))
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
                    return self._streaming(self.stream(dialect, request, job, relayed, cancel, watcher, first),
                                           media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            result = await job
        except _QueueFull as full:
            return self.busy(full, dialect)
        except (GenerationCancelled, LocalToolsError) as exc:
            return self.failed(exc, dialect)
        finally:
            # However this ends (this handler cancelled at shutdown, say), nothing may go on
            # generating for it; a stream that started ends it itself.
            if not streaming:
                await relayed.aclose()
                cancel.set()
                watcher.cancel()
                job.cancel()
        if not request.stream:
            return self._json(dialect.reply(result, request, model=self.config.model_name))
        return self._streaming(self.stream(dialect, request, job, relayed, cancel, watcher),
                               media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    def busy(self, full: _QueueFull, dialect: Dialect) -> Response:
        return self.error(503, f"the server is busy: {self.worker.pending} requests are ahead; retry after "
                          f"{full.retry_after} s", kind="server_busy", code="queue_full",
                          headers={"Retry-After": str(full.retry_after)}, dialect=dialect)

    def failed(self, exc: GenerationCancelled | LocalToolsError, dialect: Dialect) -> Response:
        if isinstance(exc, GenerationCancelled):
            log.info("the client disconnected; its generation was stopped")
            return self.error(400, "the client disconnected", code="client_disconnected", dialect=dialect)
        status, code = error_status(exc)
        kind = "server_error" if status >= 500 else "invalid_request_error"
        return self.error(status, str(exc), kind=kind, code=code, dialect=dialect)

    async def stream(self, dialect: Dialect, request: ChatRequest, job: asyncio.Future[ChatResult],
                     relayed: AsyncGenerator[StreamEvent, None], cancel: threading.Event, watcher: asyncio.Task[None],
                     first: StreamEvent | None = None) -> AsyncIterator[str]:
        """Server-sent events as the turn is generated; an error after the first one ends the
        stream with the dialect's error object, as the upstream APIs' own streams do."""
        writer: EventWriter = dialect.writer(request, model=self.config.model_name)
        # The records of one event go out as one write: a dialect that opens with more records than
        # another (Responses, Messages) then sends its first answer byte no later.
        opening = "".join(writer.opening())
        try:
            try:
                if first is not None:
                    opening += "".join(writer.event(first))
                if opening:
                    yield opening
                    opening = ""
                async for event in relayed:
                    if records := "".join(writer.event(event)):
                        yield records
                result = job.result()
            except (GenerationCancelled, LocalToolsError) as exc:
                yield opening + "".join(writer.failure(json.loads(bytes(self.failed(exc, dialect).body))))
            else:
                yield opening + "".join(writer.closing(result))
        finally:
            await relayed.aclose()
            cancel.set()
            watcher.cancel()

    async def models(self, http: Request) -> Response:
        if (denied := self.refused(http)) is not None:
            return denied
        return self._json({"object": "list", "data": [
            {"id": self.config.model_name, "object": "model", "created": 0, "owned_by": "localtools"}]})

    async def health(self, http: Request) -> Response:
        worker = self.worker
        body: dict[str, Any] = {"status": "ok", "model": self.config.model_name, "family": self.model.family.name,
                                "backend": self.model.backend.name, "concurrency": worker.concurrency,
                                "pending": worker.pending, "served": worker.served, "rejected": worker.rejected}
        if self.model.backend.capabilities.remote:
            # An engine behind the model: this server is as healthy as it is.
            engine = await asyncio.get_running_loop().run_in_executor(None, self.model.backend.health)
            if engine is None:
                return self._json(body)
            body["engine"] = engine
            if not engine.get("ok"):
                body["status"] = "engine_unavailable"
                return self._json(body, status_code=503)
        return self._json(body)

    async def not_found(self, http: Request, exc: Exception) -> Response:
        return self.error(404, f"no route {http.method} {http.url.path}; this server has POST /v1/chat/completions, "
                          "POST /v1/responses, POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models and GET /health",
                          code="not_found", dialect=_MESSAGES if "/messages" in http.url.path else _CHAT)

    async def crashed(self, http: Request, exc: Exception) -> Response:
        log.exception("request failed", exc_info=exc)
        return self.error(500, f"internal error: {type(exc).__name__}: {exc}", kind="server_error")


async def _watch_disconnect(http: Request, cancel: threading.Event) -> None:
    while not await http.is_disconnected():
        await asyncio.sleep(0.05)
    cancel.set()


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
