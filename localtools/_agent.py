"""The loop: generate -> parse -> validate -> execute -> feed results back, until an answer."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ._errors import (
    ApprovalDenied,
    GenerationTruncated,
    MaxStepsExceeded,
    RetryLimitExceeded,
    ToolArgumentsError,
    ToolCallParseError,
    ToolExecutionError,
    ToolNotAllowed,
    ToolTimeout,
    UnknownToolError,
    UsageError,
)
from ._model import Model
from ._parse import ToolCall
from ._tools import Tool, ToolRegistry

__all__ = ["Agent", "CallTrace", "RunResult", "StepTrace"]

Approver = Callable[[ToolCall, Tool], bool | Awaitable[bool]]


@dataclass
class CallTrace:
    id: str
    name: str
    arguments: dict[str, Any]
    ok: bool
    result: str
    error: str | None = None
    seconds: float = 0.0


@dataclass
class StepTrace:
    step: int
    constrained: bool
    tool_choice: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: float = 0.0
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0
    #: More than 1 when a call cut by max_tokens was generated again with a repeat penalty.
    attempts: int = 1
    raw: str = ""
    calls: list[CallTrace] = field(default_factory=list)
    error: str | None = None


@dataclass
class RunResult:
    answer: str
    messages: list[dict[str, Any]]
    trace: list[StepTrace]

    def write_trace(self, path: str | Path) -> None:
        write_trace(self.trace, path)


def write_trace(trace: Sequence[StepTrace], path: str | Path) -> None:
    """One JSON object per step."""
    with Path(path).open("w", encoding="utf-8") as f:
        for step in trace:
            f.write(json.dumps(asdict(step), ensure_ascii=False, default=str) + "\n")


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, ensure_ascii=False, default=str)


async def _run_sync(fn: Callable[[], Any], timeout: float | None) -> Any:
    """Run blocking ``fn`` in a daemon thread: a tool that hangs past its timeout cannot block exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(action: Callable[[], Any]) -> None:
        # RuntimeError: the loop is gone, the call timed out long ago and was reported then.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lambda: future.done() or action())

    def target() -> None:
        try:
            value = fn()
        except BaseException as exc:  # handed to the awaiting side, which reports it
            error = exc  # `exc` is unbound after the block; the callback runs later
            settle(lambda: future.set_exception(error))
        else:
            settle(lambda: future.set_result(value))

    threading.Thread(target=target, daemon=True, name="localtools-tool").start()
    return await asyncio.wait_for(future, timeout)


