"""What every backend provides: a prompt and a constraint in, text and tokens out."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._types import Prompt
from ..grammar import Grammar, matches

__all__ = ["Backend", "Bias", "Capabilities", "Generation", "NextTokens", "Parting", "TextFeed", "TokenChoice", "cut_at_stop",
           "first_stop", "held_back", "next_token_source"]


@dataclass
class Generation:
    text: str
    tokens: list[int] = field(default_factory=list)
    #: "stop" (end of turn or a stop string) or "length" (max_tokens reached).
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    #: Time to the first generated token (prompt processing included).
    prompt_seconds: float = 0.0
    #: Time for the remaining tokens.
    decode_seconds: float = 0.0
    #: Prompt tokens an engine reused from its cache (0 where the backend does not say).
    cached_tokens: int = 0
    #: Tokens generated, where a backend knows the count but not the ids (``None``: ``len(tokens)``).
    completion_tokens: int | None = None
    #: Of ``tokens``, those the grammar forced and the decoder appended without sampling them.
    forced_tokens: int = 0
    #: The stop string that ended it (left out of ``text``); ``None`` when none did.
    stop: str | None = None
    #: It was stopped where it parted (``Parting``): a reply begun, not whole.
    parted: bool = False
    #: The reply's text at each pick a bias's bonus changed (``Bias``): where the greedy token
    #: without it was another; empty where none did, or where the backend cannot tell.
    biased: tuple[str, ...] = ()

    @property
    def generated(self) -> int:
        """How many tokens were generated."""
        return len(self.tokens) if self.completion_tokens is None else self.completion_tokens


def cut_at_stop(text: str, stop: Sequence[str]) -> str | None:
    """``text`` up to the earliest stop string, or ``None`` when no stop string occurs."""
    found = first_stop(text, stop)
    return text[:found[0]] if found is not None else None


def first_stop(text: str, stop: Sequence[str]) -> tuple[int, str] | None:
    """Where the earliest stop string in ``text`` begins, and which one (the longest of those
    beginning there), or ``None`` when no stop string occurs."""
    hits = [(text.find(s), -len(s), s) for s in stop if s and s in text]
    if not hits:
        return None
    at, _, which = min(hits)
    return at, which


def held_back(text: str, openings: Sequence[str]) -> int:
    """How many characters at the end of ``text`` could be the start of one of ``openings`` (a
    stop string, a tag) not yet whole; a whole one is the caller's to find."""
    return max((n for s in openings for n in range(min(len(s) - 1, len(text)), 0, -1) if text.endswith(s[:n])),
               default=0)


class TextFeed:
    """Hands a reply's text to ``on_text`` as it grows, in pieces that join to the final text.

    What may still change is held back: a tail that could be the start of a stop string (the
    stop string is never part of the text) and a character not yet whole (a decoder shows a
    partial UTF-8 sequence as U+FFFD until its last byte arrives).
    """

    def __init__(self, on_text: Callable[[str], None], stop: Sequence[str] = ()) -> None:
        self.on_text, self.stop, self.sent = on_text, tuple(s for s in stop if s), ""

    def grow(self, text: str) -> None:
        """The text so far, while generating."""
        self._send(self.certain(text))

    def certain(self, text: str) -> str:
        """What of the text so far cannot change any more."""
        cut = cut_at_stop(text, self.stop)
        text = cut if cut is not None else text[: len(text) - held_back(text, self.stop)]
        return text.rstrip("\ufffd")

    def end(self, text: str) -> None:
        """The final text: what was held back and is part of it is sent now."""
        self._send(text)

    def _send(self, text: str) -> None:
        # Text already sent cannot be taken back, so only text that extends it is sent.
        if len(text) > len(self.sent) and text.startswith(self.sent):
            piece, self.sent = text[len(self.sent):], text
            self.on_text(piece)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, as it declares it; the server, the loop and the bench read this,
    never the backend's attributes."""

    #: An engine elsewhere runs the tokens (llama-server, vLLM, SGLang): requests may run at once.
    remote: bool = False
    #: The context size in tokens, when known.
    n_ctx: int | None = None
    #: The context it grows to when a prompt needs more (the model's trained length), where it
    #: grows; ``None``: ``n_ctx`` is all there is.
    max_ctx: int | None = None
    #: Requests it serves at once.
    concurrency: int = 1
    #: It answers ``NextTokens.next_tokens``: the model's own distribution of the next token, which
    #: the decisions (``localtools.Decisions``) read. Without it every decision is greedy.
    next_tokens: bool = False
    #: Its ``generate`` takes ``reply=``: token ids of a reply it returned, to go on from under the
    #: grammar (a decision taken part way through a reply decodes only what follows). Without it
    #: the reply is decoded again from its start.
    continues: bool = False
    #: Its ``generate`` takes ``bias=`` (a ``Bias``): logit bonuses for the texts a reply may go on
    #: with, added before the grammar picks, greedy or drawn. Without it the copy decision is not made.
    biases: bool = False
    #: Its ``generate`` takes ``parting=`` (a ``Parting``) and stops a reply where it parts, so a
    #: decision there costs no tokens past it. Without it the reply is decoded whole first.
    parts: bool = False


