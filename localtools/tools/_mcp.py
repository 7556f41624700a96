"""Tools from MCP servers (the official ``mcp`` SDK), run by the loop like any other tool.

An MCP session is bound to the event loop that opened it, while the loop's tools run from any
thread or loop, so each server gets an event loop on a thread of its own; a call is sent there
and waited for with the tool's timeout. A server that exits fails the calls waiting on it, and
every later one, with ``MCPServerError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from .._errors import MCPServerError, MissingDependency, ToolTimeout, UsageError
from ._tools import DEFAULT_TIMEOUT, Tool

__all__ = ["MCP_HINT", "MCPTools", "mcp_tools"]

MCP_HINT = "pip install 'localtools[mcp]'"
#: How long a server may take to start and list its tools.
START_TIMEOUT = 60.0


def _field(obj: Any, *names: str) -> Any:
    """A field by its mcp 2 name or its mcp 1 (camelCase) name."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _import_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise MissingDependency(f"MCP tools need the mcp SDK: {MCP_HINT}") from exc
    return mcp


class _Server:
    """One MCP server's session, held open by a task on an event loop of its own."""

    def __init__(self, label: str, connect: Callable[[], Any], timeout: float) -> None:
        self.label = label
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name=f"localtools-mcp {label}")
        self.thread.start()
        self.session: Any = None
        self.listed: list[Any] = []
        self.ended: BaseException | None = None
        self._closing = asyncio.Event()
        ready: Future[None] = Future()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(connect, ready), self.loop)
        try:
            ready.result(timeout)
        except FutureTimeout:
            self.close()
            raise MCPServerError(f"the MCP server {label} did not start and list its tools within {timeout:.0f} s") from None
        except BaseException as exc:
            self.close()
            raise MCPServerError(f"the MCP server {label} could not be started: {_why(exc)}") from exc

    async def _hold(self, connect: Callable[[], Any], ready: Future[None]) -> None:
        """Open the session, list the tools, and keep it open until ``close`` (the transport's
        task group must be left by the task that entered it)."""
        mcp = _import_mcp()
        try:
            async with connect() as streams, mcp.ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                cursor = None
                while True:
                    page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
                    self.listed += list(page.tools)
                    cursor = _field(page, "next_cursor", "nextCursor")
                    if not cursor:
                        break
                self.session = session
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            self.ended = exc
            if not isinstance(exc, Exception):
                raise
        else:
            self.ended = MCPServerError(f"the MCP server {self.label} was closed")

    def call(self, name: str, arguments: dict[str, Any], timeout: float | None) -> Any:
        """Call a tool and wait for its result, the server's exit or ``timeout``."""
        if self.ended is not None or self.session is None:
            raise MCPServerError(f"the MCP server {self.label} is not running ({_why(self.ended)}); "
                                 f"its tool {name!r} cannot be called")
        future = asyncio.run_coroutine_threadsafe(self._call(name, arguments), self.loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise ToolTimeout(f"tool {name!r} of the MCP server {self.label} did not finish within {timeout} s") from None

    async def _call(self, name: str, arguments: dict[str, Any]) -> Any:
        holder = asyncio.wrap_future(self._holder)
        call = asyncio.ensure_future(self.session.call_tool(name, arguments))
        call.add_done_callback(lambda done: done.cancelled() or done.exception())  # always retrieved
        try:
            await asyncio.wait({call, holder}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():  # timed out, or the session ended: the SDK tells the server to stop
                call.cancel()
        if not call.cancelled() and not _closed(call.exception()):
            return call.result()
        self.ended = self.ended or (call.exception() if not call.cancelled() else None)
        if self._closing.is_set():
            raise MCPServerError(f"the session with the MCP server {self.label} was closed while {name!r} was running")
        raise MCPServerError(f"the MCP server {self.label} exited while {name!r} was running "
                             f"({_why(self.ended)})")

    def close(self) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._closing.set)
        if self.session is None:
            self._holder.cancel()  # still starting (or stuck at it): nothing to close politely
        with contextlib.suppress(BaseException):
            self._holder.result(10)
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


#: JSON-RPC's "connection closed" (the SDK's CONNECTION_CLOSED): the server's end of the pipe is gone.
_CONNECTION_CLOSED = -32000


def _closed(exc: BaseException | None) -> bool:
    """Whether a call failed because the server went away, not because the tool failed."""
    error = getattr(exc, "error", None)  # mcp 1 wraps ErrorData; mcp 2 has the code itself
    code = getattr(exc, "code", None) if error is None else getattr(error, "code", None)
    return exc is not None and (code == _CONNECTION_CLOSED or isinstance(exc, (BrokenPipeError, EOFError)))


def _why(exc: BaseException | None) -> str:
    if exc is None:
        return "not started"
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _result(server: _Server, name: str, result: Any) -> Any:
    """An MCP tool result as the tool's value: structured content (JSON) or the text; an error
    result raises, so the loop reports it to the model as the tool's failure."""
    parts = []
    for item in _field(result, "content") or []:
        text = getattr(item, "text", None)
        kind = " ".join(filter(None, (getattr(item, "type", "content"), _field(item, "mime_type", "mimeType"))))
        parts.append(text if isinstance(text, str) else f"[{kind}]")
    text = "\n".join(parts)
    if _field(result, "is_error", "isError"):
        raise RuntimeError(f"the MCP server {server.label} answered with an error: {text or '(no message)'}")
    structured = _field(result, "structured_content", "structuredContent")
    if structured is None:
        return text
    # Servers send structured content beside a text rendering of it. A text that is not that
    # rendering is the tool's own answer (the SDKs wrap a plain string as {"result": ...}).
    try:
        rendered = json.loads(text) == structured
    except ValueError:
        rendered = not text
    return structured if rendered else text


def _tool(server: _Server, listed: Any, *, timeout: float | None, tags: Iterable[str]) -> Tool:
    name = str(listed.name)
    annotations = _field(listed, "annotations")
    read_only = bool(annotations is not None and _field(annotations, "read_only_hint", "readOnlyHint"))
    # Destructive only when the server says so: MCP's default for an unmarked tool would make
    # every tool of most servers need approval.
    destructive = bool(annotations is not None and not read_only
                       and _field(annotations, "destructive_hint", "destructiveHint") is True)

    def call(**arguments: Any) -> Any:
        return _result(server, name, server.call(name, arguments, timeout))

    spec = {"name": name, "description": str(_field(listed, "description") or ""),
            "parameters": dict(_field(listed, "input_schema", "inputSchema") or {"type": "object", "properties": {}})}
    return Tool.from_schema(spec, call, tags=["mcp", "read" if read_only else "write", *tags],
                            destructive=destructive, timeout=timeout)


class MCPTools(list[Tool]):
    """The tools of one MCP server, as a list of ``Tool``; a context manager that closes the
    session (and stops a stdio server) on exit. ``close()`` does the same."""

    def __init__(self, server: _Server, tools: Iterable[Tool]) -> None:
        super().__init__(tools)
        self._server = server

    @property
    def server(self) -> str:
        return self._server.label

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mcp_tools(command: str | list[str] | None = None, *, url: str | None = None,
              env: Mapping[str, str] | None = None,
              timeout: float | None = DEFAULT_TIMEOUT, tags: Iterable[str] = (),
              start_timeout: float = START_TIMEOUT) -> MCPTools:
    """The tools of an MCP server: started as ``command`` and spoken to over stdio
    (``"python my_server.py"``), or reached at ``url`` over streamable HTTP.

    Each call goes through the server's ``call_tool`` with the loop's timeout (``timeout``),
    approval (tools the server marks ``destructiveHint`` need it), allow-lists (every tool is
    tagged ``mcp``, and ``read`` when the server marks it ``readOnlyHint``, else ``write``; plus
    ``tags``) and retries. Structured results
    come back as JSON, text results as text; an error result is the tool's failure. Use it as a
    context manager, or ``close()`` it, to end the session. Raises ``MCPServerError`` when the
    server cannot be started or listed.
    """
    mcp = _import_mcp()
    if (command is None) == (url is None):
        raise UsageError("mcp_tools takes a command (a stdio server) or url= (streamable HTTP), one of them")
    connect: Callable[[], Any]
    if command is not None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise UsageError("mcp_tools was given an empty command")
        from mcp.client.stdio import stdio_client

        params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], env=dict(env) if env else None)
        label = repr(" ".join(argv))

        def connect() -> Any:
            return stdio_client(params)
    else:
        assert url is not None
        label = url
        connect = _http_connector(url)
    server = _Server(label, connect, start_timeout)
    try:
        return MCPTools(server, [_tool(server, t, timeout=timeout, tags=tags) for t in server.listed])
    except BaseException:
        server.close()
        raise


def _http_connector(url: str) -> Callable[[], Any]:
    """The streamable-HTTP transport under either SDK's name for it (mcp 2, mcp 1)."""
    from mcp.client import streamable_http

    names = ("streamable_http_client", "streamablehttp_client")
    connect = next(getattr(streamable_http, n) for n in names if hasattr(streamable_http, n))
    return lambda: connect(url)
