"""The decode loop every backend shares; a backend supplies its ``Steps``.

The loop owns what must not differ between backends: when generation ends (an end-of-generation
token, a stop string, ``max_tokens``, the caller's cancel check), how time is split into prompt
and decode, and the window the repeat penalty looks at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from .._errors import GenerationCancelled
from ..grammar import Grammar, Resume, continuation
from ._base import Bias, Generation, Parting, TextFeed, TokenChoice, first_stop
from ._draw import best_ids

__all__ = ["PENALTY_WINDOW", "Bonuses", "FastForward", "Heard", "Steps", "decode", "penalised", "top_choices",
           "unwritten"]

#: The repeat penalty applies to the reply's last this-many tokens (llama.cpp's default window),
#: never to the prompt: copying values out of the question is not penalised.
PENALTY_WINDOW = 64


def penalised(reply: Sequence[int]) -> list[int]:
    """The distinct tokens the repeat penalty applies to, given the reply so far."""
    return sorted(set(reply[-PENALTY_WINDOW:]))


def _top(logits: Any, k: int) -> tuple[list[int], list[float]]:
    """The ``k`` best tokens of a row of logits (a 1-d numpy array) and their log-probabilities
    over all of it, best first."""
    import numpy as np

    # Read at every greedy pick under a grammar: in the row's own float32, the best found by
    # blocks (``best_ids``; a Qwen row is 151k logits, and partitioning it whole was most of this).
    logits = np.asarray(logits, dtype=np.float32)
    top = best_ids(logits, k)
    peak = float(logits[top[0]])
    norm = peak + float(np.log(np.sum(np.exp(logits - peak), dtype=np.float64)))
    return [int(t) for t in top], [float(logits[t]) - norm for t in top]


def top_choices(logits: Any, k: int, text: Callable[[int], str], end: Callable[[int], bool]) -> list[TokenChoice]:
    """The ``k`` best tokens of a row of logits (a 1-d numpy array), log-softmaxed over all of it."""
    ids, logprobs = _top(logits, k)
    return [TokenChoice(t, text(t), lp, end(t)) for t, lp in zip(ids, logprobs, strict=True)]


class Bonuses:
    """A ``Bias`` read for one backend: the bonus of each token id, from the reply's text; the
    first token of each text is the backend's own encoding of it, remembered."""

    def __init__(self, bias: Bias, text: Callable[[list[int]], str], encode: Callable[[str], list[int]]) -> None:
        self.bias, self.text, self.encode = bias, text, encode
        self._first: dict[str, int | None] = {}
        #: The reply's text at each greedy pick the bonuses changed (``Generation.biased``).
        self.flips: list[str] = []

    def flipped(self, reply: list[int]) -> None:
        """The pick after ``reply`` is not the one the model would have made without the bonuses."""
        self.flips.append(self.text(reply))

    def __call__(self, reply: list[int]) -> dict[int, float]:
        out: dict[int, float] = {}
        for text, bonus in self.bias(self.text(reply)).items():
            if text not in self._first:
                ids = self.encode(text)
                self._first[text] = ids[0] if ids else None
            token = self._first[text]
            if token is not None:
                out[token] = max(out.get(token, bonus), bonus)
        return out


