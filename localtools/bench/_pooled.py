"""BFCL cases asked against one pooled tool set: every case's tools in one list of hundreds, offered
whole (no routing) or routed to the top k per question, scored against each case's expected call.

A prompt that leaves fewer than ``max_tokens`` of the model's context is not generated: it is
counted and scored wrong, as a client with that many tools would get an error.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._errors import ContextLengthExceeded
from ..agent._routing import EmbeddingRouter, Router
from ..model._model import Model
from ..tools._tools import Tool
from ._bfcl import Case
from ._runner import CaseResult, Mode, rotated, run_one

__all__ = ["Pool", "PooledMode", "PooledResult", "pool_tools", "run_pooled", "summarize_pooled"]


@dataclass(frozen=True)
class Pool:
    #: One spec per name, in the order the cases define them.
    specs: list[dict[str, Any]]
    #: Names a later case defines with another description or schema; the first definition is kept.
    redefined: list[str]

    def __len__(self) -> int:
        return len(self.specs)


def pool_tools(cases: Iterable[Case]) -> Pool:
    """Every case's tools in one list, deduplicated by name (the first definition wins)."""
    first: dict[str, dict[str, Any]] = {}
    redefined: dict[str, None] = {}
    for case in cases:
        for spec in case.tools:
            name = spec["function"]["name"]
            if name not in first:
                first[name] = spec
            elif first[name] != spec:
                redefined[name] = None
    return Pool(list(first.values()), list(redefined))


@dataclass(frozen=True)
class PooledMode(Mode):
    """A mode asked with the whole pool (``route_k=None``) or with the top ``route_k`` tools."""

    route_k: int | None = None

    @property
    def label(self) -> str:
        return f"{super().label} {'all tools' if self.route_k is None else f'top {self.route_k}'}"


@dataclass
class PooledResult(CaseResult):
    #: Tools in the prompt.
    offered: int = 0
    #: Every tool the case expects was offered (the router's recall; always so without routing).
    expected_offered: bool = False
    #: The prompt left fewer than max_tokens of the context: not generated, scored wrong.
    over_context: bool = False
    #: An expected tool is defined differently in the pool than in the case (another case's definition was kept).
    redefined: bool = False
    route_seconds: float = 0.0


def _never_run(**_: Any) -> Any:
    raise AssertionError("the bench scores calls; it never runs them")


def _expected_names(case: Case) -> set[str]:
    return {name for call in case.expected for name in call}


def run_pooled(
    models: dict[tuple[str, str], Model],
    modes: Sequence[PooledMode],
    cases: Iterable[Case],
    pool: Pool,
    *,
    max_tokens: int = 256,
    router: Callable[[int], Router] = EmbeddingRouter,
    on_result: Callable[[PooledResult], None] | None = None,
) -> list[PooledResult]:
    """Every mode on every case, each case asked with the pooled tools in place of its own;
    ``router(k)`` makes the router of a ``top k`` mode (default: ``EmbeddingRouter(k)``)."""
    tools = [Tool.from_schema(spec, _never_run) for spec in pool.specs]
    by_name = {spec["function"]["name"]: spec for spec in pool.specs}
    routers = {m.route_k: router(m.route_k) for m in modes if m.route_k is not None}
    for r in routers.values():
        # Loading the embedder and embedding the pool happen once, here: route_seconds is the per-question cost.
        r.select([{"role": "user", "content": "warm up"}], tools, keep=())
    out = []
    for case, mode, model in rotated(models, modes, cases):
        own = {spec["function"]["name"]: spec for spec in case.tools}
        redefined = any(own.get(name) != by_name.get(name) for name in _expected_names(case))
        started = time.perf_counter()
        offered = tools if mode.route_k is None else routers[mode.route_k].select(case.messages, tools, keep=())
        route_seconds = time.perf_counter() - started if mode.route_k is not None else 0.0
        result = _ask(model, mode, replace(case, tools=[by_name[t.name] for t in offered]), max_tokens)
        result.redefined, result.route_seconds = redefined, route_seconds
        out.append(result)
        if on_result:
            on_result(result)
    return out


def _ask(model: Model, mode: PooledMode, case: Case, max_tokens: int) -> PooledResult:
    names = {spec["function"]["name"] for spec in case.tools}
    prompt = model.render(case.messages, case.tools, tool_choice=mode.tool_choice)
    tokens = len(model.backend.tokenize(prompt))
    n_ctx = model.backend.capabilities.max_ctx or model.backend.capabilities.n_ctx
    base = CaseResult(mode=mode.label, category=case.category, case_id=case.id, correct=False, valid=False)
    if isinstance(n_ctx, int) and tokens > n_ctx - max_tokens:
        base.reason = f"the prompt has {tokens} tokens: max_tokens={max_tokens} do not fit the {n_ctx}-token context"
        over = True
    else:
        try:
            base, over = run_one(model, mode, case, max_tokens), False
        except ContextLengthExceeded as exc:
            base.reason, over = str(exc), True
    result = PooledResult(**vars(base), offered=len(names), expected_offered=_expected_names(case) <= names,
                          over_context=over)
    result.prompt_tokens = tokens  # counted for every prompt, generated or not
    return result


def summarize_pooled(results: list[PooledResult], modes: Sequence[PooledMode]) -> list[dict[str, Any]]:
    """One row per mode; a routed row also compares itself with the same mode given every tool."""
    rows: dict[str, dict[str, Any]] = {}
    for mode in modes:
        mine = [r for r in results if r.mode == mode.label]
        if not mine:
            continue
        answered = [r for r in mine if r.completion_tokens]
        rows[mode.label] = {
            "mode": mode.label,
            "route_k": mode.route_k,
            "cases": len(mine),
            "accuracy": sum(r.correct for r in mine) / len(mine),
            "valid_rate": sum(r.valid for r in mine) / len(mine),
            "offered_mean": statistics.fmean(r.offered for r in mine),
            "expected_offered_rate": sum(r.expected_offered for r in mine) / len(mine),
            "prompt_tokens_mean": statistics.fmean(r.prompt_tokens for r in mine),
            "prompt_tokens_max": max(r.prompt_tokens for r in mine),
            "over_context": sum(r.over_context for r in mine),
            "redefined": sum(r.redefined for r in mine),
            "latency_p50": statistics.median([r.latency for r in answered]) if answered else None,
            "route_ms_mean": 1000 * statistics.fmean(r.route_seconds for r in mine) if mode.route_k is not None else None,
        }
    for mode in modes:
        row, whole = rows.get(mode.label), rows.get(replace(mode, route_k=None).label)
        if mode.route_k is None or row is None or whole is None:
            continue
        row["accuracy_vs_all"] = row["accuracy"] - whole["accuracy"]
        row["prompt_tokens_ratio_vs_all"] = row["prompt_tokens_mean"] / whole["prompt_tokens_mean"]
    return list(rows.values())
