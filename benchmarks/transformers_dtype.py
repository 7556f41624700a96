"""The transformers backend in bfloat16 vs float32 on this CPU: the choice ``dtype="auto"`` makes.

    .venv/bin/python benchmarks/transformers_dtype.py --model qwen2.5-coder-0.5b --runs 3

Two requests, each timed ``--runs`` times per dtype with the prompt cache dropped first: a long
prompt (the twenty test tool sets' 24 tools, a call required, mostly prompt evaluation) and a
short one (one tool, 64 tokens of free answer, mostly decoding). The ratio is float32 seconds
over bfloat16 seconds, medians of the same run; whether both dtypes wrote the same reply is shown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from toolsets import TOOLSETS

from localtools import load
from localtools.backends.transformers import auto_dtype

LONG = ([{"role": "user", "content": "Weather in Paris?"}], [t for _, ts, _ in TOOLSETS for t in ts],
        {"tool_choice": "required", "max_tokens": 64})
SHORT = ([{"role": "user", "content": "Describe Paris in three sentences."}], [TOOLSETS[0][1][0]],
         {"tool_choice": "none", "max_tokens": 64})


def _time(model: Any, request: tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]], runs: int) -> tuple[float, Any]:
    messages, tools, options = request
    seconds, result = [], None
    for _ in range(runs):
        model.backend.drop_prompt_cache()
        start = time.perf_counter()
        result = model.chat(messages, tools, retry_repeat_penalties=(), **options)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"dtype='auto' picks {auto_dtype('cpu')} on this CPU")
    timed: dict[str, dict[str, tuple[float, Any]]] = {}
    for dtype in ("float32", "bfloat16"):
        model = load(args.model, backend="transformers", dtype=dtype, device="cpu")
        _time(model, SHORT, 1)  # warm-up
        timed[dtype] = {"long": _time(model, LONG, args.runs), "short": _time(model, SHORT, args.runs)}
        del model
    print(f"{'request':<7} {'prompt':>6} {'tokens':>6} {'float32 s':>10} {'bfloat16 s':>11} {'f32/bf16':>9}  same reply")
    for name in ("long", "short"):
        (f32, a), (bf16, b) = timed["float32"][name], timed["bfloat16"][name]
        print(f"{name:<7} {a.prompt_tokens:>6} {a.completion_tokens:>6} {f32:>10.2f} {bf16:>11.2f} {f32 / bf16:>8.2f}x  "
              f"{'yes' if a.raw == b.raw else 'no'}")


if __name__ == "__main__":
    main()
