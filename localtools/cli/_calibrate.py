"""``localtools calibrate``: the decisions' thresholds for one model, from BFCL cases apart from those reported."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..backends import BACKENDS
from . import _common


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate", help="calibrate the call / another-call thresholds of a model on BFCL data",
        description="Ask BFCL cases (a calibration split: never the cases `localtools bench --sample 40` reports) "
        "with every decision probing, then pick the thresholds with the best mean accuracy over the categories: "
        "call vs text under tool_choice auto, another call vs the end of the turn, the family's parallel form (one list) "
        "vs single calls, and the shares under which a call that is a guess (its required values not in the "
        "conversation) or calls a tool the conversation never speaks of is answered in text. They are written "
        "where `load(MODEL, decisions='calibrated')` and `run`/`serve --calibrated` "
        "find them (see `--print-path`); `localtools bench --levers` reports them on the other split.")
    p.add_argument("model", nargs="?", help="catalog name or .gguf path (default: the default model)")
    p.add_argument("--backend", default="llama-cpp", choices=list(BACKENDS), help="in-process backend (default llama-cpp)")
    p.add_argument("--sample", type=int, default=20, metavar="N", help="calibration cases per category (default 20)")
    p.add_argument("--category", action="append", metavar="C",
                   help="simple_python, multiple, parallel, parallel_multiple, irrelevance (repeatable; default all five)")
    p.add_argument("--max-tokens", type=int, default=256, help="most tokens per reply (default 256)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the call decision's curve (needs matplotlib)")
    p.add_argument("--dry-run", action="store_true", help="print the thresholds and the curve, write nothing")
    p.add_argument("--replay", action="store_true",
                   help="choose the thresholds again from the probes of the calibration already written with these "
                   "options, asking the model nothing (after a new threshold grid or decision)")
    p.add_argument("--print-path", action="store_true", help="print where the thresholds are kept for MODEL and exit")


def main(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .._errors import UsageError
    from ..bench import CATEGORIES, bfcl_data_dir, load_cases
    from ..bench._calibrate import (
        ProbeLog,
        calibration_cases,
        call_curve,
        choose,
        probe,
        saved_probes,
        write_calibration,
    )
    from ..host._catalog import default_model
    from ..model._decide import Decisions
    from ..model._load import calibration_path, load

    name = args.model or default_model()
    path = calibration_path(name)
    if args.print_path:
        print(path)
        return 0
    if args.plot:
        from ..bench._plot import pyplot

        pyplot()  # an install hint before the run, not after it
    folder = bfcl_data_dir()
    categories = args.category or list(CATEGORIES)
    cases = [c for category in categories for c in calibration_cases(load_cases(folder, category), args.sample)]
    meta = {"model": name, "backend": args.backend, "categories": categories, "sample": args.sample,
            "max_tokens": args.max_tokens, "split": "calibration: seed 1 over the cases outside bench's --sample 40 --seed 0"}
    log = None
    if args.replay:
        saved = saved_probes(path, meta)
        if saved is None or any(c.id not in saved for c in cases):
            raise UsageError(f"--replay: no calibration of {name} at {path} made with these options (--backend, "
                             "--sample, --category, --max-tokens); run `localtools calibrate` without --replay first")
        done = saved
    else:
        # The probes are kept as they are made: a run stopped part way goes on where it stopped.
        log = None if args.dry_run else ProbeLog(path.with_suffix(".probes.jsonl"), meta)
        done = {} if log is None else {c.id: log.done[c.id] for c in cases if c.id in log.done}
        if log is not None and done:
            print(f"note: {len(done)} of the {len(cases)} cases were probed by a run that stopped; going on from there "
                  f"({log.path})", file=sys.stderr)
    model = None if all(c.id in done for c in cases) else load(name, backend=args.backend, decisions=Decisions())
    probes = []
    with _common.steps("calibrate", len(cases)) as step:
        for case in cases:
            made = done.get(case.id)
            if made is None:
                assert model is not None
                made = probe(model, case, max_tokens=args.max_tokens)
                if log is not None:
                    log.add(made)
            probes.append(made)
            step(case.id)
    decisions, rows = choose(probes, cases)
    table = Table(title=f"{name}: mean accuracy by threshold on {len(cases)} calibration cases (best first)")
    for column in ("call", "more", "form", "guess", "fit", "mean", *categories):
        table.add_column(column, justify="right")
    for row in sorted(rows, key=lambda r: -r["mean"])[:12]:
        table.add_row(f"{row['call']:g}", f"{row['more']:g}", f"{row['form']:g}", f"{row['guess']:g}", f"{row.get('fit', 0):g}",
                      f"{row['mean']:.1%}",
                      *(f"{row[c]:.1%}" if c in row else "-" for c in categories))
    _common.print_table(table)
    curve = call_curve(probes, cases)
    table = Table(title="the call decision: cases that call, per threshold")
    for column in ("call threshold", "expect a call: called", "expect none: called"):
        table.add_column(column, justify="right")
    for point in curve:
        table.add_row(f"{point['threshold']:.2f}", f"{point['needed_called']} / {point['needed']}",
                      f"{point['unneeded_called']} / {point['unneeded']}")
    _common.print_table(table)
    failed = sum(1 for p in probes if p.error)
    if failed:
        print(f"note: {failed} cases ended in an error while probing (scored as no call)", file=sys.stderr)
    print(f"chosen: call {decisions.call}, more {decisions.more}, form {decisions.form}, guess {decisions.guess}, "
          f"fit {decisions.fit}, distinct {decisions.distinct}")
    if args.replay and not args.dry_run:
        write_calibration(path, decisions, meta, rows, probes, curve)
        print(f"wrote {path}")
    if log is not None:
        write_calibration(path, decisions, meta, rows, probes, curve)
        log.close()
        print(f"wrote {path}")
    if args.plot:
        from ..bench._plot import plot_call_curve

        plot_call_curve(curve, args.plot, chosen=decisions.call, title=f"{name}: call or text, {len(cases)} cases")
        print(f"wrote {args.plot}")
    return 0
