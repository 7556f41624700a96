"""The loop: generate -> parse -> validate -> execute -> feed results back, until an answer."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._errors import (
    ApprovalDenied,
    DisguisedCall,
    GenerationTruncated,
    MaxStepsExceeded,
    RetryLimitExceeded,
    SchemaViolation,
    ToolArgumentsError,
    ToolCallParseError,
    ToolExecutionError,
    ToolNotAllowed,
    ToolTimeout,
    UnknownToolError,
    UsageError,
)
from ..families._parse import ToolCall, call_key, new_call_id
from ..families._prompt import Prompt, with_system
from ..model._model import Model
from ..model._stream import StreamEvent, TurnDone, relay
from ..model._turn import ChatResult
from ..tools._tools import Tool, ToolRegistry
from ._context import ContextBudget
from ._memory import Memory
from ._middleware import CallContext, Middleware, chain
from ._redact import redact_json
from ._results import Full, ResultContext, ResultPolicy, shape
from ._routing import Router
from ._runfile import Pending, Replay, RunLog, replay, tool_message
from ._trace import CallOutcome, CallTrace, StepTrace, outcome_of

__all__ = ["Agent", "AgentEvent", "CallOutcome", "CallTrace", "Observer", "RunDone", "RunFailed", "RunResult", "RunStarted",
           "StepDone", "StepTrace", "ToolResult"]

Approver = Callable[[ToolCall, Tool], bool | Awaitable[bool]]
_log = logging.getLogger("localtools")
#: Told to the model with ``Agent(cite=True)``.
CITE_HINT = ("Each tool result begins with its id in brackets, like [r1]. When your answer uses a result, "
             "cite its id in brackets.")
_CITE = re.compile(r"\[(r\d+)\]")
#: On by default: it costs one render per turn until a prompt would overflow.
DEFAULT_BUDGET = ContextBudget()


@dataclass
class RunResult:
    answer: str
    messages: list[dict[str, Any]]
    trace: list[StepTrace]
    run_id: str = ""

    @property
    def citations(self) -> dict[str, CallTrace]:
        """The results the answer cites by their short ids (``Agent(cite=True)``), by id."""
        refs = {c.ref: c for s in self.trace for c in s.calls if c.ref}
        return {ref: refs[ref] for ref in dict.fromkeys(_CITE.findall(self.answer)) if ref in refs}

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
        thinking: bool | None = None,
        reasoning_budget: int | None = None,
        middleware: Sequence[Middleware] = (),
        observers: Sequence[Observer] = (),
        router: Router | None = None,
        context: ContextBudget | None = DEFAULT_BUDGET,
        memory: Memory | None = None,
        result: ResultPolicy | None = None,
        redact: bool | Callable[[str, Tool], str] = False,
        cite: bool = False,
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
        self.thinking = thinking
        self.reasoning_budget = reasoning_budget
        self.middleware = list(middleware)
        self.observers = list(observers)
        self.router = router
        self.context = context
        self.memory = memory
        self.result: ResultPolicy = result if result is not None else Full()
        self.redact = redact
        self.cite = cite

    def run(self, question: str | list[dict[str, Any]], *, run_file: str | Path | None = None) -> RunResult:
        """Synchronous ``arun``; inside a running event loop use ``await agent.arun(...)``."""
        return _sync(self.arun(question, run_file=run_file), "run")

    def resume(self, run_file: str | Path) -> RunResult:
        """Synchronous ``aresume``."""
        return _sync(self.aresume(run_file), "resume")

    async def arun(self, question: str | list[dict[str, Any]], *, run_file: str | Path | None = None) -> RunResult:
        """Run until the model answers. ``run_file``: a new file the run's state is written to as
        it happens (every turn, each call before it runs and after), so ``resume`` can continue it
        if the process dies."""
        return await _result_of(self._steps(question, live=False, run_file=run_file))

    async def aresume(self, run_file: str | Path) -> RunResult:
        """Continue the run written to ``run_file`` by an agent with the same tools: calls that
        finished are not run again; calls of the interrupted turn that did not finish, or failed
        in the tool (raised, timed out, unavailable), run again; then the loop goes on, within the
        same ``max_steps``. A run that had ended returns its answer."""
        return await _result_of(self._steps(None, live=False, resume_from=run_file))

    async def astream(self, question: str | list[dict[str, Any]], *,
                      run_file: str | Path | None = None) -> AsyncIterator[AgentEvent]:
        """``arun`` as events while it runs: each model turn's (see ``Model.stream``; a turn
        ends with ``TurnDone``), a ``ToolResult`` for each call, ``StepDone`` after each step
        (its trace; ``error`` set when the turn was unusable and fed back) and last ``RunDone``
        with the same ``RunResult`` that ``arun`` returns. ``arun``'s errors are raised here."""
        # Each level closes the one below it, so leaving early stops the generation at once.
        async with contextlib.aclosing(self._steps(question, live=True, run_file=run_file)) as events:
            async for event in events:
                yield event

    async def _steps(self, question: str | list[dict[str, Any]] | None, *, live: bool, run_file: str | Path | None = None,
                     resume_from: str | Path | None = None) -> AsyncGenerator[AgentEvent, None]:
        tools = self.registry.list(self.allow)
        pending: Pending | None = None
        if resume_from is not None:
            replayed = replay(resume_from)
            state = _RunState.resumed(replayed)
            messages, pending = replayed.messages, replayed.pending
            if replayed.answer is None:
                state.log = RunLog.reopen(resume_from)
        else:
            assert question is not None
            state = _RunState(run_id=uuid.uuid4().hex[:12])
            messages = self._opening(question)
            if self.memory is not None:
                earlier = self.memory.messages()
                lead = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
                messages[lead:lead] = earlier
                state.remembered = lead + len(earlier)
            state.question = _question_index(messages)
            state.ids = _history_ids(messages)
            if run_file is not None:
                state.log = RunLog.create(run_file, state.run_id, messages, [t.name for t in tools],
                                          remembered=state.remembered)
        run_id = state.run_id
        self._observe(run_id, RunStarted(run_id, self.model.name, [dict(m) for m in messages], [t.name for t in tools]))
        try:
            if resume_from is not None and state.log is None:  # the run had ended
                yield RunDone(RunResult(answer=replayed.answer or "", messages=messages, trace=state.trace, run_id=run_id))
                return
            async with contextlib.aclosing(self._loop(messages, tools, state, live=live, pending=pending)) as events:
                async for event in events:
                    self._observe(run_id, event)
                    yield event
        except BaseException as exc:
            self._observe(run_id, RunFailed(exc))
            raise
        finally:
            if state.log is not None:
                state.log.close()

    def _observe(self, run_id: str, event: ObservedEvent) -> None:
        for observer in self.observers:
            try:
                observer(run_id, event)
            except Exception:  # an observer sees a run; its failure never changes one
                _log.warning("observer %r failed on %s of run %s", observer, type(event).__name__, run_id, exc_info=True)

    async def _loop(self, messages: list[dict[str, Any]], tools: list[Tool], state: _RunState, *, live: bool,
                    pending: Pending | None = None) -> AsyncGenerator[AgentEvent, None]:
        if pending is not None:  # resumed between a turn and the end of its calls
            async with contextlib.aclosing(self._calls(pending.step, pending.calls, messages, state,
                                                       pending.finished)) as events:
                async for event in events:
                    yield event
        for step in range(len(state.trace) + 1, self.max_steps + 1):
            st = StepTrace(step=step, constrained=self.constrained, tool_choice=self._choice(step, state))
            state.trace.append(st)
            # Embedding the question (a router) and tokenizing (the budget) take milliseconds: off the
            # event loop, so concurrent runs on one agent do not wait on each other.
            offered = await asyncio.to_thread(self._offer, messages, tools, state, st)
            result = None
            async with contextlib.aclosing(self._reply(messages, offered, st, state, live=live)) as turn:
                async for event in turn:
                    if isinstance(event, TurnDone):
                        result = event.result
                    yield event
            if result is None:  # unusable; what went wrong was fed back
                yield StepDone(st)
                continue
            self._unique_ids(result.tool_calls, state, st)
            messages.append(result.message())
            if state.log is not None:
                state.log.turn(st, messages[-1], result.tool_calls)
            if not result.tool_calls:
                if state.log is not None:
                    state.log.end(result.content)
                if self.memory is not None:
                    self.memory.add(state.run_id, messages[state.remembered:])
                self._notify(st)
                yield StepDone(st)
                yield RunDone(RunResult(answer=result.content, messages=messages, trace=state.trace, run_id=state.run_id))
                return
            async with contextlib.aclosing(self._calls(st, result.tool_calls, messages, state)) as events:
                async for event in events:
                    yield event
        raise MaxStepsExceeded(
            f"no final answer after max_steps={self.max_steps} model turns; raise max_steps or check the trace",
            messages,
            state.trace,
        )

    async def _calls(self, st: StepTrace, calls: list[ToolCall], messages: list[dict[str, Any]], state: _RunState,
                     finished: dict[str, CallTrace] | None = None) -> AsyncGenerator[AgentEvent, None]:
        """A turn's calls: run (``finished``: traces of calls that already ran, kept), results
        fed back, the step closed."""
        state.called.update(c.name for c in calls)
        st.calls = await self._run_calls(calls, state, st.step, finished or {})
        for done in st.calls:
            if done.id in state.renamed and "(Your call had the id" not in done.result:
                done.result += (f"\n(Your call had the id {state.renamed[done.id]!r}, which an earlier call already "
                                f"used; it is {done.id!r} now. Give each call an id of its own.)")
        if self.cite:
            for done in st.calls:
                if done.ref is None:
                    state.refs += 1
                    done.ref = f"r{state.refs}"
        state.repeated = any(c.outcome.is_repeat for c in st.calls)
        st.loop_checks += [f"{c.name} ({c.id}): {c.outcome.value}, not run again" for c in st.calls if c.outcome.is_repeat]
        added = len(messages)
        for done in st.calls:
            messages.append(tool_message(done))
            yield ToolResult(done)
        if (stalled := self._alternating(st, state)) is not None:
            messages.append({"role": "user", "content": stalled})
        self._notify(st)
        yield StepDone(st)
        self._count_mistakes(st, state, messages, messages[added:])

    def _opening(self, question: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(question, str):
            messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        else:
            messages = [dict(m) for m in question]
            _check_pairs(messages)
        if self.system and not (messages and messages[0].get("role") == "system"):
            messages.insert(0, {"role": "system", "content": self.system})
        if self.cite:
            messages = with_system(messages, CITE_HINT)
        return messages

    def _offer(self, messages: list[dict[str, Any]], tools: list[Tool], state: _RunState, st: StepTrace) -> list[Tool]:
        """The tools this turn may call: all, or what the router picks (a tool called earlier in
        the run stays offered, so the model can call it again)."""
        if self.router is None:
            return tools
        keep = set(state.called)  # a copy: the named choice is added for this turn only
        if st.tool_choice not in ("auto", "required", "none"):
            keep.add(st.tool_choice)  # a named choice is offered whatever the router thinks
        offered: list[Tool] = list(self.router.select(messages, tools, keep=keep))
        st.offered = [t.name for t in offered]
        return offered

    def _fit(self, messages: list[dict[str, Any]], tools: list[Tool], st: StepTrace,
             state: _RunState) -> list[dict[str, Any]]:
        """The messages this turn's prompt is rendered from: all of them while they fit the
        context with ``max_tokens`` to spare, else what the context budget keeps."""
        budget = self.context
        can = self.model.backend.capabilities
        # A context that grows is budgeted at the most it grows to: the backend makes the room.
        n_ctx = None if budget is None else budget.n_ctx or can.max_ctx or can.n_ctx
        if budget is None or not isinstance(n_ctx, int):
            return messages
        # A reply room of half the context or more is cut to half: the backend shortens the reply
        # to what is left, as it did before, rather than every prompt failing to fit.
        room = n_ctx - min(self.max_tokens if budget.reserve is None else budget.reserve, n_ctx // 2)
        render = functools.partial(self.model.render, tools=tools, parallel_tool_calls=self.parallel_tool_calls,
                                   tool_choice=st.tool_choice, thinking=self.thinking)

        def measure(msgs: list[dict[str, Any]]) -> int:
            prompt = render(msgs)
            size = len(prompt.text.encode("utf-8"))  # no token is shorter than a byte: a cheap bound
            return size if size <= room else len(self.model.backend.tokenize(prompt))

        fitted = budget.fit(messages, measure, room, question=state.question)
        st.context_cuts = fitted.cuts
        return fitted.messages

    def _unique_ids(self, calls: list[ToolCall], state: _RunState, st: StepTrace) -> None:
        """A call id the model wrote twice (in this turn or an earlier one) would pair two results
        with one call: the later call gets a fresh id, and its result says so."""
        for i, call in enumerate(calls):
            if call.id in state.ids:
                fresh = new_call_id(self.model.family.id)
                calls[i] = dataclasses.replace(call, id=fresh)
                state.renamed[fresh] = call.id
                st.loop_checks.append(f"{call.name}: call id {call.id!r} was used before; renamed {fresh!r}")
            state.ids.add(calls[i].id)

    def _alternating(self, st: StepTrace, state: _RunState) -> str | None:
        """Two tools called in turn, four steps running, with nothing new from any of them: the
        model is told to stop, and its next turn must answer."""
        fresh = [c for c in st.calls if c.outcome is CallOutcome.OK and c.result.strip() not in _EMPTY
                 and c.result not in state.results]
        state.results.update(c.result for c in st.calls if c.outcome is CallOutcome.OK)
        state.recent = [*state.recent[-3:], (frozenset(c.name for c in st.calls), bool(fresh))]
        if len(state.recent) < 4 or any(progress for _, progress in state.recent):
            return None
        (a, _), (b, _), (c, _), (d, _) = state.recent
        if not (a == c and b == d and a != b and len(a | b) == 2):
            return None
        first, second = sorted(a | b)
        state.repeated, state.recent = True, []
        st.loop_checks.append(f"{first} and {second} called in turn for 4 steps without a new result")
        return (f"You have called {first} and {second} in turn four times without getting anything new. "
                "Do not call them again: answer with what you have, or say what is missing.")

    def _choice(self, step: int, state: _RunState) -> str:
        if state.repeated:
            # The model asked again for a result it already has: small models loop like this.
            # It gets the result once more, and this turn must be the answer.
            return "none"
        # A forced choice applies to the first turn; afterwards the model must be free to answer.
        return self.tool_choice if step == 1 or self.tool_choice in ("auto", "none") else "auto"

    async def _reply(self, messages: list[dict[str, Any]], tools: list[Tool], st: StepTrace,
                     state: _RunState, *, live: bool) -> AsyncGenerator[StreamEvent, None]:
        """One model turn, ending with ``TurnDone``; a reply that cannot be used is fed back (no
        ``TurnDone``) until the retries run out. ``live``: the turn's events as it is generated."""
        fitted = await asyncio.to_thread(self._fit, messages, tools, st, state)
        chat = functools.partial(
            self.model.chat,
            fitted,
            tools,
            tool_choice=st.tool_choice,
            parallel_tool_calls=self.parallel_tool_calls,
            constrained=self.constrained,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            thinking=self.thinking,
            reasoning_budget=self.reasoning_budget,
            # The loop answers a repeated call itself, from the result it has (and says so in the trace).
            repeat_calls=True,
        )
        try:
            if live:
                result = None
                async with contextlib.aclosing(_live(chat)) as events:
                    async for event in events:
                        if isinstance(event, TurnDone):
                            result = event.result
                        else:
                            yield event
                assert result is not None
            else:
                result = await asyncio.to_thread(chat)
        except (ToolCallParseError, GenerationTruncated) as exc:
            st.error, st.raw = str(exc), exc.raw
            if isinstance(exc, SchemaViolation):
                st.schema_repairs, st.schema_refused = exc.repairs, True
            if isinstance(exc, DisguisedCall):
                st.disguise_retries = exc.retries
            state.failures += 1
            self._notify(st)
            if state.failures > self.max_retries:
                raise RetryLimitExceeded(
                    f"the model produced no usable reply after {state.failures} tries: {exc}", messages, state.trace
                ) from exc
            messages.append({"role": "assistant", "content": exc.raw})
            messages.append({"role": "user", "content": _feedback(exc)})
            if state.log is not None:
                state.log.unusable(st, messages[-2:], state.failures)
            return
        st.prompt_tokens, st.completion_tokens = result.prompt_tokens, result.completion_tokens
        st.latency, st.raw, st.reasoning = result.latency, result.raw, result.reasoning
        st.prompt_seconds, st.decode_seconds = result.prompt_seconds, result.decode_seconds
        st.attempts, st.schema_repairs = result.attempts, result.schema_repairs
        st.disguise_retries = result.disguise_retries
        st.decisions = list(result.decisions)
        yield TurnDone(result)

    async def _run_calls(self, calls: list[ToolCall], state: _RunState, step: int,
                         finished: dict[str, CallTrace]) -> list[CallTrace]:
        """Runs the calls concurrently; identical calls (in this turn or repeating an earlier one)
        run once; a call in ``finished`` (a resumed run's) keeps its outcome unless the tool failed."""
        kept = {i: t for i, t in finished.items() if not t.outcome.tool_failed}
        for c in calls:  # what finished before a resume counts as run, for the calls beside it too
            if c.id in kept:
                state.remember(c, kept[c.id])
        first: dict[str, ToolCall] = {}
        for c in calls:
            if c.id not in kept and _call_key(c) not in state.done_calls and _call_key(c) not in state.failed_calls:
                first.setdefault(_call_key(c), c)
        outcomes = await asyncio.gather(*(self._logged(c, state, step) for c in first.values()))
        executed = dict(zip(first, outcomes, strict=True))
        traces: list[CallTrace] = []
        for call in calls:
            key = _call_key(call)
            if call.id in kept:
                traces.append(kept[call.id])
            elif first.get(key) is call:
                traces.append(executed[key])
                state.remember(call, executed[key])
            elif key in state.done_calls:
                earlier = state.done_calls[key]
                # Measured on the seeds' scenarios in four languages (Qwen 0.5B): with this note in
                # the result the forced answer holds the facts in 18 of 20; with the bare result (15)
                # or a user note beside it (13) the model writes the call again as text. Once (the
                # Japanese order scenario) it copies the note as its answer.
                note = (f"{earlier}\n(This call was already made; this is its result. Use it to answer.)"
                        if earlier.strip() not in _EMPTY else
                        f"{earlier}\n(This call was already made and returned nothing; it will return nothing again. "
                        "Answer with what you have, or call with other arguments.)")
                traces.append(CallTrace(call.id, call.name, call.arguments, note, CallOutcome.REPEATED.value,
                                        outcome=CallOutcome.REPEATED))
            elif key in state.failed_calls and key not in first:
                note = (f"{state.failed_calls[key]}\n(This exact call already failed; with the same arguments it fails "
                        "the same way. Change the arguments, call another tool, or answer with what you have.)")
                traces.append(CallTrace(call.id, call.name, call.arguments, note, CallOutcome.REPEATED_ERROR.value,
                                        outcome=CallOutcome.REPEATED_ERROR))
            else:  # a duplicate whose first copy failed: same failure, same message
                twin = executed[key]
                traces.append(CallTrace(call.id, call.name, call.arguments, twin.result, twin.error,
                                        outcome=twin.outcome))
        return traces

    def _count_mistakes(self, st: StepTrace, state: _RunState, messages: list[dict[str, Any]],
                        added: list[dict[str, Any]]) -> None:
        """A turn whose every call was a model mistake uses up a retry; any other turn resets them."""
        mistakes = [c for c in st.calls if c.outcome.is_model_mistake]
        state.failures = state.failures + 1 if len(mistakes) == len(st.calls) else 0
        if state.log is not None:
            state.log.step_done(st, added, state.failures, state.repeated)
        if state.failures > self.max_retries:
            raise RetryLimitExceeded(f"the model kept making invalid calls ({mistakes[-1].error})", messages, state.trace)

    def _notify(self, st: StepTrace) -> None:
        if self.on_step is not None:
            self.on_step(st)

    async def _logged(self, call: ToolCall, state: _RunState, step: int) -> CallTrace:
        if state.log is not None:
            state.log.call_started(step, call)
        trace = await self._execute(call, state.run_id)
        if state.log is not None:
            state.log.call_done(step, trace)
        return trace

    async def _execute(self, call: ToolCall, run_id: str) -> CallTrace:
        started = time.perf_counter()
        ctx: CallContext | None = None

        def done(result: str, outcome: CallOutcome = CallOutcome.OK, detail: str = "") -> CallTrace:
            error = None if outcome is CallOutcome.OK else f"{outcome.value}: {detail}" if detail else outcome.value
            trace = CallTrace(call.id, call.name, call.arguments, result, error,
                              time.perf_counter() - started, outcome)
            if ctx is not None:
                trace.cached, trace.attempts, trace.notes = ctx.cached, ctx.attempt, ctx.notes
            return trace

        try:
            tool = self.registry.get(call.name, self.allow)
        except UnknownToolError as exc:
            return done(f"Error: {exc}. Call one of the available tools.", CallOutcome.UNKNOWN_TOOL)
        except ToolNotAllowed as exc:
            return done(f"Error: {exc}.", CallOutcome.NOT_ALLOWED)
        try:
            validated = tool.validate(call.arguments)
        except ToolArgumentsError as exc:
            return done(f"Error: {exc}. Fix the arguments and call again.", CallOutcome.INVALID_ARGUMENTS, exc.details)
        try:
            if tool.destructive:
                await self._check_approval(call, tool)
            ctx = CallContext(run_id, tool, call, validated)
            value = await chain([*self.middleware, *tool.middleware], _invoke)(ctx)
        except Exception as exc:
            outcome = outcome_of(exc)
            if outcome is None:  # a middleware's own failure: the call failed, the run goes on
                return done(f"Error: the call to {tool.name!r} failed: {type(exc).__name__}: {exc}", CallOutcome.RAISED)
            return done(_ERROR_WORDING[outcome].format(exc), outcome)
        try:
            text = _to_text(value)
            if self.redact:
                text = self.redact(text, tool) if callable(self.redact) else redact_json(text)
            shaped = await shape(tool.result or self.result, text, ResultContext(tool, call, self._count_tokens))
        except Exception as exc:
            return done(f"Error: the result of {tool.name!r} could not be prepared: {type(exc).__name__}: {exc}",
                        CallOutcome.RAISED)
        trace = done(shaped)
        if shaped != text:
            trace.full_result = text
        return trace

    def _count_tokens(self, text: str) -> int:
        return len(self.model.backend.tokenize(Prompt(((text, True),))))

    async def _check_approval(self, call: ToolCall, tool: Tool) -> None:
        if self.approve is None:
            raise ApprovalDenied(f"tool {tool.name!r} is destructive and no approver is configured; it was not run")
        verdict = self.approve(call, tool)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            raise ApprovalDenied(f"the call to {tool.name!r} was not approved; it was not run")


async def _invoke(ctx: CallContext) -> Any:
    """The innermost step: the tool function under its timeout, its errors typed."""
    tool = ctx.tool
    bound = tool.bind(ctx.arguments)
    try:
        if tool.is_async:
            return await asyncio.wait_for(bound(), tool.timeout)
        return await _run_sync(bound, tool.timeout)
    except TimeoutError:
        raise ToolTimeout(f"tool {tool.name!r} did not finish within {tool.timeout} s") from None
    except Exception as exc:
        raise ToolExecutionError(f"tool {tool.name!r} raised {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class ToolResult:
    """A call the loop handled: its trace (id, name, arguments, outcome, the result the model gets)."""

    call: CallTrace


@dataclass(frozen=True)
class StepDone:
    """A step ended: its trace (``error`` is set when the turn was unusable and fed back)."""

    step: StepTrace


@dataclass(frozen=True)
class RunDone:
    """The run's end: the same result ``arun`` returns."""

    result: RunResult


AgentEvent = StreamEvent | ToolResult | StepDone | RunDone


@dataclass(frozen=True)
class RunStarted:
    """For observers: a run began (``model``: the model's name; ``tools``: the names it may call)."""

    run_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[str]


@dataclass(frozen=True)
class RunFailed:
    """For observers: the run ended with ``error`` (raised to the caller), or was left early
    (``GeneratorExit``)."""

    error: BaseException


ObservedEvent = AgentEvent | RunStarted | RunFailed
#: Called with the run's id and each event as it happens (the agent's events, ``RunStarted``
#: first and ``RunFailed`` when the run raises). Observers see; they never change a run.
Observer = Callable[[str, ObservedEvent], None]


async def _live(chat: Callable[..., ChatResult]) -> AsyncGenerator[StreamEvent, None]:
    """``chat(on_event=...)`` on a thread, its events handed to this loop as they come, then
    ``TurnDone``. Leaving early stops the generation at its next token."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[StreamEvent] = asyncio.Queue()
    stopped = threading.Event()

    def emit(event: StreamEvent) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    task = asyncio.ensure_future(asyncio.to_thread(chat, on_event=emit, cancel=stopped.is_set))
    try:
        async with contextlib.aclosing(relay(events, task)) as relayed:
            async for event in relayed:
                yield event
        yield TurnDone(task.result())
    finally:
        stopped.set()
        if not task.done():
            with contextlib.suppress(BaseException):
                await task


@dataclass
class _RunState:
    run_id: str = ""
    log: RunLog | None = None
    trace: list[StepTrace] = field(default_factory=list)
    #: Unusable turns in a row (unparsable, cut, or every call a model mistake).
    failures: int = 0
    #: Result of each call that ran, by name and arguments.
    done_calls: dict[str, str] = field(default_factory=dict)
    #: Messages before this run's own (the system prompt and what memory brought).
    remembered: int = 0
    #: Where the question the run answers is in its messages.
    question: int | None = None
    #: Short ids given to results so far.
    refs: int = 0
    #: Results of the calls that failed, by name and arguments: not run again with the same.
    failed_calls: dict[str, str] = field(default_factory=dict)
    #: Every call id of the run, and the ids given to calls whose own was taken (new -> old).
    ids: set[str] = field(default_factory=set)
    renamed: dict[str, str] = field(default_factory=dict)
    #: Results seen, and the last steps' (tools called, whether anything new came back).
    results: set[str] = field(default_factory=set)
    recent: list[tuple[frozenset[str], bool]] = field(default_factory=list)
    #: Names of the tools the model called this run.
    called: set[str] = field(default_factory=set)
    #: The last turn repeated a call that already ran.
    repeated: bool = False

    def remember(self, call: ToolCall, done: CallTrace) -> None:
        """A call that ran: its result answers the same call again; a failure (but a timeout,
        which may pass) is not run again with the same arguments."""
        if done.outcome is CallOutcome.OK:
            self.done_calls[_call_key(call)] = done.result
        elif done.outcome is not CallOutcome.TIMEOUT:
            self.failed_calls[_call_key(call)] = done.result

    @classmethod
    def resumed(cls, replayed: Replay) -> _RunState:
        state = cls(run_id=replayed.run_id, trace=replayed.trace, failures=replayed.failures, repeated=replayed.repeated,
                    remembered=replayed.remembered, question=_question_index(replayed.messages[:replayed.opening]))
        state.ids = _history_ids(replayed.messages[:replayed.opening])
        for step in replayed.trace:
            state.called.update(c.name for c in step.calls)
            state.refs += sum(c.ref is not None for c in step.calls)
            state.ids.update(c.id for c in step.calls)
            for c in step.calls:
                if not c.outcome.is_repeat:
                    state.remember(ToolCall(c.id, c.name, c.arguments), c)
                if c.outcome is CallOutcome.OK:
                    state.results.add(c.result)
        if replayed.pending is not None:
            state.called.update(c.name for c in replayed.pending.calls)
            state.ids.update(c.id for c in replayed.pending.calls)
        return state


def _check_pairs(messages: list[dict[str, Any]]) -> None:
    """A history whose results do not pair with its calls would teach the model the wrong
    result for a call: refused, naming the message. A result without a ``tool_call_id`` answers
    the next call of its turn without a result, in order (templates that show no ids pair so)."""
    open_ids: list[str | None] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not open_ids or (call_id is not None and call_id not in open_ids):
                raise UsageError(f"messages[{i}] is a tool result for call id {call_id!r}, which no call without a result "
                                 f"in the assistant message before it has (open: {open_ids or 'none'}); each result "
                                 "must answer a call of the turn it follows")
            open_ids.remove(call_id if call_id is not None else open_ids[0])
            continue
        if open_ids and role in ("assistant", "user"):
            raise UsageError(f"the calls {open_ids} before messages[{i}] have no result; add a tool message for "
                             "each (its tool_call_id set to the call's id) or leave the calls out")
        if role == "assistant":
            open_ids = [c.get("id") for c in m.get("tool_calls") or []]
    if open_ids:
        raise UsageError(f"the history ends with calls {open_ids} that have no result; add their results "
                         "(tool messages) or leave the calls out")


def _history_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {str(c["id"]) for m in messages for c in m.get("tool_calls") or [] if c.get("id")}


def _question_index(opening: list[dict[str, Any]]) -> int | None:
    """The question the run answers: the last user message of its opening."""
    return next((i for i in range(len(opening) - 1, -1, -1) if opening[i].get("role") == "user"), None)


def _sync(run: Coroutine[Any, Any, RunResult], name: str) -> RunResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run)
    run.close()
    raise UsageError(f"Agent.{name}() was called inside an event loop; use 'await agent.a{name}(...)'")


async def _result_of(events: AsyncGenerator[AgentEvent, None]) -> RunResult:
    async with contextlib.aclosing(events) as running:
        async for event in running:
            if isinstance(event, RunDone):
                return event.result
    raise AssertionError("a run ends with RunDone or an error")  # pragma: no cover


#: Results that hold nothing.
#: What the model reads after a call failed with each outcome (``{}``: the error's message).
_ERROR_WORDING = {
    CallOutcome.NOT_APPROVED: "Error: {}.",
    CallOutcome.TIMEOUT: "Error: {}.",
    CallOutcome.UNAVAILABLE: "Error: {}. Do not call it again now; answer with what you have.",
    CallOutcome.RAISED: "Error: {}",
}

_EMPTY = frozenset({"", "[]", "{}", "null", "None", '""'})


def _call_key(call: ToolCall) -> str:
    return call_key(call.name, call.arguments)


def _feedback(exc: Exception) -> str:
    if isinstance(exc, GenerationTruncated):
        return "Your tool call was cut off because it was too long. Make a shorter call."
    return f"Your reply could not be read: {exc}. Reply with a valid tool call or a plain answer."
