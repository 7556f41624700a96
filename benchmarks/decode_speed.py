"""Tokens/s of free vs grammar-constrained decoding on one fixed prompt, every mode in one process.

    .venv/bin/python benchmarks/decode_speed.py [--model qwen2.5-coder-0.5b] [--runs 5]
        [--backend llama-cpp --backend transformers] [--engine llguidance --engine xgrammar ...]
        [--build-sets 4 [--build-tools keywords] [--build-choice auto] [--build-only]] [--device cpu]

Modes: per backend, free decoding and constrained decoding (on transformers once per mask engine,
on llama-cpp with its GBNF sampler), each masking the whole vocabulary every step and with the
lazy check that masks only when the grammar rejects the greedy token. Fast-forward is off here:
this is the grammar's cost per token (benchmarks/fast_forward.py measures fast-forward).
Runs alternate across modes so machine noise hits all of them; the table gives medians
and each constrained mode's ratio to its own backend's free mode (seconds per generated token,
decode only). ``--build-sets N`` also times, per engine, the first mask for N tool sets it has not
seen (compiling the grammar and the first token mask): tool sets change per request, so this
cost is paid often.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import localtools
from localtools import Tool
from localtools.examples import ALL

PROMPT = [{"role": "user", "content": "Convert 12.5 km to miles, then tell me the current time in Europe/Paris."}]


#: A tool set whose grammar goes beyond shapes: ranges, a pattern, formats, a tuple.
KEYWORDS: list[dict[str, Any]] = [{"type": "function", "function": {"name": "book", "description": "Book a table.", "parameters": {
    "type": "object", "properties": {
        "month": {"type": "integer", "minimum": 1, "maximum": 12}, "year": {"type": "integer", "minimum": 1900,
                                                                          "maximum": 2100},
        "zip": {"type": "string", "pattern": "^[0-9]{5}(-[0-9]{4})?$"}, "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"}, "email": {"type": "string", "format": "email"},
        "ref": {"type": "string", "format": "uuid"}, "price": {"type": "number", "minimum": 0, "maximum": 10000},
        "seat": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 1}, {"type": "string",
                                                                                       "pattern": "^[A-F]$"}],
                 "items": False, "minItems": 2}},
    "required": ["month", "zip", "day", "seat"]}}}]


def _fresh_tool_sets(n: int, kind: str = "examples") -> list[list[dict[str, Any]]]:
    # Same shapes under new names, so no engine has them cached.
    specs = [t.spec() for t in ALL] if kind == "examples" else KEYWORDS
    out = []
    for i in range(n):
        renamed = [{**s, "function": {**s["function"], "name": f"{s['function']['name']}_v{i}_{time.time_ns() % 10**6}"}}
                   for s in specs]
        out.append(renamed)
    return out


def _build_seconds(model: localtools.Model, sets: list[list[dict[str, Any]]], choice: str = "required") -> list[float]:
    import torch

    backend: Any = model.backend  # the transformers backend, whose model and engine this reaches into
    vocab = backend._vocab_size
    logits = torch.zeros((1, vocab))
    out = []
    for specs in sets:
        grammar = model.grammar(specs, choice)
        started = time.perf_counter()
        backend.engine.matcher(grammar, vocab).mask(logits.clone())
        out.append(time.perf_counter() - started)
    return out


def _llama_build_seconds(model: localtools.Model, sets: list[list[dict[str, Any]]], choice: str) -> list[float]:
    """llama-cpp: one token under a new tool set's grammar, less one token free on the same cached
    prompt (its GBNF sampler is built and asked for the first token inside generate)."""
    out = []
    for specs in sets:
        question = [{"role": "user", "content": "Hello."}]
        model.chat(question, specs, tool_choice=choice, constrained=False, max_tokens=1)  # the prompt cached
        free = model.chat(question, specs, tool_choice=choice, constrained=False, max_tokens=1)
        started = time.perf_counter()
        model.chat(question, specs, tool_choice=choice, max_tokens=1, retry_repeat_penalties=())
        out.append(time.perf_counter() - started - free.latency)
    return out


def _check_cost(model: localtools.Model, tokens: list[int], repeat: int = 5) -> tuple[float, float]:
    """Seconds per token of a whole-vocabulary mask and of asking about one token, along a call's
    tokens, with the current engine (the forward pass is left out: on CPU it hides both)."""
    import torch

    backend: Any = model.backend
    vocab = backend._vocab_size
    grammar = model.grammar(list(ALL), "required")
    logits = torch.zeros((1, vocab), device=backend.device)
    masks: list[float] = []
    asks: list[float] = []
    for _ in range(repeat):
        matcher = backend.engine.matcher(grammar, vocab)
        for token in tokens:
            started = time.perf_counter()
            matcher.mask(logits.clone())
            masked = time.perf_counter()
            matcher.allows(token)
            asks.append(time.perf_counter() - masked)
            masks.append(masked - started)
            matcher.consume([token])
    return statistics.median(masks), statistics.median(asks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backend", action="append", choices=["llama-cpp", "transformers"])
    parser.add_argument("--engine", action="append", choices=["llguidance", "xgrammar", "outlines_core"],
                        help="transformers mask engines to compare (default: all three)")
    parser.add_argument("--build-sets", type=int, default=0, help="time the first mask for N new tool sets per engine")
    parser.add_argument("--build-tools", choices=["examples", "keywords"], default="examples",
                        help="the tool sets --build-sets times: the example tools, or one tool with ranges, a pattern, "
                        "formats and a tuple")
    parser.add_argument("--build-choice", choices=["required", "auto"], default="required",
                        help="the tool_choice of the grammars --build-sets times (auto adds the text branch)")
    parser.add_argument("--build-only", action="store_true", help="with --build-sets: time only the first masks")
    parser.add_argument("--device", help="transformers device (cpu, cuda); llama-cpp uses --n-gpu-layers")
    parser.add_argument("--n-gpu-layers", type=int, help="llama-cpp layers on the GPU (-1: all)")
    args = parser.parse_args()
    backends = args.backend or ["llama-cpp"]
    engines = args.engine or ["llguidance", "xgrammar", "outlines_core"]
    tools: list[Tool] = list(ALL)

    models: dict[str, localtools.Model] = {}
    modes: list[tuple[str, str, str | None, str]] = []  # (label, backend, engine or None for free, mask)
    for name in backends:
        options: dict[str, Any] = {}
        if name == "transformers" and args.device:
            options["device"] = args.device
        if name == "llama-cpp" and args.n_gpu_layers is not None:
            options["n_gpu_layers"] = args.n_gpu_layers
        models[name] = localtools.load(args.model, backend=name, **options)
        modes.append((f"{name} free", name, None, "lazy"))
        for engine in (engines if name == "transformers" else ["GBNF"]):
            modes += [(f"{name} constrained ({engine}, full mask)", name, engine, "full"),
                      (f"{name} constrained ({engine}, lazy check)", name, engine, "lazy")]

    def run(backend: str, engine: str | None, mask: str) -> localtools.ChatResult:
        model = models[backend]
        real: Any = model.backend
        real.mask = mask
        # Per token: fast-forward (benchmarks/fast_forward.py) would leave fewer, different steps.
        real.fast_forward = False
        if engine not in (None, "GBNF"):
            real.engine_name = engine
        return model.chat(PROMPT, tools, tool_choice="required", constrained=engine is not None, max_tokens=128,
                          retry_repeat_penalties=())

    if args.build_only:
        _print_builds(args, models, engines)
        return
    for _, backend, engine, mask in modes:  # warm-up: weights paged in, prompt cached, engines built
        run(backend, engine, mask)
    per_token: dict[str, list[float]] = {label: [] for label, _, _, _ in modes}
    tokens: dict[str, int] = {}
    call_tokens: list[int] = []
    lazy_stats: dict[str, tuple[int, int]] = {}
    for _ in range(args.runs):
        for label, backend, engine, mask in modes:
            r = run(backend, engine, mask)
            # The first token's time includes prompt processing; decode covers the rest.
            per_token[label].append(r.decode_seconds / max(r.completion_tokens - 1, 1))
            tokens[label] = r.completion_tokens
            if engine is not None and backend == "transformers":
                call_tokens = models[backend].backend._encode(r.raw)  # type: ignore[attr-defined]
            if engine is not None and mask == "lazy":
                lazy_stats[label] = models[backend].backend.mask_stats  # type: ignore[attr-defined]

    print(f"model: {args.model}  runs: {args.runs}  (medians; decode only)")
    print(f"{'mode':<52} {'tokens':>6} {'tok/s':>8} {'ms/tok':>8} {'ratio':>6}")
    free = {b: statistics.median(per_token[f"{b} free"]) for b in backends}
    for label, backend, engine, _ in modes:
        sec = statistics.median(per_token[label])
        ratio = f"{sec / free[backend]:.2f}" if engine else "1.00"
        print(f"{label:<52} {tokens[label]:>6} {1 / sec:>8.1f} {sec * 1000:>8.1f} {ratio:>6}")
    for label, (full_masks, picks) in lazy_stats.items():
        print(f"{label}: {full_masks} of {picks} tokens needed the whole-vocabulary mask")
    if "transformers" in models:
        print("\nthe grammar's own cost per token along the call, transformers (forward pass left out), median:")
        for engine in engines:
            models["transformers"].backend.engine_name = engine  # type: ignore[attr-defined]
            mask_s, ask_s = _check_cost(models["transformers"], call_tokens)
            print(f"  {engine:<14} whole-vocabulary mask {mask_s * 1000:7.3f} ms   one-token check {ask_s * 1000:7.3f} ms")
    _print_builds(args, models, engines)


def _print_builds(args: argparse.Namespace, models: dict[str, localtools.Model], engines: list[str]) -> None:
    if args.build_sets and "llama-cpp" in models:
        secs = _llama_build_seconds(models["llama-cpp"], _fresh_tool_sets(args.build_sets, args.build_tools),
                                    args.build_choice)
        print(f"\nllama-cpp, first token under a new tool set's grammar less a free one, tool_choice "
              f"{args.build_choice}, {args.build_tools} tools: median {statistics.median(secs) * 1000:.0f} ms, "
              f"max {max(secs) * 1000:.0f} ms")
    if args.build_sets and "transformers" in models:
        print(f"\nfirst mask for a new tool set (compile + first token mask), {args.build_sets} sets, "
              f"tool_choice {args.build_choice}, {args.build_tools} tools; median / max:")
        for engine in engines:
            models["transformers"].backend.engine_name = engine  # type: ignore[attr-defined]
            secs = _build_seconds(models["transformers"], _fresh_tool_sets(args.build_sets, args.build_tools),
                                  args.build_choice)
            print(f"  {engine:<14} {statistics.median(secs) * 1000:8.0f} ms  {max(secs) * 1000:8.0f} ms")


if __name__ == "__main__":
    main()
