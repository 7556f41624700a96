"""OpenTelemetry spans for agent runs, after the GenAI semantic conventions.

An ``OpenTelemetry`` observer makes, for each run, an ``invoke_agent`` span; under it a ``chat
{model}`` span for each model turn and an ``execute_tool {name}`` span for each call. The agent
has no event for the start of a turn or a call: their starts are worked out from the durations
the turn and the call report. Prompts, answers, tool arguments and results, and error messages
(which can quote them) are recorded only with ``capture_content=True``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._errors import AgentError, MissingDependency
from ..model._stream import TurnDone
from ..model._turn import ChatResult
from ._agent import ObservedEvent, RunDone, RunFailed, RunStarted, StepDone, ToolResult
from ._trace import CallTrace, StepTrace

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["OTEL_HINT", "OpenTelemetry"]

OTEL_HINT = "pip install 'localtools[otel]'"

log = logging.getLogger("localtools.otel")

#: ``gen_ai.provider.name``: the spans come from localtools, whichever engine runs the model.
PROVIDER = "localtools"


@dataclass
class _Run:
    span: Span
    context: Context
    model: str
    #: When the current turn may have begun (ns): the run's start, then each step's end.
    boundary: int
    #: The current turn's first streamed event (ns), when it streams.
    first_chunk: int | None = None
    #: The current step's turn ended with ``TurnDone`` (at ``turn_end``, ns).
    turn_done: bool = False
    turn_end: int = 0
    #: The current step's calls and when each ``ToolResult`` came: spans once the step ends.
    calls: list[tuple[int, CallTrace]] = field(default_factory=list)
    steps: int = 0
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0


class OpenTelemetry:
    """An agent observer that makes OpenTelemetry spans (``Agent(..., observers=[OpenTelemetry()])``).

    ``tracer_provider``: ``None`` for the global one, which exports nothing until the application
    configures it. ``agent_name``: ``gen_ai.agent.name``, and the run span's name. ``capture_content``:
    also record messages, tool arguments and results, and error messages (off by default: they may
    be sensitive).
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *, agent_name: str | None = None,
                 capture_content: bool = False) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:
            raise MissingDependency(f"OpenTelemetry spans need opentelemetry-api: {OTEL_HINT}") from exc
        from .. import __version__

        self._trace = trace
        self._tracer = trace.get_tracer("localtools", __version__, tracer_provider=tracer_provider)
        self.agent_name = agent_name
        self.capture_content = capture_content
        self._runs: dict[str, _Run] = {}
        # One observer may serve agents running in several threads.
        self._lock = threading.Lock()

    def __call__(self, run_id: str, event: ObservedEvent) -> None:
        now = time.time_ns()
        try:
            with self._lock:
                self._handle(run_id, event, now)
        except Exception:  # telemetry must never break the run it watches
            log.warning("could not record %s of run %s", type(event).__name__, run_id, exc_info=True)

    def _handle(self, run_id: str, event: ObservedEvent, now: int) -> None:
        if isinstance(event, RunStarted):
            self._start_run(run_id, event, now)
            return
        run = self._runs.get(run_id)
        if run is None:  # a run that began before this observer was added
            return
        if isinstance(event, TurnDone):
            self._turn(run, event.result, now)
        elif isinstance(event, ToolResult):
            run.calls.append((now, event.call))
        elif isinstance(event, StepDone):
            self._step_done(run, event.step, now)
        elif isinstance(event, RunDone):
            del self._runs[run_id]
            self._end_calls(run)
            if self.capture_content:
                run.span.set_attribute("gen_ai.output.messages", _json([_output_message(event.result.answer, [], "", run.finish_reason)]))
            self._end_run(run, now)
        elif isinstance(event, RunFailed):
            del self._runs[run_id]
            self._run_failed(run, event.error, now)
        elif run.first_chunk is None:  # a streamed piece of the turn
            run.first_chunk = now

    def _start_run(self, run_id: str, event: RunStarted, now: int) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": event.model,
            "localtools.run.id": run_id,
        }
        if self.agent_name:
            attributes["gen_ai.agent.name"] = self.agent_name
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _json([_input_message(m) for m in event.messages])
        name = f"invoke_agent {self.agent_name}" if self.agent_name else "invoke_agent"
        # No context given: the run is a child of whatever span is current where it was started.
        span = self._tracer.start_span(name, kind=self._trace.SpanKind.INTERNAL, attributes=attributes, start_time=now)
        self._runs[run_id] = _Run(span, self._trace.set_span_in_context(span), event.model, boundary=now)

    def _turn(self, run: _Run, result: ChatResult, now: int) -> None:
        start = max(now - _ns(result.latency), run.boundary)
        span = self._chat_span(run, start)
        span.set_attributes({
            "gen_ai.usage.input_tokens": result.prompt_tokens,
            "gen_ai.usage.output_tokens": result.completion_tokens,
            "gen_ai.response.finish_reasons": [result.finish_reason],
        })
        if run.first_chunk is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", max(0, run.first_chunk - start) / 1e9)
        if self.capture_content:
            message = _output_message(result.content, [c.to_openai() for c in result.tool_calls], result.reasoning,
                                      result.finish_reason)
            span.set_attribute("gen_ai.output.messages", _json([message]))
        span.end(now)
        run.input_tokens += result.prompt_tokens
        run.output_tokens += result.completion_tokens
        run.turn_done, run.turn_end, run.finish_reason = True, now, result.finish_reason

    def _step_done(self, run: _Run, step: StepTrace, now: int) -> None:
        if not run.turn_done and step.error:  # (a resumed run's first step ends with no turn of its own)
            self._unusable_turn(run, step, now)
        self._end_calls(run)
        run.steps += 1
        run.boundary, run.first_chunk, run.turn_done = now, None, False

    def _unusable_turn(self, run: _Run, step: StepTrace, now: int) -> None:
        """A turn whose reply could not be used (fed back to the model, or the end of the run)."""
        start = max(now - _ns(step.latency), run.boundary) if step.latency else run.boundary
        span = self._chat_span(run, start)
        if step.prompt_tokens or step.completion_tokens:
            span.set_attributes({"gen_ai.usage.input_tokens": step.prompt_tokens,
                                 "gen_ai.usage.output_tokens": step.completion_tokens})
        error = step.error or ""
        # StepTrace keeps the message only; the agent raises one of two errors here.
        kind = "GenerationTruncated" if error.startswith("generation hit max_tokens") else "ToolCallParseError"
        self._fail(span, kind, error)
        span.end(now)

    def _chat_span(self, run: _Run, start: int) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": run.model,
            "localtools.step": run.steps + 1,
        }
        return self._tracer.start_span(f"chat {run.model}", run.context, kind=self._trace.SpanKind.CLIENT,
                                       attributes=attributes, start_time=start)

    def _end_calls(self, run: _Run) -> None:
        """The spans of a step's calls. They ran together, right after the turn; their
        ``ToolResult``s come once the slowest is done, so each started the longest duration
        before the first of them."""
        if not run.calls:
            return
        first = run.calls[0][0]
        began = max(first - max(_ns(call.seconds) for _, call in run.calls), run.turn_end)
        for _, call in run.calls:
            self._call_span(run, call, began, min(began + _ns(call.seconds), first))
        run.calls = []

    def _call_span(self, run: _Run, call: CallTrace, start: int, end: int) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "localtools.tool.outcome": call.outcome.value,
            "localtools.tool.cached": call.cached,
            "localtools.tool.attempts": call.attempts,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
            attributes["gen_ai.tool.call.result"] = call.result
        span = self._tracer.start_span(f"execute_tool {call.name}", run.context, kind=self._trace.SpanKind.INTERNAL,
                                       attributes=attributes, start_time=start)
        if not call.ok:
            self._fail(span, call.outcome.name.lower(), call.error or call.outcome.value)
        span.end(end)

    def _run_failed(self, run: _Run, error: BaseException, now: int) -> None:
        self._end_calls(run)
        if isinstance(error, AgentError) and len(error.trace) > run.steps and not run.turn_done:
            # The retries ran out on this turn: it raised before its StepDone.
            self._unusable_turn(run, error.trace[-1], now)
        elif run.first_chunk is not None and not run.turn_done:
            # Stopped while the turn was streaming (an engine error, or the consumer left).
            span = self._chat_span(run, run.boundary)
            self._fail(span, type(error).__qualname__, str(error))
            span.end(now)
        self._fail(run.span, type(error).__qualname__, str(error) or type(error).__qualname__)
        if self.capture_content and isinstance(error, Exception):
            run.span.record_exception(error, timestamp=now)
        self._end_run(run, now)

    def _end_run(self, run: _Run, now: int) -> None:
        run.span.set_attributes({"gen_ai.usage.input_tokens": run.input_tokens, "gen_ai.usage.output_tokens": run.output_tokens,
                                 "localtools.steps": run.steps})
        run.span.end(now)

    def _fail(self, span: Span, error_type: str, message: str) -> None:
        span.set_attribute("error.type", error_type)
        # Messages can quote the model's output or a tool's arguments: content.
        description = message if self.capture_content else error_type
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _input_message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped chat message as the conventions' input message (role and parts)."""
    role = str(message.get("role", "user"))
    if role == "tool":
        part = {"type": "tool_call_response", "id": message.get("tool_call_id"), "result": message.get("content")}
        return {"role": role, "parts": [part]}
    out: dict[str, Any] = {"role": role, "parts": _parts(message.get("content"), message.get("tool_calls") or [],
                                                         str(message.get("reasoning_content") or ""))}
    if message.get("name"):
        out["name"] = message["name"]
    return out


def _output_message(content: Any, tool_calls: list[dict[str, Any]], reasoning: str, finish_reason: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": _parts(content, tool_calls, reasoning), "finish_reason": finish_reason}


def _parts(content: Any, tool_calls: list[dict[str, Any]], reasoning: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": content})
    elif isinstance(content, list):  # OpenAI content parts
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append({"type": "text", "content": item.get("text", "")})
            else:
                parts.append({"type": str(item.get("type", "unknown")) if isinstance(item, dict) else "unknown"})
    for call in tool_calls:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # the model's text as it was
                arguments = json.loads(arguments)
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"), "arguments": arguments})
    return parts