class Heard:
    """The model's best tokens at each position a generation picked a token at, kept so that a
    decision read after it (``NextTokens.next_tokens`` on a prefix of that reply) costs no second
    evaluation of the reply. Positions inside a batch of forced tokens were never read alone and
    are not here. Logits are a function of the token ids alone, so a match on the ids is exact."""

    #: Tokens kept per position: ``Decisions.k`` (20) with room to spare; a larger ``k`` misses.
    K = 32

    def __init__(self, prompt_ids: Sequence[int], reply: Sequence[int] = (), before: Heard | None = None) -> None:
        self.ids: list[int] = list(prompt_ids)
        self.prompt = len(self.ids)
        self.at: dict[int, tuple[list[int], list[float]]] = {}
        # A generation that goes on from ``reply`` read none of it; the one it came from may have.
        known = self.ids + list(reply)
        if before is not None and before.ids[: len(known)] == known:
            self.at = {at: row for at, row in before.at.items() if at <= len(known)}

    def hear(self, reply: Sequence[int], logits: Any) -> None:
        """The logits read after the prompt and ``reply``, before the next token is picked."""
        self.at[self.prompt + len(reply)] = _top(logits, self.K)

    def end(self, reply: Sequence[int]) -> None:
        """The generation's reply, whole: positions are looked up against it."""
        self.ids = self.ids[: self.prompt] + list(reply)

    def choices(self, ids: Sequence[int], k: int, text: Callable[[int], str],
                end: Callable[[int], bool]) -> list[TokenChoice] | None:
        """``top_choices`` after ``ids`` when they were heard; ``None`` when not."""
        held = self.at.get(len(ids))
        if held is None or k > self.K or self.ids[: len(ids)] != list(ids):
            return None
        return [TokenChoice(t, text(t), lp, end(t)) for t, lp in zip(held[0][:k], held[1][:k], strict=True)]


class Steps(Protocol):
    """One generation's model-specific steps."""

    def start(self, reply: list[int]) -> None:
        """Evaluate the prompt, then ``reply``: tokens of a reply to go on from (the grammar takes
        them first; ``GrammarError`` when it refuses them)."""

    def pick(self, reply: list[int]) -> int:
        """The next token, under the grammar and the repeat penalty (on ``penalised(reply)``)."""

    def forced(self, reply: list[int]) -> tuple[list[int], bool]:
        """Tokens the grammar forces after ``reply`` (already accepted by the grammar), and whether
        the reply must end after them; ``([], False)`` when nothing is forced. See ``FastForward``."""

    def advance(self, tokens: list[int]) -> None:
        """Evaluate ``tokens`` (one batch) so the next pick sees them."""

    def is_end(self, token: int) -> bool:
        """Whether ``token`` ends generation (it is not part of the reply)."""

    def text(self, tokens: list[int], *, final: bool) -> str:
        """The reply's text; ``final=False`` while generating (a partial character may be dropped)."""


class FastForward:
    """The tokens a grammar forces after a reply's text, for a decoder to append without sampling
    them one by one: ``{"name": "``, the rest of a tool name once it is unique, required keys,
    closing brackets.

    The forced text is tokenized on its own, canonically (as the model's tokenizer would), so the
    model reads what it was trained on. Its last token is left to the model (it may merge with
    what follows: ``"`` then ``$`` is the one token ``"$`` to some tokenizers), and so is any
    special token (a chat-control token is never written for the model). ``encode``: text to
    token ids as the tokenizer reads it (special tokens parsed, so a call tag that is one token
    stays one); ``special``: whether an id is a special token, where the forced tokens stop.
    """

    #: After this many tokens in a row with nothing forced (prose, a long string value), the
    #: grammar is asked only every this-many tokens: asking walks the whole reply, so asking
    #: after every token of a long text would cost time quadratic in its length.
    PATIENCE = 32

    def __init__(self, grammar: Grammar, encode: Callable[[str], list[int]], special: Callable[[int], bool]) -> None:
        self.grammar, self.encode, self.special = grammar, encode, special
        self.misses = 0
        # The reply only grows: each ask walks only what the last one left open.
        self.resume = Resume()

    def after(self, text: Callable[[], str | None]) -> tuple[list[int], bool]:
        """The tokens forced after the reply so far and whether the reply must end after them.
        ``text`` gives the reply's text (``None`` while its last character is not whole); it is
        called only when the grammar is asked. One generation's replies, in order: the
        instance counts the misses."""
        if self.misses >= self.PATIENCE and self.misses % self.PATIENCE:
            self.misses += 1
            return [], False
        whole = text()
        if whole is None:
            return [], False  # a character not yet whole: what follows it is not known
        forced, ends = continuation(self.grammar, whole, self.resume)
        self.misses = 0 if forced or ends else self.misses + 1
        if not forced:
            return [], ends
        ids = self.encode(forced)
        kept = ids if ends else ids[:-1]
        for i, token in enumerate(kept):
            if self.special(token):
                kept = kept[:i]
                break
        return kept, ends and bool(kept) and len(kept) == len(ids)


