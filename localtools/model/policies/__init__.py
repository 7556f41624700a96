"""The policies that decode a turn again, and those that settle a reply's calls once it is
written, each list in the order they act.

A policy that decodes again has one interface (``Redecode``): the ``Decisions`` settings that
turn it on, whether it needs the model's distribution, what it reads, what it changes, what it
readies before the first reply is written (``ahead``), and a call that takes the turn (``Turn``)
and the reply so far and returns the reply it leaves. ``REDECODING`` states their order once;
``redecode`` runs them.

A policy that settles has one interface too (``Settle``): the switch of ``Decisions`` that turns
it on, what it reads, what it changes, and a call that takes the reply's calls and returns them
settled with a ``Decision`` for each change (the value before and after). ``SETTLING`` states
their order once; ``settle`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...backends._base import Generation
from ...families._parse import ToolCall
from .._decide import Decision, Decisions
from ._base import Context, Settle
from ._turn import Redecode, Run, Turn, switched
from .call import Call
from .distinct import Distinct
from .echo import Echo
from .form import Form
from .ground import Ground
from .guess import Guess
from .held import Held
from .more import More
from .option import Option
from .percent import Percent
from .shape import Shape
from .vote import Vote

__all__ = ["REDECODING", "SETTLING", "Context", "Redecode", "Run", "Settle", "Turn", "redecode", "settle"]

#: The order: ``call`` chooses the branch the reply is written in and ``form`` where it stops
#: (both before it is written); then ``form`` settles the calls' form, ``guess`` (and ``fit``)
#: judge the calls it left, before ``more`` adds any; ``held`` reads a text answer (not the one
#: a refused guess gave), and ``echo`` (and ``told``) a text answer ``held`` left; ``more`` adds
#: calls, ``option`` arguments to the calls there are;
#: ``samples`` votes last, on the reply every other policy left.
REDECODING: tuple[Redecode, ...] = (Call(), Form(), Guess(), Held(), Echo(), More(), Option(), Vote())


def redecode(turn: Turn) -> Generation:
    """The turn's reply: each policy that is on readies it (``ahead``), it is written, and each
    decodes it again in turn, adding its decisions to ``turn.made``."""
    on = [p for p in REDECODING if (turn.source is not None or not p.distribution) and
          any(switched(turn.decisions, name) for name in p.switch)]
    for policy in on:
        policy.ahead(turn)
    gen = turn.answer(turn.fmt, parting=turn.parting)
    for policy in on:
        gen = policy(turn, gen)
    return gen

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
