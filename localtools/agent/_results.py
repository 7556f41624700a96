"""Grounding: what of a tool's result reaches the model.

A result policy turns the result's text into what the model reads: ``Full()`` (all of it),
``Truncate(tokens=N)``, ``Pick("a", "b.c")`` (fields of a JSON result) or ``Summarize(fn)``.
Set one per tool (``@tool(result=Truncate(200))``) or for every tool (``Agent(result=...)``).
The whole result stays in the trace (``CallTrace.full_result``): nothing is lost, only kept out
of the prompt.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import UsageError
from ..families._parse import ToolCall
from ..tools._tools import Tool

__all__ = ["Full", "Pick", "ResultContext", "ResultPolicy", "Summarize", "Truncate"]


@dataclass(frozen=True)
class ResultContext:
    """What a policy may use: the tool, the call, and the model's own token count for a text."""

    tool: Tool
    call: ToolCall
    count_tokens: Callable[[str], int]


class ResultPolicy(Protocol):
    def __call__(self, text: str, ctx: ResultContext) -> str | Awaitable[str]: ...


class Full:
    """The whole result (the default)."""

    def __call__(self, text: str, ctx: ResultContext) -> str:
        return text

    def __repr__(self) -> str:
        return "Full()"


class Truncate:
    """At most ``tokens`` tokens of the result (by the model's tokenizer), then a note that says
    how much was left out."""

    def __init__(self, tokens: int) -> None:
        if tokens < 1:
            raise UsageError(f"Truncate(tokens=...) must be at least 1, got {tokens}")
        self.tokens = tokens

    def __call__(self, text: str, ctx: ResultContext) -> str:
        total = ctx.count_tokens(text)
        if total <= self.tokens:
            return text
        # The longest prefix within the budget, by bisection: O(log n) token counts.
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ctx.count_tokens(text[:mid]) <= self.tokens:
                lo = mid
            else:
                hi = mid - 1
        return f"{text[:lo]}\n[... result cut to {self.tokens} of its {total} tokens]"

    def __repr__(self) -> str:
        return f"Truncate(tokens={self.tokens})"


class Pick:
    """Only the named fields of a JSON result (dotted paths reach into objects; a list is picked
    item by item). A result that is not JSON is kept whole."""

    def __init__(self, *paths: str) -> None:
        if not paths or not all(isinstance(p, str) and p for p in paths):
            raise UsageError("Pick(...) needs one or more field names, e.g. Pick('name', 'address.city')")
        self.paths = [p.split(".") for p in paths]

    def __call__(self, text: str, ctx: ResultContext) -> str:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return json.dumps(self._pick(value), ensure_ascii=False)

    def _pick(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._pick(v) for v in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for path in self.paths:
            _copy(value, out, path)
        return out

    def __repr__(self) -> str:
        return f"Pick({', '.join(repr('.'.join(p)) for p in self.paths)})"


def _copy(src: dict[str, Any], dst: dict[str, Any], path: list[str]) -> None:
    key, rest = path[0], path[1:]
    if key not in src:
        return
    if not rest:
        dst[key] = src[key]
    elif isinstance(src[key], dict):
        _copy(src[key], dst.setdefault(key, {}), rest)
    elif isinstance(src[key], list):
        dst[key] = [Pick(".".join(rest))._pick(v) for v in src[key]]


class Summarize:
    """``fn(text, ctx)`` (sync or async) writes what the model reads instead of the result, e.g.
    a summary by another model. Its errors become the call's error."""

    def __init__(self, fn: Callable[[str, ResultContext], str | Awaitable[str]]) -> None:
        if not callable(fn):
            raise UsageError("Summarize(fn) needs a callable (text, ctx) -> str")
        self.fn = fn

    async def __call__(self, text: str, ctx: ResultContext) -> str:
        out = self.fn(text, ctx)
        if inspect.isawaitable(out):
            out = await out
        return str(out)

    def __repr__(self) -> str:
        return f"Summarize({getattr(self.fn, '__name__', self.fn)!r})"


async def shape(policy: ResultPolicy, text: str, ctx: ResultContext) -> str:
    out = policy(text, ctx)
    if inspect.isawaitable(out):
        out = await out
    return str(out)
