from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import tc
from pydantic import SecretStr

from localtools import (
    Agent,
    CallContext,
    CallOutcome,
    Model,
    ScriptedBackend,
    Tool,
    ToolExecutionError,
    ToolTimeout,
    ToolUnavailable,
    UsageError,
    tool,
)
from localtools.agent._middleware import (
    Accounting,
    AuditLog,
    Cache,
    CircuitBreaker,
    Next,
    RateLimit,
    Retry,
    RunUsage,
    ToolUsage,
    chain,
)
from localtools.agent._redact import MASK
from localtools.families._parse import ToolCall

# -- helpers --------------------------------------------------------------------------------------


class FakeTime:
    """A clock that moves only when told to, or when ``sleep`` sleeps on it."""

    def __init__(self, now: float = 1000.0, *, advance: bool = True) -> None:
        self.now, self.advance, self.slept = now, advance, list[float]()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.advance:
            self.now += seconds
        await asyncio.sleep(0)  # let other tasks run, as a real sleep would


class Script:
    """A ``call_next`` that raises the errors it is given, in order, then returns ``value``."""

    def __init__(self, *errors: BaseException, value: Any = "result", clock: FakeTime | None = None, seconds: float = 0.0) -> None:
        self.errors, self.value, self.clock, self.seconds = list(errors), value, clock, seconds
        self.calls: list[CallContext] = []
        self.attempts: list[int] = []

    async def __call__(self, ctx: CallContext) -> Any:
        self.calls.append(ctx)
        self.attempts.append(ctx.attempt)
        if self.clock is not None:
            self.clock.now += self.seconds
        if self.errors:
            raise self.errors.pop(0)
        return self.value


def lookup_fn(city: str, days: int = 1) -> str:
    """Look up."""
    return city


def make_tool(name: str = "lookup", *, idempotent: bool = True, fn: Callable[..., Any] = lookup_fn) -> Tool:
    return Tool.from_function(fn, name=name, idempotent=idempotent)


def ctx_for(t: Tool, run_id: str = "run-1", call_id: str = "call-1", **arguments: Any) -> CallContext:
    arguments = arguments or {"city": "Paris"}
    return CallContext(run_id, t, ToolCall(call_id, t.name, arguments), t.validate(arguments))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def agent(replies: list[str], tools: list[Any], **kw: Any) -> Agent:
    return Agent(Model(ScriptedBackend(replies), family="qwen2.5"), tools, **kw)


# -- order ----------------------------------------------------------------------------------------


class Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def __call__(self, ctx: CallContext, call_next: Next) -> Any:
        self.log.append(f"{self.name}>")
        try:
            return await call_next(ctx)
        finally:
            self.log.append(f"<{self.name}")


def test_agent_middleware_runs_outermost_in_order_then_the_tools_then_the_function() -> None:
    log: list[str] = []

    def weather(city: str) -> str:
        """Weather."""
        log.append("fn")
        return "sunny"

    t = Tool.from_function(weather, middleware=[Recorder("tool1", log), Recorder("tool2", log)])
    a = agent([tc("weather", city="Paris"), "It is sunny."], [t], middleware=[Recorder("agent1", log), Recorder("agent2", log)])
    assert a.run("weather?").answer == "It is sunny."
    assert log == ["agent1>", "agent2>", "tool1>", "tool2>", "fn", "<tool2", "<tool1", "<agent2", "<agent1"]


def test_chain_without_middleware_is_the_innermost_call() -> None:
    inner = Script(value=42)
    assert run(chain([], inner)(ctx_for(make_tool()))) == 42


# -- Retry ----------------------------------------------------------------------------------------


def test_retry_backs_off_exponentially_until_a_try_succeeds() -> None:
    clock = FakeTime()
    inner = Script(ToolExecutionError("boom 1"), ToolTimeout("slow 2"), value="done")
    ctx = ctx_for(make_tool())
    assert run(Retry(attempts=3, backoff=0.5, factor=2.0, sleep=clock.sleep)(ctx, inner)) == "done"
    assert inner.attempts == [1, 2, 3] and ctx.attempt == 3
    assert clock.slept == [0.5, 1.0]
    assert ctx.notes["retry_errors"] == ["boom 1", "slow 2"]


