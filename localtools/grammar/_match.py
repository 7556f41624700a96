"""Whether a text is in a grammar's language: the scripted backend, the truncation check and the
reply parser ask this."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from ._chars import _class_items, _class_match, is_surrogate
from ._expr import Alt, Any_, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, Text, Until
from ._text import text_ends, until_end

__all__ = ["Ahead", "Resume", "continuation", "lookahead", "matches"]


def matches(grammar: Grammar, text: str, *, prefix: bool = False) -> bool:
    """Whether ``text`` is in the language of ``grammar`` (a set-of-positions matcher); with
    ``prefix``, whether some string of the language starts with ``text`` (a generation that
    ``max_tokens`` or a stop string ended).

    The walk keeps its own stack (deep recursion would need the interpreter's recursion limit
    raised, for every thread at once), and reads a ``Text`` node in one pass: spelled out as rules
    it would cost time quadratic in the text's length.
    """
    return len(text) in _walk(grammar, text, prefix=prefix)


#: In a ``_walk`` frontier: the next character is one of many (a class, free text).
_OPEN = ""


@dataclass(frozen=True)
class Ahead:
    """What may follow a text in a grammar's language, read in one walk (``lookahead``): for
    asking about many short continuations of one text (the model's next tokens at a decision)
    without walking the text again for each one the grammar plainly refuses."""

    #: The text is in the language.
    whole: bool
    #: What may come right after it for a match in progress: the rest of a literal, one
    #: character, or ``_OPEN`` (one of many).
    rests: frozenset[str]

    @property
    def open(self) -> bool:
        """Some string of the language starts with the text."""
        return self.whole or bool(self.rests)

    def refuses(self, more: str) -> bool:
        """Whether no string of the language starts with the text and then ``more`` (not empty),
        as far as the rests tell; ``False`` where telling needs a walk."""
        if not self.open:
            return True  # a prefix nothing continues: nothing longer is one either
        if _OPEN in self.rests:
            return False
        return not any(rest.startswith(more) or more.startswith(rest) for rest in self.rests)


def lookahead(grammar: Grammar, text: str, resume: Resume | None = None) -> Ahead:
    """``Ahead`` of ``text`` in ``grammar``: whether it is whole, and what may follow it.
    ``resume``: as ``continuation`` takes it."""
    frontier: set[str] = set()
    whole = len(text) in _walk(grammar, text, frontier=frontier, resume=resume)
    return Ahead(whole, frozenset(frontier))


class Resume:
    """What walks of one grammar over a growing text can keep from one to the next: the parts of
    the last walk that never read as far as its text's end hold for any text that goes on from it.
    A decoder asks after every token (``continuation``); without this each ask walks the whole
    reply again, time quadratic in its length."""

    def __init__(self) -> None:
        self.text = ""
        self.memo: dict[tuple[int, int], frozenset[int]] = {}


def continuation(grammar: Grammar, text: str, resume: Resume | None = None) -> tuple[str, bool]:
    """What the grammar forces after ``text`` (a prefix of its language): the text every string
    of the language that starts with ``text`` continues with, and whether each of them ends
    right after it. ``("", False)``: the next character is the model's to choose. ``resume``:
    one ``Resume`` for the asks of one growing text (of this grammar alone).

    Decoders append forced text without sampling it token by token (fast-forward).
    """
    forced = ""
    while True:
        ahead = lookahead(grammar, text + forced, resume)
        frontier = ahead.rests
        if not frontier:
            return forced, ahead.whole
        if ahead.whole or _OPEN in frontier:
            return forced, False
        # Each entry is the rest of a literal in progress; past the shortest one, what follows
        # is another part's to say, so the walk runs again from there.
        step = min(frontier, key=len)
        for rest in frontier:
            while not rest.startswith(step):
                step = step[:-1]
        if not step:
            return forced, False
        forced += step


def _walk(grammar: Grammar, text: str, *, prefix: bool = False, frontier: set[str] | None = None,
          resume: Resume | None = None) -> frozenset[int]:
    """The positions where a match of the whole grammar from 0 may end. With ``frontier``, also
    collects what may come right after ``text`` for a match still in progress: the rest of a
    literal, one character, or ``_OPEN``. ``resume`` (not with ``prefix``): results of the last
    walk kept where its text goes on in this one; this walk's are kept for the next."""
    rules = grammar.rules
    end = len(text)

    def pending(e: Expr, pos: int) -> None:
        # Called only where a match of ``e`` from ``pos`` may be cut by the end of the text.
        assert frontier is not None
        if isinstance(e, Lit):
            if len(e.text) > end - pos and e.text.startswith(text[pos:]):
                frontier.add(e.text[end - pos:])
        elif isinstance(e, Chars):
            negate, ranges = _class_items(e.body)
            single = not negate and len(ranges) == 1 and ranges[0][0] == ranges[0][1]
            frontier.add(ranges[0][0] if single else _OPEN)
        else:
            frontier.add(_OPEN)  # any character, free text, text up to a marker

    def leaf(e: Expr, pos: int) -> frozenset[int] | None:
        if frontier is not None and isinstance(e, (Lit, Chars, Any_, Text, Until)) and (
                pos == end or (isinstance(e, Lit) and pos < end)
                or (isinstance(e, Text) and end in text_ends(e, text, pos))
                or (isinstance(e, Until) and until_end(e, text, pos) is None)):
            pending(e, pos)
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
            # Any character, as engines read UTF-8: never a lone surrogate.
            return frozenset((pos + 1,)) if pos < len(text) and not is_surrogate(text[pos]) else frozenset()
        return None

    def reads_end(e: Expr, pos: int) -> bool:
        # Whether a leaf's answer could change were the text longer: it read up to the end.
        if isinstance(e, Lit):
            return pos + len(e.text) > end
        if isinstance(e, Chars | Any_):
            return pos >= end
        return True  # free text and text up to a marker read on to the end

    kept = None if prefix else resume
    keep = kept is not None
    memo: dict[tuple[int, int], frozenset[int]] = {}
    if kept is not None:
        if text.startswith(kept.text):
            memo = kept.memo  # walked on in place, not copied: a copy per ask is quadratic again
        kept.text, kept.memo = "", {}  # until this walk ends whole
    #: Entries whose walk read the end of the text: a longer text may change them.
    ends: set[tuple[int, int]] = set()
    stack: list[tuple[tuple[int, int], Generator[tuple[Expr, int], frozenset[int], set[int]]]] = []
    hot: list[bool] = []  # per frame on the stack: whether its walk read the end so far
    start = rules[grammar.root]
    value = leaf(start, 0)
    if value is None:
        memo[(id(start), 0)] = frozenset()  # an entry while in progress guards against left recursion
        stack.append(((id(start), 0), _ends(start, 0, rules, end if prefix else -1)))
        hot.append(False)
    while stack:
        key, walk = stack[-1]
        try:
            sub, pos = walk.send(value) if value is not None else next(walk)
        except StopIteration as done:
            value = memo[key] = frozenset(done.value)
            stack.pop()
            if hot.pop():
                ends.add(key)
                if hot:
                    hot[-1] = True
            continue
        value = leaf(sub, pos)
        if value is not None:
            if keep and not hot[-1] and reads_end(sub, pos):
                hot[-1] = True
            continue
        sub_key = (id(sub), pos)
        if sub_key in memo:
            value = memo[sub_key]
            if sub_key in ends:
                hot[-1] = True
            continue
        memo[sub_key] = frozenset()
        stack.append((sub_key, _ends(sub, pos, rules, end if prefix else -1)))
        hot.append(False)
    assert value is not None
    if kept is not None:
        for key in ends:
            del memo[key]
        kept.text, kept.memo = text, memo
    return value


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
