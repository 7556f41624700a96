"""Constrained vs free decoding on BFCL-format cases: accuracy, validity and speed per mode.

One run covers every (model, backend, decoding, tool_choice) mode, and any peers, on the same
cases, so the ratios between modes come from one process on one machine.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import jsonschema

from .._errors import UsageError
from ..families._parse import disguised_calls
from ..model._decide import Decisions
from ..model._model import Model
from ._bfcl import Case
from ._checker import check_calls
from ._peers import ModelPeer, Peer, calls_from_message

__all__ = ["CaseResult", "Mode", "rotated", "run_bench", "summarize", "write_json"]


@dataclass(frozen=True)
class Mode:
    """One way of answering: a loaded model, free or constrained decoding, a tool_choice; or a peer
    (``backend`` is then the peer's name, and decoding is whatever the peer does)."""

    model: str
    backend: str
    constrained: bool
    tool_choice: str = "auto"
    peer: bool = False
    #: How it decides where the grammar leaves a choice (``None``: the model's own setting), and
    #: the name the label shows for it (``--levers``).
    decisions: Decisions | None = None
    lever: str = ""

    @property
    def label(self) -> str:
        if self.peer:
            return f"{self.model} {self.backend} {self.tool_choice}"
        decoding = "constrained" if self.constrained else "free"
        return f"{self.model} {self.backend} {decoding} {self.tool_choice}" + (f" {self.lever}" if self.lever else "")


@dataclass
class CaseResult:
    mode: str
    category: str
    case_id: str
    #: The calls match the possible answer (for irrelevance: no call).
    correct: bool
    #: The reply parsed and every call names a given tool with arguments that validate.
    valid: bool
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reason: str = ""
    latency: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: ``None`` where a peer does not report them.
    prompt_seconds: float | None = None
    decode_seconds: float | None = None
    #: What the model wrote: its text for local modes, the returned message as JSON for a peer.
    raw: str = ""
    #: Calls written as JSON inside the text answer, whatever their name: calls nobody checked or ran.
    disguised: int = 0
    #: Turns generated again because a call broke its schema, and whether it was refused at last.
    repairs: int = 0
    refused: bool = False
    #: Times the turn was decoded again because its text read as a call.
    disguises_caught: int = 0
    #: The decisions made on the model's probabilities (``Decision``: point, share, taken, argument).
    decisions: list[dict[str, Any]] = field(default_factory=list)


def _validate(calls: list[tuple[str, dict[str, Any]]], schemas: dict[str, Any]) -> str:
    for name, arguments in calls:
        if name not in schemas:
            return f"unknown tool {name!r}"
        try:
            jsonschema.validate(arguments, schemas[name])
        except jsonschema.ValidationError as exc:
            return f"{name}: {exc.message}"
    return ""


def _score(result: CaseResult, case: Case, problem: str, text: str) -> CaseResult:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in case.tools}
    result.disguised = len(disguised_calls(text))
    problem = problem or _validate(result.calls, schemas)
    result.valid = not problem
    verdict = check_calls(result.calls, case.expected, schemas)
    result.correct, result.reason = verdict.ok and not problem, problem or verdict.reason
    return result


def run_one(model: Model | Peer, mode: Mode, case: Case, max_tokens: int) -> CaseResult:
    """One case on one mode. Our own modes are asked as peers too (``ModelPeer``): every mode is
    scored on the message a client would get back."""
    peer = ModelPeer(model, constrained=mode.constrained, decisions=mode.decisions) if isinstance(model, Model) \
        else model
    result = CaseResult(mode=mode.label, category=case.category, case_id=case.id, correct=False, valid=False)
    reply = peer.chat(case.messages, case.tools, tool_choice=mode.tool_choice, max_tokens=max_tokens)
    result.latency, result.prompt_tokens, result.completion_tokens = reply.latency, reply.prompt_tokens, reply.completion_tokens
    result.prompt_seconds, result.decode_seconds = reply.prompt_seconds, reply.decode_seconds
    result.raw = reply.raw or (json.dumps(reply.message, ensure_ascii=False) if reply.message else "")
    result.repairs, result.refused = reply.repairs, reply.refused
    result.disguises_caught, result.decisions = reply.disguises_caught, reply.decisions
    if reply.error:
        result.reason = reply.error
        return result
    result.calls, problem = calls_from_message(reply.message)
    return _score(result, case, problem, str(reply.message.get("content") or ""))


