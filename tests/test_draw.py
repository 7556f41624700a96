"""Top-p sampling under a grammar, asked token by token (``draw``): the same distribution as
masking the whole row first, on generated rows, allowed sets, top-p values and temperatures."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from localtools.backends._draw import draw, nucleus_draw


def _exact(row: np.ndarray, allowed: set[int], top_p: float, temperature: float) -> dict[int, float]:
    """Mask, renormalise, cut to the top-p nucleus, then apply the temperature."""
    order = sorted(allowed, key=lambda t: -row[t])
    probs = np.exp(row[order] - row[order].max())
    cumulative = np.cumsum(probs / probs.sum())
    end = next((i for i, c in enumerate(cumulative) if c >= top_p - 1e-12), len(order) - 1)
    kept = order[: end + 1]
    weights = np.exp((row[kept] - row[kept].max()) / temperature)
    return {t: float(w) for t, w in zip(kept, weights / weights.sum(), strict=True)}


def _sample(row: np.ndarray, allowed: set[int], top_p: float, temperature: float, n: int, scan: int,
            seed: int) -> tuple[Counter[int], int]:
    rng = np.random.default_rng(seed)
    masked = np.where([t in allowed for t in range(len(row))], row, -np.inf)
    counts: Counter[int] = Counter()
    fallbacks = 0
    for _ in range(n):
        token = draw(row, allowed.__contains__, top_p=top_p, temperature=temperature, rng=rng, scan=scan)
        if token is None:
            fallbacks += 1
            token = nucleus_draw(masked, top_p=top_p, temperature=temperature, rng=rng)
        assert token is not None
        counts[token] += 1
    return counts, fallbacks


@pytest.mark.parametrize(("seed", "top_p", "temperature", "scan"), [
    (0, 0.95, 0.7, 256), (1, 0.9, 1.0, 256), (2, 0.5, 0.7, 256), (3, 1.0, 0.8, 256), (4, 0.95, 0.7, 3),
])
def test_a_draw_asked_token_by_token_follows_the_masked_nucleus(seed: int, top_p: float, temperature: float,
                                                                scan: int) -> None:
    gen = np.random.default_rng(100 + seed)
    row = gen.normal(0, 2.5, size=40)
    allowed = {int(t) for t in gen.choice(40, size=12, replace=False)}
    exact = _exact(row, allowed, top_p, temperature)
    n = 6000
    counts, fallbacks = _sample(row, allowed, top_p, temperature, n, scan, seed)
    assert set(counts) <= set(exact)  # never a refused token, never one outside the nucleus
    for token, p in exact.items():
        # Four standard errors of a frequency from n draws.
        assert abs(counts[token] / n - p) < 4 * (p * (1 - p) / n) ** 0.5 + 2e-3, (token, counts[token] / n, p)
    if scan == 3:
        assert fallbacks > 0  # three tokens rarely settle a nucleus: the row is masked then


def test_the_nucleus_is_settled_without_asking_every_token() -> None:
    row = np.full(1000, -20.0)
    row[:5] = [5.0, 4.0, 3.0, 2.0, 1.0]
    asked: list[int] = []

    def allows(token: int) -> bool:
        asked.append(token)
        return token != 0

    token = draw(row, allows, top_p=0.9, temperature=0.7, rng=np.random.default_rng(0))
    assert token in {1, 2} and len(asked) <= 5  # the best four or five, not a thousand


def test_nothing_allowed_is_none() -> None:
    row = np.array([1.0, 2.0, 3.0])
    assert draw(row, lambda t: False, top_p=0.9, temperature=1.0, rng=np.random.default_rng(0)) is None
    assert nucleus_draw(np.full(3, -np.inf), top_p=0.9, temperature=1.0, rng=np.random.default_rng(0)) is None
