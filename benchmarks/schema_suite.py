"""The official JSON-Schema-Test-Suite (draft 2020-12) against the constrained path, no model:
every group as a tool's parameters, every instance asked of ``admits`` with and without the check.

    .venv/bin/python benchmarks/schema_suite.py [--list]
"""

from __future__ import annotations

import argparse
import collections

from localtools.bench._suite import fetch_suite, load_suite, score_suite
from localtools.host._catalog import cache_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="also list every refusal and rejection")
    args = parser.parse_args()
    score = score_suite(load_suite(fetch_suite(cache_dir().parent / "suites")))
    for line in score.lines():
        print(line)
    by_file = collections.Counter(g.split(":")[0] for g, _, _ in score.invalid_admitted_by_grammar)
    print("grammar alone admits, by file:", ", ".join(f"{f} {n}" for f, n in by_file.most_common()))
    if args.list:
        for group, reason in score.refused:
            print(f"refused  {group}: {reason}")
        for group, test in score.valid_rejected:
            print(f"rejected {group} | {test}")


if __name__ == "__main__":
    main()
