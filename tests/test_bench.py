"""`localtools bench` end to end on the scripted backend: the numbers follow from the script."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import localtools
from localtools import Model, ScriptedBackend
from localtools.bench._bfcl import load_cases
from localtools.bench._runner import Mode, run_bench, summarize
from localtools.grammar import Grammar, matches

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


def reply(prompt: localtools.Prompt, grammar: Grammar | None) -> str:
    text = prompt.text
    if m := re.search(r"Area of side (\d)\?", text):
        side = int(m.group(1))
        if grammar is None:  # free decoding: side 1 is unreadable, side 2 has a string where an integer goes
            return {1: "<tool_call>\n{oops\n</tool_call>", 2: call("2")}.get(side, call(side))
        return call(side + 1 if side == 3 else side)  # constrained: side 3 gets a wrong value
    poem = int(re.search(r"Poem number (\d)\?", text).group(1))  # type: ignore[union-attr]
    if grammar is None:
        return call(7) if poem == 0 else "Roses are red."
    # Constrained text may still spell a call in a wrapping the grammar does not know: a disguised call,
    # read after decoding and decoded again under a grammar that bars it.
    disguise = '<json>\n{"name": "area", "arguments": {"side": 1}}\n</json>'
    return disguise if poem == 1 and matches(grammar, disguise) else "Roses are red."


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
    assert rows[cons, "irrelevance"]["disguised_calls"] == 0 and rows[free, "all"]["disguised_calls"] == 0
    assert rows[cons, "irrelevance"]["disguises_caught"] == 1 and rows[free, "all"]["disguises_caught"] == 0
    unreadable = next(r for r in results if r.mode == free and r.case_id == "simple_python_1")
    assert not unreadable.valid and unreadable.reason.startswith("ToolCallParseError")
    assert unreadable.raw == "<tool_call>\n{oops\n</tool_call>"  # kept whole for diagnosis
    typed = next(r for r in results if r.mode == free and r.case_id == "simple_python_2")
    assert not typed.valid and "is not of type 'integer'" in typed.reason


def test_cli_bench_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: scripted_model())
    out = tmp_path / "bench.json"
    code = main(["bench", "--data", str(_folder(tmp_path)), "--category", "simple_python", "--category", "irrelevance",
                 "--sample", "3", "--model", "fake", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["meta"]["modes"] == ["fake llama-cpp free auto", "fake llama-cpp constrained auto"]
    assert report["meta"]["decisions"] == {"fake llama-cpp": "greedy"}
    assert len(report["cases"]) == (3 + 2) * 2
    summary = {(r["mode"], r["category"]): r for r in report["summary"]}
    assert summary["fake llama-cpp constrained auto", "irrelevance"]["accuracy"] == 1.0
    captured = capsys.readouterr()
    assert "fake llama-cpp constrained auto" in captured.out
    # Not a terminal (a log file): one progress line a case and mode, numbered, naming both.
    steps = [line for line in captured.err.splitlines() if line.startswith("bench ")]
    assert len(steps) == 10 and steps[-1].startswith("bench 10/10 fake llama-cpp")
    assert "note: fake llama-cpp constrained decides greedy" in captured.err


def test_cli_bench_on_the_calibration_split_asks_none_of_the_reported_cases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools.bench._bfcl import sample
    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: scripted_model())
    (tmp_path / "possible_answer").mkdir()
    many = [{"id": f"simple_python_{i}", "question": [[{"role": "user", "content": f"Area of side {i % 10}?"}]],
             "function": [AREA]} for i in range(60)]
    answers = [{"id": f"simple_python_{i}", "ground_truth": [{"area": {"side": [i % 10]}}]} for i in range(60)]
    (tmp_path / "BFCL_v4_simple_python.json").write_text("".join(json.dumps(q) + "\n" for q in many))
    (tmp_path / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
        "".join(json.dumps(a) + "\n" for a in answers))
    reported = {c.id for c in sample(load_cases(tmp_path, "simple_python"), 40, 0)}
    for split, sample_n in (("calibration", 8), ("report", 8)):
        out = tmp_path / f"{split}.json"
        assert main(["bench", "--data", str(tmp_path), "--category", "simple_python", "--sample", str(sample_n),
                     "--model", "fake", "--mode", "constrained", "--split", split, "--json", str(out)]) == 0
        report = json.loads(out.read_text())
        asked = {r["case_id"] for r in report["cases"]}
        assert len(asked) == sample_n and report["meta"]["split"] == split
        assert (asked & reported == set()) if split == "calibration" else \
            asked == {c.id for c in sample(load_cases(tmp_path, "simple_python"), sample_n, 0)}


def test_cli_bench_says_what_a_model_decides_on_and_greedy_asks_for_greedy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main
    from localtools.model import _load
    from localtools.model._decide import Decisions

    asked: list[Any] = []

    def load(name: str, backend: str, decisions: Any = None) -> Any:
        asked.append(decisions)
        model = scripted_model()
        model.decisions = Decisions(form=0.0001, more=0.02) if decisions is None else None
        return model

    monkeypatch.setattr(_load, "load", load)
    argv = ["bench", "--data", str(_folder(tmp_path)), "--category", "irrelevance", "--sample", "1", "--model", "fake",
            "--mode", "constrained"]
    assert main(argv) == 0
    assert "fake llama-cpp constrained decides on more 0.02, form 0.0001" in capsys.readouterr().err
    assert main([*argv, "--greedy"]) == 0
    assert "fake llama-cpp constrained decides greedy" in capsys.readouterr().err
    assert asked == [None, "greedy"]


def test_cli_bench_draws_the_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: scripted_model())
    png = tmp_path / "bench.png"
    assert main(["bench", "--data", str(_folder(tmp_path)), "--category", "simple_python", "--category", "irrelevance",
                 "--model", "fake", "--plot", str(png)]) == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def test_plot_needs_matplotlib_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from localtools.cli import main
    from localtools.model import _load

    loads: list[str] = []

    def load(name: str, backend: str) -> Model:
        loads.append(name)
        return scripted_model()

    monkeypatch.setattr(_load, "load", load)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code = main(["bench", "--data", str(_folder(tmp_path)), "--category", "irrelevance", "--model", "fake",
                 "--plot", str(tmp_path / "x.png")])
    assert code == 2 and loads == []
    assert "pip install 'localtools[bench]'" in capsys.readouterr().err


@pytest.fixture
def openai_server() -> Iterator[str]:
    server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("openai_fixture_server.py"))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.kill()
        server.wait()


def test_openai_peer_is_scored_on_tool_calls_only(tmp_path: Path, openai_server: str) -> None:
    from localtools.cli import main

    out = tmp_path / "peer.json"
    assert main(["bench", "--data", str(_folder(tmp_path)), "--category", "simple_python", "--category", "irrelevance",
                 "--peers-only", "--peer", f"openai:{openai_server}", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    label = f"fixture-model openai:{openai_server} auto"
    assert report["meta"]["modes"] == [label]
    cases = {c["case_id"]: c for c in report["cases"]}
    # side 0 and 3: tool_calls with the right argument; side 1: the call only as fenced JSON in content.
    assert cases["simple_python_0"]["correct"] and cases["simple_python_3"]["correct"]
    assert not cases["simple_python_1"]["correct"] and cases["simple_python_1"]["valid"]
    assert cases["simple_python_1"]["calls"] == []
    assert "```json" in json.loads(cases["simple_python_1"]["raw"])["content"]
    assert not cases["simple_python_2"]["valid"] and "arguments are not valid JSON" in cases["simple_python_2"]["reason"]
    assert cases["irrelevance_0"]["correct"]
    assert not cases["irrelevance_1"]["correct"] and cases["irrelevance_1"]["reason"].startswith("HTTP 500")
    rows = {r["category"]: r for r in report["summary"]}
    assert rows["simple_python"]["accuracy"] == 0.5 and rows["simple_python"]["valid_rate"] == 0.75
    assert rows["all"]["irrelevance_accuracy"] == 0.5 and rows["all"]["call_accuracy"] == 0.5
    # Only side 3 came with llama-server's timings: 200 ms of prompt, 900 ms for 9 tokens after the first.
    assert rows["simple_python"]["ttft_p50"] == pytest.approx(0.2)
    assert rows["simple_python"]["seconds_per_token"] == pytest.approx(0.1)


def test_openai_peer_without_a_server_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli import main

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["bench", "--data", str(_folder(tmp_path)), "--category", "irrelevance", "--peers-only",
                 "--peer", f"openai:http://127.0.0.1:{port}/v1"])
    assert code == 2
    assert f"no OpenAI-compatible server answers at http://127.0.0.1:{port}/v1" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["openai:localhost:8080", "vllm", "llama-cpp"])
def test_bad_peer_spec_is_named(spec: str) -> None:
    from localtools._errors import LocalToolsError
    from localtools.bench._peers import parse_peer

    with pytest.raises(LocalToolsError, match=re.escape(f"--peer {spec!r}")):
        parse_peer(spec)


def test_each_reply_starts_from_an_empty_prompt_cache(tmp_path: Path) -> None:
    class CachingBackend(ScriptedBackend):
        drops = 0

        def drop_prompt_cache(self) -> None:
            CachingBackend.drops += 1

    folder = _folder(tmp_path)
    model = Model(CachingBackend([reply] * 100), family="qwen2.5")
    modes = [Mode("m", "scripted", False), Mode("m", "scripted", True)]
    results = run_bench({("m", "scripted"): model}, modes, load_cases(folder, "simple_python"))
    assert CachingBackend.drops == len(results) == 8


def test_system_message_goes_to_every_case(tmp_path: Path) -> None:
    case = load_cases(_folder(tmp_path), "irrelevance")[0]
    assert case.with_system("Be brief.").messages == [{"role": "system", "content": "Be brief."}, *case.messages]
    twice = case.with_system("B").with_system("A")
    assert twice.messages[0] == {"role": "system", "content": "A\n\nB"} and case.messages[0]["role"] == "user"