def run_bench(
    models: dict[tuple[str, str], Model | Peer],
    modes: Sequence[Mode],
    cases: Iterable[Case],
    *,
    max_tokens: int = 256,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every mode on every case. The order of modes rotates from case to case, so slow spells of a
    noisy machine fall on every mode alike; each reply starts from an empty prompt cache."""
    out = []
    for case, mode, model in rotated(models, modes, cases):
        result = run_one(model, mode, case, max_tokens)
        out.append(result)
        if on_result:
            on_result(result)
    return out


M = TypeVar("M")
ModeT = TypeVar("ModeT", bound="Mode")


def rotated(models: Mapping[tuple[str, str], M], modes: Sequence[ModeT],
            cases: Iterable[Case]) -> Iterator[tuple[Case, ModeT, M]]:
    """Each case with each mode and its loaded model, the order of modes rotating from case to
    case (so slow spells of a noisy machine fall on every mode alike)."""
    for index, case in enumerate(cases):
        shift = index % len(modes) if modes else 0
        for mode in [*modes[shift:], *modes[:shift]]:
            model = models.get((mode.model, mode.backend))
            if model is None:
                raise UsageError(f"no loaded model for {mode.model} on {mode.backend}")
            yield case, mode, model


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _seconds_per_token(rows: list[CaseResult]) -> float | None:
    # Decode only: the first token carries prompt processing.
    timed = [r for r in rows if r.decode_seconds is not None]
    tokens = sum(max(r.completion_tokens - 1, 0) for r in timed)
    seconds = sum(r.decode_seconds or 0.0 for r in timed)
    return seconds / tokens if tokens and seconds else None


def summarize(results: list[CaseResult], modes: Sequence[Mode]) -> list[dict[str, Any]]:
    """One row per (mode, category) plus an "all" row per mode."""
    by_label = {m.label: m for m in modes}
    rows: list[dict[str, Any]] = []
    for label in by_label:
        mine = [r for r in results if r.mode == label]
        for category in [*dict.fromkeys(r.category for r in mine), "all"]:
            group = [r for r in mine if category in ("all", r.category)]
            if not group:
                continue
            answered = [r for r in group if r.completion_tokens]
            timed = [r for r in answered if r.prompt_seconds is not None]
            spt = _seconds_per_token(group)
            prompt_s = sum(r.prompt_seconds or 0.0 for r in timed)
            calls_expected = [r for r in group if r.category != "irrelevance"]
            rows.append({
                "mode": label,
                "category": category,
                "cases": len(group),
                "accuracy": sum(r.correct for r in group) / len(group),
                # Parsed, and every call (if any) names a given tool with arguments that validate.
                "valid_rate": sum(r.valid for r in group) / len(group),
                "irrelevance_accuracy": _share([r.correct for r in group if r.category == "irrelevance"]),
                "call_accuracy": _share([r.correct for r in calls_expected]),
                # Text answers holding a JSON call, whatever its name (the target is none).
                "disguised_calls": sum(1 for r in group if r.disguised),
                # Cases whose call broke its schema and was generated again; cases refused at last.
                "calls_repaired": sum(1 for r in group if r.repairs),
                "calls_refused": sum(1 for r in group if r.refused),
                # Cases whose text read as a call and were decoded again (caught before they left).
                "disguises_caught": sum(1 for r in group if r.disguises_caught),
                "latency_p50": statistics.median([r.latency for r in answered]) if answered else None,
                "latency_p95": _percentile([r.latency for r in answered], 0.95) if answered else None,
                "ttft_p50": statistics.median([r.prompt_seconds or 0.0 for r in timed]) if timed else None,
                "prompt_tokens_per_s": sum(r.prompt_tokens for r in timed) / prompt_s if prompt_s else None,
                "generated_tokens_per_s": 1 / spt if spt else None,
                "seconds_per_token": spt,
            })
    # Grammar overhead: each constrained mode against the free mode of the same model and backend.
    free = {(m.model, m.backend, m.tool_choice): m.label for m in modes if not m.constrained and not m.peer}
    spt_of: dict[tuple[str, str], float | None] = {(r["mode"], r["category"]): r["seconds_per_token"] for r in rows}
    for row in rows:
        mode = by_label[row["mode"]]
        base = free.get((mode.model, mode.backend, mode.tool_choice))
        ref = spt_of.get((base, row["category"])) if base else None
        if mode.constrained and ref and row["seconds_per_token"]:
            row["grammar_overhead_ms_per_token"] = (row["seconds_per_token"] - ref) * 1000
            row["grammar_overhead_ratio"] = row["seconds_per_token"] / ref
    return rows


def write_json(path: str | Path, rows: list[dict[str, Any]], results: list[CaseResult], meta: dict[str, Any], *,
               scenarios: tuple[list[dict[str, Any]], list[Any]] | None = None) -> None:
    report: dict[str, Any] = {"meta": meta, "summary": rows, "cases": [asdict(r) for r in results]}
    if scenarios and scenarios[0]:
        report["scenario_summary"], report["scenarios"] = scenarios[0], [asdict(r) for r in scenarios[1]]
    Path(path).write_text(json.dumps(report, indent=1), encoding="utf-8")
