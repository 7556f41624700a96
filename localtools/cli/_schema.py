"""``localtools schema``: what enforces each keyword of a tool's schema."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .._errors import UnsupportedSchema, UsageError
from . import _common


def add_parser(sub: Any) -> None:
    schema = sub.add_parser(
        "schema", help="what enforces each keyword of your tools' schemas: the grammar, the check, or nothing",
        description="'check TOOLS...' prints, per tool and per keyword path, 'grammar' (no value that breaks it can "
        "be decoded), 'grammar, checked after decoding' (narrowed by the grammar, finished by jsonschema before the "
        "call leaves), 'checked after decoding', or 'unsupported' (an unknown keyword or format: nothing enforces "
        "it). Exit status 1 when a tool's schema is refused outright, and with --strict when anything is unsupported.")
    ssub = schema.add_subparsers(dest="schema_command", required=True, metavar="COMMAND")
    scheck = ssub.add_parser("check", help="the enforcement report of tools")
    scheck.add_argument("tools", nargs="+", metavar="TOOLS",
                        help="MODULE:ATTR or FILE.py:ATTR as for --tools, or a JSON file: a tool spec, a list of them, "
                        "or a parameters schema")
    scheck.add_argument("--strict", action="store_true", help="exit 1 when any keyword is unsupported")


def _schema_specs(item: str) -> list[dict[str, Any]]:
    """Tool specs from ``item``: a JSON file (a spec, a list of specs, or a bare parameters schema)
    or ``MODULE:ATTR`` as ``--tools`` takes it."""
    if item.endswith(".json"):
        path = Path(item)
        if not path.is_file():
            raise UsageError(f"no file {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(f"{path} is not JSON: {exc}") from None
        items = data if isinstance(data, list) else [data]
        out = []
        for i, spec in enumerate(items):
            if not isinstance(spec, dict):
                raise UsageError(f"{path}: item {i} is not an object")
            if "function" in spec or "parameters" in spec:
                fn = spec.get("function", spec)
                out.append({"type": "function", "function": {"name": fn.get("name", f"{path.stem}-{i}"),
                                                             "parameters": fn.get("parameters") or {}}})
            else:
                out.append({"type": "function", "function": {"name": path.stem, "parameters": spec}})
        return out
    return [t.spec() for t in _common.load_tools([item])]


def main(args: argparse.Namespace) -> int:
    from ..grammar import Enforcement, schema_report

    status = 0
    for item in args.tools:
        for spec in _schema_specs(item):
            fn = spec["function"]
            print(f"tool {fn['name']}")
            try:
                report = schema_report(fn.get("parameters") or {})
            except UnsupportedSchema as exc:
                print(f"  refused: {exc}")
                status = 1
                continue
            labels = [f"{e.path or '/'} {e.keyword}" for e in report]
            width = max(map(len, labels), default=0)
            for label, entry in zip(labels, report, strict=True):
                print(f"  {label:<{width}}  {entry.enforcement.value}")
            if args.strict and any(e.enforcement is Enforcement.UNSUPPORTED for e in report):
                status = 1
    return status
