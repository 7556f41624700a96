"""The context budget: every turn's prompt fits the model's context with room left for the reply.

A conversation that would overflow is shortened for the prompt only (the run keeps every
message): first any single tool result larger than half the room is cut, then the oldest steps
are left out whole (an assistant turn with its calls' results, so ids stay paired), then the
remaining results are cut further, largest first. Each cut is described for the trace.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import ContextLengthExceeded, UsageError

__all__ = ["ContextBudget", "Fitted"]

#: Measures a prompt for ``messages`` in tokens; any number not above the room means it fits.
Measure = Callable[[list[dict[str, Any]]], int]


@dataclass
class Fitted:
    """The messages a turn's prompt is rendered from, and what was cut to get them."""

    messages: list[dict[str, Any]]
    cuts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ContextBudget:
    """Keeps prompts within ``n_ctx`` minus ``reserve`` tokens.

    ``n_ctx``: ``None`` for the backend's own (a backend that does not say has no budget).
    ``reserve``: the room kept for the reply; ``None`` for the agent's ``max_tokens``.
    ``keep_recent``: the latest steps left out only when nothing else makes room.
    ``min_result_chars``: results are cut no shorter than this before a step is left out.
    ``summarize``: given the messages left out, the text that stands for them (the default names
    the calls they held).
    """

    n_ctx: int | None = None
    reserve: int | None = None
    keep_recent: int = 1
    min_result_chars: int = 200
    summarize: Callable[[list[dict[str, Any]]], str] | None = None

    def __post_init__(self) -> None:
        if self.n_ctx is not None and self.n_ctx < 1:
            raise UsageError(f"ContextBudget(n_ctx=...) must be a positive number of tokens, got {self.n_ctx}")
        if self.reserve is not None and self.reserve < 0:
            raise UsageError(f"ContextBudget(reserve=...) must be 0 or more tokens, got {self.reserve}")
        if self.keep_recent < 0 or self.min_result_chars < 0:
            raise UsageError("ContextBudget keep_recent and min_result_chars must be 0 or more")

    def fit(self, messages: list[dict[str, Any]], measure: Measure, room: int, *, question: int | None = None) -> Fitted:
        """``messages`` as they are when their prompt fits ``room`` tokens, else shortened.

        ``question``: the index of the message the run answers (default: the first user
        message); it and the system messages before everything are never left out. Earlier
        turns (a conversation carried over) go first, a user turn with its replies at a time.

        Raises ``ContextLengthExceeded`` only when the system prompt and the first question
        cannot fit alone."""
        used = measure(messages)
        if used <= room:
            return Fitted(messages)
        msgs = [dict(m) for m in messages]
        cuts = _Cuts()
        chars_per_token = max(1.0, _chars(msgs) / max(used, 1))
        # 1. One huge result (a whole page, a table dump) is the usual cause: cut it first.
        half = max(self.min_result_chars, int(room * chars_per_token / 2))
        for m in msgs:
            if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) > half:
                cuts.cut(m, half)
        used = measure(msgs) if cuts.results else used
        # 2. The oldest steps, whole.
        first_user = next((i for i, m in enumerate(msgs) if m.get("role") == "user"), len(msgs) - 1)
        layout = _Layout.of(msgs, first_user if question is None else question)
        units = layout.units
        droppable = units[: max(0, len(units) - self.keep_recent)]
        dropped: list[list[dict[str, Any]]] = []
        kept = msgs
        while used > room and droppable:
            dropped.append(droppable.pop(0))
            kept = self._without(layout, dropped)
            used = measure(kept)
        # 3. What is left of the results, largest first: to min_result_chars, then, before a
        # whole step goes, to nothing but the note that says a result was there.
        for floor in (self.min_result_chars, 0):
            for _ in range(64):
                if used <= room:
                    break
                results = [m for m in kept if m.get("role") == "tool" and isinstance(m.get("content"), str)
                           and cuts.kept(m) > floor]
                if not results:
                    break
                biggest = max(results, key=cuts.kept)
                over = math.ceil((used - room) * chars_per_token * 1.1) + 16
                cuts.cut(biggest, max(floor, cuts.kept(biggest) - over))
                used = measure(kept)
        # 4. Last, the latest steps too: a prompt that says what it left out beats no prompt.
        recent = units[len(dropped):]
        while used > room and recent:
            dropped.append(recent.pop(0))
            kept = self._without(layout, dropped)
            used = measure(kept)
        if dropped:
            count = sum(len(u) for u in dropped)
            cuts.lines.append(f"left out the {len(dropped)} oldest step(s) ({count} messages){_calls_in(dropped)}")
            if self.summarize is not None:
                # Asked once, for what was left out in the end (it may be a model: slow).
                summary = self.summarize([m for u in dropped for m in u])
                with_summary = self._without(layout, dropped, summary)
                if measure(with_summary) <= room:
                    kept = with_summary
                else:
                    cuts.lines.append("the summary of what was left out did not fit; a note names the calls instead")
        if used > room:
            raise ContextLengthExceeded(used, room)
        return Fitted(kept, cuts.describe(kept))

    def _without(self, layout: _Layout, dropped: list[list[dict[str, Any]]], note: str | None = None) -> list[dict[str, Any]]:
        note = _default_note(dropped) if note is None else note
        before = [m for u in layout.units[len(dropped):layout.earlier] for m in u]
        after = [m for u in layout.units[max(len(dropped), layout.earlier):] for m in u]
        return [*_with_note(layout.system, note), *before, *layout.question, *after]