class Agent:
    """Runs a model with tools until it answers.

    ``allow``: tags a run may use (``None``: all tools). Tools tagged ``destructive`` run only
    when ``approve(call, tool)`` returns true; without an approver they are refused. Parse and
    argument errors go back to the model, at most ``max_retries`` times in a row.
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
        *,
        system: str | None = None,
        max_steps: int = 8,
        max_retries: int = 2,
        constrained: bool = True,
        tool_choice: str = "auto",
        parallel_tool_calls: bool = True,
        max_tokens: int = 512,
        temperature: float = 0.0,
        allow: Sequence[str] | None = None,
        approve: Approver | None = None,
        on_step: Callable[[StepTrace], None] | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.model = model
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        self.system = system
        self.max_steps = max_steps
        self.max_retries = max_retries
        self.constrained = constrained
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.allow = allow
        self.approve = approve
        self.on_step = on_step

    def run(self, question: str | list[dict[str, Any]]) -> RunResult:
        """Synchronous ``arun``; inside a running event loop use ``await agent.arun(...)``."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(question))
        raise UsageError("Agent.run() was called inside an event loop; use 'await agent.arun(...)'")

    async def arun(self, question: str | list[dict[str, Any]]) -> RunResult:
        if isinstance(question, str):
            messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        else:
            messages = [dict(m) for m in question]
        if self.system and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": self.system})
        tools = self.registry.list(self.allow)
        trace: list[StepTrace] = []
        failures = 0
        done_calls: dict[str, str] = {}
        repeated = False
        for step in range(1, self.max_steps + 1):
            # A forced choice applies to the first turn; afterwards the model must be free to answer.
            choice = self.tool_choice if step == 1 or self.tool_choice in ("auto", "none") else "auto"
            if repeated:
                # The model asked again for a result it already has: small models loop like this.
                # It gets the result once more, and this turn must be the answer.
                choice = "none"
            st = StepTrace(step=step, constrained=self.constrained, tool_choice=choice)
            trace.append(st)
            try:
                result = await asyncio.to_thread(
                    self.model.chat,
                    messages,
                    tools,
                    tool_choice=choice,
                    parallel_tool_calls=self.parallel_tool_calls,
                    constrained=self.constrained,
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                )
            except (ToolCallParseError, GenerationTruncated) as exc:
                st.error, st.raw = str(exc), exc.raw
                failures += 1
                self._notify(st)
                if failures > self.max_retries:
                    raise RetryLimitExceeded(
                        f"the model produced no usable reply after {failures} tries: {exc}", messages, trace
                    ) from exc
                messages.append({"role": "assistant", "content": exc.raw})
                messages.append({"role": "user", "content": _feedback(exc)})
                continue
            st.prompt_tokens, st.completion_tokens = result.prompt_tokens, result.completion_tokens
            st.latency, st.raw = result.latency, result.raw
            st.prompt_seconds, st.decode_seconds = result.prompt_seconds, result.decode_seconds
            st.attempts = result.attempts
            messages.append(result.message())
            if not result.tool_calls:
                self._notify(st)
                return RunResult(answer=result.content, messages=messages, trace=trace)
            # Identical calls (within this turn or repeating an earlier one) run once.
            first: dict[str, ToolCall] = {}
            for c in result.tool_calls:
                if _call_key(c) not in done_calls:
                    first.setdefault(_call_key(c), c)
            outcomes = await asyncio.gather(*(self._execute(c) for c in first.values()))
            executed = dict(zip(first, outcomes, strict=True))
            st.calls = []
            for call in result.tool_calls:
                key = _call_key(call)
                if first.get(key) is call:
                    st.calls.append(executed[key])
                    if executed[key].ok:
                        done_calls[key] = executed[key].result
                elif key in done_calls:
                    note = f"{done_calls[key]}\n(This call was already made; this is its result. Use it to answer.)"
                    st.calls.append(CallTrace(call.id, call.name, call.arguments, True, note, "repeated call"))
                else:  # a duplicate whose first copy failed: same failure, same message
                    twin = executed[key]
                    st.calls.append(CallTrace(call.id, call.name, call.arguments, twin.ok, twin.result, twin.error))
            repeated = any(c.error == "repeated call" for c in st.calls)
            for done in st.calls:
                messages.append({"role": "tool", "tool_call_id": done.id, "name": done.name, "content": done.result})
            self._notify(st)
            rejected = [c for c in st.calls if c.error and c.error.startswith(("invalid", "unknown", "not allowed"))]
            failures = failures + 1 if len(rejected) == len(st.calls) else 0
            if failures > self.max_retries:
                raise RetryLimitExceeded(
                    f"the model kept making invalid calls ({rejected[-1].error})", messages, trace
                )
        raise MaxStepsExceeded(
            f"no final answer after max_steps={self.max_steps} model turns; raise max_steps or check the trace",
            messages,
            trace,
        )

    def _notify(self, st: StepTrace) -> None:
        if self.on_step is not None:
            self.on_step(st)

    async def _execute(self, call: ToolCall) -> CallTrace:
        started = time.perf_counter()

        def done(ok: bool, result: str, error: str | None = None) -> CallTrace:
            return CallTrace(call.id, call.name, call.arguments, ok, result, error, time.perf_counter() - started)

        try:
            tool = self.registry.get(call.name, self.allow)
        except UnknownToolError as exc:
            return done(False, f"Error: {exc}. Call one of the available tools.", "unknown tool")
        except ToolNotAllowed as exc:
            return done(False, f"Error: {exc}.", "not allowed")
        try:
            validated = tool.validate(call.arguments)
        except ToolArgumentsError as exc:
            return done(False, f"Error: {exc}. Fix the arguments and call again.", f"invalid arguments: {exc.details}")
        try:
            if tool.destructive:
                await self._check_approval(call, tool)
            value = await self._invoke(tool, validated)
        except ApprovalDenied as exc:
            return done(False, f"Error: {exc}.", "not approved")
        except ToolTimeout as exc:
            return done(False, f"Error: {exc}.", "timeout")
        except ToolExecutionError as exc:
            return done(False, f"Error: {exc}", "raised")
        return done(True, _to_text(value))

    async def _check_approval(self, call: ToolCall, tool: Tool) -> None:
        if self.approve is None:
            raise ApprovalDenied(f"tool {tool.name!r} is destructive and no approver is configured; it was not run")
        verdict = self.approve(call, tool)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            raise ApprovalDenied(f"the call to {tool.name!r} was not approved; it was not run")

    async def _invoke(self, tool: Tool, validated: dict[str, Any]) -> Any:
        bound = tool.bind(validated)
        try:
            if tool.is_async:
                return await asyncio.wait_for(bound(), tool.timeout)
            return await _run_sync(bound, tool.timeout)
        except TimeoutError:
            raise ToolTimeout(f"tool {tool.name!r} did not finish within {tool.timeout} s") from None
        except Exception as exc:
            raise ToolExecutionError(f"tool {tool.name!r} raised {type(exc).__name__}: {exc}") from exc


def _call_key(call: ToolCall) -> str:
    return call.name + json.dumps(call.arguments, sort_keys=True, default=str)


def _feedback(exc: Exception) -> str:
    if isinstance(exc, GenerationTruncated):
        return "Your tool call was cut off because it was too long. Make a shorter call."
    return f"Your reply could not be read: {exc}. Reply with a valid tool call or a plain answer."
