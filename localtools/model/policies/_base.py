"""The interface every settling policy has, and what they read."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from ...families._parse import ToolCall
from .._decide import Decision, Decisions, asked, conversation_text, readable_numbers, said

__all__ = ["Context", "Settle", "as_json", "properties"]


@dataclass(frozen=True)
class Context:
    """What a policy reads: the offered tools' schemas, the conversation, the settings; the
    conversation's readings made once and shared."""

    schemas: Mapping[str, Any]
    messages: Sequence[Mapping[str, Any]]
    decisions: Decisions

    @cached_property
    def written(self) -> str:
        """Every message but the model's own, as written (``said``)."""
        return said(self.messages)

    @cached_property
    def conversation(self) -> str:
        """The same, as values are compared (``conversation_text``)."""
        return conversation_text(self.messages)

    @cached_property
    def numbers(self) -> bool:
        """Whether the request's numbers are all read here (``readable_numbers``)."""
        return readable_numbers(asked(self.messages))


class Settle(Protocol):
    """A policy that settles a reply's calls."""

    @property
    def switch(self) -> str:
        """The ``Decisions`` switch that turns it on."""
        ...

    @property
    def reads(self) -> str:
        """What it reads (for the reader; docs/decisions.md says more)."""
        ...

    @property
    def changes(self) -> str:
        """What it changes."""
        ...

    def __call__(self, calls: list[ToolCall], context: Context) -> tuple[list[ToolCall], list[Decision]]:
        """The calls settled, and a decision for each change (``before`` and ``after``)."""
        ...


def properties(schemas: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The ``properties`` of tool ``name``'s schema (empty when it has none)."""
    schema = schemas.get(name) or {}
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


def as_json(value: Any) -> str:
    """A value as a decision records it: JSON text, as the call carries it."""
    return json.dumps(value, ensure_ascii=False)
