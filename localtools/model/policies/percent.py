"""``percent``: a number the user wrote as a percentage, written whole for a tool that does not
take percentages, given as its fraction (``as_fraction``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...families._parse import ToolCall
from .._decide import Decision, DecisionPoint, as_fraction
from ._base import Context, as_json, properties

__all__ = ["Percent"]


@dataclass(frozen=True)
class Percent:
    """A percentage the user wrote, written whole, given as its fraction."""

    switch: str = "percent"
    reads: str = "the conversation as written (numbers and '%'), each number argument's name and schema"
    changes: str = "a number argument: 5 to 0.05"

    def __call__(self, calls: list[ToolCall], context: Context) -> tuple[list[ToolCall], list[Decision]]:
        """The calls settled, and a decision for each change."""
        out, made = [], []
        for call in calls:
            props = properties(context.schemas, call.name)
            fixed = {k: f for k, v in call.arguments.items()
                     if (f := as_fraction(k, v, props.get(k) or {}, context.written)) is not None}
            made += [Decision(DecisionPoint.PERCENT, None, None, True, argument=f"{call.name}.{key}",
                              before=as_json(call.arguments[key]), after=as_json(fraction))
                     for key, fraction in fixed.items()]
            out.append(replace(call, arguments={**call.arguments, **fixed}) if fixed else call)
        return out, made
