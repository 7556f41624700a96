"""What the layers around the loop cost a run, against the bare loop, in one run.

    .venv/bin/python benchmarks/loop_layers.py --runs 200

A scripted model (no generation time) answers a two-step run: one call, then the answer, with a
long system prompt and four tools so rendering is realistic. Each configuration runs ``--runs``
times, interleaved so machine noise hits all alike; the table gives the median milliseconds per
run and the ratio to the bare loop (``context=None``, no middleware, no run file). A real model
turn takes hundreds of milliseconds to seconds: the added milliseconds are what matter.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localtools import (
    Accounting,
    Agent,
    AuditLog,
    Cache,
    CircuitBreaker,
    ContextBudget,
    Model,
    OpenTelemetry,
    RateLimit,
    Retry,
    ScriptedBackend,
    Truncate,
    tool,
)


@tool(idempotent=True)
def get_customer(customer_id: str) -> dict[str, Any]:
    """Look up a customer record by id.

    Args:
        customer_id: The customer id.
    """
    return {"id": customer_id, "plan": "pro", "notes": "x" * 400}


def _other(name: str) -> Any:
    def fn(query: str) -> str:
        return query

    return tool(name=name, description=f"{name.replace('_', ' ')} for a query")(fn)


TOOLS = [get_customer, _other("search_orders"), _other("find_invoices"), _other("list_tickets")]
REPLY = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
SYSTEM = "You are a support assistant. " * 60


def configurations(workdir: Path) -> dict[str, Callable[[], dict[str, Any]]]:
    n = iter(range(10**9))
    return {
        "bare loop (context=None)": lambda: {"context": None},
        "context budget (default)": lambda: {"context": ContextBudget()},
        "budget cuts a result": lambda: {"context": ContextBudget(n_ctx=3700, reserve=64)},
        "six middleware": lambda: {"context": None, "middleware": [
            AuditLog(workdir / "audit.jsonl"), Accounting(), Cache(), CircuitBreaker(), Retry(), RateLimit(10_000)]},
        "run file": lambda: {"context": None, "_run_file": workdir / f"run{next(n)}.jsonl"},
        "Truncate(50) result": lambda: {"context": None, "result": Truncate(50)},
        "OpenTelemetry (no SDK)": lambda: {"context": None, "observers": [OpenTelemetry()]},
    }


def one_run(options: dict[str, Any]) -> float:
    run_file = options.pop("_run_file", None)
    backend = ScriptedBackend([REPLY, "Ada is on the pro plan."], n_ctx=100_000)
    agent = Agent(Model(backend, family="qwen2.5"), TOOLS, system=SYSTEM, max_tokens=128, **options)
    started = time.perf_counter()
    agent.run("What plan is cust-1001 on?", run_file=run_file)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        configs = configurations(Path(tmp))
        times: dict[str, list[float]] = {name: [] for name in configs}
        for _ in range(3):  # warm-up: imports, template compilation
            for make in configs.values():
                one_run(make())
        for _ in range(args.runs):
            for name, make in configs.items():
                times[name].append(one_run(make()))
    base = statistics.median(times["bare loop (context=None)"])
    print(f"{'configuration':<28} {'ms/run':>8} {'vs bare':>8} {'+ms':>7}")
    rows = []
    for name, values in times.items():
        med = statistics.median(values)
        rows.append({"configuration": name, "ms": med * 1000, "ratio": med / base})
        print(f"{name:<28} {med * 1000:8.2f} {med / base:7.2f}x {1000 * (med - base):+7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
