"""Load on `localtools serve`: many concurrent clients, each request with its own tool.

Every request offers one tool of its own whose only argument admits a single value, with
tool_choice "required", so each answer proves it was generated for that request. A client that
gets a 503 waits the Retry-After it was given and tries again. The baseline is one client sending
the same number of requests one after another, against the same server, in the same run.

    .venv/bin/python benchmarks/serve_load.py --model smollm2-135m --clients 32 --requests 4 --queue 8

``--engine llama-server`` runs the same load a second time, on ``localtools serve --backend
llama-server`` in front of a llama-server with ``--parallel`` slots (built and cached by
``localtools engines build llama-server``), after the in-process server has stopped, and prints the
throughput ratio of the two:

    .venv/bin/python benchmarks/serve_load.py --model qwen2.5-coder-0.5b --clients 16 --requests 2 \
        --queue 16 --engine llama-server --parallel 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class LoadReport:
    answered: int = 0
    mismatched: list[str] = field(default_factory=list)
    busy: int = 0  # 503s, each retried
    errors: list[str] = field(default_factory=list)  # any other non-200
    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def throughput(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def request_for(client: int, index: int, shared: int = 0) -> tuple[dict[str, Any], str, str]:
    """One request and the call that answers it. ``shared`` > 0: the clients share that many tool
    sets (client c uses set c % shared, as a team's agents share their tools) and only the
    question is the request's own; 0: every request has a tool of its own."""
    if shared:
        return _shared_request(client % shared, f"KEY-{client}-{index}")
    name, key = f"lookup_{client}_{index}", f"KEY-{client}-{index}"
    tool = {"type": "function", "function": {"name": name, "description": f"Look up record {key}.", "parameters": {
        "type": "object", "properties": {"key": {"type": "string", "enum": [key]}}, "required": ["key"]}}}
    body = {"model": "any", "messages": [{"role": "user", "content": f"Look up record {key}."}], "tools": [tool],
            "tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 64}
    return body, name, key


def _shared_request(team: int, key: str) -> tuple[dict[str, Any], str, str]:
    def tool(verb: str, what: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": f"{verb}_{team}", "description": f"{what} (team {team}).",
                                                 "parameters": {"type": "object", "properties": {
                                                     "key": {"type": "string", "description": "the record key"}},
                                                     "required": ["key"]}}}

    tools = [tool("lookup", "Look up a record by key"), tool("archive", "Archive a record by key"),
             tool("notify", "Notify the owner of a record by key")]
    name = f"lookup_{team}"
    body = {"model": "any", "messages": [{"role": "user", "content": f"Look up record {key}."}], "tools": tools,
            "tool_choice": {"type": "function", "function": {"name": name}}, "parallel_tool_calls": False,
            "max_tokens": 64}
    return body, name, key


async def run_load(url: str, clients: int, requests: int, timeout: float = 600.0, shared: int = 0) -> LoadReport:
    report = LoadReport()

    async def one_client(http: httpx.AsyncClient, client: int) -> None:
        for index in range(requests):
            body, name, key = request_for(client, index, shared)
            started = time.perf_counter()
            while True:
                res = await http.post(f"{url}/chat/completions", json=body)
                if res.status_code != 503:
                    break
                report.busy += 1
                await asyncio.sleep(float(res.headers.get("Retry-After", "1")))
            report.latencies.append(time.perf_counter() - started)
            if res.status_code != 200:
                report.errors.append(f"{res.status_code}: {res.text[:200]}")
                continue
            report.answered += 1
            calls = res.json()["choices"][0]["message"].get("tool_calls") or []
            got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
            if not got or any(call != (name, {"key": key}) for call in got):
                report.mismatched.append(f"{name}: {got}")

    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=clients + 4)) as http:
        await asyncio.gather(*(one_client(http, c) for c in range(clients)))
    report.seconds = time.perf_counter() - started
    return report


def start_server(model: str, *options: str) -> tuple[subprocess.Popen[str], str]:
    """``localtools serve`` in its own process on a free port; returns it and its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "localtools", "serve", "--model", model, "--port", "0", *options],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving ") and " at " in line:
            return proc, line.rsplit(" at ", 1)[1].strip()
    proc.wait()
    raise RuntimeError(f"localtools serve exited with {proc.returncode} before it was ready")


def _loads(url: str, args: argparse.Namespace, *, sequential: bool) -> tuple[LoadReport | None, LoadReport, Any]:
    alone = asyncio.run(run_load(url, 1, args.clients * args.requests, shared=args.shared_tools)) if sequential else None
    loaded = asyncio.run(run_load(url, args.clients, args.requests, shared=args.shared_tools))
    return alone, loaded, httpx.get(url.removesuffix("/v1") + "/health").json()


def _stopped(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait()


def _row(label: str, r: LoadReport, total: int) -> str:
    return (f"{label:>36}: {r.answered}/{total} answered, {len(r.mismatched)} mismatched, {r.busy} x 503 retried, "
            f"{len(r.errors)} other errors; latency p50 {statistics.median(r.latencies):.2f} s, "
            f"p95 {r.percentile(0.95):.2f} s; {r.throughput:.2f} req/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="per client")
    parser.add_argument("--queue", type=int, default=8)
    parser.add_argument("--engine", choices=["llama-server"], help="also serve the same load over this engine")
    parser.add_argument("--parallel", type=int, default=4, help="the engine's slots (default 4)")
    parser.add_argument("--no-sequential", action="store_true", help="skip the one-client baseline")
    parser.add_argument("--shared-tools", type=int, default=0, metavar="N",
                        help="the clients share N tool sets and differ in their questions (default 0: a tool per request)")
    args = parser.parse_args()
    total = args.clients * args.requests
    proc, url = start_server(args.model, "--queue", str(args.queue))
    try:
        alone, loaded, health = _loads(url, args, sequential=not args.no_sequential)
    finally:
        _stopped(proc)
    rows = [("in process, 1 client, sequential", alone), (f"in process, {args.clients} clients x {args.requests}", loaded)]
    engine_loaded = engine_health = None
    if args.engine:
        from localtools.host._catalog import pull
        from localtools.host._engines import build_llama_server, running_llama_server

        with running_llama_server(pull(args.model), binary=build_llama_server(), parallel=args.parallel) as engine:
            proc, url = start_server(args.model, "--queue", str(args.queue), "--backend", args.engine,
                                     "--engine-url", engine.url)
            try:
                _, engine_loaded, engine_health = _loads(url, args, sequential=False)
            finally:
                _stopped(proc)
        rows.append((f"{args.engine} x{args.parallel}, {args.clients} clients x {args.requests}", engine_loaded))
    for label, r in rows:
        if r is not None:
            print(_row(label, r, total))
    if alone is not None:
        print(f"throughput ratio (concurrent / sequential, in process): {loaded.throughput / alone.throughput:.2f}")
    if engine_loaded is not None:
        print(f"throughput ratio ({args.engine} / in process, {args.clients} clients): "
              f"{engine_loaded.throughput / loaded.throughput:.2f}")
        print(f"health after, over {args.engine}: {engine_health}")
    print(f"health after, in process: {health}")


if __name__ == "__main__":
    main()
