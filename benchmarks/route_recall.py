"""The router alone: how often the expected tool is among the top k of a pooled BFCL tool set.

    .venv/bin/python benchmarks/route_recall.py [--data DIR] [--category multiple] [--k 1 --k 3 --k 5 --k 8]
        [--router model -m qwen2.5-coder-0.5b]

Every case's tools of the categories go into one pool (deduplicated by name, as ``localtools bench
--pooled`` does); each case's question is routed with ``EmbeddingRouter(k)`` (all-MiniLM-L6-v2, the
``routing`` extra) and counts as found when every tool its expected calls name is offered. No model
generates anything. Prints a Markdown table: k, recall, and mean milliseconds per question.
``--data`` reads another BFCL-format folder, such as a development set in another language
(benchmarks/data/dev/zh): the router's recall by the language of the question. ``--router model``
ranks by the model's own probability of each tool's name (``ModelRouter``) instead of by embedding.
"""

from __future__ import annotations

import argparse
import time

from localtools import Tool, load
from localtools.agent._routing import EmbeddingRouter, ModelRouter, Router
from localtools.bench import bfcl_data_dir, load_cases, pool_tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", metavar="DIR", help="a BFCL-format folder (default: BFCL v4 from the bfcl-eval wheel)")
    parser.add_argument("--category", action="append", help="repeatable (default multiple)")
    parser.add_argument("--k", type=int, action="append", help="repeatable (default 1, 3, 5, 8)")
    parser.add_argument("--router", choices=["embedding", "model"], default="embedding")
    parser.add_argument("--model", "-m", default="qwen2.5-coder-0.5b", help="with --router model: the model that ranks")
    args = parser.parse_args()
    categories = args.category or ["multiple"]
    folder = args.data or bfcl_data_dir()
    cases = [case for category in categories for case in load_cases(folder, category)]
    pool = pool_tools(cases)
    tools = [Tool.from_schema(spec, lambda **_: None) for spec in pool.specs]
    print(f"{len(cases)} {', '.join(categories)} cases of {folder}, {len(tools)} pooled tools\n")
    model = load(args.model) if args.router == "model" else None
    print(f"router: {args.router}{f' ({args.model})' if model else ''}\n")
    print("| k | expected tool offered | ms per question |")
    print("| --- | --- | --- |")
    for k in args.k or [1, 3, 5, 8]:
        router: Router = EmbeddingRouter(k) if model is None else ModelRouter(model, k)
        router.select([{"role": "user", "content": "warm up"}], tools, keep=())  # loads MiniLM and embeds the pool, or reads the listing
        found, started = 0, time.perf_counter()
        for case in cases:
            offered = {t.name for t in router.select(case.messages, tools, keep=())}
            found += {name for call in case.expected for name in call} <= offered
        ms = 1000 * (time.perf_counter() - started) / len(cases)
        print(f"| {k} | {found / len(cases):.1%} ({found} of {len(cases)}) | {ms:.0f} |")


if __name__ == "__main__":
    main()
