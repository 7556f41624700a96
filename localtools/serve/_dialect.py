"""What a wire format ("dialect") of ``localtools serve`` provides: a request body read into the one
``ChatRequest``, the turn written back as its reply or its stream of events, and its error shape.
Dialects translate and nothing else; limits, the queue, cancellation and the grammar path are the
server's, the same for each."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import LocalToolsError

if TYPE_CHECKING:
    from ..model._decide import Decisions
    from ..model._stream import StreamEvent
    from ..model._turn import ChatResult

__all__ = ["BadRequest", "ChatRequest", "Dialect", "EventWriter", "sse"]


class BadRequest(LocalToolsError):
    """A request the server refuses with a 400; ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        self.param, self.code = param, code
        super().__init__(message)


@dataclass
class ChatRequest:
    """What a request asks for, whichever dialect it came in: the one object the server answers."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str = "auto"
    parallel_tool_calls: bool = True
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    stream: bool = False
    include_usage: bool = False
    model: str = ""
    #: Variables for the chat template (``chat_template_kwargs``, as vLLM and llama.cpp take them).
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    #: ``chat_template_kwargs.enable_thinking``; ``None``: the template's default.
    thinking: bool | None = None
    #: Most tokens of reasoning before the answer (``reasoning_budget``; ``None``: no limit).
    reasoning_budget: int | None = None
    #: Responses API: keep the turn for a later ``previous_response_id``; the request's
    #: ``instructions`` and ``previous_response_id``, echoed in the response.
    store: bool = False
    instructions: str | None = None
    previous_response_id: str | None = None
    #: Structured output: the JSON schema the answer follows (``response_format``, ``text.format``),
    #: and the format as the request wrote it (echoed in a response).
    answer_schema: Any = None
    answer_format: dict[str, Any] | None = None
    #: The levers the turn runs under (the request's ``decisions``, read by the server for every
    #: dialect); ``None``: the model's own.
    decisions: Decisions | None = None


class EventWriter(Protocol):
    """One streamed turn's server-sent events, each a whole ``event:``/``data:`` record."""

    def opening(self) -> list[str]:
        """What a stream starts with, before the first event of the turn."""
        ...

    def event(self, event: StreamEvent) -> list[str]:
        """The records for one event of the turn (none for events a client is not sent)."""
        ...

    def closing(self, result: ChatResult) -> list[str]:
        """What ends a stream whose turn finished."""
        ...

    def failure(self, body: dict[str, Any]) -> list[str]:
        """What ends a stream whose turn failed after it started; ``body`` is the error's."""
        ...


class Dialect(Protocol):
    """One API a client may speak (OpenAI chat completions, Anthropic Messages)."""

    #: How error messages name the API, e.g. "chat completions".
    name: str

    def parse(self, body: Any, *, default_max_tokens: int, default_temperature: float) -> ChatRequest:
        """The request a body asks for; raises ``BadRequest`` naming the first problem."""
        ...

    def error_body(self, status: int, message: str, *, kind: str, param: str | None, code: str | None) -> dict[str, Any]:
        """An error as this API writes it."""
        ...

    def reply(self, result: ChatResult, request: ChatRequest, *, model: str) -> dict[str, Any]:
        """The whole turn as one JSON reply."""
        ...

    def writer(self, request: ChatRequest, *, model: str) -> EventWriter:
        """A writer for the turn's stream."""
        ...


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event record: ``data`` as JSON (a string as it is), under ``event`` when named."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
