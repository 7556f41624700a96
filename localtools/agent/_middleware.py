"""Execution middleware: what wraps a tool call between its validation and the tool function.

A middleware is ``async (ctx, call_next) -> result``: it may act before and after
``await call_next(ctx)``, answer without calling it, or call it again. The agent's own
middleware runs outermost, in the order given, then the tool's, then the tool's timeout and
function. Errors are typed: ``ToolTimeout``, ``ToolExecutionError``, ``ToolUnavailable``.

Built in: ``Retry``, ``RateLimit``, ``Cache``, ``CircuitBreaker``, ``Accounting``, ``AuditLog``.
Each takes its clock (and ``sleep``) as arguments, so tests need not wait. One instance may
serve many calls and runs at once; a sensible order, outermost first, is
``[AuditLog(...), Accounting(), Cache(), CircuitBreaker(), Retry(), RateLimit(...)]``: the log
and the bill see each call once, a cached answer skips the rest, the breaker counts calls that
failed after their retries, and the rate limit spaces every try.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, SecretBytes, SecretStr

from .._errors import ToolExecutionError, ToolTimeout, ToolUnavailable, UsageError
from ..families._parse import ToolCall
from ..tools._tools import Tool
from ._redact import DEFAULT_SENSITIVE_KEYS, MASK, redact
from ._trace import CallOutcome, outcome_of

__all__ = [
    "Accounting",
    "AuditLog",
    "Cache",
    "CallContext",
    "CircuitBreaker",
    "Middleware",
    "Next",
    "RateLimit",
    "Retry",
    "RunUsage",
    "ToolUsage",
    "chain",
]

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]


@dataclass
class CallContext:
    """One call on its way to the tool function."""

    run_id: str
    tool: Tool
    call: ToolCall
    #: The validated arguments the function receives.
    arguments: dict[str, Any]
    #: 1 for the first try; a retry middleware counts up.
    attempt: int = 1
    #: Set by a cache that answered without running the tool.
    cached: bool = False
    #: Free-form facts a middleware records for the trace (e.g. seconds waited for a rate limit).
    notes: dict[str, Any] = field(default_factory=dict)


Next = Callable[[CallContext], Awaitable[Any]]


class Middleware(Protocol):
    async def __call__(self, ctx: CallContext, call_next: Next) -> Any: ...


def chain(middleware: Sequence[Middleware], innermost: Next) -> Next:
    """``middleware[0]`` outermost, ``innermost`` last."""
    call = innermost
    for mw in reversed(middleware):
        call = _bind(mw, call)
    return call


def _bind(mw: Middleware, call_next: Next) -> Next:
    async def run(ctx: CallContext) -> Any:
        return await mw(ctx, call_next)

    return run


# -- Retry ----------------------------------------------------------------------------------------
class Retry:
    """Runs a failed call of an idempotent tool again, up to ``attempts`` tries in all.

    Only errors of the types ``on`` are retried; the last one is raised. Before try ``n + 1`` it
    waits ``min(backoff * factor ** (n - 1), max_backoff)`` seconds. A tool not marked idempotent
    runs once: running it twice might do its work twice. ``ctx.attempt`` counts the tries;
    ``ctx.notes["retry_errors"]`` keeps the errors of the tries that failed.
    """

    def __init__(self, attempts: int = 3, *, backoff: float = 0.5, factor: float = 2.0, max_backoff: float = 10.0,
                 on: type[BaseException] | tuple[type[BaseException], ...] = (ToolExecutionError, ToolTimeout),
                 sleep: Sleep = asyncio.sleep) -> None:
        _check_int("attempts", attempts, 1)
        _check_number("backoff", backoff, 0)
        _check_number("factor", factor, 1)
        _check_number("max_backoff", max_backoff, 0)
        errors = on if isinstance(on, tuple) else (on,)
        if not errors or not all(isinstance(e, type) and issubclass(e, BaseException) for e in errors):
            raise UsageError(f"Retry(on=...) takes exception classes, got {on!r}")
        self.attempts, self.backoff, self.factor, self.max_backoff = attempts, backoff, factor, max_backoff
        self.on = errors
        self.sleep = sleep

    def delay(self, attempt: int) -> float:
        """Seconds to wait after try ``attempt`` failed."""
        return float(min(self.backoff * self.factor ** (attempt - 1), self.max_backoff))

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        if not ctx.tool.idempotent:
            return await call_next(ctx)
        for attempt in range(1, self.attempts + 1):
            ctx.attempt = attempt
            try:
                return await call_next(ctx)
            except self.on as exc:
                if attempt == self.attempts:
                    raise
                ctx.notes.setdefault("retry_errors", []).append(str(exc))
            await self.sleep(self.delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover


# -- RateLimit ------------------------------------------------------------------------------------
class RateLimit:
    """At most ``calls`` calls start in any ``per`` seconds; a call over the limit waits its turn.

    ``key="tool"`` limits each tool apart, ``"all"`` every call together. Each call reserves its
    start time before it sleeps, so calls run at once (the agent runs a turn's calls together)
    queue up in order. The seconds waited are added to ``ctx.notes["rate_limit_wait"]``. A call
    cancelled while it waits keeps its slot.
    """

    def __init__(self, calls: int, per: float = 1.0, *, key: Literal["tool", "all"] = "tool", clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        _check_int("calls", calls, 1)
        _check_number("per", per, 0, strict=True)
        if key not in ("tool", "all"):
            raise UsageError(f"RateLimit(key=...) is 'tool' or 'all', got {key!r}")
        self.calls, self.per, self.key = calls, per, key
        self.clock, self.sleep = clock, sleep
        # The start times of the last `calls` calls of each key, some of them in the future.
        self._starts: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def reserve(self, name: str) -> float:
        """Books the next start for a call of tool ``name``; returns the seconds until then."""
        with self._lock:
            now = self.clock()
            starts = self._starts.setdefault(name if self.key == "tool" else "", deque(maxlen=self.calls))
            start = max(now, starts[0] + self.per) if len(starts) == self.calls else now
            starts.append(start)
            return start - now

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        wait = self.reserve(ctx.tool.name)
        if wait > 0:
            ctx.notes["rate_limit_wait"] = ctx.notes.get("rate_limit_wait", 0.0) + wait
            await self.sleep(wait)
        return await call_next(ctx)


# -- Cache ----------------------------------------------------------------------------------------
class Cache:
    """Answers a repeated call of an idempotent tool with the result it had, for ``ttl`` seconds.

    The key is the tool's name and its validated arguments as canonical JSON (secrets in
    pydantic ``SecretStr`` fields count by their value; the key is kept as a hash). Only results
    are kept, never errors. Beyond ``max_entries`` the oldest stored result goes first. A hit
    sets ``ctx.cached`` and skips everything inside this middleware; the result object is shared
    between the calls it answers, not copied.
    """

    def __init__(self, ttl: float = 300.0, max_entries: int = 1024, *, clock: Clock = time.monotonic) -> None:
        _check_number("ttl", ttl, 0, strict=True)
        _check_int("max_entries", max_entries, 1)
        self.ttl, self.max_entries, self.clock = ttl, max_entries, clock
        # Stored in insertion order, which is also expiry order: the front expires first.
        self._entries: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        if not ctx.tool.idempotent:
            return await call_next(ctx)
        key = (ctx.tool.name, _canonical_arguments(ctx.arguments, digest=True))
        with self._lock:
            self._expire(self.clock())
            if key in self._entries:
                ctx.cached = True
                return self._entries[key][1]
        value = await call_next(ctx)
        with self._lock:
            now = self.clock()
            self._entries.pop(key, None)
            self._entries[key] = (now + self.ttl, value)
            self._expire(now)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def _expire(self, now: float) -> None:
        while self._entries and next(iter(self._entries.values()))[0] <= now:
            self._entries.popitem(last=False)


def _canonical_arguments(arguments: Mapping[str, Any], *, digest: bool = False) -> str:
    """Validated arguments as canonical JSON (sorted keys, no spaces); ``digest``: its SHA-256."""
    text = json.dumps(_plain(arguments), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() if digest else text


def _plain(value: Any) -> Any:
    """JSON-ready data from validated arguments; ``str()`` would show every secret as '**********'."""
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, SecretStr | SecretBytes):
        return _plain(value.get_secret_value())
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True, default=str))
    return value


# -- CircuitBreaker -------------------------------------------------------------------------------
@dataclass
class _Circuit:
    failures: int = 0
    #: When the open circuit lets a trial call through; None while closed.
    retry_at: float | None = None
    trial_running: bool = False


class CircuitBreaker:
    """Stops calling a tool that keeps failing.

    After ``failures`` calls of a tool in a row raised, the circuit opens: its calls raise
    ``ToolUnavailable`` at once (the agent tells the model, ``CallOutcome.UNAVAILABLE``). After
    ``reset_after`` seconds one trial call goes through (half-open): if it succeeds the circuit
    closes, if it fails it opens again for ``reset_after`` seconds. Circuits are per tool name.
    """

    def __init__(self, failures: int = 5, reset_after: float = 30.0, *, clock: Clock = time.monotonic) -> None:
        _check_int("failures", failures, 1)
        _check_number("reset_after", reset_after, 0)
        self.failures, self.reset_after, self.clock = failures, reset_after, clock
        self._circuits: dict[str, _Circuit] = {}
        self._lock = threading.Lock()

    def state(self, tool: str) -> Literal["closed", "open", "half-open"]:
        """``"half-open"``: the next call (or the one running) is the trial."""
        with self._lock:
            circuit = self._circuits.get(tool)
            if circuit is None or circuit.retry_at is None:
                return "closed"
            return "half-open" if circuit.trial_running or self.clock() >= circuit.retry_at else "open"

    def reset(self, tool: str | None = None) -> None:
        """Closes ``tool``'s circuit (``None``: every circuit)."""
        with self._lock:
            if tool is None:
                self._circuits.clear()
            else:
                self._circuits.pop(tool, None)

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        name = ctx.tool.name
        trial = False
        with self._lock:
            circuit = self._circuits.setdefault(name, _Circuit())
            if circuit.retry_at is not None:
                now = self.clock()
                if circuit.trial_running or now < circuit.retry_at:
                    raise ToolUnavailable(self._refusal(name, circuit, now))
                circuit.trial_running = trial = True
        try:
            value = await call_next(ctx)
        except BaseException as exc:
            with self._lock:
                circuit.trial_running = circuit.trial_running and not trial
                # A cancelled call says nothing about the tool; a cancelled trial leaves the next call to try.
                if isinstance(exc, Exception):
                    circuit.failures += 1
                    # A call that started before the circuit opened does not move the reopening time.
                    if trial or (circuit.retry_at is None and circuit.failures >= self.failures):
                        circuit.retry_at = self.clock() + self.reset_after
            raise
        with self._lock:
            circuit.trial_running = circuit.trial_running and not trial
            if trial or circuit.retry_at is None:
                circuit.failures, circuit.retry_at = 0, None
        return value

    def _refusal(self, name: str, circuit: _Circuit, now: float) -> str:
        when = ("a trial call is running now" if circuit.trial_running
                else f"it will be tried again in {max(0.0, (circuit.retry_at or now) - now):.1f} s")
        failures = f"{circuit.failures} failure" + ("s" if circuit.failures != 1 else "")
        return f"tool {name!r} is unavailable after {failures} in a row; {when}"


