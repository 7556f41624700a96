"""``distinct``: a reply's repeat of one of its own calls (same name and arguments) left out."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...families._parse import ToolCall, call_key
from .._decide import Decision, distinct
from ._base import Context, as_json

__all__ = ["Distinct"]


@dataclass(frozen=True)
class Distinct:
    """A reply's repeat of one of its own calls, left out."""

    switch: str = "distinct"
    reads: str = "the reply's calls"
    changes: str = "a repeated call left out"

    def __call__(self, calls: list[ToolCall], context: Context) -> tuple[list[ToolCall], list[Decision]]:
        """The calls settled, and a decision for each change."""
        if len(calls) < 2:
            return calls, []
        kept, dropped = distinct([call_key(c.name, c.arguments) for c in calls])
        made = [replace(d, argument=calls[d.calls].name, before=as_json(calls[d.calls].arguments)) for d in dropped]
        return [calls[i] for i in kept], made