def test_retry_raises_the_last_error_when_the_tries_run_out() -> None:
    clock = FakeTime()
    last = ToolExecutionError("third")
    inner = Script(ToolExecutionError("first"), ToolExecutionError("second"), last)
    ctx = ctx_for(make_tool())
    with pytest.raises(ToolExecutionError) as caught:
        run(Retry(attempts=3, sleep=clock.sleep)(ctx, inner))
    assert caught.value is last
    assert inner.attempts == [1, 2, 3] and clock.slept == [0.5, 1.0] and ctx.attempt == 3


def test_retry_delays_are_capped_by_max_backoff() -> None:
    retry = Retry(attempts=6, backoff=1.0, factor=10.0, max_backoff=3.0)
    assert [retry.delay(n) for n in range(1, 6)] == [1.0, 3.0, 3.0, 3.0, 3.0]
    assert [Retry(backoff=0.0).delay(n) for n in (1, 2)] == [0.0, 0.0]


def test_a_tool_not_marked_idempotent_runs_once() -> None:
    clock = FakeTime()
    inner = Script(ToolExecutionError("boom"))
    ctx = ctx_for(make_tool(idempotent=False))
    with pytest.raises(ToolExecutionError):
        run(Retry(attempts=5, sleep=clock.sleep)(ctx, inner))
    assert inner.attempts == [1] and clock.slept == [] and "retry_errors" not in ctx.notes


def test_retry_lets_errors_outside_on_through_at_once() -> None:
    clock = FakeTime()
    inner = Script(ToolUnavailable("open"))
    with pytest.raises(ToolUnavailable):
        run(Retry(sleep=clock.sleep)(ctx_for(make_tool()), inner))
    assert inner.attempts == [1]
    only_timeouts = Script(ToolExecutionError("raised"))
    with pytest.raises(ToolExecutionError):
        run(Retry(on=ToolTimeout, sleep=clock.sleep)(ctx_for(make_tool()), only_timeouts))
    assert only_timeouts.attempts == [1]


@pytest.mark.parametrize("kwargs", [{"attempts": 0}, {"attempts": 2.5}, {"attempts": True}, {"backoff": -1}, {"factor": 0.5},
                                    {"max_backoff": float("inf")}, {"on": ()}, {"on": (ValueError, "x")}])
def test_retry_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        Retry(**kwargs)


def test_flaky_idempotent_tool_succeeds_on_its_second_try_through_the_agent() -> None:
    tries: list[str] = []

    @tool(idempotent=True)
    def forecast(city: str) -> str:
        """Forecast."""
        tries.append(city)
        if len(tries) == 1:
            raise ConnectionError("upstream hiccup")
        return "sunny"

    clock = FakeTime()
    result = agent([tc("forecast", city="Oslo"), "Sunny."], [forecast], middleware=[Retry(sleep=clock.sleep)]).run("weather?")
    call = result.trace[0].calls[0]
    assert call.ok and call.result == "sunny" and call.attempts == 2 and tries == ["Oslo", "Oslo"]
    assert clock.slept == [0.5]
    assert "ConnectionError: upstream hiccup" in call.notes["retry_errors"][0]


def test_a_failing_tool_not_marked_idempotent_is_not_retried_through_the_agent() -> None:
    tries: list[str] = []

    def charge(amount: int) -> str:
        """Charge."""
        tries.append("x")
        raise ConnectionError("gateway down")

    clock = FakeTime()
    result = agent([tc("charge", amount=5), "Failed."], [charge], middleware=[Retry(sleep=clock.sleep)]).run("pay")
    call = result.trace[0].calls[0]
    assert call.outcome is CallOutcome.RAISED and call.attempts == 1 and tries == ["x"] and clock.slept == []


# -- RateLimit ------------------------------------------------------------------------------------


