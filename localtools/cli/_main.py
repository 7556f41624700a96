"""The ``localtools`` command line: one module per command (``add_parser`` and ``main``), what they share in ``_common``."""

from __future__ import annotations

import argparse
import logging
import sys

from .._errors import LocalToolsError
from . import _bench, _calibrate, _doctor, _engines, _models, _render, _run, _schema, _serve, _templates

EPILOG = """examples:
  localtools run "What is 17 * 23 + 4?" --tools localtools.examples:ALL
  localtools run "Plan of cust-1001?" --tools ./my_tools.py:get_customer --trace trace.jsonl
  localtools render "What time is it?" --tools localtools.examples:ALL --family qwen2.5
  localtools models pull qwen2.5-coder-0.5b
  localtools doctor                 # something fails? what the machine is and whether each backend generates
  localtools serve --model qwen2.5-coder-0.5b --port 8000   # then base_url="http://127.0.0.1:8000/v1"
  localtools bench --bfcl --category simple_python --category irrelevance --sample 20 --json bench.json
  localtools bench --sample 40 --peer llama-cpp-python --peer openai:http://127.0.0.1:8080/v1 --plot bench.png
  localtools bench --bfcl --pooled --route-k 5 --sample 20   # all BFCL 'multiple' tools in one pool vs routed to 5
  localtools calibrate qwen2.5-coder-0.5b --sample 20   # thresholds for call-or-text and another call
  localtools engines start llama-server --model qwen2.5-coder-0.5b --parallel 4 --port 8080
  localtools serve --backend llama-server --engine-url http://127.0.0.1:8080 --model qwen2.5-coder-0.5b
"""

#: Each command's module, in the order ``--help`` lists them.
_COMMANDS = {"run": _run, "render": _render, "templates": _templates, "schema": _schema, "bench": _bench,
             "calibrate": _calibrate, "serve": _serve, "doctor": _doctor, "engines": _engines, "models": _models}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    parser = argparse.ArgumentParser(
        prog="localtools",
        description="Tool calling for local models: templates put your tools into the prompt, a grammar "
        "keeps every call valid, and the loop runs the tools and feeds results back.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in _COMMANDS.values():
        module.add_parser(sub)
    return parser


def _say_backend_notes() -> None:
    """What a backend decides on its own while it runs (a context grown for a long prompt) goes
    to stderr, once per command: a user sees why memory grew."""
    log = logging.getLogger("localtools.backends")
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("localtools: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)


class _Stderr(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes (a caller may have replaced it since)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def main(argv: list[str] | None = None) -> int:
    """The ``localtools`` command; returns its exit status."""
    args = build_parser().parse_args(argv)
    _say_backend_notes()
    try:
        return _COMMANDS[args.command].main(args)
    except LocalToolsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
