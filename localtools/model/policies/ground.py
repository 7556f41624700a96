"""``ground``: optional arguments (and a list's items) the conversation never speaks of, left
out (``ungrounded``, ``ungrounded_items``); with ``closed``, booleans and enum values too; on a
request whose numbers are not all read here, never a number; never a string in a form the tool
asks for."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...families._parse import ToolCall
from .._decide import Decision, DecisionPoint, telling, ungrounded, ungrounded_items
from ._base import Context, as_json

__all__ = ["Ground"]


@dataclass(frozen=True)
class Ground:
    """Optional arguments and list items the conversation never speaks of, left out."""

    switch: str = "ground"
    reads: str = "the conversation (every message but the model's), the tools' schemas and defaults"
    changes: str = "an optional argument left out; a list's item left out"

    def __call__(self, calls: list[ToolCall], context: Context) -> tuple[list[ToolCall], list[Decision]]:
        """The calls settled, and a decision for each change."""
        text, out, made = context.conversation, [], []
        apart = telling([(c.name, c.arguments) for c in calls])
        for call in calls:
            schema = context.schemas.get(call.name) or {}
            # A request may write a number in words no reading here knows ("两位", "dos").
            loose = [k for k in ungrounded(call.name, call.arguments, schema, text, closed=context.decisions.closed,
                                           numbers=context.numbers)
                     if k not in apart[call.name]]
            args = {k: v for k, v in call.arguments.items() if k not in loose}
            extra = ungrounded_items(args, schema, text)
            made += [Decision(DecisionPoint.GROUND, None, None, True, argument=f"{call.name}.{key}",
                              before=as_json(call.arguments[key])) for key in loose]
            made += [Decision(DecisionPoint.GROUND, None, None, True, argument=f"{call.name}.{key}/{i}",
                              before=as_json(args[key][i])) for key, at in extra.items() for i in at]
            for key, at in extra.items():
                args[key] = [v for i, v in enumerate(args[key]) if i not in at]
            out.append(replace(call, arguments=args) if loose or extra else call)
        return out, made
