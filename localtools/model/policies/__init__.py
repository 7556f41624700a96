"""The policies that settle a reply's calls once it is written, in the order they act.

Each is a small policy with one interface (``Settle``): the switch of ``Decisions`` that turns it
on, what it reads, what it changes, and a call that takes the reply's calls and returns them
settled with a ``Decision`` for each change (the value before and after). ``SETTLING`` states
their order once; ``settle`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...families._parse import ToolCall
from .._decide import Decision, Decisions
from ._base import Context, Settle
from .distinct import Distinct
from .ground import Ground
from .percent import Percent
from .shape import Shape

__all__ = ["SETTLING", "Context", "Settle", "settle"]

#: The order: ``shape`` records the values written in a stated form (as the model wrote them);
#: ``percent`` and ``ground`` change values; ``distinct`` then reads the calls as they left them,
#: so two calls that differ only in what they changed are one call.
SETTLING: tuple[Settle, ...] = (Shape(), Percent(), Ground(), Distinct())


def settle(calls: list[ToolCall], schemas: Mapping[str, Any], decisions: Decisions | None,
           messages: Sequence[Mapping[str, Any]]) -> tuple[list[ToolCall], list[Decision]]:
    """``calls`` as the turn gives them, and a decision for each thing a policy changed."""
    made: list[Decision] = []
    if decisions is None:
        return calls, made
    context = Context(schemas, messages, decisions)
    for policy in SETTLING:
        if getattr(decisions, policy.switch) and calls:
            calls, changed = policy(calls, context)
            made += changed
    return calls, made
