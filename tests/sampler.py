"""Random strings from a grammar, for property tests: every string it returns is in the language.

Recursive rules (free-form JSON values) end by taking the shortest way out once the walk is
``max_depth`` rules deep, so every walk terminates.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Sequence

from localtools.grammar import Alt, Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text
from localtools.grammar._chars import _class_items, _class_match

# Characters tried first for a class: plain text, JSON's specials, and a few beyond ASCII.
_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n\té中😀"


def _size(e: Expr, shortest: dict[str, float]) -> float:
    """The length of the shortest string ``e`` derives, given each rule's in ``shortest``."""
    if isinstance(e, Lit):
        return len(e.text)
    if isinstance(e, Chars | Any_):
        return 1
    if isinstance(e, Ref):
        return shortest[e.name]
    if isinstance(e, Seq):
        return sum(_size(i, shortest) for i in e.items)
    if isinstance(e, Alt):
        return min(_size(o, shortest) for o in e.options)
    if isinstance(e, Repeat):
        return 0 if e.min == 0 else e.min * _size(e.item, shortest)
    raise TypeError(f"lower the grammar first: {e!r}")


def _shortest(grammar: Grammar) -> dict[str, float]:
    """The length of the shortest string each rule derives (a fixpoint over the rules)."""
    best = {name: math.inf for name in grammar.rules}
    changed = True
    while changed:
        changed = False
        for name, e in grammar.rules.items():
            n = _size(e, best)
            if n < best[name]:
                best[name], changed = n, True
    return best


def _char(body: str, rng: random.Random) -> str:
    fits = [c for c in _ALPHABET if _class_match(body, c)]
    if fits and rng.random() < 0.9:
        return rng.choice(fits)
    negate, ranges = _class_items(body)
    if not negate and ranges:
        low, high = rng.choice(ranges)
        c = chr(rng.randint(ord(low), min(ord(high), 0xD7FF) if ord(low) <= 0xD7FF else ord(high)))
        if _class_match(body, c):
            return c
    if fits:
        return rng.choice(fits)
    raise ValueError(f"no character found for [{body}]")


def _all_in(item: Expr, piece: str, rules: dict[str, Expr]) -> bool:
    """Whether every character of ``piece`` is one ``item`` (a character class, or a choice of
    them and other things, perhaps through a rule) matches on its own."""
    while isinstance(item, Ref):
        item = rules[item.name]
    classes = [item] if isinstance(item, Chars) else [o for o in item.options if isinstance(o, Chars)] \
        if isinstance(item, Alt) else []
    return bool(classes) and all(any(_class_match(c.body, ch) for c in classes) for ch in piece)


def sample(grammar: Grammar, rng: random.Random, *, max_depth: int = 10, max_repeat: int = 3,
           pieces: Sequence[str] = (), spans: dict[str, list[tuple[int, int]]] | None = None) -> str:
    """One random string of ``grammar``'s language.

    ``pieces``: strings written whole, now and then, where a repeated character class admits each
    of their characters (a family's tags and stop strings inside a JSON string, say). ``spans``:
    for each rule named in it, where each of its matches begins and ends in the string.
    """
    g = grammar.lowered()
    shortest = _shortest(g)
    out: list[str] = []
    length = [0]

    def emit(text: str) -> None:
        out.append(text)
        length[0] += len(text)

    def size(e: Expr) -> float:
        return _size(e, shortest)

    def walk(e: Expr, depth: int) -> None:
        if isinstance(e, Lit):
            emit(e.text)
        elif isinstance(e, Chars):
            emit(_char(e.body, rng))
        elif isinstance(e, Any_):
            emit(rng.choice(_ALPHABET))
        elif isinstance(e, Ref):
            began = length[0]
            walk(g.rules[e.name], depth + 1)
            if spans is not None and e.name in spans:
                spans[e.name].append((began, length[0]))
        elif isinstance(e, Seq):
            for item in e.items:
                walk(item, depth)
        elif isinstance(e, Alt):
            options = [o for o in e.options if size(o) < math.inf]
            if depth >= max_depth:
                least = min(size(o) for o in options)
                options = [o for o in options if size(o) == least]
            walk(rng.choice(options), depth)
        elif isinstance(e, Repeat):
            high = e.min if depth >= max_depth else min(e.max if e.max is not None else e.min + max_repeat,
                                                          e.min + max_repeat)
            count = rng.randint(e.min, max(e.min, high))
            fits = [p for p in pieces if (e.max is None or len(p) <= e.max) and _all_in(e.item, p, g.rules)] if pieces else []
            if fits and rng.random() < 0.5:
                piece = rng.choice(fits)
                emit(piece)
                count = max(e.min - len(piece), rng.randint(0, 2)) if e.max is None else \
                    min(e.max - len(piece), max(e.min - len(piece), rng.randint(0, 2)))
            for _ in range(count):
                walk(e.item, depth)
        elif isinstance(e, Text):
            raise TypeError("lower the grammar first")
        else:
            raise TypeError(f"unknown expression {e!r}")

    walk(Ref(g.root), 0)
    return "".join(out)
