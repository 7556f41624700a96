"""``more`` and ``cover``: after a reply with calls, another call while the model's share for one
reaches ``Decisions.more``; under the share, with ``cover``, another call for the values the user
listed that no call used yet, kept only when it uses one."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..._errors import GenerationTruncated
from ...backends._base import Generation
from ...families._parse import call_key
from ...grammar import MAX_PARALLEL_CALLS, matches
from .._decide import Decision, DecisionPoint, asked, covers, decide, fork, uncovered
from ._turn import Turn
from .guess import stranger

__all__ = ["More"]


@dataclass(frozen=True)
class More:
    """Another call, on the model's share for one after the reply's calls (or for what the user
    listed that no call used)."""

    switch: tuple[str, ...] = ("more",)
    distribution: bool = True
    reads: str = "the next-token distribution after the reply's calls; with cover, the lists the user wrote"
    changes: str = "the reply decoded again with one more call required"

    def ahead(self, turn: Turn) -> None:
        """Nothing: it reads the written reply."""

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """A continuation that repeats one of its calls or runs out of tokens is not taken, nor
        one whose new calls ``guess`` or ``fit`` refuse on that share (``stranger``)."""
        whole, made, decisions, grounds = turn.whole, turn.made, turn.decisions, turn.grounds
        if decisions.more is None or not turn.parallel or not turn.family.parallel or not whole.can_call:
            return gen
        judge = None if grounds is None else partial(stranger, decisions, grounds)
        # The words as written: a list of names is read by its capitals.
        cover = partial(uncovered, conversation=asked(turn.messages)) if decisions.cover else None
        source, variant = turn.next_tokens, turn.later
        most = min(decisions.max_calls, MAX_PARALLEL_CALLS)
        calls = whole.parse(gen.text).tool_calls
        while gen.finish_reason == "stop" and not turn.run.streamed:
            n = len(calls)
            if not 1 <= n < most:
                break
            exact, more = variant("required", (n, n)), variant("required", (n + 1, most))
            if exact.grammar is None or more.grammar is None or not matches(exact.grammar, gen.text):
                break  # text before the calls, or more than the grammar's count: not this decision
            at = fork(source, gen.tokens, gen.text, more.grammar)
            if at is None:
                break
            made.append(decide(source, turn.prompt, DecisionPoint.MORE, decisions.more, more.grammar, exact.grammar,
                               decisions, reply=at[0], text=at[1], calls=n, whole=gen.text))
            left = [] if made[-1].taken or cover is None else cover([(c.name, c.arguments) for c in calls])
            if not made[-1].taken and not left:
                break
            longer = None
            # Greedy, the next call is often the last one again: the repeat penalties (on the
            # reply's own tokens) push it off the values it already wrote.
            for penalty in turn.penalties:
                try:
                    attempt = turn.answer(more, penalties=[penalty], reply=at[0])
                except GenerationTruncated:
                    break
                tried = whole.parse(attempt.text).tool_calls
                keys = [call_key(c.name, c.arguments) for c in tried]
                if len(keys) > n and len(set(keys)) == len(keys):
                    longer = attempt
                    break
            if longer is None:
                break  # the model had no new call to make: the reply it had stands
            added = [(c.name, c.arguments) for c in tried[n:]]
            share = made[-1].share
            if left:
                made.append(Decision(DecisionPoint.COVER, share, None, covers(added, left), n, gen.text, ", ".join(left)))
                if not made[-1].taken:
                    break  # the call written was not for what the user listed
            refused = None if judge is None else judge(added, share, [(c.name, c.arguments) for c in calls], gen.text)
            if refused is not None:
                made.append(refused)
                break
            gen, calls = longer, tried  # read once: the next decision counts these calls
        return gen
