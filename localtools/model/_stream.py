"""A reply read while it is generated: typed events whose pieces join to the turn ``Model.chat``
returns.

Reasoning and text are passed on as the model writes them, held back only while they may still
change: a tail that could begin the reasoning's end tag, a call's opening or a stop string, and
whitespace the finished turn strips. Whether the answer is text or calls is read from the
grammar: text is streamed once the reply can no longer be calls alone.

Calls are held until the turn is over and every call of it passes its check (the grammar, then
the tool's schema and a pydantic model's own validation), then sent whole: a client never sees
the id, name or any argument of a call that will not be run. A turn whose calls fail the check is
generated again, announced by ``SchemaRepair``. Free output's calls are not checked; they too come
when the turn ends.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..backends._base import cut_at_stop, held_back
from ..families._families import CallStyle
from ..families._parse import ToolCall, first_disguise, not_json
from ..families._reply import ReplyFormat
from ..grammar import Grammar, matches
from ..grammar._check import Violation, violations
from ._turn import ChatResult

__all__ = ["ANSWER", "DisguiseCaught", "ReasoningDelta", "ReplyStream", "SchemaRepair", "StreamEvent", "TextDelta", "ToolCallDelta",
           "ToolCallDone", "ToolCallStarted", "TurnCheck", "TurnDone", "answer_violations", "relay"]


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
class SchemaRepair:
    """The attempt so far broke its tools' schemas (``violations``; none of its calls was sent):
    the turn is generated again with the violations fed back, and that attempt's events follow.
    ``attempt`` counts from 1. Text and reasoning the failed attempt streamed stay sent; the
    events after the last repair join to the turn ``TurnDone`` carries."""

    attempt: int
    violations: tuple[Violation, ...]


@dataclass(frozen=True)
class DisguiseCaught:
    """The attempt's text answer read as a call (to ``name``, an offered tool, or "";
    ``disguised_calls``): that text was
    not sent (text before its first bracket may have been), and the turn is generated again.
    ``attempt`` counts from 1."""

    attempt: int
    name: str


@dataclass(frozen=True)
class TurnDone:
    """The whole turn, as ``Model.chat`` returns it; the last event of ``Model.stream``."""

    result: ChatResult


StreamEvent = (ReasoningDelta | TextDelta | ToolCallStarted | ToolCallDelta | ToolCallDone | SchemaRepair
               | DisguiseCaught | TurnDone)

async def relay(events: asyncio.Queue[StreamEvent], job: asyncio.Future[Any]) -> AsyncGenerator[StreamEvent, None]:
    """The events a turn generated on another thread puts on ``events`` (``call_soon_threadsafe``),
    as they come, until ``job`` (that turn) is done. Events sent before the turn ended are queued
    before its result, so none is missed; the job's own result or error is the caller's to read."""
    getter: asyncio.Future[StreamEvent] | None = None
    try:
        while not (job.done() and events.empty()):
            if not events.empty():
                yield events.get_nowait()
                continue
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, job}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
    finally:
        if getter is not None:
            getter.cancel()

#: How a structured answer is named in its violations (where a call's tool name stands).
ANSWER = "(answer)"


def answer_violations(result: ChatResult, schema: Any) -> list[Violation]:
    """Every way a turn's structured answer breaks ``schema`` (none for a turn of calls, or
    when no schema was asked for)."""
    if schema is None or result.tool_calls:
        return []
    try:
        value = json.loads(result.content)
    except ValueError as exc:  # the grammar admits only JSON; a cut answer is not
        return [Violation(ANSWER, "", "type", f"the answer is not one whole JSON value ({exc})")]
    return violations(ANSWER, schema, value)


class TurnCheck:
    """What a turn's calls and its structured answer break, each worked out once: a streamed
    turn is checked before anything of it is sent, and the repair loop reads the same verdicts."""

    def __init__(self, call: Callable[[ToolCall], Sequence[Violation]], answer_schema: Any) -> None:
        self._call, self._schema = call, answer_schema
        # By object identity (the object is kept, so its id is not reused while it is here).
        self._calls: dict[int, tuple[ToolCall, list[Violation]]] = {}
        self._answer: tuple[ChatResult, list[Violation]] | None = None

    def call(self, call: ToolCall) -> list[Violation]:
        seen = self._calls.get(id(call))
        if seen is None or seen[0] is not call:
            seen = self._calls[id(call)] = (call, list(self._call(call)))
        return seen[1]

    def answer(self, result: ChatResult) -> list[Violation]:
        if self._answer is None or self._answer[0] is not result:
            self._answer = (result, answer_violations(result, self._schema))
        return self._answer[1]


#: Characters that may open a call in free output (the tolerant parser reads JSON, tags and
#: fences anywhere): free text is streamed up to the first of them, the rest once the turn ends.
_FREE_RISKY = "{[<`"
#: Where a call in disguise may open in a constrained text answer (``disguised_calls`` reads
#: JSON and Python literals): text is streamed up to the first, the rest once the turn ends and
#: its text does not read as a call.
_DISGUISE_RISKY = "{["


class ReplyStream:
    """Reads one turn's raw text as it grows (``feed``) and emits events; ``finish`` with the
    parsed turn sends what was held back and the calls."""

    def __init__(self, fmt: ReplyFormat, emit: Callable[[StreamEvent], None], stop: Sequence[str] = (),
                 check: TurnCheck | None = None) -> None:
        self.fmt, self.emit, self.stop = fmt, emit, tuple(s for s in stop if s)
        #: What every call of the turn passes before any of them is sent (its schema; a pydantic
        #: model's own check), and what its structured answer passes.
        self._check = check or TurnCheck(
            lambda call: violations(call.name, fmt.schemas.get(call.name) or {}, call.arguments), fmt.answer_schema)
        self.raw = ""
        self.reasoning_sent = ""
        self.text_sent = ""
        family = fmt.family
        self._text_open = fmt.text_open
        answer = fmt.answer_grammar
        rules = answer.rules if answer is not None else {}
        self._calls_alone = Grammar(rules, "calls") if "calls" in rules else None
        text = rules.get("text")
        self._text_alone = Grammar(rules, "text") if text is not None else None
        self._markers: tuple[str, ...] = tuple(getattr(text, "markers", ()))
        self._risky_at: int | None = None
        self._scanned = 0
        if answer is None:
            # Free output goes through the tolerant parser, which reads calls in any family
            # form: only the family's plain shapes let text stream before the turn ends.
            live = family.call_style is not CallStyle.PATTERN and not family.reply_opening
            risky = _FREE_RISKY + "".join(s[:1] for s in (family.call_start, *family.strip) if s)
            self._free_risky: str | None = risky if live else None
        else:
            self._free_risky = _DISGUISE_RISKY if fmt.text_can_call else None
        self._free = answer is None
        #: A structured answer is held, as calls are, until the whole of it passes its check.
        self._held_answer = fmt.answer_schema is not None
        # Constrained with no text branch: the answer is calls (tool_choice required or named).
        self._no_text = answer is not None and self._calls_alone is not None and "text" not in rules
        #: "" undecided, "text" (calls may follow after a marker) or "calls".
        self._mode = "calls" if self._no_text else ""

    @property
    def sent(self) -> bool:
        """Whether a client was sent anything: from then on the turn is never generated again."""
        return bool(self.text_sent or self.reasoning_sent)

    def restart(self, raw: str = "") -> None:
        """The answer is generated from ``raw`` on (after a reasoning budget, or again after a
        cut when nothing was sent): what was sent is a prefix of ``raw``'s turn."""
        assert not self.text_sent, "a turn whose answer started streaming is not generated again"
        self.raw, self._mode = raw, "calls" if self._no_text else ""
        self._risky_at, self._scanned = None, 0

    def feed(self, piece: str) -> None:
        self.raw += piece
        reasoning, answer, closed = self.fmt.split_reasoning(self.raw)
        start = self.fmt.family.reasoning_start
        if reasoning is None and self.fmt.reasoning in ("may", "must") and start.startswith(self.raw.lstrip()):
            return  # the reasoning's start tag may still be coming
        if reasoning is not None:
            if not closed:
                end = self.fmt.family.reasoning_end
                reasoning = reasoning[: len(reasoning) - held_back(reasoning, [end])].rstrip()
            self._send_reasoning(reasoning)
            if not closed:
                return
        if self._mode != "calls":
            text = self._live_text(answer)
            if text is not None:
                self._send_text(text)

    def finish(self, result: ChatResult) -> ChatResult:
        """Send what is left of the finished turn: its text, then its calls, each whole, once
        every call of the turn passes its check (none of them otherwise: the turn is repaired or
        refused, and a client never sees a call that will not be run)."""
        self._send_reasoning(result.reasoning)
        calls = result.tool_calls
        disguised = self.fmt.text_can_call and first_disguise(result.content, self.fmt.tool_names) is not None
        if self._held_answer and self._check.answer(result):
            return result  # repaired, or refused: never sent
        if self._free or not disguised:
            self._send_text(result.content)
        if disguised:
            return result  # the turn is decoded again: neither its text nor its calls go out
        if any(not_json(call.arguments) is not None for call in calls) or \
                (not self._free and any(self._check.call(call) for call in calls)):
            return result  # repaired, or refused: never sent
        for index, call in enumerate(calls):
            self.emit(ToolCallStarted(index, call.id, call.name))
            self.emit(ToolCallDelta(index, json.dumps(call.arguments, ensure_ascii=False)))
            self.emit(ToolCallDone(index, call))
        return result

    def _live_text(self, answer: str) -> str | None:
        """The answer's text that is certain so far, or ``None`` while it may still be calls."""
        if self._no_text or self._held_answer:
            return None
        if self._free:
            if self._free_risky is None:
                return None
            text = re.sub(r"\n{3,}", "\n\n", answer[: self._risky(answer)])
        else:
            if self._mode == "" and self._calls_alone is not None and matches(self._calls_alone, answer, prefix=True):
                if self._text_alone is not None and not matches(self._text_alone, answer, prefix=True):
                    self._mode = "calls"  # decided: no text can begin so; not asked again
                return None
            self._mode = "text"
            found = [i for m in self._markers if (i := answer.find(m)) >= 0]
            if self._free_risky is not None:
                # Held from where a call in disguise could open, until the turn's text is read whole.
                found += [r] if (r := self._risky(answer)) is not None else []
            text = answer[: min(found)] if found else answer[: len(answer) - held_back(answer, self._markers)]
        # The finished turn strips its text as str.strip() does.
        text = text.lstrip()
        if self._text_open:
            if self._text_open.startswith(text):
                return None
            text = text.removeprefix(self._text_open).lstrip()
        cut = cut_at_stop(text, self.stop)
        text = cut if cut is not None else text[: len(text) - held_back(text, self.stop)]
        return text.rstrip()

    def _risky(self, answer: str) -> int | None:
        """Where the first character that may open a call stands in ``answer``."""
        if self._risky_at is None and self._free_risky:
            # Scanned once: only what came since the last piece.
            risky = next((i for i in range(self._scanned, len(answer)) if answer[i] in self._free_risky), None)
            self._risky_at, self._scanned = risky, len(answer)
        return self._risky_at

    def _send_reasoning(self, reasoning: str) -> None:
        if len(reasoning) > len(self.reasoning_sent) and reasoning.startswith(self.reasoning_sent):
            self.emit(ReasoningDelta(reasoning[len(self.reasoning_sent):]))
            self.reasoning_sent = reasoning

    def _send_text(self, text: str) -> None:
        if len(text) > len(self.text_sent) and text.startswith(self.text_sent):
            self.emit(TextDelta(text[len(self.text_sent):]))
            self.text_sent = text
