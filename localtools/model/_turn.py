"""One assistant turn as the model layer returns it, streamed or not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..families._parse import ToolCall
from ._decide import Decision

__all__ = ["ChatResult"]


@dataclass
class ChatResult:
    """One assistant turn."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    raw: str = ""
    #: "tool_calls", "stop" or "length" (text cut by max_tokens; a cut call raises instead).
    finish_reason: str = "stop"
    constrained: bool = True
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0
    latency: float = 0.0
    #: Generations this turn took: more than 1 when a call cut by ``max_tokens`` was retried with a
    #: repeat penalty, and when a reasoning budget applied (the thought and the answer are
    #: generated apart, whether or not the budget ran out).
    attempts: int = 1
    #: Times a call that broke its tool's schema was sent back to the model this turn (``chat``).
    schema_repairs: int = 0
    #: Times the turn was decoded again because its text answer read as a call (``chat``).
    disguise_retries: int = 0
    #: The model's reasoning before its answer, without its tags ("" when it gave none). Never
    #: read for calls.
    reasoning: str = ""
    #: Which of the request's stop strings ended the text answer (``None``: none did).
    stop_sequence: str | None = None
    #: The decisions made on the model's probabilities this turn (``Decisions``), in order.
    decisions: tuple[Decision, ...] = ()

    def message(self) -> dict[str, Any]:
        """The OpenAI-shaped assistant message for the history (``reasoning_content`` as llama.cpp
        and vLLM name it; each family's template keeps or drops it as its official one does)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return msg
