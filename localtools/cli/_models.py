"""``localtools models``: list and pull catalog models."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    models = sub.add_parser("models", help="list or download catalog models")
    msub = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    msub.add_parser("list", help="one model a line: name, family, backends, size, where it is cached")
    pull = msub.add_parser("pull", help="download, assemble and verify a catalog model")
    pull.add_argument("name")
    pull.add_argument("--force", action="store_true", help="download again even if cached")


def main(args: argparse.Namespace) -> int:
    from ..host._catalog import catalog, pull

    if args.models_command == "list":
        for entry in catalog().values():
            state = str(entry.path) if entry.cached else "not downloaded"
            decides = ",".join(f"{k}={v:g}" for k, v in entry.decisions) or "greedy"
            print(f"{entry.name}\t{entry.family}\t{','.join(entry.backends)}\t{entry.size / 1e6:.0f} MB\t{state}\t{decides}")
        return 0
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    known = catalog().get(args.name)
    if known is not None and known.cached and not args.force:
        print(known.path)
        return 0
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        task = bar.add_task(f"downloading {args.name}", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, description=f"assembling {args.name}", completed=done, total=total)

        path = pull(args.name, force=args.force, progress=progress)
    print(path)
    return 0
