"""Turn 2's prompt time with the conversation's prefix reused vs the same prompt evaluated cold.

    .venv/bin/python benchmarks/prefix_reuse.py --model qwen2.5-coder-0.5b --runs 3

For each backend: turn 1 asks a question with a tool (the model calls it); turn 2 is the call, its
result and the rest of the conversation. Turn 2 is generated once right after turn 1 (only its new
tokens are evaluated) and once after ``drop_prompt_cache()`` (every token evaluated), alternating
``--runs`` times. The ratio is warm over cold prompt seconds, medians of the same run; the replies
of both are compared too.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from localtools import load

QUESTION = "What subscription plan is customer cust-1001 using? Answer in one sentence."
SYSTEM = ("You are the support assistant of a software company. Be brief and exact; use the tools to look "
          "up customers, orders and invoices before you answer, and never invent data. ") * 4
TOOLS = [{"type": "function", "function": {"name": name, "description": description,
                                           "parameters": {"type": "object", "properties": {key: {"type": "string"}},
                                                          "required": [key]}}}
         for name, description, key in [("get_customer", "Look up a customer record by id.", "customer_id"),
                                        ("get_order", "Look up an order by its number.", "order_id"),
                                        ("list_invoices", "List a customer's invoices.", "customer_id")]]


def turn_two(model: Any) -> tuple[list[dict[str, Any]], Any]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    first = model.chat(messages, TOOLS, tool_choice="required", max_tokens=64)
    call = first.tool_calls[0]
    result = '{"id": "cust-1001", "name": "Ada Lovelace", "plan": "pro", "since": "2021-03-04"}'
    return [*messages, first.message(), {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result}], first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--backend", action="append", choices=["llama-cpp", "transformers"])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'backend':<13} {'turn-2 tokens':>13} {'reused':>7} {'warm s':>8} {'cold s':>8} {'warm/cold':>9}  same reply")
    for backend in args.backend or ["llama-cpp", "transformers"]:
        model = load(args.model, backend=backend)
        drop = model.backend.drop_prompt_cache  # type: ignore[attr-defined]
        warm: list[float] = []
        cold: list[float] = []
        same = True
        reused = tokens = 0
        for _ in range(args.runs):
            drop()
            messages, _first = turn_two(model)
            hot = model.chat(messages, TOOLS, max_tokens=32)
            reused = getattr(model.backend, "reused_tokens", -1)
            drop()
            fresh = model.chat(messages, TOOLS, max_tokens=32)
            warm.append(hot.prompt_seconds)
            cold.append(fresh.prompt_seconds)
            same = same and hot.raw == fresh.raw
            tokens = fresh.prompt_tokens
        w, c = statistics.median(warm), statistics.median(cold)
        shown = str(reused) if reused >= 0 else "n/a"
        print(f"{backend:<13} {tokens:>13} {shown:>7} {w:8.3f} {c:8.3f} {w / c:8.3f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
