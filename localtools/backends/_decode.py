"""The decode loop every backend shares; a backend supplies its ``Steps``.

The loop owns what must not differ between backends: when generation ends (an end-of-generation
token, a stop string, ``max_tokens``, the caller's cancel check), how time is split into prompt
and decode, and the window the repeat penalty looks at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

from .._errors import GenerationCancelled
from ._base import Generation, TextFeed, cut_at_stop

__all__ = ["PENALTY_WINDOW", "Steps", "decode", "penalised"]

#: The repeat penalty applies to the reply's last this-many tokens (llama.cpp's default window),
#: never to the prompt: copying values out of the question is not penalised.
PENALTY_WINDOW = 64


def penalised(reply: Sequence[int]) -> list[int]:
    """The distinct tokens the repeat penalty applies to, given the reply so far."""
    return sorted(set(reply[-PENALTY_WINDOW:]))


class Steps(Protocol):
    """One generation's model-specific steps."""

    def start(self) -> None:
        """Evaluate the prompt."""

    def pick(self, reply: list[int]) -> int:
        """The next token, under the grammar and the repeat penalty (on ``penalised(reply)``)."""

    def advance(self, token: int) -> None:
        """Evaluate ``token`` so the next pick sees it."""

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends generation (it is not part of the reply)."""

    def text(self, tokens: list[int], *, final: bool) -> str:
        """The reply's text; ``final=False`` while generating (a partial character may be dropped)."""


def decode(steps: Steps, *, prompt_tokens: int, max_tokens: int, stop: Sequence[str] = (),
           cancel: Callable[[], bool] | None = None, on_text: Callable[[str], None] | None = None) -> Generation:
    """Generate until an end token, a stop string (left out of the text) or ``max_tokens``.

    ``cancel`` is asked before each token; when it answers True, ``GenerationCancelled`` is raised.
    ``on_text`` is handed the text as it grows (see ``TextFeed``).
    """
    feed = TextFeed(on_text, stop) if on_text is not None else None
    out: list[int] = []
    finish, text = "length", ""
    start = time.perf_counter()
    first = start
    steps.start()
    while len(out) < max_tokens:
        if cancel is not None and cancel():
            raise GenerationCancelled("generation was cancelled")
        token = steps.pick(out)
        if not out:
            first = time.perf_counter()
        if steps.is_end(token):
            finish = "stop"
            break
        out.append(token)
        if stop or feed is not None:
            text = steps.text(out, final=False)
            cut = cut_at_stop(text, stop) if stop else None
            if cut is not None:
                text, finish = cut, "stop"
                break
            if feed is not None:
                feed.grow(text)
        if len(out) >= max_tokens:
            break  # the last token is never evaluated: nothing would read its logits
        steps.advance(token)
    end = time.perf_counter()
    if finish != "stop" or not stop:
        text = steps.text(out, final=True)
    if feed is not None:
        feed.end(text)
    return Generation(text=text, tokens=out, finish_reason=finish, prompt_tokens=prompt_tokens,
                      prompt_seconds=first - start, decode_seconds=end - first)
