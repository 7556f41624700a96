"""Tokens/s of free vs grammar-constrained decoding on one fixed prompt, same process.

    .venv/bin/python benchmarks/decode_speed.py [--model qwen2.5-coder-0.5b] [--runs 5]

Runs alternate (free, constrained, free, ...) so machine noise hits both; prints medians and
the constrained/free ratio of seconds per generated token (decode only).
"""

from __future__ import annotations

import argparse
import statistics

import localtools
from localtools.examples import ALL

PROMPT = [{"role": "user", "content": "Convert 12.5 km to miles, then tell me the current time in Europe/Paris."}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    model = localtools.load(args.model)
    per_token: dict[bool, list[float]] = {False: [], True: []}
    tokens: dict[bool, list[int]] = {False: [], True: []}
    model.chat(PROMPT, ALL, tool_choice="none", max_tokens=4)  # warm-up: puts the prompt in the KV cache
    for _ in range(args.runs):
        for constrained in (False, True):
            r = model.chat(PROMPT, ALL, tool_choice="required", constrained=constrained, max_tokens=128)
            # The first token's time includes prompt processing; decode covers the rest.
            per_token[constrained].append(r.decode_seconds / max(r.completion_tokens - 1, 1))
            tokens[constrained].append(r.completion_tokens)
    free, cons = statistics.median(per_token[False]), statistics.median(per_token[True])
    print(f"model: {args.model}  runs: {args.runs}  tokens per reply: free {tokens[False][0]}, constrained {tokens[True][0]}")
    print(f"free:        {1 / free:7.1f} tokens/s  ({free * 1000:.1f} ms/token)")
    print(f"constrained: {1 / cons:7.1f} tokens/s  ({cons * 1000:.1f} ms/token)")
    print(f"grammar_overhead_ratio (constrained / free seconds per token): {cons / free:.2f}")


if __name__ == "__main__":
    main()
