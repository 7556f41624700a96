"""``localtools doctor``: the machine, the backends and a test generation."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor", help="if something fails: the machine, the installed backends and models, and a test generation",
        description="Print the machine (CPU model and features, cores, memory, GPUs), llama.cpp's and torch's own "
        "build info, each backend and grammar engine with its version, the cached models with size and sha256 "
        "status, then run a short generation per installed backend in a child process (so a crash is reported, "
        "not suffered) and say ok, crashed (with the signal) or error, each with its fix. Exit code 1 when an "
        "installed backend cannot generate.")
    doctor.add_argument("--backend", action="append", metavar="llama-cpp|transformers|MODULE:CLASS",
                        help="check only this backend, or a backend of your own (repeatable; default: every backend)")
    doctor.add_argument("--model", "-m", help="the model to generate with (default: the smallest cached catalog model "
                        "each backend runs on)")
    doctor.add_argument("--no-generate", action="store_true", help="skip the test generations")
    doctor.add_argument("--no-checksum", action="store_true", help="skip hashing the cached models (seconds per GB)")
    doctor.add_argument("--timeout", type=float, default=600, help="seconds a test generation may take (default 600)")


def main(args: argparse.Namespace) -> int:
    from ..ops._doctor import diagnose, render

    def progress(step: str) -> None:
        print(f"… {step}", file=sys.stderr, flush=True)

    report = diagnose(backends=args.backend, model=args.model, checksums=not args.no_checksum,
                      generate=not args.no_generate, timeout=args.timeout, progress=progress)
    print(render(report, generate=not args.no_generate))
    return 1 if report.failed else 0
