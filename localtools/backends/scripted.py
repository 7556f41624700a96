"""A scripted backend for tests and examples: it replies with the texts it was given, in order."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._errors import GenerationCancelled, UsageError
from .._grammar import Grammar, matches
from .._prompt import Prompt
from ._base import Generation

__all__ = ["ScriptedBackend"]

Reply = str | Callable[[Prompt, Grammar | None], str]


class ScriptedBackend:
    """Replies from a script; one "token" per character, so ``max_tokens`` truncates like a real model.

    With a grammar, a scripted reply the grammar rejects raises: a real constrained decoder could
    not have produced it, so the test script is wrong. ``prompts``, ``grammars`` and
    ``repeat_penalties`` record each call. ``seconds_per_token`` paces the reply like a slow
    model, asking ``cancel`` before each character; ``cancelled_at`` records, for each call
    that was cancelled, how many characters it had written.
    """

    name = "scripted"
    bos_token = ""
    eos_token = ""

    def __init__(self, replies: Iterable[Reply], *, metadata: dict[str, Any] | None = None,
                 seconds_per_token: float = 0.0) -> None:
        self._replies = list(replies)
        self.seconds_per_token = seconds_per_token
        self.cancelled_at: list[int] = []
        self.metadata: dict[str, Any] = metadata or {}
        self.prompts: list[Prompt] = []
        self.grammars: list[Grammar | None] = []
        self.repeat_penalties: list[float] = []

    def generate(
        self,
        prompt: Prompt,
        *,
        grammar: Grammar | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        repeat_penalty: float = 1.0,
        cancel: Callable[[], bool] | None = None,
    ) -> Generation:
        # Real tokenizers read the prompt as UTF-8; text that is not (a lone surrogate) fails here too.
        prompt.text.encode("utf-8")
        self.prompts.append(prompt)
        self.grammars.append(grammar)
        self.repeat_penalties.append(repeat_penalty)
        if not self._replies:
            raise UsageError("the scripted backend has no replies left")
        reply = self._replies.pop(0)
        text = reply(prompt, grammar) if callable(reply) else reply
        if grammar is not None and not matches(grammar, text):
            raise UsageError(f"scripted reply {text!r} violates the grammar it was given")
        finish = "stop"
        if len(text) > max_tokens:
            text, finish = text[:max_tokens], "length"
        if cancel is not None or self.seconds_per_token:
            for written in range(len(text)):
                if cancel is not None and cancel():
                    self.cancelled_at.append(written)
                    raise GenerationCancelled("generation was cancelled")
                time.sleep(self.seconds_per_token)
        return Generation(
            text=text, tokens=[ord(c) for c in text], finish_reason=finish, prompt_tokens=len(prompt.text)
        )

    def tokenize(self, prompt: Prompt) -> list[int]:
        return [ord(c) for c in prompt.text]
