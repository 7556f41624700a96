"""BFCL-format data: question lines, possible-answer lines, and their schemas as JSON Schema.

``--bfcl`` data comes from the ``bfcl-eval`` wheel, fetched with ``pip download --no-deps`` (its
dependencies are never installed) and unpacked once into the cache; any folder in the same
format works through ``load_cases(folder, category)``.
"""

from __future__ import annotations

import json
import random
import tempfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._errors import DataError
from ..families._prompt import with_system as _with_system
from ..host._catalog import _download, cache_dir

__all__ = ["CATEGORIES", "Case", "bfcl_data_dir", "load_cases", "sample", "to_json_schema", "to_tool_spec"]

#: Categories the bench knows; ``irrelevance``'s right answer is no call.
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    messages: list[dict[str, Any]]
    #: OpenAI-style tool specs with JSON Schema parameters.
    tools: list[dict[str, Any]]
    #: Expected calls, ``[{name: {param: [allowed, ...]}}]``; ``[]`` means no call.
    expected: list[dict[str, Any]]

    def with_system(self, text: str) -> Case:
        """The same case with ``text`` as its system message (before any system message it has)."""
        return replace(self, messages=_with_system(list(self.messages), text))


def to_json_schema(schema: Any) -> Any:
    """BFCL's Python-flavoured types (dict, float, tuple, any) as JSON Schema, recursively."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            if value == "any":
                continue  # any JSON value
            out[key] = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


def to_tool_spec(function: dict[str, Any]) -> dict[str, Any]:
    params = to_json_schema(function.get("parameters") or {"type": "object", "properties": {}})
    return {"type": "function", "function": {"name": function["name"], "description": function.get("description", ""),
                                             "parameters": params}}


def _lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: not a JSON line ({exc})") from None
    return rows


def load_cases(folder: str | Path, category: str) -> list[Case]:
    """The cases of ``category`` in a BFCL-format folder (``BFCL_v4_<category>.json`` plus
    ``possible_answer/BFCL_v4_<category>.json``; irrelevance needs no answers)."""
    folder = Path(folder)
    questions = folder / f"BFCL_v4_{category}.json"
    if not questions.is_file():
        known = sorted(p.name[len("BFCL_v4_"):-len(".json")] for p in folder.glob("BFCL_v4_*.json"))
        raise DataError(f"no {questions.name} in {folder}; categories there: {', '.join(known) or '(none)'}")
    answers_path = folder / "possible_answer" / questions.name
    answers = {row["id"]: row["ground_truth"] for row in _lines(answers_path)} if answers_path.is_file() else {}
    cases = []
    for row in _lines(questions):
        if row["id"] not in answers and "irrelevance" not in category:
            raise DataError(f"{answers_path}: no possible answer for {row['id']}")
        turns = row["question"]
        cases.append(Case(
            id=row["id"],
            category=category,
            messages=list(turns[0]) if turns and isinstance(turns[0], list) else list(turns),
            tools=[to_tool_spec(f) for f in row["function"]],
            expected=answers.get(row["id"], []),
        ))
    return cases


def sample(cases: list[Case], n: int | None, seed: int = 0) -> list[Case]:
    """``n`` cases spread evenly over the list; ``seed`` shifts where the spread starts."""
    if n is None or n >= len(cases):
        return list(cases)
    step = len(cases) / n
    offset = random.Random(seed).random() * step
    return [cases[int(offset + i * step)] for i in range(n)]


def bfcl_data_dir(*, download: bool = True) -> Path:
    """The ``bfcl_eval/data`` folder from the ``bfcl-eval`` wheel, unpacked under the cache."""
    target = cache_dir().parent / "bfcl"
    data = target / "bfcl_eval" / "data"
    if (data / "BFCL_v4_simple_python.json").is_file():
        return data
    if not download:
        raise DataError("BFCL data is not downloaded yet (run once with download on)")
    with tempfile.TemporaryDirectory() as tmp:
        _download(["bfcl-eval"], Path(tmp))
        wheels = list(Path(tmp).glob("bfcl_eval-*.whl"))
        if not wheels:
            raise DataError("pip did not produce a bfcl-eval wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if m.startswith("bfcl_eval/data/") and m.endswith(".json")]
            wheel.extractall(target, members)
    return data
