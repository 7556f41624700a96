"""The development sets under benchmarks/data/dev: they load as the bench loads them, the generator
writes what is committed, and every allowed answer is a call the checker takes and its schema admits."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from localtools.bench._bfcl import load_cases
from localtools.bench._checker import check_calls
from localtools.model._decide import said

DEV = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "dev"
SETS = ("zh", "ja", "es", "en", "multiturn")
CATEGORIES = ("simple_python", "multiple", "irrelevance")


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_dev", DEV / "make_dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _choices(allowed: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of allowed values, an optional argument left out where "" allows it."""
    keys = list(allowed)
    out = []
    for values in itertools.product(*(allowed[k] for k in keys)):
        out.append({k: v for k, v in zip(keys, values, strict=True) if v != ""})
    return out


def test_the_committed_files_are_what_the_generator_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_dev = _generator()
    monkeypatch.setattr(make_dev, "HERE", tmp_path)
    make_dev.main()
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.json"))
    committed = sorted(p.relative_to(DEV) for p in DEV.rglob("*.json"))
    assert written == committed
    for path in written:
        assert (tmp_path / path).read_text(encoding="utf-8") == (DEV / path).read_text(encoding="utf-8"), path


@pytest.mark.parametrize("folder", SETS)
def test_every_case_loads_and_its_answers_are_calls_the_checker_and_schema_take(folder: str) -> None:
    count = 0
    for category in CATEGORIES:
        cases = load_cases(DEV / folder, category)
        assert cases, (folder, category)
        count += len(cases)
        for case in cases:
            assert case.messages[-1]["role"] == "user"
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in case.tools}
            if category == "irrelevance":
                assert case.expected == []
                continue
            assert case.expected, case.id
            for want in case.expected:
                ((name, allowed),) = want.items()
                for arguments in _choices(allowed):
                    jsonschema.validate(arguments, schemas[name])
                    assert check_calls([(name, arguments)], [want], schemas).ok, (case.id, arguments)
    assert 20 <= count <= 40, (folder, count)


def test_second_turns_carry_a_call_and_its_result_before_the_new_request() -> None:
    for category in CATEGORIES:
        for case in load_cases(DEV / "multiturn", category):
            roles = [m["role"] for m in case.messages]
            assert roles[0] == "user" and roles[1] == "assistant" and roles[-1] == "user", case.id
            calls = case.messages[1]["tool_calls"]
            assert roles[2:-1] == ["tool"] * len(calls), case.id
            assert [m["tool_call_id"] for m in case.messages[2:-1]] == [c["id"] for c in calls]
            # The first turn's calls are to offered tools, and their results are part of what was said.
            offered = {t["function"]["name"] for t in case.tools}
            assert {c["function"]["name"] for c in calls} <= offered, case.id
            assert json.loads(case.messages[2]["content"]) is not None
            assert case.messages[2]["content"] in said(case.messages)
