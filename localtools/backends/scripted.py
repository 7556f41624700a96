"""A scripted backend for tests and examples: it replies with the texts it was given, in order."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._errors import ContextLengthExceeded, GenerationCancelled, UsageError
from .._types import Prompt
from ..grammar import Grammar, matches
from ._base import Capabilities, Generation, Parting, TokenChoice
from ._decode import FastForward, decode

__all__ = ["ScriptedBackend"]

#: Token ids from here up are ``next_tokens``' multi-character tokens.
_PIECES = 0x110000

Reply = str | Callable[[Prompt, Grammar | None], str]
#: Next-token probabilities after a reply's text so far: token text -> probability ("" is the end).
Choices = Mapping[str, Mapping[str, float]] | Callable[[Prompt, str], Mapping[str, float]]


class ScriptedBackend:
    """Replies from a script; one "token" per character, through the decode loop real backends use,
    so ``max_tokens``, stop strings and ``cancel`` end a reply as they would a real model's.

    With a grammar, a scripted reply the grammar rejects raises: a real constrained decoder could
    not have produced it, so the test script is wrong. ``prompts``, ``grammars`` and
    ``repeat_penalties`` record each call (``continued``: the tokens of a reply it went
    on from). ``seconds_per_token`` paces the reply like a slow
    model, asking ``cancel`` before each character; ``cancelled_at`` records, for each call
    that was cancelled, how many characters it had written. ``fast_forward``: characters the
    grammar forces join the one before them in one step, as on a real backend; ``batches``
    records each step's size. ``choices``: the model's next-token distribution after a reply's
    text so far (``NextTokens``), by that text or from a function of the prompt and the text; the
    backend declares ``next_tokens`` only when it is given.
    """

    name = "scripted"
    bos_token = ""
    eos_token = ""

    def __init__(self, replies: Iterable[Reply], *, metadata: dict[str, Any] | None = None,
                 seconds_per_token: float = 0.0, n_ctx: int | None = None, fast_forward: bool = False,
                 choices: Choices | None = None) -> None:
        self._replies = list(replies)
        self.choices = choices
        #: Texts of the multi-character tokens ``next_tokens`` handed out, by id (past the code points).
        self._pieces: list[str] = []
        #: Each ``next_tokens`` question: the reply's text it was asked after.
        self.asked: list[str] = []
        self.fast_forward = fast_forward
        self.batches: list[int] = []
        #: The context in tokens (one a character), when set: a longer prompt raises, as a real model's does.
        self.n_ctx = n_ctx
        self.seconds_per_token = seconds_per_token
        self.cancelled_at: list[int] = []
        self.metadata: dict[str, Any] = metadata or {}
        self.prompts: list[Prompt] = []
        self.grammars: list[Grammar | None] = []
        self.repeat_penalties: list[float] = []
        #: For each call, how many tokens of an earlier reply it went on from (``continues``).
        self.continued: list[int] = []
        #: Whether ``generate`` takes ``parting=`` (``Capabilities.parts``).
        self.parts = True
        # A reply stopped where it parted, and its script: going on from exactly there (whatever was
        # asked in between) goes on with it.
        self._parted: tuple[list[int], str] | None = None

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
        on_text: Callable[[str], None] | None = None,
        reply: Sequence[int] = (),
        parting: Parting | None = None,
    ) -> Generation:
        """The next scripted reply, checked against ``grammar`` (``Backend.generate``); going on from
        ``reply`` (``Capabilities.continues``), it must begin with that reply's text; stopped where
        it parts (``Capabilities.parts``)."""
        # Real tokenizers read the prompt as UTF-8; text that is not (a lone surrogate) fails here too.
        prompt.text.encode("utf-8")
        if self.n_ctx is not None and len(prompt.text) >= self.n_ctx:
            raise ContextLengthExceeded(len(prompt.text), self.n_ctx)
        self.prompts.append(prompt)
        self.grammars.append(grammar)
        self.repeat_penalties.append(repeat_penalty)
        held = self._parted
        if held is not None and list(reply) == held[0]:
            text, self._parted = held[1], None
        else:
            if not self._replies:
                raise UsageError("the scripted backend has no replies left")
            script = self._replies.pop(0)
            text = script(prompt, grammar) if callable(script) else script
        self.continued.append(len(reply))
        if grammar is not None and not matches(grammar, text):
            raise UsageError(f"scripted reply {text!r} violates the grammar it was given")
        ahead = FastForward(grammar, lambda t: [ord(c) for c in t], lambda _: False) \
            if grammar is not None and self.fast_forward else None
        steps = _Script(text, self.seconds_per_token, ahead, self.batches)
        try:
            gen = decode(steps, prompt_tokens=len(prompt.text), max_tokens=max_tokens, stop=stop, cancel=cancel,
                         on_text=on_text, reply=reply, parting=parting)
            if gen.parted:
                self._parted = (list(gen.tokens), text)
            return gen
        except GenerationCancelled:
            self.cancelled_at.append(steps.written)
            raise

    @property
    def capabilities(self) -> Capabilities:
        """In process, one request at a time; ``n_ctx`` as given."""
        return Capabilities(n_ctx=self.n_ctx, next_tokens=self.choices is not None, continues=True,
                            parts=self.parts)

    def reply_text(self, reply: Sequence[int]) -> str:
        """The text of ``reply``: one character a token, or a piece ``next_tokens`` handed out."""
        return "".join(chr(t) if t < _PIECES else self._pieces[t - _PIECES] for t in reply)

    def next_tokens(self, prompt: Prompt, reply: Sequence[int] = (), *, k: int = 20) -> list[TokenChoice]:
        """The scripted distribution after ``reply`` (``NextTokens``); a reply text it does not
        list has none (an empty list)."""
        if self.choices is None:
            raise UsageError("this scripted backend was given no choices (next_tokens)")
        text = self.reply_text(reply)
        self.asked.append(text)
        table = self.choices(prompt, text) if callable(self.choices) else self.choices.get(text, {})
        out = []
        for piece, p in sorted(table.items(), key=lambda item: -item[1])[:k]:
            if len(piece) == 1:
                token = ord(piece)
            else:
                if piece not in self._pieces:
                    self._pieces.append(piece)
                token = _PIECES + self._pieces.index(piece)
            out.append(TokenChoice(token, piece, math.log(p) if p > 0 else -math.inf, end=piece == ""))
        return out

    def health(self) -> None:
        """Nothing behind it to ask."""
        return None

    def drop_prompt_cache(self) -> None:
        """It keeps no prompt state."""

    def tokenize(self, prompt: Prompt) -> list[int]:
        """One id per character of the prompt."""
        return [ord(c) for c in prompt.text]


class _Script:
    """A scripted reply as decode steps: one token per character, then the end."""

    END = -1

    def __init__(self, text: str, seconds_per_token: float, ahead: FastForward | None, batches: list[int]) -> None:
        self.reply, self.seconds_per_token, self.written = text, seconds_per_token, 0
        self.ahead, self.batches = ahead, batches

    def start(self, reply: list[int]) -> None:
        if not self.reply.startswith(self.text(reply, final=True)):
            raise UsageError(f"scripted reply {self.reply!r} does not go on from {self.text(reply, final=True)!r}")

    def pick(self, reply: list[int]) -> int:
        self.written = len(reply)
        return ord(self.reply[len(reply)]) if len(reply) < len(self.reply) else self.END

    def forced(self, reply: list[int]) -> tuple[list[int], bool]:
        return self.ahead.after(lambda: self.text(reply, final=False)) if self.ahead is not None else ([], False)

    def advance(self, tokens: list[int]) -> None:
        self.batches.append(len(tokens))
        if self.seconds_per_token:
            time.sleep(self.seconds_per_token)

    def is_end(self, token: int) -> bool:
        return token == self.END

    def text(self, tokens: list[int], *, final: bool) -> str:
        return "".join(map(chr, tokens))
