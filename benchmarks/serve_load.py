"""Load on `localtools serve`: many concurrent clients, each request with its own tool.

Every request offers one tool of its own whose only argument admits a single value, with
tool_choice "required", so each answer proves it was generated for that request. A client that
gets a 503 waits the Retry-After it was given and tries again. The baseline is one client sending
the same number of requests one after another, against the same server, in the same run.

    .venv/bin/python benchmarks/serve_load.py --model smollm2-135m --clients 32 --requests 4 --queue 8
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


def request_for(client: int, index: int) -> tuple[dict[str, Any], str, str]:
    name, key = f"lookup_{client}_{index}", f"KEY-{client}-{index}"
    tool = {"type": "function", "function": {"name": name, "description": f"Look up record {key}.", "parameters": {
        "type": "object", "properties": {"key": {"type": "string", "enum": [key]}}, "required": ["key"]}}}
    body = {"model": "any", "messages": [{"role": "user", "content": f"Look up record {key}."}], "tools": [tool],
            "tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 64}
    return body, name, key


async def run_load(url: str, clients: int, requests: int, timeout: float = 600.0) -> LoadReport:
    report = LoadReport()

    async def one_client(http: httpx.AsyncClient, client: int) -> None:
        for index in range(requests):
            body, name, key = request_for(client, index)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=4, help="per client")
    parser.add_argument("--queue", type=int, default=8)
    args = parser.parse_args()
    proc, url = start_server(args.model, "--queue", str(args.queue))
    try:
        total = args.clients * args.requests
        alone = asyncio.run(run_load(url, 1, total))
        loaded = asyncio.run(run_load(url, args.clients, args.requests))
        health = httpx.get(url.removesuffix("/v1") + "/health").json()
    finally:
        proc.terminate()
        proc.wait()
    for label, r in (("1 client, sequential", alone), (f"{args.clients} clients x {args.requests}", loaded)):
        print(f"{label:>24}: {r.answered}/{total} answered, {len(r.mismatched)} mismatched, {r.busy} x 503 retried, "
              f"{len(r.errors)} other errors; latency p50 {statistics.median(r.latencies):.2f} s, "
              f"p95 {r.percentile(0.95):.2f} s; {r.throughput:.2f} req/s")
    print(f"throughput ratio (concurrent / sequential): {loaded.throughput / alone.throughput:.2f}")
    print(f"health after: {health}")


if __name__ == "__main__":
    main()