@dataclass(frozen=True)
class Parting:
    """Where a reply leaves the others' languages for one grammar's: its text is still a prefix of
    ``into``'s language and no longer one of any of ``away``'s (a call begun in one form, not in
    another, nor text)."""

    into: Grammar
    away: tuple[Grammar, ...]

    def parted(self, text: str) -> bool | None:
        """Whether ``text`` has parted; ``None`` when no longer text can (it has left ``into``'s
        prefixes): there is nothing more to watch."""
        if not matches(self.into, text, prefix=True):
            return None
        return not any(matches(g, text, prefix=True) for g in self.away)


class Bias(Protocol):
    """Logit bonuses for a greedy reply's next token: given the reply's text so far, the texts it
    may go on with, each with the bonus the first token of that text gets (a negative one holds
    that token back)."""

    def __call__(self, text: str) -> Mapping[str, float]: ...


@dataclass(frozen=True)
class TokenChoice:
    """One candidate next token and the model's log-probability of it (over the whole vocabulary,
    no grammar, no penalty)."""

    token: int
    #: Its text as the reply's text would show it.
    text: str
    logprob: float
    #: It ends generation (an end-of-turn token): no text follows.
    end: bool = False


@runtime_checkable
class NextTokens(Protocol):
    """What a backend that declares ``Capabilities.next_tokens`` provides."""

    def next_tokens(self, prompt: Prompt, reply: Sequence[int] = (), *, k: int = 20) -> list[TokenChoice]:
        """The ``k`` most probable tokens after ``prompt`` and then ``reply`` (token ids this
        backend returned in a ``Generation``), most probable first."""
        ...

    def reply_text(self, reply: Sequence[int]) -> str:
        """The text of ``reply`` (token ids this backend returned), as a ``Generation``'s text reads."""
        ...


def next_token_source(backend: object) -> NextTokens | None:
    """``backend`` as a source of next-token distributions, or ``None`` where it does not give them.

    Both must hold: it declares ``Capabilities.next_tokens`` and it has the members
    (``NextTokens``); a declaration without the members, or the members without it, is not one.
    """
    capabilities = getattr(backend, "capabilities", None)
    if getattr(capabilities, "next_tokens", False) and isinstance(backend, NextTokens):
        return backend
    return None


@runtime_checkable
class Backend(Protocol):
    """A text generator. It never sees tools: only a rendered prompt and an optional grammar.

    A backend of your own implements these members; ``ScriptedBackend`` shows the least one needs.
    """

    name: str
    #: GGUF-style metadata used to pick a family ({} when unknown).
    metadata: dict[str, Any]
    bos_token: str
    eos_token: str

    @property
    def capabilities(self) -> Capabilities:
        """What it can do (``Capabilities``)."""
        ...

    def health(self) -> dict[str, Any] | None:
        """The state of the engine behind it (``{"ok": bool, ...}``); ``None`` in process."""
        ...

    def drop_prompt_cache(self) -> None:
        """Forget cached prompt state, so the next prompt is evaluated in full (a no-op without one)."""
        ...

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
    ) -> Generation:
        """``cancel``, when given, is asked between tokens; True stops with ``GenerationCancelled``.
        ``on_text``, when given, is called with each new piece of the reply's text as it is
        generated (a ``TextFeed``); the pieces join to ``Generation.text``."""
        ...

    def tokenize(self, prompt: Prompt) -> list[int]: ...
