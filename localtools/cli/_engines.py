"""``localtools engines``: build and start llama-server."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    engines = sub.add_parser(
        "engines", help="build and start llama-server, for --backend llama-server",
        description="'build llama-server' compiles llama.cpp's server (its target alone) from the llama.cpp sources "
        "in the llama-cpp-python sdist the llama-cpp backend uses, tuned for this CPU, and caches it (minutes the "
        "first time; then it prints the cached path). $LOCALTOOLS_LLAMA_SERVER names a binary of your own instead. "
        "'start llama-server' runs it on a catalog model or GGUF, on 127.0.0.1, until interrupted; then point "
        "--backend llama-server --engine-url at it.")
    esub = engines.add_subparsers(dest="engines_command", required=True, metavar="ACTION")
    ebuild = esub.add_parser("build", help="build llama-server and print its path")
    ebuild.add_argument("engine", choices=["llama-server"])
    ebuild.add_argument("--force", action="store_true", help="build again even if a build is cached")
    ebuild.add_argument("--jobs", "-j", type=int, help="parallel compile jobs (default: every core)")
    estart = esub.add_parser("start", help="run llama-server on a model until interrupted")
    estart.add_argument("engine", choices=["llama-server"])
    estart.add_argument("--model", "-m", help="catalog name or .gguf path (default: the first catalog model)")
    estart.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")
    estart.add_argument("--parallel", type=int, default=4, help="requests it batches at once (slots; default 4)")
    estart.add_argument("--n-ctx", type=int, default=4096, help="context per slot in tokens (default 4096)")
    estart.add_argument("--threads", type=int, help="CPU threads (default: llama-server's choice)")


def main(args: argparse.Namespace) -> int:
    from ..host._catalog import default_model, resolve_model
    from ..host._engines import build_llama_server, running_llama_server

    def progress(line: str) -> None:
        print(f"… {line}", file=sys.stderr, flush=True)

    if args.engines_command == "build":
        print(build_llama_server(force=args.force, jobs=args.jobs, progress=progress))
        return 0
    path, _ = resolve_model(args.model or default_model())
    binary = build_llama_server(progress=progress)
    with running_llama_server(path, binary=binary, parallel=args.parallel, n_ctx=args.n_ctx, port=args.port,
                              threads=args.threads) as engine:
        print(f"llama-server on {path.name} at {engine.url} ({args.parallel} slots of {args.n_ctx} tokens); "
              f"use --backend llama-server --engine-url {engine.url}. Ctrl-C stops it.", flush=True)
        engine.process.wait()
        print(f"llama-server exited ({engine.process.returncode}):\n{engine.log_tail()}", file=sys.stderr)
    return 1
