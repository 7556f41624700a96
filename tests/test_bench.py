"""`localtools bench` end to end on the scripted backend: the numbers follow from the script."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import localtools
from localtools import Model, ScriptedBackend
from localtools._bench import Mode, run_bench, summarize
from localtools._bfcl import load_cases

AREA = {"name": "area", "description": "Area of a square.", "parameters": {
    "type": "dict", "properties": {"side": {"type": "integer"}, "unit": {"type": "string"}}, "required": ["side"]}}


def _folder(tmp: Path) -> Path:
    (tmp / "possible_answer").mkdir()
    simple = [{"id": f"simple_python_{i}", "question": [[{"role": "user", "content": f"Area of side {i}?"}]], "function": [AREA]}
              for i in range(4)]
    answers = [{"id": f"simple_python_{i}", "ground_truth": [{"area": {"side": [i], "unit": ["cm", ""]}}]} for i in range(4)]
    irrelevant = [{"id": f"irrelevance_{i}", "question": [[{"role": "user", "content": f"Poem number {i}?"}]], "function": [AREA]}
                  for i in range(2)]
    (tmp / "BFCL_v4_simple_python.json").write_text("".join(json.dumps(q) + "\n" for q in simple))
    (tmp / "possible_answer" / "BFCL_v4_simple_python.json").write_text("".join(json.dumps(a) + "\n" for a in answers))
    (tmp / "BFCL_v4_irrelevance.json").write_text("".join(json.dumps(q) + "\n" for q in irrelevant))
    return tmp


def call(side: object) -> str:
    return '<tool_call>\n{"name": "area", "arguments": {"side": ' + json.dumps(side) + "}}\n</tool_call>"


def reply(prompt: localtools.Prompt, grammar: object) -> str:
    text = prompt.text
    if m := re.search(r"Area of side (\d)\?", text):
        side = int(m.group(1))
        if grammar is None:  # free decoding: side 1 is unreadable, side 2 has a string where an integer goes
            return {1: "<tool_call>\n{oops\n</tool_call>", 2: call("2")}.get(side, call(side))
        return call(side + 1 if side == 3 else side)  # constrained: side 3 gets a wrong value
    poem = int(re.search(r"Poem number (\d)\?", text).group(1))  # type: ignore[union-attr]
    if grammar is None:
        return call(7) if poem == 0 else "Roses are red."
    return "Roses are red."


def scripted_model() -> Model:
    return Model(ScriptedBackend([reply] * 100), family="qwen2.5")


def test_run_bench_scores_each_mode(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    cases = load_cases(folder, "simple_python") + load_cases(folder, "irrelevance")
    modes = [Mode("m", "scripted", False), Mode("m", "scripted", True)]
    results = run_bench({("m", "scripted"): scripted_model()}, modes, cases)
    assert len(results) == 12
    rows = {(r["mode"], r["category"]): r for r in summarize(results, modes)}
    free, cons = modes[0].label, modes[1].label
    assert rows[free, "simple_python"]["accuracy"] == 0.5 and rows[free, "simple_python"]["valid_rate"] == 0.5
    assert rows[cons, "simple_python"]["accuracy"] == 0.75 and rows[cons, "simple_python"]["valid_rate"] == 1.0
    assert rows[free, "irrelevance"]["accuracy"] == 0.5 and rows[cons, "irrelevance"]["accuracy"] == 1.0
    assert rows[cons, "all"]["cases"] == 6 and rows[cons, "all"]["accuracy"] == 5 / 6
    unreadable = next(r for r in results if r.mode == free and r.case_id == "simple_python_1")
    assert not unreadable.valid and unreadable.reason.startswith("ToolCallParseError")
    typed = next(r for r in results if r.mode == free and r.case_id == "simple_python_2")
    assert not typed.valid and "is not of type 'integer'" in typed.reason


def test_cli_bench_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools import _load
    from localtools.cli import main

    monkeypatch.setattr(_load, "load", lambda name, backend: scripted_model())
    out = tmp_path / "bench.json"
    code = main(["bench", "--data", str(_folder(tmp_path)), "--category", "simple_python", "--category", "irrelevance",
                 "--sample", "3", "--model", "fake", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["meta"]["modes"] == ["fake llama-cpp free auto", "fake llama-cpp constrained auto"]
    assert len(report["cases"]) == (3 + 2) * 2
    summary = {(r["mode"], r["category"]): r for r in report["summary"]}
    assert summary["fake llama-cpp constrained auto", "irrelevance"]["accuracy"] == 1.0
    assert "fake llama-cpp constrained auto" in capsys.readouterr().out
