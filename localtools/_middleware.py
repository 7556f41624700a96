"""Execution middleware: what wraps a tool call between its validation and the tool function.

A middleware is ``async (ctx, call_next) -> result``: it may act before and after
``await call_next(ctx)``, answer without calling it, or call it again. The agent's own
middleware runs outermost, in the order given, then the tool's, then the tool's timeout and
function. Errors are typed: ``ToolTimeout``, ``ToolExecutionError``, ``ToolUnavailable``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._parse import ToolCall
from ._tools import Tool

__all__ = ["CallContext", "Middleware", "Next", "chain"]


@dataclass
class CallContext:
    """One call on its way to the tool function."""

    run_id: str
    tool: Tool
    call: ToolCall
    #: The validated arguments the function receives.
    arguments: dict[str, Any]
    #: 1 for the first try; a retry middleware counts up.
    attempt: int = 1
    #: Set by a cache that answered without running the tool.
    cached: bool = False
    #: Free-form facts a middleware records for the trace (e.g. seconds waited for a rate limit).
    notes: dict[str, Any] = field(default_factory=dict)


Next = Callable[[CallContext], Awaitable[Any]]


class Middleware(Protocol):
    async def __call__(self, ctx: CallContext, call_next: Next) -> Any: ...


def chain(middleware: Sequence[Middleware], innermost: Next) -> Next:
    """``middleware[0]`` outermost, ``innermost`` last."""
    call = innermost
    for mw in reversed(middleware):
        call = _bind(mw, call)
    return call


def _bind(mw: Middleware, call_next: Next) -> Next:
    async def run(ctx: CallContext) -> Any:
        return await mw(ctx, call_next)

    return run
