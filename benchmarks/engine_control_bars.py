"""What barring control tokens costs a constrained request over llama-server.

Under a grammar the llama-server backend sends every control token a reply never holds as a
``logit_bias`` ban (Qwen 0.5B: 19; Gemma 3: 6,248, most of them ``<unusedN>``). Short constrained
replies (the example tools, ``--tokens`` at most), each question with the bans and without,
alternating which goes first; prints the median seconds of each and their ratio (the first two
questions warm the cache and are left out).

    .venv/bin/python benchmarks/engine_control_bars.py --model qwen2.5-coder-0.5b
    .venv/bin/python benchmarks/engine_control_bars.py --model gemma3-270m
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import localtools
from localtools.examples import ALL
from localtools.host._catalog import pull
from localtools.host._engines import build_llama_server, running_llama_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=40)
    args = parser.parse_args()
    with running_llama_server(pull(args.model), binary=build_llama_server(), parallel=1, n_ctx=4096) as engine:
        model = localtools.load(args.model, backend="llama-server", url=engine.url)
        backend: Any = model.backend
        barred, written = backend._barred, backend._written
        specs = [t.spec() for t in ALL]
        fmt = model.reply_format(specs, "auto", True, constrained=True, stop=())
        assert fmt.grammar is not None  # constrained, with tools
        literals = fmt.grammar.literals()
        print(f"{args.model}: {len(barred(literals, list(model.family.stop)))} control tokens barred")
        seconds: dict[str, list[float]] = {"bars": [], "none": []}
        for i in range(args.questions):
            prompt = model.render([{"role": "user", "content": f"What is the weather in city number {i}?"}], specs)
            for mode in ("bars", "none") if i % 2 else ("none", "bars"):
                backend._barred = barred if mode == "bars" else (lambda literals, stop: [])
                backend._written = written if mode == "bars" else (lambda literals: [])
                started = time.perf_counter()
                backend.generate(prompt, grammar=fmt.grammar, max_tokens=args.tokens, stop=list(model.family.stop))
                seconds[mode].append(time.perf_counter() - started)
        bars, none = (statistics.median(seconds[m][2:]) for m in ("bars", "none"))
        print(f"median s a request: with bars {bars:.3f}, without {none:.3f}, ratio {bars / none:.3f}")


if __name__ == "__main__":
    main()
