"""The grammar mask engines, driven directly rather than through outlines' logits processors.

A processor masks every step and moves one token per call. The decode loop wants more: ask
about the one token it is about to take (and mask only when the grammar rejects it), and move
by several tokens at once. The outlines backend object is still what holds each engine's
per-model work, built once: xgrammar's ``grammar_compiler`` (its tokenizer info), llguidance's
tokenizer, outlines_core's vocabulary.

``compile_grammar`` turns a rendered grammar into something to cache; ``new_matcher`` makes a
``Matcher`` from it for one generation.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import BackendNotInstalled, GrammarError, UsageError

if TYPE_CHECKING:
    import torch

__all__ = ["ENGINES", "Matcher", "compile_grammar", "new_matcher"]

ENGINES = ("xgrammar", "llguidance", "outlines_core")


class Matcher(Protocol):
    """One generation's grammar state."""

    def allows(self, token: int) -> bool:
        """Whether the grammar takes ``token`` next; the state does not change."""
        ...

    def consume(self, tokens: Sequence[int]) -> None:
        """Advance by ``tokens``; raise ``GrammarError`` naming the first one the grammar rejects
        (nothing is consumed then)."""
        ...

    def mask(self, logits: torch.Tensor) -> None:
        """Set every token the grammar rejects next to -inf, in place (``logits``: ``(vocab,)``
        or ``(1, vocab)``, any device; rows past the tokenizer's vocabulary are rejected too)."""
        ...

    def check(self) -> None:
        """Raise ``GrammarError`` when the engine gave up on the grammar."""
        ...


def compile_grammar(outlines_backend: Any, engine: str, source: str) -> Any:
    """``source`` (GBNF for xgrammar, Lark for llguidance, a regex for outlines_core) compiled
    against the backend's tokenizer: an object to cache and hand to ``new_matcher``."""
    if engine == "xgrammar":
        _module(engine)
        try:
            return outlines_backend.grammar_compiler.compile_grammar(source)
        except (RuntimeError, ValueError) as exc:
            raise _refused(engine, str(exc)) from exc
    if engine == "llguidance":
        llg = _module(engine)
        try:
            template = llg.LLMatcher(outlines_backend.llg_tokenizer, llg.grammar_from("lark", source))
        except ValueError as exc:
            raise _refused(engine, str(exc)) from exc
        # llguidance has no compiled-grammar object; a matcher that never consumes is one, and
        # each generation takes a deep copy of it (cheap, and the grammar is not parsed again).
        if template.is_error():
            raise _refused(engine, template.get_error())
        return template
    if engine == "outlines_core":
        oc = _module(engine)
        try:
            return oc.Index(source, outlines_backend.vocabulary)
        except ValueError as exc:
            raise _refused(engine, str(exc)) from exc
    raise UsageError(f"unknown mask engine {engine!r}; expected one of {', '.join(ENGINES)}")


def new_matcher(engine: str, compiled: Any, outlines_backend: Any, vocab_size: int) -> Matcher:
    """A fresh matcher for one generation. ``vocab_size``: the width of the model's logits
    (padded embedding rows included)."""
    if engine == "xgrammar":
        return _XGrammar(compiled)
    if engine == "llguidance":
        tokenizer = outlines_backend.llg_tokenizer
        return _LLGuidance(compiled, tokenizer.vocab_size, int(tokenizer.eos_token))
    if engine == "outlines_core":
        return _OutlinesCore(compiled, outlines_backend.vocabulary, vocab_size)
    raise UsageError(f"unknown mask engine {engine!r}; expected one of {', '.join(ENGINES)}")


def _module(engine: str) -> Any:
    try:
        return importlib.import_module(engine)
    except ImportError as exc:
        raise BackendNotInstalled(f"the {engine} mask engine is not installed: pip install {engine.replace('_', '-')}") from exc


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendNotInstalled("grammar masks need torch: pip install torch 'localtools[transformers]'") from exc
    return torch


def _refused(engine: str, message: str) -> GrammarError:
    return GrammarError(f"the {engine} engine refused this grammar: {_first_line(message)}")


def _rejected(engine: str, token: int, position: int, count: int) -> GrammarError:
    where = f" (token {position + 1} of {count})" if count > 1 else ""
    return GrammarError(f"the {engine} grammar does not allow token {token} here{where}")


class _Bitmask:
    """A packed row of allowed-token bits: written on the CPU by an engine, applied on the logits'
    device. ``known``: ids from here up are outside the engine's vocabulary, never allowed."""

    def __init__(self, words: int, known: int) -> None:
        torch = _torch()
        self._torch = torch
        self.known = known
        self.words = words
        try:
            # Pinned, as the engines' own allocators do, for a quicker copy to a GPU.
            self.cpu = torch.zeros((1, words), dtype=torch.int32, pin_memory=torch.cuda.is_available())
        except RuntimeError:
            self.cpu = torch.zeros((1, words), dtype=torch.int32)
        self.nbytes = words * 4
        self._on_device: Any = None
        self._shifts: Any = None

    @property
    def ptr(self) -> int:
        return int(self.cpu.data_ptr())

    def apply(self, logits: torch.Tensor) -> None:
        torch = self._torch
        row = logits[0] if logits.dim() == 2 else logits  # a view: the fills land in logits
        width = row.shape[0]
        bits = self.cpu
        if row.device != bits.device:
            if self._on_device is None or self._on_device.device != row.device:
                self._on_device = torch.empty_like(bits, device=row.device)
                self._shifts = None
            # A blocking copy: the engine overwrites the CPU row at the next step.
            self._on_device.copy_(bits)
            bits = self._on_device
        if self._shifts is None:
            self._shifts = torch.arange(32, dtype=torch.int32, device=row.device)
        covered = min(width, self.words * 32)
        allowed = ((bits.view(-1, 1) >> self._shifts) & 1).view(-1)[:covered].bool()
        row[:covered].masked_fill_(~allowed, float("-inf"))
        self.pad(logits)

    def pad(self, logits: torch.Tensor) -> None:
        """Reject the rows past the engine's vocabulary (padded embeddings)."""
        row = logits[0] if logits.dim() == 2 else logits
        if row.shape[0] > self.known:
            row[self.known:] = float("-inf")


