"""What the policies that decode a turn again share (``Turn``), and the interface they have
(``Redecode``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Protocol

from ..._errors import GenerationTruncated
from ...backends._base import Generation, NextTokens, Parting
from ...families._families import Family
from ...families._parse import ToolCall
from ...families._prompt import Prompt
from ...families._reply import ReplyFormat
from ...grammar import Grammar
from .._decide import Decision, Decisions, Grounds

__all__ = ["Live", "Redecode", "Run", "Turn", "switched"]


class Live(Protocol):
    """A turn's stream to its client, as a redecoding sees it."""

    def restart(self, raw: str = "") -> None:
        """The answer is generated again from ``raw`` on."""
        ...


class Run(Protocol):
    """One turn's generations on a backend (the model's ``_Decoding``)."""

    @property
    def live(self) -> Live | None:
        """The stream its text goes out on, when the turn is streamed."""
        ...

    @property
    def streamed(self) -> bool:
        """A client was sent part of this turn: it is not generated again."""
        ...

    def generate(self, prompt: Prompt, *, grammar: Grammar | None, max_tokens: int, stop: list[str],
                 repeat_penalty: float, sampling: Mapping[str, Any] | None = None,
                 reply: Sequence[int] = (), parting: Parting | None = None) -> Generation:
        """One generation, counted in the turn."""
        ...


#: Each setting's default: a lever is on where its setting is anything else.
_OFF = {f.name: f.default for f in fields(Decisions)}


def switched(decisions: Decisions, name: str) -> bool:
    """Whether ``decisions`` sets ``name`` away from its default (``None``, ``False``, one sample)."""
    return bool(getattr(decisions, name) != _OFF[name])


@dataclass
class Turn:
    """One turn's redecoding: what the policies read, and what they change as they go (the
    format, the decisions made, where the reply parts, the format later calls are written in).

    ``whole``: the turn's format before the call decision (its reply is read with it); ``fmt``:
    the one the reply is written in. ``variant(choice, calls=None, only=forms, tools=specs)``:
    the same request's format on one branch. ``reprompt(note)``: the prompt with ``note`` first in
    its system message. ``settle``: the calls as the turn would give them (``SETTLING``).
    ``source``: the model's next-token distribution (``None``: the greedy token decides, and only
    the policies that need none act). A turn with nothing to decide has ``Decisions()``."""

    run: Run
    source: NextTokens | None
    family: Family
    prompt: Prompt
    whole: ReplyFormat
    fmt: ReplyFormat
    thought: str
    decisions: Decisions
    messages: Sequence[Mapping[str, Any]]
    specs: Sequence[dict[str, Any]]
    forms: tuple[str, ...] | None
    variant: Callable[..., ReplyFormat]
    reprompt: Callable[[str], Prompt]
    settle: Callable[[list[ToolCall]], list[ToolCall]]
    max_tokens: int
    penalties: Sequence[float]
    parallel: bool
    #: The turn's decisions, in the order they were made.
    made: list[Decision] = field(default_factory=list)
    #: Where the first reply stops to be gone on from (``form``).
    parting: Parting | None = None
    #: The reply's formats as one list and as single calls, once ``form`` has built them.
    apart: tuple[ReplyFormat, ReplyFormat] | None = None
    #: The format calls after the form decision are written in (``form`` narrows ``variant``).
    later: Callable[..., ReplyFormat] = field(init=False)

    def __post_init__(self) -> None:
        self.later = self.variant

    @property
    def next_tokens(self) -> NextTokens:
        """The distribution a policy that needs one reads (``Redecode.distribution``)."""
        assert self.source is not None, "only a policy that needs no distribution acts without one"
        return self.source

    @cached_property
    def grounds(self) -> Grounds | None:
        """What ``guess``, ``fit``, ``cover`` and ``held`` judge calls against, read once (``None``
        where none of them is on)."""
        d = self.decisions
        on = d.guess is not None or d.fit is not None or d.cover or d.held
        return Grounds.of(self.messages, self.specs) if on else None

    def answer(self, fmt: ReplyFormat, *, prompt: Prompt | None = None, penalties: Sequence[float] | None = None,
               reply: Sequence[int] = (), tells: Sequence[str] = (), parting: Parting | None = None) -> Generation:
        """The answer under ``fmt``'s grammar (going on from ``reply``, an earlier reply's tokens
        up to a decision, where the backend can); when ``max_tokens`` cuts a call, again with each
        repeat penalty in turn (a cut call is almost always a loop), unless a client was sent part
        of it. ``tells``: more stop strings, which the caller reads in ``Generation.stop``.
        ``parting``: the answer may stop where it parts (``Generation.parted``), to be gone on
        from. ``prompt`` and ``penalties`` default to the turn's."""
        run = self.run
        for penalty in self.penalties if penalties is None else penalties:
            if run.live is not None:
                run.live.restart(self.thought)
            gen = run.generate(self.prompt if prompt is None else prompt, grammar=fmt.grammar,
                               max_tokens=self.max_tokens, stop=[*fmt.stop, *tells], repeat_penalty=penalty,
                               reply=reply, parting=parting)
            # Under the grammar a stop string that ended a call (an engine applies them where it
            # will) cut it, as max_tokens does; a tell is the caller's to read. Free output cut so
            # holds an unclosed call, which its parser refuses.
            stopped = gen.stop is not None and gen.stop not in tells and fmt.answer_grammar is not None
            cut = (gen.finish_reason == "length" or stopped) and fmt.cut_inside_call(gen.text)
            if not cut or run.streamed:
                break
        if cut:
            raise GenerationTruncated(self.max_tokens, gen.text, gen.stop if gen.finish_reason != "length" else None)
        return gen

    def as_call(self, fmt: ReplyFormat) -> tuple[Generation, list[tuple[str, dict[str, Any]]]] | None:
        """A text answer decoded again under ``fmt`` (a branch that calls), with the first repeat
        penalty, and the calls it wrote (read with ``whole``); ``None`` where ``fmt`` has no grammar
        or ``max_tokens`` cut the call."""
        if fmt.grammar is None:
            return None
        try:
            attempt = self.answer(fmt, penalties=self.penalties[:1])
        except GenerationTruncated:
            return None
        return attempt, [(c.name, c.arguments) for c in self.whole.parse(attempt.text).tool_calls]


class Redecode(Protocol):
    """A policy that may decode a turn again."""

    @property
    def switch(self) -> tuple[str, ...]:
        """The ``Decisions`` settings that turn it on (any one of them, set: ``switched``)."""
        ...

    @property
    def distribution(self) -> bool:
        """Whether it reads the model's next-token distribution: off on a turn without one."""
        ...

    @property
    def reads(self) -> str:
        """What it reads (for the reader; docs/decisions.md says more)."""
        ...

    @property
    def changes(self) -> str:
        """What it changes."""
        ...

    def ahead(self, turn: Turn) -> None:
        """Before the first reply is written: what it is written in, where it stops."""
        ...

    def __call__(self, turn: Turn, gen: Generation) -> Generation:
        """The reply so far, ``gen``, as this policy leaves it (decoded again, or as it was),
        with its decisions added to ``turn.made``."""
        ...
