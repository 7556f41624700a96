"""Whether a text is in a grammar's language: the scripted backend, the truncation check and the
reply parser ask this."""

from __future__ import annotations

from collections.abc import Generator

from ._chars import _class_match
from ._expr import Alt, Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text, Until
from ._text import text_ends, until_end

__all__ = ["matches"]


def matches(grammar: Grammar, text: str, *, prefix: bool = False) -> bool:
    """Whether ``text`` is in the language of ``grammar`` (a set-of-positions matcher); with
    ``prefix``, whether some string of the language starts with ``text`` (a generation that
    ``max_tokens`` or a stop string ended).

    The walk keeps its own stack (deep recursion would need the interpreter's recursion limit
    raised, for every thread at once), and reads a ``Text`` node in one pass: spelled out as rules
    it would cost time quadratic in the text's length.
    """
    rules = grammar.rules
    end = len(text)

    def leaf(e: Expr, pos: int) -> frozenset[int] | None:
        if prefix and pos >= end:
            # The text ran out here: whatever follows could still come.
            return frozenset((end,))
        if isinstance(e, Text):
            return text_ends(e, text, pos)
        if isinstance(e, Until):
            stop = until_end(e, text, pos)
            if stop is None:
                return frozenset((end,)) if prefix else frozenset()
            return frozenset((stop,))
        if isinstance(e, Lit):
            if text.startswith(e.text, pos):
                return frozenset((pos + len(e.text),))
            return frozenset((end,)) if prefix and e.text.startswith(text[pos:]) else frozenset()
        if isinstance(e, Chars):
            return frozenset((pos + 1,)) if pos < len(text) and _class_match(e.body, text[pos]) else frozenset()
        if isinstance(e, Any_):
            return frozenset((pos + 1,)) if pos < len(text) else frozenset()
        return None

    memo: dict[tuple[int, int], frozenset[int]] = {}
    stack: list[tuple[tuple[int, int], Generator[tuple[Expr, int], frozenset[int], set[int]]]] = []
    start = rules[grammar.root]
    value = leaf(start, 0)
    if value is None:
        memo[(id(start), 0)] = frozenset()  # an entry while in progress guards against left recursion
        stack.append(((id(start), 0), _ends(start, 0, rules, end if prefix else -1)))
    while stack:
        key, walk = stack[-1]
        try:
            sub, pos = walk.send(value) if value is not None else next(walk)
        except StopIteration as done:
            value = memo[key] = frozenset(done.value)
            stack.pop()
            continue
        value = leaf(sub, pos)
        if value is not None:
            continue
        sub_key = (id(sub), pos)
        if sub_key in memo:
            value = memo[sub_key]
            continue
        memo[sub_key] = frozenset()
        stack.append((sub_key, _ends(sub, pos, rules, end if prefix else -1)))
    assert value is not None
    return end in value

def _ends(e: Expr, pos: int, rules: dict[str, Expr],
          sticky: int = -1) -> Generator[tuple[Expr, int], frozenset[int], set[int]]:
    """The end positions of ``e`` matched from ``pos``; asks ``matches`` for each part's ends.
    ``sticky``: where the text runs out when prefixes count (-1 otherwise): reaching it, a
    repeat needs no more items, whatever its minimum."""
    if isinstance(e, Ref):
        return set((yield rules[e.name], pos))
    if isinstance(e, Seq):
        current = {pos}
        for item in e.items:
            after: set[int] = set()
            for p in current:
                after |= yield item, p
            current = after
            if not current:
                break
        return current
    if isinstance(e, Alt):
        out: set[int] = set()
        for option in e.options:
            out |= yield option, pos
        return out
    if isinstance(e, Repeat):
        # Positions after exactly ``count`` items. Below the minimum the count matters, so every
        # position is carried; from the minimum on it no longer does, and each position is
        # extended once (``done``), which ends unbounded repeats.
        out, current, count = ({pos} if e.min == 0 else set()), {pos}, 0
        done: set[int] = set()
        empty = False  # an item matched the empty string: the minimum is met by repeating it
        while current and (e.max is None or count < e.max):
            after = set()
            for p in current:
                ends = yield e.item, p
                empty |= p in ends
                after |= ends
            count += 1
            if count >= e.min or empty:
                out |= after
            elif sticky in after:
                out.add(sticky)
            current = after - done if count >= e.min else after
            if count >= e.min:
                done |= current
        return out
    raise TypeError(f"cannot match {e!r}; lower the grammar first")