# -- Accounting -----------------------------------------------------------------------------------
@dataclass
class ToolUsage:
    """What one tool's calls took: failed and cached calls are among ``calls``."""

    calls: int = 0
    failures: int = 0
    cached: int = 0
    seconds: float = 0.0
    cost: float = 0.0

    def _add(self, seconds: float, cost: float, failed: bool, cached: bool) -> None:
        self.calls += 1
        self.failures += failed
        self.cached += cached
        self.seconds += seconds
        self.cost += cost


@dataclass
class RunUsage(ToolUsage):
    """One run's totals, and the same per tool name in ``by_tool``."""

    by_tool: dict[str, ToolUsage] = field(default_factory=dict)


class Accounting:
    """Counts each run's tool calls, their wall seconds and their cost, per tool and in total.

    ``cost``: a price per call by tool name (a call answered from a cache costs nothing), or a
    function of the finished call's context. Calls that raised count too. Place it inside
    ``Retry`` to count each try as a call. Usage is kept per run id until ``pop`` or ``reset``:
    in a long-lived process call ``accounting.pop(result.run_id)`` after each run.
    """

    def __init__(self, cost: Mapping[str, float] | Callable[[CallContext], float] | None = None, *,
                 clock: Clock = time.perf_counter) -> None:
        if isinstance(cost, Mapping):
            for tool, price in cost.items():
                _check_number(f"cost[{tool!r}]", price, 0)
        elif cost is not None and not callable(cost):
            raise UsageError(f"Accounting(cost=...) takes a mapping of tool name to price or a function, got {cost!r}")
        self.cost, self.clock = cost, clock
        self._runs: dict[str, RunUsage] = {}
        self._lock = threading.Lock()

    def report(self, run_id: str) -> RunUsage:
        """A copy of the run's usage so far (all zeros for a run not seen)."""
        with self._lock:
            usage = self._runs.get(run_id, RunUsage())
            return replace(usage, by_tool={name: replace(u) for name, u in usage.by_tool.items()})

    def pop(self, run_id: str) -> RunUsage:
        """The run's usage, forgotten here."""
        with self._lock:
            return self._runs.pop(run_id, RunUsage())

    def reset(self, run_id: str | None = None) -> None:
        """Forgets one run's usage (``None``: every run's)."""
        with self._lock:
            if run_id is None:
                self._runs.clear()
            else:
                self._runs.pop(run_id, None)

    def runs(self) -> list[str]:
        """The run ids with usage kept."""
        with self._lock:
            return list(self._runs)

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        started = self.clock()
        failed = True
        try:
            value = await call_next(ctx)
            failed = False
            return value
        finally:
            seconds = self.clock() - started
            cost = self._price(ctx)
            with self._lock:
                usage = self._runs.setdefault(ctx.run_id, RunUsage())
                usage._add(seconds, cost, failed, ctx.cached)
                usage.by_tool.setdefault(ctx.tool.name, ToolUsage())._add(seconds, cost, failed, ctx.cached)

    def _price(self, ctx: CallContext) -> float:
        if self.cost is None:
            return 0.0
        if isinstance(self.cost, Mapping):
            return 0.0 if ctx.cached else float(self.cost.get(ctx.tool.name, 0.0))
        return float(self.cost(ctx))


