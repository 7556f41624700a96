"""The ``localtools`` command line: one module per command, what they share in ``_common``."""

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
