"""What each API dialect of `localtools serve` costs against chat completions, on real weights.

    .venv/bin/python benchmarks/serve_dialects.py --model qwen2.5-coder-0.5b --rounds 7

One server process; the same two requests (a text answer with no tools, and the seeds' question
with ``get_customer``, whose answer is a call) go through chat completions, the Responses API and
the Anthropic Messages API, whole and streamed, the dialects' order rotating every round so
machine noise hits each alike. Every request renders the same prompt, so after the warm-up round
each finds it cached. Per dialect: the median time to the whole reply, and, streamed, to the
first event that carries the answer (text or a call) and to the end of the stream. Ratios are
against chat completions' medians from the same run; the dialects only translate, so the aim is
at most 1.05x.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

_spec = importlib.util.spec_from_file_location("serve_load", Path(__file__).with_name("serve_load.py"))
assert _spec and _spec.loader
serve_load = importlib.util.module_from_spec(_spec)
sys.modules["serve_load"] = serve_load
_spec.loader.exec_module(serve_load)

QUESTIONS = {"text": ("Write three sentences about the sea.", False),
             "call": ("What subscription plan is customer cust-1001 using?", True)}
TOOL = {"name": "get_customer", "description": "Look up a customer record by id.",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}
MAX_TOKENS = 48


def chat_body(question: str, tools: bool) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": question}], "max_tokens": MAX_TOKENS}
    if tools:
        body["tools"] = [{"type": "function", "function": TOOL}]
    return "/v1/chat/completions", body


def responses_body(question: str, tools: bool) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"model": "m", "input": question, "max_output_tokens": MAX_TOKENS, "store": False}
    if tools:
        body["tools"] = [{"type": "function", **TOOL}]
    return "/v1/responses", body


def messages_body(question: str, tools: bool) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": question}], "max_tokens": MAX_TOKENS}
    if tools:
        body["tools"] = [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}]
    return "/v1/messages", body


DIALECTS: dict[str, Callable[[str, bool], tuple[str, dict[str, Any]]]] = {
    "chat completions": chat_body, "responses": responses_body, "messages": messages_body}
#: Event types (Responses, Messages) and delta types whose record carries answer text or a call.
_ANSWER_TYPES = frozenset({"response.output_text.delta", "response.function_call_arguments.delta", "text_delta",
                           "input_json_delta"})


def _answer_started(line: str) -> bool:
    """A record with answer text or a call in it, in any dialect (a chat-completions role chunk,
    whose content is empty, or a Responses / Messages opening event is not)."""
    if not line.startswith("data:") or line == "data: [DONE]":
        return False
    record = json.loads(line[5:])
    if record.get("type") in _ANSWER_TYPES or (record.get("delta") or {}).get("type") in _ANSWER_TYPES:
        return True
    delta = ((record.get("choices") or [{}])[0]).get("delta") or {}
    return bool(delta.get("content") or delta.get("tool_calls"))


def whole(http: httpx.Client, root: str, path: str, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    res = http.post(root + path, json=body)
    res.raise_for_status()
    return time.perf_counter() - started


def streamed(http: httpx.Client, root: str, path: str, body: dict[str, Any]) -> tuple[float, float]:
    started = time.perf_counter()
    first = 0.0
    with http.stream("POST", root + path, json={**body, "stream": True}) as res:
        res.raise_for_status()
        for line in res.iter_lines():
            if not first and _answer_started(line):
                first = time.perf_counter() - started
    end = time.perf_counter() - started
    return first or end, end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    proc, url = serve_load.start_server(args.model)
    root = url.removesuffix("/v1")
    times: dict[tuple[str, str, str], list[float]] = {}
    try:
        with httpx.Client(timeout=300) as http:
            for round_ in range(args.rounds + 1):
                names = list(DIALECTS)
                names = names[round_ % len(names):] + names[: round_ % len(names)]
                for kind, (question, tools) in QUESTIONS.items():
                    for name in names:
                        path, body = DIALECTS[name](question, tools)
                        took = whole(http, root, path, body)
                        first, end = streamed(http, root, path, body)
                        if round_ == 0:
                            continue  # the warm-up: every prompt cached from here on
                        for what, value in (("whole", took), ("first byte", first), ("stream end", end)):
                            times.setdefault((kind, name, what), []).append(value)
    finally:
        serve_load._stopped(proc)
    print(f"model {args.model}, {args.rounds} rounds, max_tokens {MAX_TOKENS}; median ms, ratio to chat completions")
    print("| answer | dialect | whole | first byte (streamed) | stream end |")
    print("|---|---|---|---|---|")
    for kind in QUESTIONS:
        for name in DIALECTS:
            cells = []
            for what in ("whole", "first byte", "stream end"):
                ours = statistics.median(times[(kind, name, what)])
                base = statistics.median(times[(kind, "chat completions", what)])
                cells.append(f"{ours * 1000:.0f} ({ours / base:.2f}x)")
            print(f"| {kind} | {name} | " + " | ".join(cells) + " |")
    print(json.dumps({f"{k}/{n}/{w}": statistics.median(v) for (k, n, w), v in times.items()}))


if __name__ == "__main__":
    main()
