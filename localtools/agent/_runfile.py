"""Run files: a run's state written as it happens (JSON lines), and read back to resume it.

One record per line, each flushed before the run goes on, so a killed process leaves every step
it finished on disk (and at worst one torn last line, which is skipped)::

    {"kind": "run", "version": 1, "run_id": ..., "messages": [...], "tools": [...]}
    {"kind": "turn", "step": 1, "message": {...}, "calls": [...], "trace": {...}}   a usable turn
    {"kind": "call", "step": 1, "id": ..., "state": "running"}                        before a call runs
    {"kind": "call", "step": 1, "id": ..., "state": "done", "trace": {...}}           its outcome
    {"kind": "step", "step": 1, "calls": [...], "messages": [...], "failures": 0, ...}  the step ended
    {"kind": "unusable", "step": 2, "trace": {...}, "messages": [...]}                fed back
    {"kind": "end", "answer": ...}
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from .._errors import DataError, UsageError
from ..families._parse import ToolCall
from ..model._decide import Decision, DecisionPoint
from ._trace import CallOutcome, CallTrace, StepTrace

__all__ = ["Pending", "Replay", "RunLog", "replay"]

VERSION = 1


class RunLog:
    """Appends a run's records to its file."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def create(cls, path: str | Path, run_id: str, messages: list[dict[str, Any]], tools: list[str], *,
               remembered: int = 0) -> RunLog:
        p = Path(path)
        try:
            handle = p.open("x", encoding="utf-8")
        except FileExistsError:
            raise UsageError(f"run file {p} already exists; continue that run with agent.resume({str(p)!r}) "
                             "or give a new path") from None
        log = cls(p, handle)
        log._write({"kind": "run", "version": VERSION, "run_id": run_id, "messages": messages, "tools": tools,
                    "remembered": remembered})
        return log

    @classmethod
    def reopen(cls, path: str | Path) -> RunLog:
        p = Path(path)
        data = p.read_bytes()
        if data and not data.endswith(b"\n"):
            # A kill in the middle of a record leaves it torn; the step it began is done again.
            with p.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
        return cls(p, p.open("a", encoding="utf-8"))

    def turn(self, step: Any, message: dict[str, Any], calls: list[ToolCall]) -> None:
        self._write({"kind": "turn", "step": step.step, "message": message,
                     "calls": [asdict(c) for c in calls], "trace": _step_fields(step)})

    def call_started(self, step: int, call: ToolCall) -> None:
        self._write({"kind": "call", "step": step, "id": call.id, "name": call.name, "state": "running"})

    def call_done(self, step: int, trace: Any) -> None:
        self._write({"kind": "call", "step": step, "id": trace.id, "state": "done", "trace": asdict(trace)})

    def step_done(self, step: Any, messages: list[dict[str, Any]], failures: int, repeated: bool) -> None:
        """The step's calls as the model got them (ids, results, notes) and the messages they added."""
        self._write({"kind": "step", "step": step.step, "calls": [asdict(c) for c in step.calls], "messages": messages,
                     "failures": failures, "repeated": repeated})

    def unusable(self, step: Any, messages: list[dict[str, Any]], failures: int) -> None:
        self._write({"kind": "unusable", "step": step.step, "trace": _step_fields(step), "messages": messages,
                     "failures": failures})

    def end(self, answer: str) -> None:
        self._write({"kind": "end", "answer": answer})

    def close(self) -> None:
        self._handle.close()

    def _write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())


def _step_fields(step: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(step).items() if k != "calls"}


@dataclass
class Pending:
    """A turn whose calls had not all finished when the run stopped."""

    step: Any
    calls: list[ToolCall]
    #: The calls that finished, by id: they are not run again.
    finished: dict[str, Any] = field(default_factory=dict)


@dataclass
class Replay:
    """A run as its file left it."""

    run_id: str
    messages: list[dict[str, Any]]
    tools: list[str]
    trace: list[Any] = field(default_factory=list)
    failures: int = 0
    repeated: bool = False
    pending: Pending | None = None
    #: The final answer when the run ended.
    answer: str | None = None
    #: How many of ``messages`` the run started with, and how many of those memory brought.
    opening: int = 0
    remembered: int = 0


def replay(path: str | Path) -> Replay:
    """Read a run file back into the trace's classes."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no run file at {p}")
    lines = p.read_text(encoding="utf-8").splitlines()
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # the kill came in the middle of this line: the step it began is redone
            raise DataError(f"{p}:{number} is not a JSON record; this run file cannot be resumed") from None
    if not records or records[0].get("kind") != "run":
        raise DataError(f"{p} does not start with a run record; it is not a localtools run file")
    head = records[0]
    if head.get("version") != VERSION:
        raise DataError(f"{p} is a run file of version {head.get('version')}; this localtools reads version {VERSION}")
    state = Replay(run_id=head["run_id"], messages=list(head["messages"]), tools=list(head.get("tools", [])),
                   opening=len(head["messages"]), remembered=int(head.get("remembered", 0)))

    def step_trace(data: dict[str, Any]) -> StepTrace:
        known = {f.name for f in fields(StepTrace)}
        kept = {k: v for k, v in data.items() if k in known}
        # Decisions come back as the classes they were written from.
        kept["decisions"] = [Decision(**{**d, "point": DecisionPoint(d["point"])}) for d in kept.get("decisions") or ()]
        return StepTrace(**kept)

    def call_trace(data: dict[str, Any]) -> CallTrace:
        known = {f.name for f in fields(CallTrace)}
        trace = CallTrace(**{k: v for k, v in data.items() if k in known})
        trace.outcome = CallOutcome(trace.outcome)
        return trace

    for record in records[1:]:
        kind = record.get("kind")
        if kind == "turn":
            st = step_trace(record["trace"])
            state.trace.append(st)
            state.messages.append(record["message"])
            calls = [ToolCall(**c) for c in record["calls"]]
            if calls:
                state.pending = Pending(st, calls)
            else:
                state.answer = record["message"].get("content", "")
        elif kind == "call" and record.get("state") == "done" and state.pending is not None:
            state.pending.finished[record["id"]] = call_trace(record["trace"])
        elif kind == "step" and state.pending is not None:
            pending, state.pending = state.pending, None
            pending.step.calls = [call_trace(c) for c in record["calls"]]
            state.messages.extend(record["messages"])
            state.failures, state.repeated = int(record["failures"]), bool(record["repeated"])
        elif kind == "unusable":
            state.trace.append(step_trace(record["trace"]))
            state.messages.extend(record["messages"])
            state.failures = int(record["failures"])
        elif kind == "end":
            state.answer = str(record["answer"])
    return state


def tool_message(done: Any) -> dict[str, Any]:
    """The history message that hands a call's result back to the model."""
    content = f"[{done.ref}] {done.result}" if done.ref else done.result
    return {"role": "tool", "tool_call_id": done.id, "name": done.name, "content": content}
