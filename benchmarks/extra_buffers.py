"""What llama.cpp's extra CPU buffer types (weight repacking) are worth: tokens/s with them on and off.

    .venv/bin/python benchmarks/extra_buffers.py [--model qwen2.5-coder-0.5b --model smollm2-135m] [--runs 3]

Per model, both settings are loaded in one process and their runs alternate, so machine noise hits
both alike. Each run processes the same prompt (the five example tools and a question, from an
empty cache) and then decodes a fixed number of tokens freely. The table gives medians and the
speed ratio on ÷ off (above 1: extra buffers are that much faster), and what they make of one
tool-calling turn (a 600-token prompt and the decoded tokens). Where ``auto`` turns them off
(an AMX build on an AMX CPU, whose AMX kernels crash), the ``on`` row is skipped, not run.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import localtools
from localtools.backends.llama_cpp import build_features, extra_buffers_choice, system_info
from localtools.examples import ALL
from localtools.host._machine import machine

#: A tool-calling turn's prompt: schemas and a conversation (the turn column estimates its time from the
#: measured speeds).
PROMPT_TOKENS = 600
PROMPT = [{"role": "user", "content": "Convert 12.5 km to miles, then tell me the current time in Europe/Paris."}]


def _run(model: localtools.Model, tokens: int) -> tuple[float, float]:
    backend: Any = model.backend
    backend.drop_prompt_cache()
    gen = backend.generate(model.render(PROMPT, ALL), max_tokens=tokens, repeat_penalty=1.3)
    # The first token's time carries prompt processing; the rest is decoding.
    return gen.prompt_tokens / gen.prompt_seconds, (len(gen.tokens) - 1) / gen.decode_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="catalog name or .gguf (repeatable; default Qwen 0.5B and SmolLM2)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64, help="tokens decoded per run (default 64)")
    args = parser.parse_args()
    auto = extra_buffers_choice("auto", machine().cpu_flags, build_features(system_info()))
    print(f"CPU: {machine().cpu_model}; features: {' '.join(machine().features())}")
    print(f"llama.cpp: {system_info()}")
    print(f"auto: {auto.reason}\n")
    settings = ["on", "off"] if auto.use else ["off"]
    print(f"| model | extra buffers | prompt tokens/s | decode tokens/s | prompt speed on/off | decode speed on/off | "
          f"turn s ({PROMPT_TOKENS} + {args.tokens} tokens) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.model or ["qwen2.5-coder-0.5b", "smollm2-135m"]:
        models = {s: localtools.load(name, extra_buffers=s) for s in settings}
        for s, m in models.items():
            used = m.backend.extra_buffers.use  # type: ignore[attr-defined]
            assert used is (s == "on"), f"extra_buffers={s} did not reach llama.cpp"
        for m in models.values():
            _run(m, 4)  # warm the page cache and the threads
        samples: dict[str, list[tuple[float, float]]] = {s: [] for s in settings}
        for i in range(args.runs):
            for s in settings[i % 2:] + settings[:i % 2]:  # the order alternates too
                samples[s].append(_run(models[s], args.tokens))
        medians = {s: (statistics.median(p for p, _ in v), statistics.median(d for _, d in v)) for s, v in samples.items()}
        for s in settings:
            prompt, decode = medians[s]
            ratios = ("–", "–")
            if "on" in medians and s == "off":
                ratios = (f"{medians['on'][0] / prompt:.2f}", f"{medians['on'][1] / decode:.2f}")
            turn = PROMPT_TOKENS / prompt + args.tokens / decode
            print(f"| {name} | {s} | {prompt:.1f} | {decode:.1f} | {ratios[0]} | {ratios[1]} | {turn:.1f} |")
        del models


if __name__ == "__main__":
    main()
