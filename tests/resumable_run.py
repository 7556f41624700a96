"""A run to kill and resume: ``python resumable_run.py RUN_FILE WORKDIR [MODEL]``.

Its tools count their executions in WORKDIR; ``ship_order`` hangs the first time it runs, so a
test can kill this process in the middle of the run's first turn, with ``check_stock`` done. With
MODEL (a catalog name) the real model answers; without it a scripted one does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from localtools import Agent, Model, ScriptedBackend, Tool, load

QUESTION = "Ship order 42, but first check the stock of item A-7."


def tools(workdir: Path) -> list[Tool]:
    def count(name: str) -> int:
        path = workdir / f"{name}.count"
        n = int(path.read_text()) + 1 if path.exists() else 1
        # Written whole or not at all: the test polls these files while this process runs.
        partial = path.with_suffix(".part")
        partial.write_text(str(n))
        partial.replace(path)
        return n

    def check_stock(item: str) -> dict[str, object]:
        """How many of an item are in stock.

        Args:
            item: The item's code, e.g. A-7.
        """
        count("check_stock")
        return {"item": item, "in_stock": 12}

    def ship_order(order_id: int) -> str:
        """Ship an order.

        Args:
            order_id: The order number.
        """
        if count("ship_order") == 1:
            time.sleep(3600)  # the first run hangs until the test kills the process
        return f"order {order_id} shipped"

    return [Tool.from_function(check_stock, timeout=None), Tool.from_function(ship_order, timeout=None)]


def scripted_replies() -> list[str]:
    calls = [{"name": "check_stock", "arguments": {"item": "A-7"}}, {"name": "ship_order", "arguments": {"order_id": 42}}]
    return ["".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in calls).rstrip(), "Order 42 has shipped."]


def agent(workdir: Path, model_name: str | None, replies: list[str]) -> Agent:
    if model_name:  # a small model may answer without calling anything unless it must call
        return Agent(load(model_name), tools(workdir), max_steps=4, tool_choice="required")
    return Agent(Model(ScriptedBackend(replies), family="qwen2.5"), tools(workdir), max_steps=4)


if __name__ == "__main__":
    run_file, workdir = Path(sys.argv[1]), Path(sys.argv[2])
    name = sys.argv[3] if len(sys.argv) > 3 else None
    result = agent(workdir, name, scripted_replies()).run(QUESTION, run_file=run_file)
    print(result.answer)