# -- AuditLog -------------------------------------------------------------------------------------
class AuditLog:
    """Appends one JSON line per call to ``path``: ``time`` (ISO 8601, UTC, when it started),
    ``run_id``, ``call_id``, ``tool``, ``arguments`` (as the model sent them, sensitive fields
    masked: see ``localtools.agent._redact``), ``outcome`` (``"ok"``, or ``"timeout"``, ``"raised"``,
    ``"unavailable"``, ... as in ``CallOutcome``; an error of another type by its class name),
    ``error`` (its message or null), ``seconds``, ``attempt`` and ``cached``. Errors pass through
    unchanged. Results are not logged.
    """

    def __init__(self, path: str | os.PathLike[str], *, redact_keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS,
                 mask: str = MASK, clock: Clock = time.perf_counter,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise UsageError(f"AuditLog: the folder {str(self.path.parent)!r} does not exist")
        self.redact_keys = (redact_keys,) if isinstance(redact_keys, str) else tuple(redact_keys)
        self.mask, self.clock, self.now = mask, clock, now
        # Lines from concurrent calls (and from agents on other threads) must not interleave.
        self._lock = threading.Lock()

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        when = self.now().astimezone(UTC).isoformat()
        started = self.clock()
        try:
            value = await call_next(ctx)
        except BaseException as exc:
            # The call's outcome as the trace has it; a cancelled call, or an error no outcome names, by its kind.
            known = outcome_of(exc)
            outcome = known.value if known else "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
            self._write(ctx, when, self.clock() - started, outcome, str(exc) or type(exc).__name__)
            raise
        self._write(ctx, when, self.clock() - started, CallOutcome.OK.value, None)
        return value

    def _write(self, ctx: CallContext, when: str, seconds: float, outcome: str, error: str | None) -> None:
        record = {
            "time": when,
            "run_id": ctx.run_id,
            "call_id": ctx.call.id,
            "tool": ctx.tool.name,
            "arguments": redact(ctx.call.arguments, schema=ctx.tool.parameters, keys=self.redact_keys, mask=self.mask),
            "outcome": outcome,
            "error": error,
            "seconds": round(seconds, 6),
            "attempt": ctx.attempt,
            "cached": ctx.cached,
        }
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line)


# -- argument checks ------------------------------------------------------------------------------
def _check_int(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"{name} must be a whole number of at least {least}, got {value!r}")


def _check_number(name: str, value: Any, least: float, *, strict: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < least or (strict and value == least):
        bound = f"more than {least}" if strict else f"at least {least}"
        raise UsageError(f"{name} must be a finite number {bound}, got {value!r}")