def test_rate_limit_spaces_calls_made_at_the_same_moment() -> None:
    clock = FakeTime(advance=False)
    limit = RateLimit(2, per=1.0, clock=clock, sleep=clock.sleep)
    t = make_tool()
    ctxs = [ctx_for(t) for _ in range(5)]
    for ctx in ctxs:
        run(limit(ctx, Script()))
    assert clock.slept == [1.0, 1.0, 2.0]
    assert [ctx.notes.get("rate_limit_wait") for ctx in ctxs] == [None, None, 1.0, 1.0, 2.0]


def test_rate_limit_waits_only_for_what_is_left_of_the_window() -> None:
    clock = FakeTime()
    limit = RateLimit(1, per=1.0, clock=clock, sleep=clock.sleep)
    t = make_tool()
    run(limit(ctx_for(t), Script()))
    clock.now += 0.25
    second = ctx_for(t)
    run(limit(second, Script()))
    assert second.notes["rate_limit_wait"] == pytest.approx(0.75)
    # The second call started at 1001.0; the third, asked for at once, must wait a whole window.
    assert limit.reserve("lookup") == pytest.approx(1.0)
    clock.now += 10
    assert limit.reserve("lookup") == 0.0


def test_rate_limit_under_concurrency_never_lets_more_than_calls_start_in_a_window() -> None:
    clock = FakeTime(advance=False)
    limit = RateLimit(3, per=2.0, clock=clock, sleep=clock.sleep)
    t = make_tool()
    ctxs = [ctx_for(t, call_id=f"c{i}") for i in range(10)]

    async def all_at_once() -> None:
        await asyncio.gather(*(limit(ctx, Script()) for ctx in ctxs))

    run(all_at_once())
    starts = sorted(clock.now + ctx.notes.get("rate_limit_wait", 0.0) for ctx in ctxs)
    assert [s - clock.now for s in starts] == [0, 0, 0, 2, 2, 2, 4, 4, 4, 6]
    assert all(sum(1 for s in starts if begin <= s < begin + 2.0) <= 3 for begin in starts)


def test_rate_limit_per_tool_or_for_all_tools() -> None:
    clock = FakeTime(advance=False)
    a, b = make_tool("a"), make_tool("b")
    per_tool = RateLimit(1, per=5.0, clock=clock, sleep=clock.sleep)
    run(per_tool(ctx_for(a), Script()))
    run(per_tool(ctx_for(b), Script()))
    assert clock.slept == []
    shared = RateLimit(1, per=5.0, key="all", clock=clock, sleep=clock.sleep)
    run(shared(ctx_for(a), Script()))
    run(shared(ctx_for(b), Script()))
    assert clock.slept == [5.0]


@pytest.mark.parametrize("kwargs", [{"calls": 0}, {"calls": 1, "per": 0}, {"calls": 1, "per": -1}, {"calls": 1, "key": "run"}])
def test_rate_limit_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        RateLimit(**kwargs)


def test_rate_limit_wait_reaches_the_call_trace_through_the_agent() -> None:
    clock = FakeTime(advance=False)

    def ping(n: int) -> int:
        """Ping."""
        return n

    reply = tc("ping", n=1) + "\n" + tc("ping", n=2)
    result = agent([reply, "done"], [ping], middleware=[RateLimit(1, per=10.0, clock=clock, sleep=clock.sleep)]).run("go")
    waits = sorted(c.notes.get("rate_limit_wait", 0.0) for c in result.trace[0].calls)
    assert waits == [0.0, 10.0] and all(c.ok for c in result.trace[0].calls)


# -- Cache ----------------------------------------------------------------------------------------


def test_cache_answers_the_same_arguments_without_calling_the_tool() -> None:
    clock = FakeTime()
    cache = Cache(clock=clock)
    t = make_tool()
    inner = Script(value={"temp": 21})
    first = ctx_for(t, city="Paris", days=2)
    assert run(cache(first, inner)) == {"temp": 21} and not first.cached
    # Same validated arguments in another order, and the default filled in the same way.
    again = CallContext("run-2", t, ToolCall("c2", "lookup", {"days": 2, "city": "Paris"}), {"days": 2, "city": "Paris"})
    assert run(cache(again, inner)) == {"temp": 21} and again.cached
    assert len(inner.calls) == 1
    other = ctx_for(t, city="Rome")
    run(cache(other, inner))
    assert not other.cached and len(inner.calls) == 2 and len(cache) == 2


