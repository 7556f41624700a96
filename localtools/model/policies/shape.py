"""``shape``: the values written under the form their description states (a date format, a city
and its state), recorded. The grammar wrote them so (``shaped``); this policy changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...families._parse import ToolCall
from .._decide import Decision, DecisionPoint, stated_shape
from ._base import Context, as_json, properties

__all__ = ["Shape", "shaped_here"]


def shaped_here(prop: Any) -> bool:
    """Whether ``prop``'s pattern is the one ``shape`` gave it (``stated_shape``), not its own."""
    if not isinstance(prop, Mapping) or not isinstance(prop.get("pattern"), str):
        return False
    return stated_shape({k: v for k, v in prop.items() if k != "pattern"}) == prop["pattern"]


@dataclass(frozen=True)
class Shape:
    """Each value written in the form its description states, recorded."""

    switch: str = "shape"
    reads: str = "each argument's schema: a pattern the stated form gave it"
    changes: str = "nothing: records each value written in a stated form"

    def __call__(self, calls: list[ToolCall], context: Context) -> tuple[list[ToolCall], list[Decision]]:
        """The calls settled, and a decision for each change."""
        made = [Decision(DecisionPoint.SHAPE, None, None, True, argument=f"{call.name}.{key}", after=as_json(value))
                for call in calls for key, value in call.arguments.items()
                if shaped_here(properties(context.schemas, call.name).get(key))]
        return calls, made
