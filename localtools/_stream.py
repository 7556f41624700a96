"""A reply read while it is generated: typed events whose pieces join to the turn ``Model.chat``
returns.

Reasoning and text are passed on as the model writes them, held back only while they may still
change: a tail that could begin the reasoning's end tag, a call's opening or a stop string, and
whitespace the finished turn strips. Whether the answer is text or calls is read from the
grammar: text is streamed once the reply can no longer be calls alone. Calls are passed on when
the reply is whole and parsed, so a call is never shown before it is complete and valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._parse import ToolCall
from ._reply import ReplyFormat
from .backends._base import cut_at_stop
from .grammar import Grammar, call_shape, matches

if TYPE_CHECKING:
    from ._model import ChatResult

__all__ = ["ReasoningDelta", "ReplyStream", "StreamEvent", "TextDelta", "ToolCallDelta", "ToolCallDone",
           "ToolCallStarted", "TurnDone"]


@dataclass(frozen=True)
class ReasoningDelta:
    """The next piece of the model's reasoning (the pieces join to ``ChatResult.reasoning``)."""

    text: str


@dataclass(frozen=True)
class TextDelta:
    """The next piece of the answer's text (the pieces join to ``ChatResult.content``)."""

    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """A call, by its position in the turn: its id and the tool's name."""

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a call's arguments as JSON text (the pieces join to the OpenAI ``arguments``)."""

    index: int
    arguments: str


@dataclass(frozen=True)
class ToolCallDone:
    """A call whose arguments are whole and parsed."""

    index: int
    call: ToolCall


@dataclass(frozen=True)
class TurnDone:
    """The whole turn, as ``Model.chat`` returns it; the last event of ``Model.stream``."""

    result: ChatResult


StreamEvent = ReasoningDelta | TextDelta | ToolCallStarted | ToolCallDelta | ToolCallDone | TurnDone

_WHITESPACE = " \t\r\n"
#: Characters that may open a call in free output (the tolerant parser reads JSON, tags and
#: fences anywhere): free text is streamed up to the first of them, the rest once the turn ends.
_FREE_RISKY = "{[<`"


def _held(text: str, openings: Sequence[str]) -> int:
    """How many characters at the end of ``text`` could be the start of one of ``openings``."""
    return max((n for s in openings for n in range(min(len(s), len(text)), 0, -1) if text.endswith(s[:n])), default=0)


class ReplyStream:
    """Reads one turn's raw text as it grows (``feed``) and emits events; ``finish`` with the
    parsed turn sends what was held back and the calls."""

    def __init__(self, fmt: ReplyFormat, emit: Callable[[StreamEvent], None], stop: Sequence[str] = ()) -> None:
        self.fmt, self.emit, self.stop = fmt, emit, tuple(s for s in stop if s)
        self.raw = ""
        self.reasoning_sent = ""
        self.text_sent = ""
        family = fmt.family
        self._text_open = call_shape(family).text_open if family.call_style == "pattern" else ""
        answer = fmt.answer_grammar
        rules = answer.rules if answer is not None else {}
        self._calls_alone = Grammar(rules, "calls") if "calls" in rules else None
        text = rules.get("text")
        self._markers: tuple[str, ...] = tuple(getattr(text, "markers", ()))
        if answer is None:
            # Free output goes through the tolerant parser, which reads calls in any family
            # form: only the family's plain shapes are streamed live.
            live = family.call_style in ("tagged", "marker", "bare") and not family.reply_opening
            risky = _FREE_RISKY + "".join(s[:1] for s in (family.call_start, *family.strip) if s)
            self._free_risky: str | None = risky if live else None
        self._free = answer is None
        # Constrained with no text branch: the answer is calls (tool_choice required or named).
        self._no_text = answer is not None and self._calls_alone is not None and "text" not in rules

    def restart(self, raw: str = "") -> None:
        """The turn is generated again from ``raw`` (a retry, or the answer after a reasoning
        budget): what was already sent stays sent."""
        self.raw = raw

    def feed(self, piece: str) -> None:
        self.raw += piece
        reasoning, answer, closed = self.fmt.split_reasoning(self.raw)
        start = self.fmt.family.reasoning_start
        if reasoning is None and self.fmt.reasoning in ("may", "must") and start.startswith(self.raw.lstrip()):
            return  # the reasoning's start tag may still be coming
        if reasoning is not None:
            if not closed:
                end = self.fmt.family.reasoning_end
                reasoning = reasoning[: len(reasoning) - _held(reasoning, [end])].rstrip()
            self._send_reasoning(reasoning)
            if not closed:
                return
        text = self._live_text(answer)
        if text is not None:
            self._send_text(text)

    def finish(self, result: ChatResult) -> None:
        self._send_reasoning(result.reasoning)
        self._send_text(result.content)
        for index, call in enumerate(result.tool_calls):
            self.emit(ToolCallStarted(index, call.id, call.name))
            self.emit(ToolCallDelta(index, json.dumps(call.arguments, ensure_ascii=False)))
            self.emit(ToolCallDone(index, call))

    def _live_text(self, answer: str) -> str | None:
        """The answer's text that is certain so far, or ``None`` while it may still be calls."""
        if self._no_text:
            return None
        if self._free:
            if self._free_risky is None:
                return None
            risky = next((i for i, c in enumerate(answer) if c in self._free_risky), len(answer))
            text = re.sub(r"\n{3,}", "\n\n", answer[:risky])
        else:
            if self._calls_alone is not None and matches(self._calls_alone, answer, prefix=True):
                return None
            found = [i for m in self._markers if (i := answer.find(m)) >= 0]
            text = answer[: min(found)] if found else answer[: len(answer) - _held(answer, self._markers)]
        text = text.lstrip(_WHITESPACE)
        if self._text_open:
            if self._text_open.startswith(text):
                return None
            text = text.removeprefix(self._text_open).lstrip(_WHITESPACE)
        cut = cut_at_stop(text, self.stop)
        text = cut if cut is not None else text[: len(text) - _held(text, self.stop)]
        return text.rstrip(_WHITESPACE)

    def _send_reasoning(self, reasoning: str) -> None:
        if len(reasoning) > len(self.reasoning_sent) and reasoning.startswith(self.reasoning_sent):
            self.emit(ReasoningDelta(reasoning[len(self.reasoning_sent):]))
            self.reasoning_sent = reasoning

    def _send_text(self, text: str) -> None:
        if len(text) > len(self.text_sent) and text.startswith(self.text_sent):
            self.emit(TextDelta(text[len(self.text_sent):]))
            self.text_sent = text
