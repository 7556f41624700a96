from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import tc

from localtools import Agent, CallOutcome, DataError, MaxStepsExceeded, Model, ScriptedBackend, Tool, UsageError
from localtools.agent._runfile import replay

sys.path.insert(0, str(Path(__file__).parent))
import resumable_run

SCRIPT = Path(__file__).with_name("resumable_run.py")


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def written(path: Path) -> list[dict]:
    """The records a running child has written whole: a line it is still writing waits for the next look."""
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


def counts(workdir: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in workdir.glob("*.count")}


def kill_in_first_turn(tmp_path: Path, model: str | None) -> Path:
    """Start the run in a child process and kill it while ``ship_order`` hangs."""
    run_file = tmp_path / "run.jsonl"
    cmd = [sys.executable, str(SCRIPT), str(run_file), str(tmp_path)] + ([model] if model else [])
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if child.poll() is not None:
                out, err = child.communicate()
                pytest.fail(f"the run ended before it was killed: {out}\n{err}")
            if run_file.exists():
                states = {(r.get("name"), r.get("state")) for r in written(run_file) if r["kind"] == "call"}
                if ("ship_order", "running") in states and counts(tmp_path).get("ship_order") == 1:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("ship_order never started")
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
    return run_file


def test_a_killed_run_resumes_without_running_a_finished_call_again(tmp_path: Path) -> None:
    run_file = kill_in_first_turn(tmp_path, None)
    assert counts(tmp_path) == {"check_stock": 1, "ship_order": 1}
    # The file holds the turn and check_stock's result; ship_order never finished.
    done = {r["trace"]["name"] for r in records(run_file) if r["kind"] == "call" and r["state"] == "done"}
    assert done == {"check_stock"}

    backend = ScriptedBackend(["Order 42 has shipped."])  # the first turn is on file: only the answer is left
    agent = Agent(Model(backend, family="qwen2.5"), resumable_run.tools(tmp_path), max_steps=4)
    result = agent.resume(run_file)

    assert result.answer == "Order 42 has shipped."
    assert counts(tmp_path) == {"check_stock": 1, "ship_order": 2}
    assert len(backend.prompts) == 1
    assert [s.step for s in result.trace] == [1, 2]
    calls = result.trace[0].calls
    assert [(c.name, c.outcome) for c in calls] == [("check_stock", CallOutcome.OK), ("ship_order", CallOutcome.OK)]
    # Each result is paired to its call's id, in the order of the calls.
    ids = [c["id"] for c in result.messages[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == ids
    assert result.messages[-2]["content"] == "order 42 shipped"
    assert '"in_stock": 12' in backend.prompts[0].text and "order 42 shipped" in backend.prompts[0].text
    # The file now ends with the answer: resuming again runs nothing.
    assert records(run_file)[-1] == {"kind": "end", "answer": "Order 42 has shipped."}
    again = Agent(Model(ScriptedBackend([]), family="qwen2.5"), resumable_run.tools(tmp_path)).resume(run_file)
    assert again.answer == result.answer and counts(tmp_path) == {"check_stock": 1, "ship_order": 2}


@pytest.mark.model
def test_a_killed_run_on_real_weights_resumes(tmp_path: Path, qwen: Model) -> None:
    run_file = kill_in_first_turn(tmp_path, "qwen2.5-coder-0.5b")
    turns = [r for r in records(run_file) if r["kind"] == "turn"]
    interrupted = turns[-1]["step"]
    assert "ship_order" in {c["name"] for c in turns[-1]["calls"]}
    before = counts(tmp_path)
    result = Agent(qwen, resumable_run.tools(tmp_path), max_steps=4).resume(run_file)
    after = counts(tmp_path)

    def ran(name: str) -> int:  # executions after the kill, by the resumed run's trace
        later = [c for s in result.trace[interrupted:] for c in s.calls]
        return sum(c.name == name and c.outcome is CallOutcome.OK for c in later)

    # The hung call ran again once; nothing that had finished ran again.
    assert after["ship_order"] == before["ship_order"] + 1 + ran("ship_order")
    assert after.get("check_stock", 0) == before.get("check_stock", 0) + ran("check_stock")
    resumed = {c.name: c for c in result.trace[interrupted - 1].calls}
    assert resumed["ship_order"].ok and resumed["ship_order"].result == "order 42 shipped"
    assert result.answer


def test_a_turn_that_failed_in_the_tool_runs_again_and_one_that_was_refused_does_not(tmp_path: Path) -> None:
    flaky = {"n": 0}

    def fetch(url: str) -> str:
        """Fetch a page.

        Args:
            url: Where.
        """
        flaky["n"] += 1
        raise RuntimeError("network down")

    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: Which.
        """
        raise AssertionError("never approved, never run")

    tools = [Tool.from_function(fetch), Tool.from_function(delete, destructive=True)]
    run_file = tmp_path / "run.jsonl"
    backend = ScriptedBackend([tc("fetch", url="u") + "\n" + tc("delete", path="p"), "gave up"])
    Agent(Model(backend, family="qwen2.5"), tools).run("go", run_file=run_file)
    # Cut the file after the first step's call records, as a kill before the step record would.
    lines = run_file.read_text().splitlines()
    cut = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "call") + 1
    run_file.write_text("\n".join(lines[:cut]) + "\n")
    flaky["n"] = 0

    def fetch_ok(url: str) -> str:
        """Fetch a page.

        Args:
            url: Where.
        """
        flaky["n"] += 1
        return "page"

    backend = ScriptedBackend(["done"])
    result = Agent(Model(backend, family="qwen2.5"), [Tool.from_function(fetch_ok, name="fetch"), tools[1]]).resume(run_file)
    assert flaky["n"] == 1  # the raised call ran again
    outcomes = {c.name: c.outcome for c in result.trace[0].calls}
    assert outcomes == {"fetch": CallOutcome.OK, "delete": CallOutcome.NOT_APPROVED}
    assert result.answer == "done"


def test_a_run_killed_while_the_model_wrote_redoes_that_turn_only(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    backend = ScriptedBackend([tc("check_stock", item="A-7"), tc("ship_order", order_id=42), "shipped"])
    (tmp_path / "ship_order.count").write_text("1")  # ship_order does not hang
    Agent(Model(backend, family="qwen2.5"), resumable_run.tools(tmp_path)).run("go", run_file=run_file)
    lines = run_file.read_text().splitlines()
    # Keep step 1 whole and half of step 2's turn record: the kill came while it was written.
    second = next(i for i, line in enumerate(lines) if json.loads(line).get("kind") == "turn" and json.loads(line)["step"] == 2)
    run_file.write_text("\n".join(lines[:second]) + "\n" + lines[second][:20])
    backend = ScriptedBackend([tc("ship_order", order_id=42), "shipped"])
    result = Agent(Model(backend, family="qwen2.5"), resumable_run.tools(tmp_path)).resume(run_file)
    assert result.answer == "shipped" and [s.step for s in result.trace] == [1, 2, 3]
    assert counts(tmp_path) == {"check_stock": 1, "ship_order": 3}
    # The torn record was cut away: the file reads back whole, ending with the answer.
    replayed = replay(run_file)
    assert replayed.answer == "shipped" and [s.step for s in replayed.trace] == [1, 2, 3]


def test_the_step_limit_holds_across_a_resume(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    (tmp_path / "ship_order.count").write_text("1")
    loop = [tc("check_stock", item=f"A-{i}") for i in range(5)]
    backend = ScriptedBackend(loop[:2])
    agent = Agent(Model(backend, family="qwen2.5"), resumable_run.tools(tmp_path), max_steps=3)
    with pytest.raises(UsageError, match="no replies left"):  # the script ends after two turns: the process "died"
        agent.run("go", run_file=run_file)
    backend = ScriptedBackend(loop[2:])
    with pytest.raises(MaxStepsExceeded):
        Agent(Model(backend, family="qwen2.5"), resumable_run.tools(tmp_path), max_steps=3).resume(run_file)
    assert len(backend.prompts) == 1  # steps 1 and 2 were on file; one more reached the limit


def test_run_file_errors_are_typed(tmp_path: Path) -> None:
    run_file = tmp_path / "run.jsonl"
    run_file.write_text("")
    agent = Agent(Model(ScriptedBackend(["hi"]), family="qwen2.5"), [])
    with pytest.raises(UsageError, match="already exists"):
        agent.run("go", run_file=run_file)
    with pytest.raises(DataError, match="not a localtools run file"):
        agent.resume(run_file)
    with pytest.raises(UsageError, match="no run file"):
        agent.resume(tmp_path / "missing.jsonl")
    run_file.write_text('{"kind": "run", "version": 1, "run_id": "x", "messages": [], "tools": []}\nnot json\n{}\n')
    with pytest.raises(DataError, match=":2 is not a JSON record"):
        agent.resume(run_file)


def test_cli_run_file_continues_a_run_and_audit_log_records_each_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import localtools.cli as cli
    from localtools.cli import _common

    run_file = kill_in_first_turn(tmp_path, None)
    monkeypatch.setattr(_common, "load_model", lambda args: Model(ScriptedBackend(["Order 42 has shipped."]), family="qwen2.5"))
    monkeypatch.setattr(_common, "load_tools", lambda specs: resumable_run.tools(tmp_path))
    audit = tmp_path / "audit.jsonl"
    assert cli.main(["run", "ignored: read from the file", "--run-file", str(run_file), "--audit-log", str(audit)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "Order 42 has shipped." and f"continuing the run in {run_file}" in captured.err
    assert counts(tmp_path) == {"check_stock": 1, "ship_order": 2}
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["tool"], r["outcome"], r["arguments"]) for r in lines] == [("ship_order", "ok", {"order_id": 42})]
    assert lines[0]["run_id"] == records(run_file)[0]["run_id"]


def _look_tool(counter: dict[str, int]) -> Tool:
    def look(q: str) -> str:
        """Look something up.

        Args:
            q: What.
        """
        counter[q] = counter.get(q, 0) + 1
        return f"answer for {q}"

    return Tool.from_function(look)


def _cut_after(run_file: Path, keep: Callable[[list[dict]], int]) -> None:
    lines = run_file.read_text().splitlines()
    run_file.write_text("\n".join(lines[: keep([json.loads(line) for line in lines])]) + "\n")


def test_a_run_with_repeated_calls_replays_and_resumes(tmp_path: Path) -> None:
    counter: dict[str, int] = {}
    run_file = tmp_path / "run.jsonl"
    backend = ScriptedBackend([tc("look", q="x"), tc("look", q="x"), "x it is"])
    Agent(Model(backend, family="qwen2.5"), [_look_tool(counter)]).run("go", run_file=run_file)
    # Cut before the end record: the run resumes after its second step, whose call was a repeat.
    _cut_after(run_file, lambda rs: next(i for i, r in enumerate(rs) if r["kind"] == "turn" and r["step"] == 3))
    result = Agent(Model(ScriptedBackend(["x it is"]), family="qwen2.5"), [_look_tool(counter)]).resume(run_file)
    assert result.answer == "x it is" and counter == {"x": 1}
    assert [c.outcome for s in result.trace[:2] for c in s.calls] == [CallOutcome.OK, CallOutcome.REPEATED]


def test_a_duplicate_of_a_call_that_finished_before_the_kill_is_not_run(tmp_path: Path) -> None:
    counter: dict[str, int] = {}
    run_file = tmp_path / "run.jsonl"
    backend = ScriptedBackend([tc("look", q="y") + "\n" + tc("look", q="y") + "\n" + tc("look", q="z"), "done"])
    Agent(Model(backend, family="qwen2.5"), [_look_tool(counter)]).run("go", run_file=run_file)
    # As if killed after y's result was written and before z's.
    _cut_after(run_file, lambda rs: next(i for i, r in enumerate(rs) if r.get("state") == "done") + 1)
    counter.clear()
    result = Agent(Model(ScriptedBackend(["done"]), family="qwen2.5"), [_look_tool(counter)]).resume(run_file)
    assert counter == {"z": 1}
    assert [c.outcome for c in result.trace[0].calls] == [CallOutcome.OK, CallOutcome.REPEATED, CallOutcome.OK]


def test_citation_ids_survive_a_resume(tmp_path: Path) -> None:
    counter: dict[str, int] = {}
    run_file = tmp_path / "run.jsonl"
    backend = ScriptedBackend([tc("look", q="a"), tc("look", q="b"), "a [r1] and b [r2]"])
    Agent(Model(backend, family="qwen2.5"), [_look_tool(counter)], cite=True).run("go", run_file=run_file)
    _cut_after(run_file, lambda rs: next(i for i, r in enumerate(rs) if r["kind"] == "turn" and r["step"] == 2))
    backend = ScriptedBackend([tc("look", q="b"), "a [r1] and b [r2]"])
    result = Agent(Model(backend, family="qwen2.5"), [_look_tool(counter)], cite=True).resume(run_file)
    assert "[r1] answer for a" in backend.prompts[0].text
    assert {ref: c.arguments["q"] for ref, c in result.citations.items()} == {"r1": "a", "r2": "b"}


def test_a_resumed_run_traces_no_failed_turn(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from localtools import OpenTelemetry

    run_file = kill_in_first_turn(tmp_path, None)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(Model(ScriptedBackend(["Order 42 has shipped."]), family="qwen2.5"), resumable_run.tools(tmp_path),
                  observers=[OpenTelemetry(provider)])
    agent.resume(run_file)
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans if s.status.status_code.name == "ERROR"] == []
    assert sorted(s.name for s in spans if s.name.startswith("execute_tool")) == ["execute_tool check_stock",
                                                                                   "execute_tool ship_order"]
