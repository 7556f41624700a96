"""Time to the first byte of the answer, streamed vs not, against `localtools serve` on real weights.

    .venv/bin/python benchmarks/stream_latency.py --model qwen2.5-coder-0.5b --runs 5

One server process; for each question, alternating in one run so machine noise hits every mode
alike, and each request after a warm-up that leaves the same prompt cached:
- ``first token``: the same request with ``max_tokens: 1``, not streamed (prompt + one token);
- ``not streamed``: the whole reply, which is when a client gets its first byte of text;
- ``streamed``: when the first content (or reasoning) delta arrives, and when the stream ends.
Ratios are against the first-token time of the same question in the same run.

    .venv/bin/python benchmarks/stream_latency.py --model qwen2.5-coder-0.5b --runs 5 --first-call

``--first-call``: questions whose answer is a call (tool_choice ``auto`` and ``required``): when
the first byte of a call reaches a client, streamed (its first ``tool_calls`` delta) and not
(the whole reply). A streamed call is sent only once the turn is over and its calls are checked,
so the two should match; the ratio says what the check-before-send costs a streaming client.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

_spec = importlib.util.spec_from_file_location("serve_load", Path(__file__).with_name("serve_load.py"))
assert _spec and _spec.loader
serve_load = importlib.util.module_from_spec(_spec)
sys.modules["serve_load"] = serve_load
_spec.loader.exec_module(serve_load)

#: Offered with every question in the "with a tool" rows: the answer's text is held back until the
#: grammar says it cannot be a call.
TOOL = {"type": "function", "function": {"name": "get_customer", "description": "Look up a customer record by id.",
                                         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}},
                                                        "required": ["customer_id"]}}}
QUESTIONS = [
    "Explain in three sentences why the sky is blue.",
    "Write a short paragraph about the history of the bicycle.",
    "List five tips for writing clear Python code, one sentence each.",
]


def _whole(client: httpx.Client, body: dict[str, Any]) -> tuple[float, str]:
    started = time.perf_counter()
    res = client.post("/chat/completions", json=body)
    res.raise_for_status()
    return time.perf_counter() - started, res.json()["choices"][0]["message"]["content"] or ""


def _deltas(client: httpx.Client, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each chunk's delta of a streamed request, as it arrives."""
    with client.stream("POST", "/chat/completions", json={**body, "stream": True}) as res:
        res.raise_for_status()
        for line in res.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[len("data: "):])
                yield chunk["choices"][0]["delta"] if chunk.get("choices") else {}


def _streamed(client: httpx.Client, body: dict[str, Any]) -> tuple[float, float, str]:
    started, first, text = time.perf_counter(), None, ""
    for delta in _deltas(client, body):
        piece = delta.get("content") or delta.get("reasoning_content") or ""
        if piece and first is None:
            first = time.perf_counter() - started
        text += delta.get("content") or ""
    return first if first is not None else float("nan"), time.perf_counter() - started, text


CALL_QUESTIONS = [
    "What subscription plan is customer cust-1001 using?",
    "Look up customer cust-2002 for me.",
    "Which plan does customer cust-3003 have?",
]


def _streamed_call(client: httpx.Client, body: dict[str, Any]) -> tuple[float, float, str]:
    """(first call byte, end, the call's name and arguments joined) of a streamed request."""
    started, first, joined = time.perf_counter(), None, ""
    for delta in _deltas(client, body):
        for call in delta.get("tool_calls") or []:
            if first is None:
                first = time.perf_counter() - started
            fn = call.get("function", {})
            joined += (fn.get("name") or "") + (fn.get("arguments") or "")
    return first if first is not None else float("nan"), time.perf_counter() - started, joined


