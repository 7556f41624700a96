"""Hostile tool schemas against ordinary ones: what a request's checks cost, and what a second client waits.

    .venv/bin/python benchmarks/hostile_schemas.py [--runs 3] [--budget 5]

The corpus of ordinary schemas is BFCL's tools (simple_python, multiple, parallel,
parallel_multiple, live_simple, live_multiple; from the cache, never downloaded here), or the
examples' tools when BFCL is not there. Each schema goes through what the server does before it
queues a request (``spec_problems``, then the grammar's build, under ``build_budget``); the table
gives each hostile case's median time as a ratio to the median ordinary schema's, and how it
ended. The check's rows time ``violations`` on the arguments named instead. The second table
serves each hostile case to the app in process (scripted backend, httpx) and times /health and an
ordinary request sent while it is being checked, against the same without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx

from localtools import Model, ScriptedBackend, UnsupportedSchema, get_family
from localtools.bench._bfcl import bfcl_data_dir, load_cases
from localtools.examples import ALL
from localtools.grammar import build_budget, build_grammar
from localtools.grammar._check import violations
from localtools.serve._app import ServerConfig, create_app
from localtools.tools._schema import spec_problems

QWEN = get_family("qwen2.5")
_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")


def _params(props: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), **more}


def _fan_out(branches: int, description: int = 0, defs: int = 1) -> dict[str, Any]:
    return {"type": "object", "description": "d" * description,
            "properties": {"v": {"anyOf": [{"$ref": f"#/$defs/d{i % defs}"} for i in range(branches)]}},
            "required": ["v"], "$defs": {f"d{i}": {"type": "object", "properties": {"x": {"const": i}}}
                                         for i in range(defs)}}


def _long_pattern(seed: int) -> str:
    rng = random.Random(seed)
    return "^" + "".join(rng.choice("abcdefgh") for _ in range(3900)) + "$"


def _key_under(pattern: str, n: int) -> dict[str, Any]:
    return _params({"a" * n + "x": {"type": "string"}}, patternProperties={pattern: {"type": "integer"}})


#: (name, parameters) of schemas built hostile (issue items 6-8).
HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("free value ({}), replies nest 1,200 deep", _params({"v": {}})),
    ("key 'a'*40+'x' under ^(a|aa)*c$", _key_under("^(a|aa)*c$", 40)),
    ("key 'a'*60+'x' under ^(a|aa)*c$", _key_under("^(a|aa)*c$", 60)),
    ("key 'a'*400+'x' under ^(a+)+$", _key_under("^(a+)+$", 400)),
    ("anyOf of 16k $refs", _fan_out(16000)),
    ("8k $refs beside a 400 KB description", _fan_out(8000, 400_000)),
    ("900 patterns of 3,900 chars (3.5 MB)", _params({"v": {"anyOf": [{"type": "string", "pattern": _long_pattern(i)}
                                                                      for i in range(900)]}})),
    ("30k distinct branches (2.9 MB)", _fan_out(30000, defs=30000)),
]
#: (name, parameters, arguments) for the check after decoding.
CHECKED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("check: (a|aa)*c on 'a'*45+'xc'", _params({"s": {"type": "string", "pattern": "(a|aa)*c"}}), {"s": "a" * 45 + "xc"}),
    ("check: ^(a|aa)*c$ on 'a'*5000+'x'", _params({"s": {"type": "string", "pattern": "^(a|aa)*c$"}}),
     {"s": "a" * 5000 + "x"}),
    ("check: .*a.*a.*a.*c on 'a'*3000", _params({"s": {"type": "string", "pattern": ".*a.*a.*a.*c"}}), {"s": "a" * 3000}),
]


def corpus() -> tuple[str, list[dict[str, Any]]]:
    """BFCL's tool parameters (distinct), or the examples' when BFCL is not in the cache."""
    try:
        folder = bfcl_data_dir(download=False)
    except Exception:
        return "the examples' tools", [t.spec()["function"]["parameters"] for t in ALL]
    seen: dict[str, dict[str, Any]] = {}
    for category in _CATEGORIES:
        for case in load_cases(folder, category):
            for tool in case.tools:
                params = tool["function"].get("parameters") or {}
                seen.setdefault(json.dumps(params, sort_keys=True), params)
    return f"BFCL ({', '.join(_CATEGORIES)}): {len(seen)} distinct schemas", list(seen.values())


def prechecked(parameters: dict[str, Any], budget: float) -> tuple[float, str]:
    """Seconds the server's checks take on a tool with ``parameters``, and how they end."""
    function = {"name": "f", "description": "", "parameters": parameters}
    spec = {"type": "function", "function": function}
    started = time.perf_counter()
    with build_budget(budget):
        problems = spec_problems(function)
        if problems:
            outcome = f"400 at the door: {problems[0][1]}"
        else:
            try:
                build_grammar(QWEN, [spec], "required")
                outcome = "built"
            except UnsupportedSchema as exc:
                outcome = f"400: {exc}"
    return time.perf_counter() - started, outcome


