"""A constrained call's wall time with the tokens the grammar forces fast-forwarded, vs token by
token, vs the same prompt decoded free; every mode in one process.

    .venv/bin/python benchmarks/fast_forward.py [--model qwen2.5-coder-0.5b] [--runs 3]
        [--backend llama-cpp --backend transformers] [--device cuda] [--n-gpu-layers -1]

Each question asks for one or two calls of the example tools. Per backend, each question is
generated in three modes, alternating ``--runs`` times so machine noise hits all of them: free
(no grammar), constrained token by token (``fast_forward=False``) and constrained with
fast-forward. The prompt is evaluated once before timing, so each generation reuses it and its
wall time is the call's own (first token included). The table sums the medians over the
questions and gives each mode's ratio to free decoding, in wall time and per token of the reply
(free decoding writes the same calls in more tokens: it lays JSON out over lines); it also says
whether fast-forward wrote the same text as token-by-token decoding (and free decoding the same
calls).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import localtools
from localtools.examples import ALL

QUESTIONS = [
    "Convert 12.5 km to miles.",
    "What time is it in Europe/Paris?",
    "What is 17 * 23 + 4?",
    "Read the file notes/todo.txt",
    "Look up customer 4521.",
    "Convert 3 kg to lb and tell me the time in Asia/Tokyo.",
]
MODES = ("free", "token by token", "fast-forward")


def _generate(model: localtools.Model, question: str, mode: str) -> Any:
    backend: Any = model.backend
    messages = [{"role": "user", "content": question}]
    prompt = model.render(messages, ALL)
    fmt = model.reply_format(ALL, "auto", constrained=mode != "free")
    backend.fast_forward = mode == "fast-forward"
    return backend.generate(prompt, grammar=fmt.grammar, max_tokens=128, stop=list(fmt.stop))


def _device_options(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    if backend == "transformers" and args.device:
        return {"device": args.device}
    if backend == "llama-cpp" and args.n_gpu_layers is not None:
        return {"n_gpu_layers": args.n_gpu_layers}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--backend", action="append", choices=["llama-cpp", "transformers"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", help="transformers device (cpu, cuda)")
    parser.add_argument("--n-gpu-layers", type=int, help="llama-cpp layers on the GPU (-1: all)")
    args = parser.parse_args()
    print(f"{'backend':<13} {'mode':<15} {'tokens':>6} {'forced':>6} {'passes':>6} {'wall s':>7} {'vs free':>8} "
          f"{'ms/token':>8} {'vs free':>8}  same text")
    for name in args.backend or ["llama-cpp", "transformers"]:
        model = localtools.load(args.model, backend=name, **_device_options(name, args))
        seconds: dict[str, list[float]] = {m: [] for m in MODES}
        tokens = dict.fromkeys(MODES, 0)
        forced = dict.fromkeys(MODES, 0)
        same_text, same_calls = True, True
        for question in QUESTIONS:
            _generate(model, question, "free")  # the prompt is cached from here on
            times: dict[str, list[float]] = {m: [] for m in MODES}
            texts: dict[str, str] = {}
            for run in range(args.runs):
                for mode in MODES[run % 3:] + MODES[:run % 3]:
                    gen = _generate(model, question, mode)
                    times[mode].append(gen.prompt_seconds + gen.decode_seconds)
                    texts[mode] = gen.text
                    if run == 0:
                        tokens[mode] += len(gen.tokens)
                        forced[mode] += gen.forced_tokens
            for mode in MODES:
                seconds[mode].append(statistics.median(times[mode]))
            same_text = same_text and texts["fast-forward"] == texts["token by token"]
            fmt = model.reply_format(ALL, "auto")
            calls = [[(c.name, c.arguments) for c in fmt.parse(texts[m]).tool_calls] for m in ("free", "fast-forward")]
            same_calls = same_calls and calls[0] == calls[1]
        free = sum(seconds["free"])
        free_per_token = free / tokens["free"]
        for mode in MODES:
            total = sum(seconds[mode])
            per_token = total / tokens[mode]
            same = "" if mode != "fast-forward" else ("yes" if same_text else "NO") + \
                f" (free wrote the same calls: {'yes' if same_calls else 'no'})"
            print(f"{name:<13} {mode:<15} {tokens[mode]:>6} {forced[mode]:>6} {tokens[mode] - forced[mode]:>6} "
                  f"{total:7.3f} {total / free:7.3f}x {per_token * 1000:8.1f} {per_token / free_per_token:7.3f}x  {same}")


if __name__ == "__main__":
    main()
