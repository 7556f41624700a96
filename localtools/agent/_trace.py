"""What a run records: each call's outcome and trace, each step's trace. The loop writes them;
run files, middleware, tracing and the server read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .._errors import ApprovalDenied, ToolExecutionError, ToolTimeout, ToolUnavailable
from ..model._decide import Decision

__all__ = ["CallOutcome", "CallTrace", "StepTrace", "outcome_of"]


class CallOutcome(StrEnum):
    """What became of one call the model made."""

    OK = "ok"
    #: The same call (name and arguments) already ran; the model got its result again.
    REPEATED = "repeated call"
    #: The same call already failed; it was not run again, the model got the failure again.
    REPEATED_ERROR = "repeated error"
    UNKNOWN_TOOL = "unknown tool"
    NOT_ALLOWED = "not allowed"
    INVALID_ARGUMENTS = "invalid arguments"
    NOT_APPROVED = "not approved"
    TIMEOUT = "timeout"
    #: The tool function raised.
    RAISED = "raised"
    #: Not run: a circuit breaker is open after repeated failures.
    UNAVAILABLE = "unavailable"

    @property
    def is_model_mistake(self) -> bool:
        """The model's fault (a name or arguments it got wrong): counts against ``max_retries``."""
        return self in (CallOutcome.UNKNOWN_TOOL, CallOutcome.NOT_ALLOWED, CallOutcome.INVALID_ARGUMENTS)

    @property
    def is_repeat(self) -> bool:
        """Not run: the same call ran (or failed) earlier, and the model got that again."""
        return self in (CallOutcome.REPEATED, CallOutcome.REPEATED_ERROR)

    @property
    def succeeded(self) -> bool:
        """The model got a result: the call ran, or the same call had run and its result was sent again."""
        return self in (CallOutcome.OK, CallOutcome.REPEATED)

    @property
    def tool_failed(self) -> bool:
        """The tool, not the model, failed: a resumed run calls it again."""
        return self in (CallOutcome.TIMEOUT, CallOutcome.RAISED, CallOutcome.UNAVAILABLE)


@dataclass
class CallTrace:
    """One call of a step: what the model asked for, what it got back, and what became of it
    (``outcome``, the one record of that; ``ok`` reads it)."""

    id: str
    name: str
    arguments: dict[str, Any]
    result: str
    #: What went wrong, for people ("invalid arguments: 'city' is a required property"); None when ok.
    error: str | None = None
    seconds: float = 0.0
    outcome: CallOutcome = CallOutcome.OK
    #: Answered from a result cache without running the tool.
    cached: bool = False
    #: Times the tool function ran (a retry middleware may run it more than once).
    attempts: int = 1
    #: What middleware recorded (e.g. seconds waited for a rate limit).
    notes: dict[str, Any] = field(default_factory=dict)
    #: The whole result, when a result policy gave the model less of it (``result``).
    full_result: str | None = None
    #: The short id the model may cite this result by (``Agent(cite=True)``), e.g. "r1".
    ref: str | None = None

    @property
    def ok(self) -> bool:
        """The model got a result (``CallOutcome.succeeded``)."""
        return self.outcome.succeeded


@dataclass
class StepTrace:
    step: int
    constrained: bool
    tool_choice: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: float = 0.0
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0
    #: More than 1 when a call cut by max_tokens was generated again with a repeat penalty.
    attempts: int = 1
    #: Times this turn was generated again because a call broke its tool's schema; and whether a
    #: call still broke it after them (``SchemaViolation``, fed back as an unusable turn).
    schema_repairs: int = 0
    schema_refused: bool = False
    #: Times this turn was decoded again because its text answer read as a call.
    disguise_retries: int = 0
    raw: str = ""
    #: The model's reasoning this step, apart from its answer and calls.
    reasoning: str = ""
    calls: list[CallTrace] = field(default_factory=list)
    error: str | None = None
    #: The tools offered this turn, when a router picked them (``None``: every allowed tool).
    offered: list[str] | None = None
    #: What the context budget cut from this turn's prompt to make it fit ([]: nothing).
    context_cuts: list[str] = field(default_factory=list)
    #: What the loop's checks found this step and told the model: a repeated call, a repeated
    #: failure, two tools called in turn without progress, a call id used before.
    loop_checks: list[str] = field(default_factory=list)
    #: The turn's decisions (``ChatResult.decisions``): where each was made, on what share, and
    #: what it changed (``before`` and ``after``).
    decisions: list[Decision] = field(default_factory=list)


#: The outcome each error a tool call may raise stands for; the loop and the audit log read it here.
_ERROR_OUTCOMES: tuple[tuple[type[BaseException], CallOutcome], ...] = (
    (ApprovalDenied, CallOutcome.NOT_APPROVED),
    (ToolTimeout, CallOutcome.TIMEOUT),
    (ToolUnavailable, CallOutcome.UNAVAILABLE),
    (ToolExecutionError, CallOutcome.RAISED),
)


def outcome_of(exc: BaseException) -> CallOutcome | None:
    """The outcome a call that raised ``exc`` has (``None``: an error no outcome names)."""
    return next((outcome for kind, outcome in _ERROR_OUTCOMES if isinstance(exc, kind)), None)
