"""Top-p sampling under a grammar, asked token by token (``draw``): the same distribution as
masking the whole row first, on generated rows, allowed sets, top-p values and temperatures."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from localtools.backends._draw import best_allowed, best_ids, draw, nucleus_draw


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


@pytest.mark.parametrize("seed", range(6))
def test_the_best_allowed_token_is_the_masked_rows_argmax(seed: int) -> None:
    """``best_allowed`` picks what ``argmax`` of the masked row picks, on generated rows (with
    ties, rounded to a few values), allowed sets from a handful to most tokens, and scans; it
    gives up (``None``) rather than guess where the scan cannot settle it, and never asks more
    than it scans."""
    rng = np.random.default_rng(seed)
    settled = 0
    for _ in range(200):
        n = int(rng.integers(5, 400))
        row = rng.normal(0, 3, n).astype(np.float32)
        if rng.random() < 0.4:
            row = np.round(row)  # ties, at the scan's edge too
        allowed = set(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist())
        scan = int(rng.choice([1, 4, 16, 64]))
        asked: list[int] = []

        def allows(token: int, asked: list[int] = asked, allowed: set[int] = allowed) -> bool:
            asked.append(token)
            return token in allowed

        got = best_allowed(row, allows, scan=scan)
        masked = np.where([t in allowed for t in range(n)], row, -np.inf)
        assert len(asked) <= scan
        if got is not None:
            settled += 1
            assert got == int(np.argmax(masked))
    assert settled > 50


@pytest.mark.parametrize(("n", "m"), [(151936, 32), (151936, 256), (20000, 1), (20000, 32), (300, 32), (5, 8)])
def test_the_best_ids_found_by_blocks_are_the_best(n: int, m: int) -> None:
    """``best_ids`` finds the ``m`` best of a row through its blocks' maxima: the same values as
    sorting the whole row (ties included: rows rounded to a few values, a peak in the tail no
    block holds), best first, the lowest id first among equals."""
    rng = np.random.default_rng(n + m)
    for trial in range(4):
        row = rng.normal(0, 3, n).astype(np.float32)
        if trial % 2:
            row = np.round(row)
        if trial == 3:
            row[-1] = row.max() + 1  # the best in the tail after the last whole block
        got = best_ids(row, m)
        want = np.sort(row)[::-1][: min(m, n)]
        assert len(got) == len(want) and np.array_equal(row[got], want)
        for a, b in itertools.pairwise(got):
            assert row[a] > row[b] or (row[a] == row[b] and a < b)


def test_an_infinite_logit_is_picked_as_argmax_picks_it() -> None:
    """A bonus can push a logit to +inf: allowed, it is the pick; refused tokens at -inf never are."""
    row = np.array([0.0, np.inf, 3.0, -np.inf, 2.0], dtype=np.float32)
    assert best_allowed(row, lambda t: t != 2, scan=5) == 1
    assert best_allowed(row, lambda t: t in (3, 4), scan=5) == 4
    assert best_allowed(row, lambda t: t == 3, scan=5) is None