def _chars(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))


class _Cuts:
    """The results cut so far (each from its whole text, however often) and other cuts."""

    def __init__(self) -> None:
        self.results: dict[int, tuple[dict[str, Any], str, int]] = {}
        self.lines: list[str] = []

    def kept(self, message: dict[str, Any]) -> int:
        entry = self.results.get(id(message))
        return entry[2] if entry else len(message["content"])

    def cut(self, message: dict[str, Any], keep: int) -> None:
        whole = self.results[id(message)][1] if id(message) in self.results else message["content"]
        message["content"] = whole[:keep] + f"\n[... {len(whole) - keep} of {len(whole)} characters left out to fit the context]"
        self.results[id(message)] = (message, whole, keep)

    def describe(self, kept: list[dict[str, Any]]) -> list[str]:
        present = {id(m) for m in kept}
        return [f"cut the result of {m.get('name') or 'a tool'} ({m.get('tool_call_id', '?')}) from {len(whole)} to {keep} characters"
                for key, (m, whole, keep) in self.results.items() if key in present] + self.lines


@dataclass
class _Layout:
    """The messages as what is never left out (leading system messages, the question) and the
    units that may be, oldest first: earlier turns (a user message and what answered it), then
    this run's steps (an assistant message and what follows it: its calls' results, feedback)."""

    system: list[dict[str, Any]]
    question: list[dict[str, Any]]
    units: list[list[dict[str, Any]]]
    #: How many of ``units`` come before the question.
    earlier: int

    @classmethod
    def of(cls, msgs: list[dict[str, Any]], question: int) -> _Layout:
        lead = 0
        while lead < question and msgs[lead].get("role") == "system":
            lead += 1
        earlier = _split(msgs[lead:question], "user")
        later = _split(msgs[question + 1:], "assistant")
        return cls(msgs[:lead], msgs[question:question + 1], earlier + later, len(earlier))


def _split(msgs: list[dict[str, Any]], role: str) -> list[list[dict[str, Any]]]:
    units: list[list[dict[str, Any]]] = []
    for m in msgs:
        if m.get("role") == role or not units:
            units.append([m])
        else:
            units[-1].append(m)
    return units


def _calls_in(dropped: list[list[dict[str, Any]]]) -> str:
    names = [c.get("function", {}).get("name", "?") for u in dropped for m in u for c in m.get("tool_calls") or []]
    return f": calls to {', '.join(dict.fromkeys(names))}" if names else ""


def _default_note(dropped: list[list[dict[str, Any]]]) -> str:
    return f"({sum(len(u) for u in dropped)} earlier messages were left out to fit the context{_calls_in(dropped)}.)"


def _with_note(head: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    if head and head[0].get("role") == "system" and isinstance(head[0].get("content"), str):
        return [{**head[0], "content": f"{head[0]['content']}\n\n{note}"}, *head[1:]]
    return [{"role": "system", "content": note}, *head]