def test_cache_entries_expire_after_ttl() -> None:
    clock = FakeTime()
    cache = Cache(ttl=10.0, clock=clock)
    t = make_tool()
    inner = Script()
    run(cache(ctx_for(t), inner))
    clock.now += 9.9
    assert run(cache(hit := ctx_for(t), inner)) and hit.cached
    clock.now += 0.1
    run(cache(miss := ctx_for(t), inner))
    assert not miss.cached and len(inner.calls) == 2


def test_cache_evicts_the_oldest_entry_beyond_max_entries() -> None:
    clock = FakeTime()
    cache = Cache(max_entries=2, clock=clock)
    t = make_tool()
    inner = Script()
    for city in ("A", "B", "C"):
        run(cache(ctx_for(t, city=city), inner))
        clock.now += 1
    assert len(cache) == 2
    for city, cached in (("C", True), ("B", True), ("A", False)):
        ctx = ctx_for(t, city=city)
        run(cache(ctx, inner))
        assert ctx.cached is cached, city


def test_cache_passes_tools_not_marked_idempotent_through() -> None:
    cache = Cache(clock=FakeTime())
    t = make_tool(idempotent=False)
    inner = Script()
    for _ in range(2):
        ctx = ctx_for(t)
        run(cache(ctx, inner))
        assert not ctx.cached
    assert len(inner.calls) == 2 and len(cache) == 0


def test_cache_keeps_no_errors() -> None:
    cache = Cache(clock=FakeTime())
    t = make_tool()
    inner = Script(ToolExecutionError("boom"), value="fine")
    with pytest.raises(ToolExecutionError):
        run(cache(ctx_for(t), inner))
    assert len(cache) == 0
    assert run(cache(ctx_for(t), inner)) == "fine"
    assert run(cache(third := ctx_for(t), inner)) == "fine" and third.cached and len(inner.calls) == 2


def test_cache_tells_secret_arguments_apart_and_does_not_keep_them_in_its_keys() -> None:
    @tool(idempotent=True)
    def account(user: str, password: SecretStr) -> str:
        """Account."""
        return user

    cache = Cache(clock=FakeTime())
    inner = Script()
    run(cache(ctx_for(account, user="ann", password="one"), inner))
    run(cache(second := ctx_for(account, user="ann", password="two"), inner))
    run(cache(third := ctx_for(account, user="ann", password="two"), inner))
    assert not second.cached and third.cached and len(inner.calls) == 2
    assert not any("two" in part for key in cache._entries for part in key)


@pytest.mark.parametrize("kwargs", [{"ttl": -1}, {"ttl": 0}, {"ttl": float("nan")}, {"max_entries": 0}])
def test_cache_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        Cache(**kwargs)


def test_a_second_run_is_answered_from_the_cache() -> None:
    runs: list[str] = []

    @tool(idempotent=True)
    def rates(currency: str) -> dict[str, float]:
        """Rates."""
        runs.append(currency)
        return {"EUR": 1.1}

    a = agent([tc("rates", currency="USD"), "1.1", tc("rates", currency="USD"), "1.1 again"], [rates], middleware=[Cache()])
    first, second = a.run("rate?"), a.run("rate again?")
    assert runs == ["USD"]
    assert not first.trace[0].calls[0].cached
    call = second.trace[0].calls[0]
    assert call.cached and call.ok and call.result == '{"EUR": 1.1}'


# -- CircuitBreaker -------------------------------------------------------------------------------


def test_breaker_opens_after_consecutive_failures_and_names_tool_count_and_time() -> None:
    clock = FakeTime()
    breaker = CircuitBreaker(failures=2, reset_after=10.0, clock=clock)
    t = make_tool()
    inner = Script(ToolExecutionError("1"), ToolExecutionError("2"))
    for _ in range(2):
        with pytest.raises(ToolExecutionError):
            run(breaker(ctx_for(t), inner))
    assert breaker.state("lookup") == "open"
    clock.now += 4
    with pytest.raises(ToolUnavailable, match=r"'lookup' is unavailable after 2 failures in a row; it will be tried again in 6\.0 s"):
        run(breaker(ctx_for(t), inner))
    assert len(inner.calls) == 2
    assert breaker.state("other") == "closed"
    run(breaker(ctx_for(make_tool("other")), Script()))