class _XGrammar:
    def __init__(self, compiled: Any) -> None:
        xgr = _module("xgrammar")
        self._m = xgr.GrammarMatcher(compiled)
        known = int(compiled.tokenizer_info.vocab_size)
        # fill_next_token_bitmask takes exactly ceil(vocab / 32) words.
        self._bits = _Bitmask((known + 31) // 32, known)

    def allows(self, token: int) -> bool:
        # xgrammar has no read-only test for one token; rollback is unbounded since 0.2 (the
        # max_rollback_tokens argument is deprecated), so accept and undo.
        if not 0 <= token < self._bits.known or not self._m.accept_token(token):
            return False
        self._m.rollback(1)
        return True

    def consume(self, tokens: Sequence[int]) -> None:
        for done, token in enumerate(tokens):
            if not 0 <= token < self._bits.known or not self._m.accept_token(token):
                if done:
                    self._m.rollback(done)
                raise _rejected("xgrammar", token, done, len(tokens))

    def mask(self, logits: torch.Tensor) -> None:
        # False means every token is allowed: only the padding is left to mask.
        if self._m.fill_next_token_bitmask(self._bits.cpu):
            self._bits.apply(logits)
        else:
            self._bits.pad(logits)

    def check(self) -> None:
        pass


class _LLGuidance:
    def __init__(self, template: Any, known: int, eos: int) -> None:
        self._m = template.deep_copy()
        # unsafe_compute_mask_ptr takes exactly ceil(vocab / 32) words.
        self._bits = _Bitmask((known + 31) // 32, known)
        self._eos = eos

    def _ends(self, token: int) -> bool:
        # Once the grammar can take nothing more, llguidance stops the matcher: its mask then
        # allows only the end token, which the stopped matcher refuses to consume. That token
        # ends the reply, as it would have before the stop.
        return token == self._eos and self._m.is_stopped()

    def allows(self, token: int) -> bool:
        # The range test first: llguidance prints a warning for an id past its vocabulary.
        return 0 <= token < self._bits.known and (self._m.validate_tokens([token]) == 1 or self._ends(token))

    def consume(self, tokens: Sequence[int]) -> None:
        tokens = list(tokens)
        if tokens and self._ends(tokens[-1]) and all(t == self._eos for t in tokens):
            return
        inside = next((i for i, t in enumerate(tokens) if not 0 <= t < self._bits.known), len(tokens))
        # try_consume_tokens stops at a rejected token without entering the error state, so the
        # prefix it took can be rolled back.
        done = self._m.try_consume_tokens(tokens[:inside]) if inside else 0
        if done < len(tokens):
            if done:
                self._m.rollback(done)
            self.check()
            raise _rejected("llguidance", tokens[done], done, len(tokens))

    def mask(self, logits: torch.Tensor) -> None:
        self._m.unsafe_compute_mask_ptr(self._bits.ptr, self._bits.nbytes)
        self._bits.apply(logits)

    def check(self) -> None:
        # A failed matcher masks everything but end-of-sequence, which would read as an empty
        # answer; say what happened instead.
        if self._m.is_error():
            raise GrammarError(f"the llguidance engine failed on this grammar: {_first_line(self._m.get_error())}")


class _OutlinesCore:
    def __init__(self, index: Any, vocabulary: Any, vocab_size: int) -> None:
        oc = _module("outlines_core")
        self._index = index
        self._guide = oc.Guide(index)
        self._eos = int(vocabulary.get_eos_token_id())
        # write_mask_into takes any buffer at least as large as its vocabulary and zeroes what
        # it does not allow, so every bit is the engine's word.
        words = (max(vocab_size, len(vocabulary)) + 31) // 32
        self._bits = _Bitmask(words, words * 32)

    def _final_eos(self, token: int, state: Any) -> bool:
        # A final state's mask allows EOS, but the index has no edge for it (outlines-core
        # #227): outlines' own processor skips the advance there, and so do we.
        return token == self._eos and self._index.is_final_state(state)

    def allows(self, token: int) -> bool:
        if token < 0:
            return False
        return bool(self._guide.accepts_tokens([token])) or self._final_eos(token, self._guide.get_state())

    def consume(self, tokens: Sequence[int]) -> None:
        # Walk the index first, so a rejection leaves the guide where it was (its rollback is
        # bounded).
        state = self._guide.get_state()
        steps: list[bool] = []
        for position, token in enumerate(tokens):
            if self._final_eos(token, state):
                steps.append(False)
                continue
            following = self._index.get_next_state(state, token) if token >= 0 else None
            if following is None:
                raise _rejected("outlines_core", token, position, len(tokens))
            steps.append(True)
            state = following
        for token, step in zip(tokens, steps, strict=True):
            if step:
                self._guide.advance(token, return_tokens=False)

    def mask(self, logits: torch.Tensor) -> None:
        self._guide.write_mask_into(self._bits.ptr, self._bits.words, 4)
        self._bits.apply(logits)

    def check(self) -> None:
        pass


def _first_line(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else "no reason given"
