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
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from .._errors import DataError
from ..families._prompt import with_system as _with_system
from ..host._catalog import _download, cache_dir

__all__ = ["CATEGORIES", "Case", "bfcl_data_dir", "conversation", "load_cases", "sample", "to_json_schema", "to_tool_spec",
           "unpack_bfcl_eval"]

#: Categories the bench knows; ``irrelevance``'s right answer is no call.
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
_Item = TypeVar("_Item")
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


_ROLES = ("system", "user", "assistant", "tool")


def conversation(turns: Any, where: str) -> list[dict[str, Any]]:
    """A question's messages: the conversation up to the reply the bench asks for.

    BFCL writes one turn, a list of messages (a bare list of messages is taken as that turn). A
    user's second request after a tool result is written out: the first turn, then turns that each
    begin with the assistant's reply (its ``tool_calls``, then a ``tool`` message for each call, then
    the user again), in one turn or several; the last message is the user's. Calls' arguments and
    results may be written as JSON objects and ids left out: they are given in the shape an OpenAI
    client sends (strings, ids of nine letters and digits, each result answering its call's id), so
    every mode and peer reads the same conversation. ``where`` names the case in errors.
    """
    if not isinstance(turns, list) or not turns:
        raise DataError(f"{where}: the question is not a list of turns")
    turns = turns if isinstance(turns[0], list) else [turns]
    messages: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        if not isinstance(turn, list) or not all(isinstance(m, dict) for m in turn):
            raise DataError(f"{where}: turn {index} is not a list of messages")
        if index and (not turn or turn[0].get("role") != "assistant"):
            # BFCL's multi-turn categories hold only the user's turns, the replies between them made
            # live: the bench asks for one reply, to a conversation written out.
            raise DataError(f"{where}: turn {index} does not begin with the assistant's reply (a later turn "
                            "continues a written conversation)")
        messages += [dict(m) for m in turn]
    pending: list[str] = []  # the ids of the calls not answered yet, in order
    made = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in _ROLES:
            raise DataError(f"{where}: message {index} has role {role!r}; expected one of {', '.join(_ROLES)}")
        if role == "tool":
            if not pending:
                raise DataError(f"{where}: message {index} is a tool result that answers no call")
            answers = message.setdefault("tool_call_id", pending[0])
            if answers not in pending:
                raise DataError(f"{where}: message {index} answers {answers!r}, which no call waiting for a "
                                "result has as its id")
            pending.remove(answers)
            if not isinstance(message.get("content"), str):
                message["content"] = json.dumps(message.get("content"), ensure_ascii=False)
            continue
        if pending:
            raise DataError(f"{where}: message {index} comes before the result of call {pending[0]!r}")
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                made += 1
                calls.append(_call(call, f"{where}: message {index}", f"call{made:05d}"))
            message["tool_calls"], pending = calls, [c["id"] for c in calls]
            message.setdefault("content", "")
    if pending:
        raise DataError(f"{where}: call {pending[0]!r} has no result")
    if messages[-1].get("role") != "user":
        raise DataError(f"{where}: the conversation does not end with the user's message")
    return messages


def _call(call: Any, where: str, default_id: str) -> dict[str, Any]:
    """A written call in OpenAI's shape: ``{"id", "type": "function", "function": {"name", "arguments"}}``,
    the arguments a JSON string."""
    function = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise DataError(f"{where}: a tool call has no function name")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: the arguments of {function['name']!r} are not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise DataError(f"{where}: the arguments of {function['name']!r} are not an object")
    own = call.get("id") if "function" in call else None
    return {"id": str(own) if own else default_id, "type": "function",
            "function": {"name": function["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}}


def load_cases(folder: str | Path, category: str) -> list[Case]:
    """The cases of ``category`` in a BFCL-format folder (``BFCL_v4_<category>.json`` plus
    ``possible_answer/BFCL_v4_<category>.json``; irrelevance needs no answers, and a ground truth
    ``[]`` means no call in any category). A question may be a conversation written out past a tool
    result (``conversation``)."""
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
        cases.append(Case(
            id=row["id"],
            category=category,
            messages=conversation(row["question"], f"{questions}: {row['id']}"),
            tools=[to_tool_spec(f) for f in row["function"]],
            expected=answers.get(row["id"], []),
        ))
    return cases


def sample(cases: list[_Item], n: int | None, seed: int = 0) -> list[_Item]:
    """``n`` cases spread evenly over the list; ``seed`` shifts where the spread starts (0: none)."""
    if n is None or n >= len(cases):
        return list(cases)
    if n <= 0:
        return []
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
    unpack_bfcl_eval(target, lambda m: m.startswith("bfcl_eval/data/") and m.endswith(".json"))
    return data


def unpack_bfcl_eval(target: Path, keep: Callable[[str], bool]) -> None:
    """The ``bfcl-eval`` wheel's files ``keep`` names, fetched without its dependencies and
    unpacked under ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        _download(["bfcl-eval"], Path(tmp))
        wheels = list(Path(tmp).glob("bfcl_eval-*.whl"))
        if not wheels:
            raise DataError("pip did not produce a bfcl-eval wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(target, [m for m in wheel.namelist() if keep(m)])