def test_a_success_resets_the_count_of_failures() -> None:
    breaker = CircuitBreaker(failures=2, clock=FakeTime())
    t = make_tool()
    inner = Script(ToolExecutionError("1"))
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), inner))
    run(breaker(ctx_for(t), inner))
    inner.errors = [ToolExecutionError("2")]
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), inner))
    assert breaker.state("lookup") == "closed"


def test_breaker_half_open_trial_success_closes_it() -> None:
    clock = FakeTime()
    breaker = CircuitBreaker(failures=1, reset_after=30.0, clock=clock)
    t = make_tool()
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), Script(ToolExecutionError("down"))))
    clock.now += 30
    assert breaker.state("lookup") == "half-open"
    assert run(breaker(ctx_for(t), Script(value="back"))) == "back"
    assert breaker.state("lookup") == "closed"
    assert run(breaker(ctx_for(t), Script(value="still"))) == "still"


def test_breaker_half_open_trial_failure_reopens_it_for_another_period() -> None:
    clock = FakeTime()
    breaker = CircuitBreaker(failures=1, reset_after=30.0, clock=clock)
    t = make_tool()
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), Script(ToolExecutionError("down"))))
    clock.now += 31
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), Script(ToolExecutionError("still down"))))
    assert breaker.state("lookup") == "open"
    clock.now += 29.5
    with pytest.raises(ToolUnavailable, match=r"after 2 failures in a row; it will be tried again in 0\.5 s"):
        run(breaker(ctx_for(t), Script()))


def test_breaker_lets_one_trial_through_at_a_time_and_a_cancelled_trial_frees_it() -> None:
    clock = FakeTime()
    breaker = CircuitBreaker(failures=1, reset_after=5.0, clock=clock)
    t = make_tool()
    with pytest.raises(ToolExecutionError):
        run(breaker(ctx_for(t), Script(ToolExecutionError("down"))))
    clock.now += 5

    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(ctx: CallContext) -> str:
            await release.wait()
            return "ok"

        trial = asyncio.ensure_future(breaker(ctx_for(t), slow))
        await asyncio.sleep(0)
        with pytest.raises(ToolUnavailable, match="a trial call is running now"):
            await breaker(ctx_for(t), Script())
        trial.cancel()
        with pytest.raises(asyncio.CancelledError):
            await trial
        assert breaker.state("lookup") == "half-open"  # the cancelled trial was no failure
        second = asyncio.ensure_future(breaker(ctx_for(t), slow))
        await asyncio.sleep(0)
        release.set()
        assert await second == "ok"

    run(scenario())
    assert breaker.state("lookup") == "closed"


def test_breaker_reset() -> None:
    breaker = CircuitBreaker(failures=1, clock=FakeTime())
    for name in ("a", "b"):
        with pytest.raises(ToolExecutionError):
            run(breaker(ctx_for(make_tool(name)), Script(ToolExecutionError("x"))))
    breaker.reset("a")
    assert (breaker.state("a"), breaker.state("b")) == ("closed", "open")
    breaker.reset()
    assert breaker.state("b") == "closed"


@pytest.mark.parametrize("kwargs", [{"failures": 0}, {"reset_after": -1}])
def test_breaker_refuses_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        CircuitBreaker(**kwargs)


def test_an_open_breaker_is_an_unavailable_outcome_the_model_is_told_about() -> None:
    def broken(x: int) -> int:
        """Broken."""
        raise RuntimeError("disk on fire")

    a = agent([tc("broken", x=1), tc("broken", x=2), "It is down."], [broken], middleware=[CircuitBreaker(failures=1)])
    result = a.run("go")
    assert [step.calls[0].outcome for step in result.trace[:2]] == [CallOutcome.RAISED, CallOutcome.UNAVAILABLE]
    message = result.messages[4]["content"]
    assert "'broken' is unavailable after 1 failure in a row" in message and "Do not call it again now" in message
    assert result.answer == "It is down."


