"""Turn 2's prompt time with the conversation's prefix reused vs the same prompt evaluated cold.

    .venv/bin/python benchmarks/prefix_reuse.py --model qwen2.5-coder-0.5b --runs 3 [--earlier 0 --earlier 3]

For each backend: turn 1 asks a question with a tool (the model calls it); turn 2 is the call, its
result and the rest of the conversation; ``--earlier N`` puts N finished exchanges of the same
conversation before the question (a longer conversation: the turn adds a smaller share). Turn 2
is generated once right after turn 1 (only its new tokens are evaluated) and once after
``drop_prompt_cache()`` (every token evaluated), alternating ``--runs`` times. The ratio is warm
over cold prompt seconds, medians of the same run; the replies of both are compared too.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from fast_forward import _device_options

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


def _earlier(n: int) -> list[dict[str, Any]]:
    """``n`` earlier exchanges of the same conversation: a question, its call, the result, the answer."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        customer = f"cust-{1002 + i}"
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "get_customer", "arguments": f'{{"customer_id": "{customer}"}}'}}
        out += [{"role": "user", "content": f"Which plan is customer {customer} on?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"call_{i}", "name": "get_customer",
                 "content": f'{{"id": "{customer}", "name": "Customer {i}", "plan": "basic", "since": "2020-0{i + 1}-01"}}'},
                {"role": "assistant", "content": f"Customer {customer} is on the basic plan."}]
    return out


def turn_two(model: Any, earlier: int = 0) -> tuple[list[dict[str, Any]], Any]:
    """The prompt of the turn after a call (its result added), and the turn that made the call;
    ``earlier`` exchanges come before the question."""
    messages = [{"role": "system", "content": SYSTEM}, *_earlier(earlier), {"role": "user", "content": QUESTION}]
    first = model.chat(messages, TOOLS, tool_choice="required", max_tokens=64)
    call = first.tool_calls[0]
    result = '{"id": "cust-1001", "name": "Ada Lovelace", "plan": "pro", "since": "2021-03-04"}'
    return [*messages, first.message(), {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result}], first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--backend", action="append", choices=["llama-cpp", "transformers"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--earlier", type=int, action="append",
                        help="exchanges (question, call, result, answer) before the question; repeatable (default 0)")
    parser.add_argument("--device", help="transformers device (cpu, cuda)")
    parser.add_argument("--n-gpu-layers", type=int, help="llama-cpp layers on the GPU (-1: all)")
    args = parser.parse_args()
    print(f"{'backend':<13} {'earlier':>7} {'tokens':>6} {'reused':>7} {'warm s':>8} {'cold s':>8} {'warm/cold':>9}  same reply")
    for backend in args.backend or ["llama-cpp", "transformers"]:
        model = load(args.model, backend=backend, **_device_options(backend, args))
        for earlier in args.earlier or [0]:
            drop = model.backend.drop_prompt_cache
            warm: list[float] = []
            cold: list[float] = []
            same = True
            reused = tokens = 0
            for _ in range(args.runs):
                drop()
                messages, _first = turn_two(model, earlier)
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
            print(f"{backend:<13} {earlier:>7} {tokens:>6} {shown:>7} {w:8.3f} {c:8.3f} {w / c:8.3f}x  {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
