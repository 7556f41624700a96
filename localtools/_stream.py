"""A reply read while it is generated: typed events whose pieces join to the turn ``Model.chat``
returns.

Reasoning and text are passed on as the model writes them, held back only while they may still
change: a tail that could begin the reasoning's end tag, a call's opening or a stop string, and
whitespace the finished turn strips. Whether the answer is text or calls is read from the
grammar: text is streamed once the reply can no longer be calls alone.

Under the grammar every prefix of a call is a prefix of a valid one, so calls stream as they are
written: a call starts once its name (and id, where the model writes one) is read, its JSON
arguments follow in pieces (rewritten as ``json.dumps`` writes them, so the pieces join to the
finished call's ``arguments``), and it is done once the reply could end after it and it parses.
Calls in other argument syntaxes (XML, Python, Gemma 4), and calls whose id the model writes
after the arguments, come whole once done. Free output's calls come when the turn ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ._check import violations
from ._families import Family
from ._jsonstream import CanonicalJSON
from ._parse import ToolCall, new_call_id
from ._reply import ReplyFormat
from .backends._base import cut_at_stop, held_back
from .grammar import Grammar, call_shape, matches

if TYPE_CHECKING:
    from ._model import ChatResult

__all__ = ["ReasoningDelta", "ReplyStream", "StreamEvent", "TextDelta", "ToolCallDelta", "ToolCallDone",
           "ToolCallStarted", "TurnDone", "relay"]


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

log = logging.getLogger("localtools.stream")


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

#: Characters that may open a call in free output (the tolerant parser reads JSON, tags and
#: fences anywhere): free text is streamed up to the first of them, the rest once the turn ends.
_FREE_RISKY = "{[<`"


#: How a reply can end just after a call: constrained calls are checked for a finished parse
#: only there, not at every token of a long argument.
_CALL_ENDINGS = "}])>|`"


def _json_call_head(family: Family) -> re.Pattern[str] | None:
    """Where a call's JSON arguments begin, once its name is read: the grammar file's head for
    a pattern family, the JSON call object's ``"name"`` and arguments key otherwise. ``None``
    where the arguments are no JSON, or the id the call needs follows them (Mistral's)."""
    if family.args_syntax != "json":
        return None
    if family.call_style == "pattern":
        return call_shape(family).head
    if family.id != "call":
        return None
    keys = "|".join(re.escape(k) for k in dict.fromkeys((family.args_key, "arguments", "parameters")))
    return re.compile(r'\{\s*"name"\s*:\s*(?P<qname>"(?:[^"\\]|\\.)*")\s*,\s*"(?:' + keys + r')"\s*:\s*')


def _fixed_keys(schema: dict[str, object]) -> bool:
    """Whether the grammar writes these parameters with fixed keys, each at most once: a plain
    object with properties (``$ref``, ``anyOf``, ``oneOf``, ``allOf`` or a list of types may let
    it write a free-form object)."""
    combined = any(k in schema for k in ("$ref", "anyOf", "oneOf", "allOf")) or isinstance(schema.get("type"), list)
    return bool(schema.get("properties")) and not combined


@dataclass
class _LiveCall:
    """A call being streamed."""

    id: str
    name: str
    #: Where its arguments begin in the answer.
    start: int
    args: CanonicalJSON = field(default_factory=CanonicalJSON)
    #: The arguments text sent so far.
    sent: str = ""
    #: Its arguments are sent whole, once it is done.
    whole: bool = False


class ReplyStream:
    """Reads one turn's raw text as it grows (``feed``) and emits events; ``finish`` with the
    parsed turn sends what was held back and the calls."""

    def __init__(self, fmt: ReplyFormat, emit: Callable[[StreamEvent], None], stop: Sequence[str] = ()) -> None:
        self.fmt, self.emit, self.stop = fmt, emit, tuple(s for s in stop if s)
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
        #: The answer's length below which no call can have finished since the last look.
        self._next_check = 0
        if answer is None:
            # Free output goes through the tolerant parser, which reads calls in any family
            # form: only the family's plain shapes are streamed live.
            live = family.call_style in ("tagged", "marker", "bare") and not family.reply_opening
            risky = _FREE_RISKY + "".join(s[:1] for s in (family.call_start, *family.strip) if s)
            self._free_risky: str | None = risky if live else None
        self._free = answer is None
        # Constrained with no text branch: the answer is calls (tool_choice required or named).
        self._no_text = answer is not None and self._calls_alone is not None and "text" not in rules
        #: "" undecided, "text" (calls may follow after a marker) or "calls".
        self._mode = "calls" if self._no_text else ""
        self._head = _json_call_head(family) if answer is not None and fmt.can_call else None
        # What follows a call's JSON arguments, up to its end.
        self._tail = call_shape(family).tail if family.call_style == "pattern" else re.compile(r"\s*\}")
        self._tail_empty = self._tail.fullmatch("") is not None
        self._calls: list[_LiveCall] = []
        #: Calls whose ``ToolCallDone`` was sent.
        self._done = 0

    @property
    def sent(self) -> bool:
        """Whether anything was sent: from then on the turn is never generated again."""
        return bool(self._calls or self.text_sent or self.reasoning_sent)

    def restart(self, raw: str = "") -> None:
        """The answer is generated from ``raw`` on (after a reasoning budget, or again after a
        cut when nothing was sent): what was sent is a prefix of ``raw``'s turn."""
        assert not self._calls and not self.text_sent, "a turn whose answer started streaming is not generated again"
        self.raw, self._mode = raw, "calls" if self._no_text else ""
        self._risky_at, self._scanned, self._next_check = None, 0, 0

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
        if not self._free and self.fmt.can_call:
            # Undecided here means the answer so far can be calls alone (``_live_text`` asked).
            self._live_calls(answer)

    def finish(self, result: ChatResult) -> ChatResult:
        """Send what is left of the finished turn; returns it with the ids its calls streamed with."""
        self._send_reasoning(result.reasoning)
        self._send_text(result.content)
        calls = list(result.tool_calls)
        for index, call in enumerate(calls):
            calls[index] = self._call_done(index, call) if index >= self._done else replace(call, id=self._calls[index].id)
        return replace(result, tool_calls=calls) if calls != result.tool_calls else result

    def _live_calls(self, answer: str) -> None:
        """Start the calls whose heads are written, pass on their arguments, finish whole ones."""
        if self._mode == "text":
            found = [i for m in self._markers if (i := answer.find(m)) >= 0]
            if not found:
                return
            region = min(found)
        else:
            region = 0
        if self._head is not None:
            while not self._calls or self._calls[-1].args.end is not None:
                pos = self._calls[-1].start + self._calls[-1].args.end if self._calls else region  # type: ignore[operator]
                head = self._head.search(answer, pos)
                if head is None:
                    break
                groups = head.groupdict()
                name = groups.get("name") or json.loads(groups["qname"])
                # Arguments of a free-form object may repeat a key: they come whole, when done.
                whole = not _fixed_keys(self.fmt.schemas.get(name) or {})
                live = _LiveCall(groups.get("id") or new_call_id(self.fmt.family.id), name, head.end(), whole=whole)
                self._mode = "calls" if self._mode == "" else self._mode
                self._calls.append(live)
                self.emit(ToolCallStarted(len(self._calls) - 1, live.id, live.name))
            for index in range(self._done, len(self._calls)):
                live = self._calls[index]
                live.args.feed(answer[live.start:])
                if not (live.whole or live.args.broken) and len(live.args.text) > len(live.sent):
                    self.emit(ToolCallDelta(index, live.args.text[len(live.sent):]))
                    live.sent = live.args.text
                if live.args.end is not None and not live.args.broken and self._closed(answer, live):
                    # What the grammar let through is a valid call once closed: done, as parsed.
                    arguments = json.loads(answer[live.start:live.start + live.args.end])
                    self._call_done(index, ToolCall(live.id, live.name, arguments))
            return
        tail = answer.rstrip()
        ends = tail[-1:] in _CALL_ENDINGS or bool(self.fmt.family.call_end and tail.endswith(self.fmt.family.call_end))
        if not ends or len(answer) < self._next_check or self.fmt.answer_grammar is None:
            return
        # Without a head to follow, whether a call is whole is asked of the whole answer: at
        # lengths a quarter apart, so a long call costs O(n log n); finish() sends any call this
        # skips past.
        self._next_check = len(answer) + max(16, len(answer) // 4)
        if not matches(self.fmt.answer_grammar, answer):
            return
        try:
            parsed = self.fmt.parse(self.raw).tool_calls
        except Exception:  # a reply the grammar allows always parses; the turn's own parse says so
            return
        if parsed:
            self._mode = "calls" if self._mode == "" else self._mode
        for index in range(self._done, len(parsed)):
            self._call_done(index, parsed[index])

    def _closed(self, answer: str, live: _LiveCall) -> bool:
        """Whether what closes the call after its arguments is written (``}`` of a JSON call
        object, a pattern family's tail)."""
        end = live.start + (live.args.end or 0)
        return self._tail.match(answer, end) is not None and (answer[end:].strip() != "" or self._tail_empty)

    def _call_done(self, index: int, call: ToolCall) -> ToolCall:
        """Send a parsed call's end (and its start, if it was not streamed); returns it with the
        id it streamed with."""
        final = json.dumps(call.arguments, ensure_ascii=False)
        if index < len(self._calls):
            live = self._calls[index]
            if final.startswith(live.sent) and live.name == call.name:
                if len(final) > len(live.sent):
                    self.emit(ToolCallDelta(index, final[len(live.sent):]))
            else:  # only a free-form object written with a key twice parses to other text
                log.warning("call %d streamed arguments %r that its parse does not start with (%r)", index,
                            live.sent, final)
            live.sent = final
            call = replace(call, id=live.id)
        else:
            self._calls.append(_LiveCall(call.id, call.name, -1, sent=final))
            self.emit(ToolCallStarted(index, call.id, call.name))
            self.emit(ToolCallDelta(index, final))
        # A call that breaks its schema is never sent as done: the turn ends in SchemaViolation.
        if self._free or not violations(call.name, self.fmt.schemas.get(call.name) or {}, call.arguments):
            self.emit(ToolCallDone(index, call))
        self._done = index + 1
        return call

    def _live_text(self, answer: str) -> str | None:
        """The answer's text that is certain so far, or ``None`` while it may still be calls."""
        if self._no_text:
            return None
        if self._free:
            if self._free_risky is None:
                return None
            if self._risky_at is None:
                # Scanned once: only what came since the last piece.
                risky = next((i for i in range(self._scanned, len(answer)) if answer[i] in self._free_risky), None)
                self._risky_at, self._scanned = risky, len(answer)
            text = re.sub(r"\n{3,}", "\n\n", answer[: self._risky_at])
        else:
            if self._mode == "" and self._calls_alone is not None and matches(self._calls_alone, answer, prefix=True):
                if self._text_alone is not None and not matches(self._text_alone, answer, prefix=True):
                    self._mode = "calls"  # decided: no text can begin so; not asked again
                return None
            self._mode = "text"
            found = [i for m in self._markers if (i := answer.find(m)) >= 0]
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

    def _send_reasoning(self, reasoning: str) -> None:
        if len(reasoning) > len(self.reasoning_sent) and reasoning.startswith(self.reasoning_sent):
            self.emit(ReasoningDelta(reasoning[len(self.reasoning_sent):]))
            self.reasoning_sent = reasoning

    def _send_text(self, text: str) -> None:
        if len(text) > len(self.text_sent) and text.startswith(self.text_sent):
            self.emit(TextDelta(text[len(self.text_sent):]))
            self.text_sent = text