# -- Accounting -----------------------------------------------------------------------------------


def test_accounting_counts_calls_seconds_and_cost_per_tool_and_in_total() -> None:
    clock = FakeTime()
    accounting = Accounting({"lookup": 0.5, "search": 2.0}, clock=clock)
    calls = chain([accounting, Cache(clock=clock)], Script(ToolExecutionError("boom"), clock=clock, seconds=1.5))
    lookup, search = make_tool("lookup"), make_tool("search", idempotent=False)
    with pytest.raises(ToolExecutionError):
        run(calls(ctx_for(lookup, city="A")))  # failed: 1.5 s, charged
    run(calls(ctx_for(lookup, city="A")))  # ran: 1.5 s, charged
    run(calls(ctx_for(lookup, city="A")))  # cached: no time, no charge
    run(calls(ctx_for(search, city="A")))
    run(calls(ctx_for(search, run_id="run-2", city="A")))
    usage = accounting.report("run-1")
    assert (usage.calls, usage.failures, usage.cached) == (4, 1, 1)
    assert usage.seconds == pytest.approx(4.5) and usage.cost == pytest.approx(3.0)
    assert usage.by_tool == {"lookup": ToolUsage(calls=3, failures=1, cached=1, seconds=3.0, cost=1.0),
                             "search": ToolUsage(calls=1, seconds=1.5, cost=2.0)}
    assert accounting.report("run-2").calls == 1 and sorted(accounting.runs()) == ["run-1", "run-2"]


def test_accounting_reports_are_copies_and_runs_can_be_forgotten() -> None:
    accounting = Accounting(lambda ctx: 0.25 * ctx.attempt, clock=FakeTime())
    run(accounting(ctx_for(make_tool()), Script()))
    report = accounting.report("run-1")
    report.by_tool["lookup"].calls = 99
    assert accounting.report("run-1").by_tool["lookup"].calls == 1 and report.cost == 0.25
    assert accounting.pop("run-1").calls == 1
    assert accounting.report("run-1") == RunUsage() and accounting.runs() == []
    run(accounting(ctx_for(make_tool(), run_id="a"), Script()))
    run(accounting(ctx_for(make_tool(), run_id="b"), Script()))
    accounting.reset("a")
    assert accounting.runs() == ["b"]
    accounting.reset()
    assert accounting.runs() == []


@pytest.mark.parametrize("cost", [{"lookup": -1.0}, {"lookup": "free"}, 3.0])
def test_accounting_refuses_bad_prices(cost: Any) -> None:
    with pytest.raises(UsageError):
        Accounting(cost)


def test_accounting_through_the_agent_is_kept_by_run_id() -> None:
    accounting = Accounting({"weather": 0.01})

    def weather(city: str) -> str:
        """Weather."""
        return "sunny"

    reply = tc("weather", city="Paris") + "\n" + tc("weather", city="Rome")
    result = agent([reply, "Sunny in both."], [weather], middleware=[accounting]).run("weather?")
    usage = accounting.report(result.run_id)
    assert usage.calls == 2 and usage.cost == pytest.approx(0.02) and usage.by_tool["weather"].calls == 2
    assert usage.seconds > 0


# -- AuditLog -------------------------------------------------------------------------------------