def _median(runs: int, fn: Callable[[], tuple[float, str]]) -> tuple[float, str]:
    results = [fn() for _ in range(runs)]
    return statistics.median(r[0] for r in results), results[-1][1]


def _reply(prompt: Any, grammar: Any) -> str:
    """The ordinary call, or a call to the hostile tool ("f") that its grammar admits, when it was built."""
    if grammar is not None and "get_weather" not in prompt.text:
        props = json.loads(prompt.text[prompt.text.index('{"type": "function"'):].split("\n")[0])["function"][
            "parameters"]["properties"]
        arguments = {k: 1 if v == {} else "s" for k, v in props.items()}
        return f'<tool_call>\n{{"name": "f", "arguments": {json.dumps(arguments)}}}\n</tool_call>'
    return '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


async def _second_client(app: Any, hostile: dict[str, Any] | None) -> tuple[float, float, int]:
    """(/health seconds, ordinary request seconds, hostile status) with ``hostile`` being checked meanwhile."""
    weather = {"type": "function", "function": {"name": "get_weather", "description": "",
                                                "parameters": _params({"city": {"type": "string"}})}}
    user = [{"role": "user", "content": "go"}]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                 base_url="http://t", timeout=600) as client:
        bad = None
        if hostile is not None:
            body = {"messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": hostile}}],
                    "tool_choice": "required"}
            bad = asyncio.create_task(client.post("/v1/chat/completions", json=body))
            await asyncio.sleep(0.05)  # its checks are under way
        asked = time.perf_counter()
        assert (await client.get("/health")).status_code == 200
        health = time.perf_counter() - asked
        asked = time.perf_counter()
        good = await client.post("/v1/chat/completions", json={"messages": user, "tools": [weather],
                                                               "tool_choice": "required"})
        ordinary = time.perf_counter() - asked
        assert good.status_code == 200, good.text
        status = (await bad).status_code if bad is not None else 0
    return health, ordinary, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=ServerConfig("m").max_build_seconds,
                        help="the build budget in seconds (the server's default)")
    args = parser.parse_args()

    where, schemas = corpus()
    ordinary = [_median(args.runs, partial(prechecked, p, args.budget))[0] for p in schemas]
    base = statistics.median(ordinary)
    print(f"Ordinary corpus: {where}; median check + build {base * 1000:.2f} ms, p95 "
          f"{statistics.quantiles(ordinary, n=20)[-1] * 1000:.2f} ms, max {max(ordinary) * 1000:.1f} ms "
          f"(budget {args.budget:g} s, median of {args.runs} runs each)\n")
    print("| hostile case | seconds | x median ordinary | outcome |")
    print("| --- | --- | --- | --- |")
    for name, parameters in HOSTILE:
        seconds, outcome = _median(args.runs, partial(prechecked, parameters, args.budget))
        print(f"| {name} | {seconds:.3f} | {seconds / base:,.0f} | {outcome[:110]} |")
    for name, parameters, arguments in CHECKED:
        def check(p: dict[str, Any] = parameters, a: dict[str, Any] = arguments) -> tuple[float, str]:
            started = time.perf_counter()
            found = violations("f", p, a)
            return time.perf_counter() - started, f"{len(found)} violations"
        seconds, outcome = _median(args.runs, check)
        print(f"| {name} | {seconds:.3f} | {seconds / base:,.0f} | {outcome} |")

    print("\nA second client while a hostile request is checked (in process, scripted backend; median of runs):\n")
    print("| hostile request | its status | /health (ms) | ordinary request (ms) |")
    print("| --- | --- | --- | --- |")
    cases: list[tuple[str, dict[str, Any] | None]] = [("none (baseline)", None), *HOSTILE[1:]]
    for name, hostile in cases:
        runs = []
        for _ in range(args.runs):
            app = create_app(Model(ScriptedBackend([_reply] * 2), family="qwen2.5"),
                             ServerConfig(model_name="m", max_build_seconds=args.budget))
            runs.append(asyncio.run(_second_client(app, hostile)))
        health = statistics.median(r[0] for r in runs)
        good = statistics.median(r[1] for r in runs)
        print(f"| {name} | {runs[-1][2] or '-'} | {health * 1000:.1f} | {good * 1000:.1f} |")


if __name__ == "__main__":
    main()
