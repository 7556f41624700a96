"""How much llama-server's batching buys on this machine, with no localtools in the way.

Four completions of ``--tokens`` tokens from short prompts (no grammar, end token ignored, no
prompt cache), first one after another, then all four at once against a server with ``--parallel``
slots; prints the wall-time ratio and each stream's tokens/s as the server measured them.

    .venv/bin/python benchmarks/engine_batching.py --model qwen2.5-coder-0.5b --parallel 4
    .venv/bin/python benchmarks/engine_batching.py --model smollm2-135m -- --threads 1
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from localtools.host._catalog import pull
from localtools.host._engines import build_llama_server, running_llama_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("extra", nargs="*", help="more llama-server options (after --)")
    args = parser.parse_args()
    with running_llama_server(pull(args.model), binary=build_llama_server(), parallel=args.parallel, n_ctx=2048,
                              extra=args.extra) as engine:
        def one(k: int) -> float:
            body = {"prompt": f"Story number {k}:", "n_predict": args.tokens, "ignore_eos": True, "temperature": 0,
                    "cache_prompt": False}
            timings = httpx.post(f"{engine.url}/completion", json=body, timeout=600).json()["timings"]
            return float(timings["predicted_per_second"])

        one(0)  # warm
        started = time.perf_counter()
        alone = [one(k) for k in range(1, args.streams + 1)]
        sequential = time.perf_counter() - started
        started = time.perf_counter()
        with ThreadPoolExecutor(args.streams) as pool:
            together = list(pool.map(one, range(100, 100 + args.streams)))
        concurrent = time.perf_counter() - started
    print(f"{args.model}, --parallel {args.parallel} {' '.join(args.extra)}: {args.streams} x {args.tokens} tokens "
          f"one after another {sequential:.2f} s ({sum(alone) / len(alone):.1f} tok/s each), all at once "
          f"{concurrent:.2f} s ({sum(together) / len(together):.1f} tok/s each); ratio {sequential / concurrent:.2f}")


if __name__ == "__main__":
    main()
