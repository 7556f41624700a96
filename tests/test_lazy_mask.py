"""The lazy check on the transformers backend: the token the model wants is asked about alone and
the vocabulary masked only on a rejection. Greedy, the reply is the one masking every step
writes; sampled, the tokens follow the masked distribution."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import load_once

from localtools.examples import ALL

QUESTIONS = ["Convert 12.5 km to miles.", "What is 17 * 23 + 4?", "Look up customer 4521."]


class _SetMatcher:
    """A grammar that allows a fixed set of tokens at every step."""

    def __init__(self, allowed: set[int]) -> None:
        self.allowed = allowed

    def allows(self, token: int) -> bool:
        return token in self.allowed

    def consume(self, tokens: Sequence[int]) -> None:
        assert all(t in self.allowed for t in tokens)

    def mask(self, logits: Any) -> None:
        for t in range(logits.shape[-1]):
            if t not in self.allowed:
                logits[t] = float("-inf")

    def check(self) -> None:
        pass


def _draws(mask: str, n: int, *, top_p: float = 1.0) -> Counter[int]:
    torch = pytest.importorskip("torch")
    from localtools.backends.transformers import TransformersBackend, _Steps

    backend: Any = SimpleNamespace(mask=mask, _pick=TransformersBackend._pick, device="cpu")
    logits = torch.tensor([[2.0, 1.5, 0.5, 0.0, -1.0, 1.0]])
    steps = _Steps(backend, torch, [0], _SetMatcher({1, 3, 4}), None, torch.Generator().manual_seed(7),
                   temperature=0.8, top_p=top_p, repeat_penalty=1.0)
    counts: Counter[int] = Counter()
    for _ in range(n):
        steps.logits = logits.clone()
        counts[steps.pick([])] += 1
    return counts


def test_sampling_lazily_draws_from_the_masked_distribution() -> None:
    torch = pytest.importorskip("torch")
    n = 20_000
    logits = torch.tensor([2.0, 1.5, 0.5, 0.0, -1.0, 1.0]) / 0.8
    allowed = [1, 3, 4]
    exact = torch.softmax(logits[allowed], dim=0).tolist()
    lazy = _draws("lazy", n)
    assert set(lazy) == set(allowed)
    for token, p in zip(allowed, exact, strict=True):
        # Four standard errors of a frequency from 20,000 draws: about 0.014 at p = 0.5.
        assert abs(lazy[token] / n - p) < 4 * (p * (1 - p) / n) ** 0.5 + 1e-3, (token, lazy[token] / n, p)


def test_top_p_sampling_masks_first() -> None:
    # Top-p of the masked distribution keeps tokens 1 and 3; a draw from the unmasked one could
    # keep token 4 too, so with top-p the vocabulary is masked before every draw.
    counts = _draws("lazy", 2000, top_p=0.9)
    assert set(counts) == {1, 3}


@pytest.mark.model
@pytest.mark.parametrize("engine", ["xgrammar", "llguidance", "outlines_core"])
def test_lazy_greedy_writes_what_masking_every_step_writes(engine: str) -> None:
    # Both ways read the same logits at every step, so the smallest model shows it as well as any.
    model = load_once("smollm2-135m", "transformers")
    real: Any = model.backend
    real.engine_name = engine
    masks = picks = calls = 0
    try:
        for question in QUESTIONS:
            prompt = model.render([{"role": "user", "content": question}], ALL)
            # One call: the grammar then ends the reply, where SmolLM2 would go on to more calls.
            fmt = model.reply_format(ALL, "required", parallel_tool_calls=False)
            texts = []
            for mask in ("full", "lazy"):
                real.mask = mask
                # Both from a cold prompt: a reused prefix splits the prompt's evaluation differently,
                # which moves float32 logits enough to change a greedy pick.
                real.drop_prompt_cache()
                texts.append(real.generate(prompt, grammar=fmt.grammar, max_tokens=96).text)
                if mask == "full":
                    assert real.mask_stats[0] == real.mask_stats[1]  # a mask per pick
            masks, picks = masks + real.mask_stats[0], picks + real.mask_stats[1]
            assert texts[1] == texts[0], (engine, question)
            calls += len(fmt.parse(texts[1]).tool_calls)
    finally:
        real.mask, real.engine_name = "lazy", "xgrammar"
    # SmolLM2 loops inside a string on some questions until max_tokens; the others end in a call.
    assert calls >= 1
    assert masks < picks / 2  # most of a call is a token the grammar allows
