"""What the default decisions cost a turn against greedy decoding, and what reading the
distribution from the generation (``Heard``) and going on from a reply (``continues``) save.

    .venv/bin/python benchmarks/decisions_cost.py [--model qwen2.5-coder-0.5b] [--rounds 4]

One process, one loaded model, every mode on the same questions in alternating order each round:
``greedy`` (every choice by the greedy token), ``default`` (the catalog's thresholds for the
model), ``default, re-read`` (each distribution read evaluated by the model again, as before the
generation kept what it read), ``default, re-read, restart`` (also each further item decoded
from the reply's start, as before ``generate(reply=)``). Prints the median seconds per question
and mode, and each mode's ratio to greedy over all questions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from localtools import Decisions, load, tool


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city."""
    return "sunny"


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return "12:00"


QUESTIONS = {
    "one call": "What's the weather in Paris?",
    "one call, an optional argument": "Weather in Tokyo in fahrenheit?",
    "three calls": "What's the weather in Paris, in London and in Rome?",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    model = load(args.model)
    backend: Any = model.backend
    default = model.decisions
    if default is None:
        raise SystemExit(f"{args.model} decides greedily by default: nothing to measure")
    generate, next_tokens = backend.generate, backend.next_tokens

    def reread(prompt: Any, reply: Any = (), *, k: int = 20) -> Any:
        backend._heard = None  # what the generation kept is forgotten: the model evaluates again
        return next_tokens(prompt, reply, k=k)

    def restart(*a: Any, reply: Any = (), **kw: Any) -> Any:
        return generate(*a, **kw)  # the reply is decoded from its start

    modes: dict[str, tuple[Decisions, Any, Any]] = {
        "greedy": (Decisions(), generate, next_tokens),
        "default": (default, generate, next_tokens),
        "default, re-read": (default, generate, reread),
        "default, re-read, restart": (default, restart, reread),
    }
    times: dict[tuple[str, str], list[float]] = {}
    tools = [get_weather, get_time]
    model.chat([{"role": "user", "content": "Hi"}], tools)  # warm
    for r in range(args.rounds):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for question, text in QUESTIONS.items():
            for mode in order:
                decisions, backend.generate, backend.next_tokens = modes[mode]
                start = time.perf_counter()
                result = model.chat([{"role": "user", "content": text}], tools, decisions=decisions)
                times.setdefault((question, mode), []).append(time.perf_counter() - start)
                if r == 0:
                    print(f"{mode:26} {question:32} {[(c.name, c.arguments) for c in result.tool_calls]}")
    backend.generate, backend.next_tokens = generate, next_tokens
    print(f"\n{args.model}, default decisions {default}, {args.rounds} rounds (median s)")
    print(f"{'question':32}" + "".join(f"{m:>28}" for m in modes))
    for question in QUESTIONS:
        print(f"{question:32}" + "".join(f"{statistics.median(times[question, m]):>28.3f}" for m in modes))
    base = sum(statistics.median(times[q, "greedy"]) for q in QUESTIONS)
    print(f"{'all, ratio to greedy':32}" + "".join(
        f"{sum(statistics.median(times[q, m]) for q in QUESTIONS) / base:>27.2f}x" for m in modes))


if __name__ == "__main__":
    main()