def _first_call(client: httpx.Client, runs: int, max_tokens: int, model: str) -> None:
    modes = {"auto": "auto", "required": "required"}
    rows: dict[str, dict[str, list[float]]] = {m: {"not streamed": [], "streamed first call byte": [],
                                                   "streamed end": []} for m in modes}
    ratios: dict[str, list[float]] = {m: [] for m in modes}
    same = {m: 0 for m in modes}
    for _ in range(runs):
        for question in CALL_QUESTIONS:
            for mode, choice in modes.items():
                body = {"model": "m", "messages": [{"role": "user", "content": question}], "tools": [TOOL],
                        "tool_choice": choice, "max_tokens": max_tokens}
                client.post("/chat/completions", json=body).raise_for_status()  # the prompt cached alike
                started = time.perf_counter()
                res = client.post("/chat/completions", json=body)
                res.raise_for_status()
                whole = time.perf_counter() - started
                calls = res.json()["choices"][0]["message"].get("tool_calls") or []
                text = "".join(c["function"]["name"] + c["function"]["arguments"] for c in calls)
                first, end, joined = _streamed_call(client, body)
                same[mode] += bool(text) and joined == text
                rows[mode]["not streamed"].append(whole)
                rows[mode]["streamed first call byte"].append(first)
                rows[mode]["streamed end"].append(end)
                ratios[mode].append(first / whole)
    for mode in modes:
        n = len(ratios[mode])
        print(f"{model}, a call under {mode}: {n} requests, max_tokens {max_tokens}; streamed call identical to the "
              f"non-streamed one in {same[mode]}/{n}")
        for key, values in rows[mode].items():
            ordered = sorted(values)
            print(f"{key:>26} {statistics.median(ordered):7.3f}s p95 {ordered[int(0.95 * (len(ordered) - 1))]:7.3f}s")
        print(f"{'first call byte ÷ not streamed':>26} {statistics.median(ratios[mode]):7.2f} (p50)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--runs", type=int, default=5, help="rounds over the questions")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--first-call", action="store_true", help="time a call's first byte instead of text's")
    args = parser.parse_args()
    proc, url = serve_load.start_server(args.model)
    if args.first_call:
        try:
            with httpx.Client(base_url=url, timeout=600) as client:
                _first_call(client, args.runs, args.max_tokens, args.model)
        finally:
            proc.terminate()
            proc.wait(30)
        return
    modes: dict[str, dict[str, Any]] = {"no tools": {}, "with a tool": {"tools": [TOOL]}}
    keys = ("first token", "not streamed", "streamed first", "streamed end")
    rows: dict[str, dict[str, list[float]]] = {m: {k: [] for k in keys} for m in modes}
    ratios: dict[str, dict[str, list[float]]] = {m: {"not streamed": [], "streamed first": []} for m in modes}
    same = {m: 0 for m in modes}
    try:
        with httpx.Client(base_url=url, timeout=600) as client:
            for _ in range(args.runs):
                for question in QUESTIONS:
                    for mode, extra in modes.items():
                        body = {"model": "m", "messages": [{"role": "user", "content": question}],
                                "max_tokens": args.max_tokens, **extra}
                        _whole(client, body)  # the prompt cached for every timed request alike
                        ttft, _ = _whole(client, {**body, "max_tokens": 1})
                        whole, text = _whole(client, body)
                        first, end, streamed = _streamed(client, body)
                        same[mode] += streamed == text
                        for key, value in (("first token", ttft), ("not streamed", whole), ("streamed first", first),
                                           ("streamed end", end)):
                            rows[mode][key].append(value)
                        ratios[mode]["not streamed"].append(whole / ttft)
                        ratios[mode]["streamed first"].append(first / ttft)
    finally:
        proc.terminate()
        proc.wait(30)
    for mode in modes:
        n = len(rows[mode]["first token"])
        print(f"{args.model}, {mode}: {n} requests a row, max_tokens {args.max_tokens}; streamed text identical to "
              f"the non-streamed reply in {same[mode]}/{n}")
        print(f"{'':>16} {'p50':>8} {'p95':>8}  first byte ÷ first token (p50)")
        for key, values in rows[mode].items():
            ordered = sorted(values)
            ratio = f"{statistics.median(ratios[mode][key]):.2f}" if key in ratios[mode] else ""
            print(f"{key:>16} {statistics.median(ordered):7.3f}s {ordered[int(0.95 * (len(ordered) - 1))]:7.3f}s  {ratio}")


if __name__ == "__main__":
    main()
