"""The grammar matcher on text answers: ``Text`` read in one pass vs spelled out as rules.

    .venv/bin/python benchmarks/matcher.py [--runs 3]

``Model.chat`` asks the matcher up to three times per constrained reply whether the reply is a
text answer, calls, or cut inside a call. A ``Text`` node spelled out as rules (what llama.cpp's
GBNF gets) recurses once per character and makes every position's set of ends as long as the
rest of the text; the matcher reads it in one pass instead. Both are timed in the same run on the
same grammar (Qwen2.5, two tools, tool_choice auto) and texts; the table gives medians and the
ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

from localtools import get_family
from localtools.examples import ALL
from localtools.grammar import build_grammar, matches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    grammar = build_grammar(get_family("qwen2.5"), [t.spec() for t in ALL[:2]], "auto")
    rules = grammar.lowered()
    print("| text answer | one pass (s) | as rules (s) | ratio |")
    print("| --- | --- | --- | --- |")
    for chars in (250, 1000, 2000, 4000):
        text = ("The customer is on the pro plan, renewed in May. " * 100)[:chars].rstrip()
        times: dict[str, list[float]] = {"pass": [], "rules": []}
        for _ in range(args.runs):
            for name, g in (("pass", grammar), ("rules", rules)):
                started = time.perf_counter()
                assert matches(g, text)
                times[name].append(time.perf_counter() - started)
        one, spelled = statistics.median(times["pass"]), statistics.median(times["rules"])
        print(f"| {len(text)} chars | {one:.4f} | {spelled:.3f} | {spelled / one:.0f}x |")


if __name__ == "__main__":
    main()