def test_audit_log_writes_one_redacted_line_per_call_with_its_outcome(tmp_path: Path) -> None:
    @tool
    def login(user: str, password: SecretStr, api_key: str = "", note: str = "") -> str:
        """Log in."""
        return "ok"

    path = tmp_path / "audit.jsonl"
    clock = FakeTime()
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    log = AuditLog(path, clock=clock, now=lambda: moment)
    unexpected = RuntimeError("middleware bug")
    errors: list[BaseException] = [ToolTimeout("too slow"), ToolExecutionError("it raised"), ToolUnavailable("open"), unexpected]
    inner = Script(*errors, value="welcome", clock=clock, seconds=0.25)
    arguments = {"user": "ann", "password": "hunter2", "api_key": "k-123", "note": "café"}
    for i, error in enumerate(errors):
        with pytest.raises(type(error)) as caught:
            run(log(ctx_for(login, call_id=f"call-{i}", **arguments), inner))
        assert caught.value is error  # passed on unchanged
    assert run(log(ctx_for(login, call_id="call-4", **arguments), inner)) == "welcome"
    text = path.read_text(encoding="utf-8")
    assert "hunter2" not in text and "k-123" not in text and "café" in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["outcome"] for line in lines] == ["timeout", "raised", "unavailable", "RuntimeError", "ok"]
    assert {line["outcome"] for line in lines if line["outcome"] != "RuntimeError"} <= {o.value for o in CallOutcome}
    assert [line["error"] for line in lines] == ["too slow", "it raised", "open", "middleware bug", None]
    assert lines[-1] == {"time": "2025-01-02T01:04:05+00:00", "run_id": "run-1", "call_id": "call-4", "tool": "login",
                         "arguments": {"user": "ann", "password": MASK, "api_key": MASK, "note": "café"},
                         "outcome": "ok", "error": None, "seconds": 0.25, "attempt": 1, "cached": False}
    assert datetime.fromisoformat(lines[0]["time"]).tzinfo == UTC


def test_audit_log_sees_attempts_and_cache_hits_of_the_middleware_inside_it(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    clock = FakeTime()
    calls = chain([AuditLog(path), Cache(clock=clock), Retry(sleep=clock.sleep)], Script(ToolExecutionError("flaky")))
    t = make_tool()
    run(calls(ctx_for(t)))
    run(calls(ctx_for(t)))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["attempt"], line["cached"], line["outcome"]) for line in lines] == [(2, False, "ok"), (1, True, "ok")]


def test_audit_log_lines_from_concurrent_calls_stay_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, redact_keys=["city"])
    t = make_tool()

    async def many() -> None:
        await asyncio.gather(*(log(ctx_for(t, call_id=f"c{i}", city="x" * 5000), Script()) for i in range(50)))

    run(many())
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(line["call_id"] for line in lines) == sorted(f"c{i}" for i in range(50))
    assert all(line["arguments"] == {"city": MASK} for line in lines)


def test_audit_log_needs_an_existing_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        AuditLog(tmp_path / "missing" / "audit.jsonl")


def test_audit_log_through_the_agent_matches_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"

    def send(to: str, token: str) -> str:
        """Send."""
        return "sent"

    result = agent([tc("send", to="bob", token="tok-1"), "Sent."], [send], middleware=[AuditLog(path)]).run("send")
    [line] = [json.loads(line) for line in path.read_text().splitlines()]
    call = result.trace[0].calls[0]
    assert (line["run_id"], line["call_id"], line["tool"]) == (result.run_id, call.id, "send")
    assert line["arguments"] == {"to": "bob", "token": MASK} and line["outcome"] == call.outcome.value == "ok"


# -- composed -------------------------------------------------------------------------------------


def test_the_documented_stack_composes(tmp_path: Path) -> None:
    tries: list[str] = []

    @tool(idempotent=True)
    def quote(symbol: str) -> float:
        """Quote."""
        tries.append(symbol)
        if len(tries) == 1:
            raise ConnectionError("reset")
        return 101.5

    clock = FakeTime()
    accounting = Accounting({"quote": 0.1})
    stack = [AuditLog(tmp_path / "audit.jsonl"), accounting, Cache(), CircuitBreaker(), Retry(sleep=clock.sleep),
             RateLimit(10, per=1.0, sleep=clock.sleep)]
    a = agent([tc("quote", symbol="ACME"), "101.5", tc("quote", symbol="ACME"), "101.5"], [quote], middleware=stack)
    first, second = a.run("price?"), a.run("price again?")
    assert first.trace[0].calls[0].attempts == 2 and second.trace[0].calls[0].cached and tries == ["ACME", "ACME"]
    assert accounting.report(first.run_id).cost == pytest.approx(0.1) and accounting.report(second.run_id).cost == 0.0
    outcomes = [json.loads(line)["outcome"] for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert outcomes == ["ok", "ok"]