def decode(steps: Steps, *, prompt_tokens: int, max_tokens: int, stop: Sequence[str] = (),
           cancel: Callable[[], bool] | None = None, on_text: Callable[[str], None] | None = None,
           reply: Sequence[int] = (), parting: Parting | None = None) -> Generation:
    """Generate until an end token, a stop string (left out of the text) or ``max_tokens``.
    ``reply``: tokens of a reply to go on from; the ``Generation`` holds them and what followed
    (``max_tokens`` counts both; ``completion_tokens`` only what followed).

    After each picked token, the tokens the grammar forces (``Steps.forced``) join it and the
    batch is evaluated in one pass. ``cancel`` is asked before each pick; when it answers True,
    ``GenerationCancelled`` is raised. ``on_text`` is handed the text as it grows (see ``TextFeed``).
    ``parting``: the reply stops where it parts (``Generation.parted``), its tokens and text kept.
    """
    feed = TextFeed(on_text, stop) if on_text is not None else None
    out: list[int] = list(reply)
    finish, text, forced_count, stopped_by, parted = "length", "", 0, None, False
    start = time.perf_counter()
    first = None
    steps.start(list(reply))
    while len(out) < max_tokens:
        if cancel is not None and cancel():
            raise GenerationCancelled("generation was cancelled")
        token = steps.pick(out)
        if first is None:
            first = time.perf_counter()
        if steps.is_end(token):
            finish = "stop"
            break
        batch, ends = [token], False
        if len(out) + 1 < max_tokens:
            forced, ends = steps.forced([*out, token])
            batch += forced
        done = False
        for i, tok in enumerate(batch):
            out.append(tok)
            forced_count += i > 0
            if stop or feed is not None:
                text = steps.text(out, final=False)
                found = first_stop(text, stop) if stop else None
                if found is not None:
                    text, finish, done, stopped_by = text[:found[0]], "stop", True, found[1]
                    break
                if feed is not None:
                    feed.grow(text)
            if parting is not None:
                # Watched only while the reply could still part: a few tokens at its start.
                now = parting.parted(steps.text(out, final=False))
                if now:
                    finish, done, parted = "stop", True, True
                    break
                if now is None:
                    parting = None
            if len(out) >= max_tokens:
                done = True  # the last token is never evaluated: nothing would read its logits
                break
        if done:
            break
        if ends:
            finish = "stop"  # the grammar allows nothing but the end here
            break
        steps.advance(batch)
    end = time.perf_counter()
    if finish != "stop" or not stop or parted:
        text = steps.text(out, final=True)
    if feed is not None:
        feed.end(text)
    first = end if first is None else first
    return Generation(text=text, tokens=out, finish_reason=finish, prompt_tokens=prompt_tokens,
                      prompt_seconds=first - start, decode_seconds=end - first,
                      completion_tokens=len(out) - len(reply) if reply else None,
                      forced_tokens=forced_count, stop=stopped_by, parted=parted)


def unwritten(controls: Sequence[tuple[int, str]], literals: Iterable[str]) -> list[int]:
    """Of ``controls`` (a vocabulary's control tokens but its ends, each with its text), those a
    reply under a grammar never holds: every one but those whose text the grammar writes whole
    (a call marker such as ``[TOOL_CALLS]``), ``literals`` being what it writes (``Grammar.literals``).

    An engine's grammar may read a control token as its text (``<|im_start|>`` is text to a text
    answer's rule, in llama.cpp's GBNF and xgrammar), while the reply's text is read without
    control tokens: a reply that opened with one was a call to the engine and a cut call to the
    parser, and a text answer could hold the opening of a turn the model made up."""
    written = "\x00".join(literals)  # no token's text holds a NUL: no match across two
    return [t for t, text in controls if not text or text not in written]
