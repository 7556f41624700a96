"""The exception tree: every error localtools raises is a ``LocalToolsError``.

::

    LocalToolsError
    ├── UsageError (ValueError)            an argument or option the caller got wrong
    ├── ToolDefinitionError (TypeError)    a tool that cannot be built from its function or schema
    ├── UnknownToolError (KeyError)        a name no registered, visible tool has
    ├── ToolNotAllowed (PermissionError)   a tool outside the caller's allow-list
    ├── ToolCallParseError (ValueError)    model output that looks like a call but does not parse
    │   └── SchemaViolation                a call whose arguments break its schema, after the repairs
    ├── ToolArgumentsError (ValueError)    arguments that do not match the tool's schema
    ├── ToolError                          raised while running a tool
    │   ├── ToolExecutionError             the tool function raised (``__cause__``)
    │   ├── ToolTimeout (TimeoutError)
    │   ├── ApprovalDenied (PermissionError)
    │   ├── ToolUnavailable                a circuit breaker is open after repeated failures
    │   └── MCPServerError                 an MCP server that cannot be started, or exited
    ├── GenerationTruncated                max_tokens cut a call
    ├── GenerationCancelled                the caller's cancel check stopped generation
    ├── AgentError                         the loop ended without an answer
    │   ├── MaxStepsExceeded
    │   └── RetryLimitExceeded
    ├── TemplateError (ValueError)         a chat template or family record that cannot render
    │   ├── DeriveError                    a template whose call syntax cannot be read off it
    │   └── FamilyNotFound                 no family renders as the model's template, none derived
    ├── GrammarError (ValueError)          a grammar that cannot be built or that an engine refuses
    │   ├── UnsupportedSchema              a tool schema the grammar cannot express
    │   └── GrammarNotRegular              a recursive grammar where a regular one is needed
    ├── ContextLengthExceeded (ValueError) a prompt longer than the model's context
    ├── ModelError                         a model that cannot be found, downloaded, verified or loaded
    ├── EngineError                        a serving engine (llama-server, vLLM, SGLang) failed a request
    │   ├── EngineUnavailable (ConnectionError)  not reachable, timed out or hung up
    │   └── EngineIgnoredGrammar           a reply the request's grammar could not have produced
    ├── DataError                          benchmark data that cannot be found, fetched or read
    └── MissingDependency (ImportError)    an optional package is missing; the message has the pip line
        └── BackendNotInstalled            ... one a backend needs

The server answers each with its own status and ``code`` (``localtools.serve._app``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentError",
    "ApprovalDenied",
    "BackendNotInstalled",
    "ContextLengthExceeded",
    "DataError",
    "DeriveError",
    "DisguisedCall",
    "EngineError",
    "EngineIgnoredGrammar",
    "EngineUnavailable",
    "FamilyNotFound",
    "GenerationCancelled",
    "GenerationTruncated",
    "GrammarError",
    "GrammarNotRegular",
    "LocalToolsError",
    "MCPServerError",
    "MaxStepsExceeded",
    "MissingDependency",
    "ModelError",
    "RetryLimitExceeded",
    "SchemaViolation",
    "TemplateError",
    "ToolArgumentsError",
    "ToolCallParseError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotAllowed",
    "ToolTimeout",
    "ToolUnavailable",
    "UnknownToolError",
    "UnsupportedSchema",
    "UsageError",
]


class LocalToolsError(Exception):
    """Base class of every localtools error."""


class UsageError(LocalToolsError, ValueError):
    """An argument, option or setting the caller got wrong (an unknown backend, a tool_choice that
    names no offered tool, a malformed ``--tools`` spec); the message says what was expected."""


class ToolDefinitionError(LocalToolsError, TypeError):
    """A tool could not be built; ``problems`` lists every issue found at once."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"cannot define tool {name!r}:\n{lines}")


class UnknownToolError(LocalToolsError, KeyError):
    """A tool name that is not registered (or not visible to this caller)."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        listing = ", ".join(available) if available else "(none)"
        super().__init__(f"unknown tool {name!r}; available tools: {listing}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class ToolNotAllowed(LocalToolsError, PermissionError):
    """A registered tool that the current allow-list does not permit."""


class ToolCallParseError(LocalToolsError, ValueError):
    """Model output that looks like a tool call but cannot be parsed. The message says where and
    what was wrong, never what the model wrote (a server hands it to clients): that is in ``raw``."""

    def __init__(self, message: str, raw: str) -> None:
        self.raw = raw
        super().__init__(message)


class SchemaViolation(ToolCallParseError):
    """A call whose arguments still break its tool's schema after the turn's repairs.

    ``violations``: each with the tool, the JSON pointer into the arguments and the keyword.
    """

    def __init__(self, violations: Sequence[Any], raw: str, repairs: int) -> None:
        self.violations = list(violations)
        self.repairs = repairs
        first = self.violations[0]
        self.tool, self.pointer, self.keyword = first.tool, first.pointer, first.keyword
        #: Where in the tool's schema (a JSON pointer to the keyword that failed).
        self.schema_path = getattr(first, "schema_path", "") or "#"
        more = f" (and {len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        # The schema's path and keyword, never the value nor a key the model wrote: the message
        # reaches clients, what the model wrote is in .raw and .violations.
        super().__init__(f"the call to {first.tool!r} breaks its schema after {repairs} repairs: "
                         f"{self.schema_path} ({first.keyword!r}){more}", raw)


class DisguisedCall(ToolCallParseError):
    """A text answer that still holds a call (a call object in any spelling: ``disguised_calls``)
    after the turn was decoded again ``retries`` times: it is no answer, and no call was run.
    ``name``: the offered tool it names ("" for a name that is no tool's: not repeated here)."""

    def __init__(self, name: str, raw: str, retries: int) -> None:
        self.name, self.retries = name, retries
        what = f"a call to {name!r}" if name else "a call to a tool that is not offered"
        super().__init__(f"the text answer holds {what} (not a call the grammar checked) after "
                         f"{retries} retries; it was not run", raw)


class ToolArgumentsError(LocalToolsError, ValueError):
    """Arguments that do not match the tool's schema."""

    def __init__(self, tool: str, details: str, arguments: Any = None) -> None:
        self.tool = tool
        self.details = details
        self.arguments = arguments
        super().__init__(f"invalid arguments for tool {tool!r}: {details}")


class ToolError(LocalToolsError):
    """Base of errors raised while running a tool."""


class ToolExecutionError(ToolError):
    """The tool function raised; the original exception is ``__cause__``."""


class ToolTimeout(ToolError, TimeoutError):
    """The tool did not finish within its timeout."""


class ApprovalDenied(ToolError, PermissionError):
    """A destructive tool was not approved."""


class ToolUnavailable(ToolError):
    """A tool not called because it failed too often lately (a circuit breaker is open)."""


class MCPServerError(ToolError):
    """An MCP server could not be started or listed, or exited while its tools were in use."""


class GenerationTruncated(LocalToolsError):
    """Generation stopped at ``max_tokens`` in the middle of a tool call, or a stop string
    (``stop``, which an engine applied inside the call) ended it there."""

    def __init__(self, max_tokens: int, raw: str, stop: str | None = None) -> None:
        self.max_tokens = max_tokens
        self.raw = raw
        self.stop = stop
        if stop is not None:
            super().__init__(f"a stop string ({len(stop)} characters) ended generation inside a tool call; the call is "
                             "incomplete and was not run (the reply is in .raw)")
            return
        super().__init__(
            f"generation hit max_tokens={max_tokens} inside a tool call; the call is incomplete "
            f"and was not run (raise max_tokens; the reply is in .raw)"
        )


class GenerationCancelled(LocalToolsError):
    """Generation was stopped by its ``cancel`` check (a server's client hung up)."""


class AgentError(LocalToolsError):
    """The loop ended without an answer; ``messages`` and ``trace`` hold what happened."""

    def __init__(self, message: str, messages: list[Any] | None = None, trace: list[Any] | None = None) -> None:
        self.messages = messages or []
        self.trace = trace or []
        super().__init__(message)


class MaxStepsExceeded(AgentError):
    """The loop reached ``max_steps`` without a final answer."""


class RetryLimitExceeded(AgentError):
    """The model kept producing invalid calls after the allowed retries."""


class TemplateError(LocalToolsError, ValueError):
    """A chat template or family definition is missing or cannot render."""


class DeriveError(TemplateError):
    """A chat template's call syntax cannot be read off its renderings; the message says which part."""


class FamilyNotFound(TemplateError):
    """No family renders the model's chat template as it does, and no call syntax can be derived from it."""


class GrammarError(LocalToolsError, ValueError):
    """A grammar that cannot be built from the tools, or that a decoding engine refuses."""


class UnsupportedSchema(GrammarError):
    """A tool's JSON Schema uses something the grammar cannot express (or, under
    ``strict_schema``, something neither the grammar nor the check enforces)."""

    def __init__(self, message: str, *, keyword: str = "", path: str = "") -> None:
        super().__init__(message)
        #: The keyword refused ("$ref", "format", ...), when one is to blame.
        self.keyword = keyword
        #: JSON pointer to it inside the tool's parameters schema.
        self.path = path


class GrammarNotRegular(GrammarError):
    """A grammar that refers to itself where an engine needs a regular expression."""


class ContextLengthExceeded(LocalToolsError, ValueError):
    """The prompt does not fit the model's context."""

    def __init__(self, prompt_tokens: int, limit: int, why: str = "") -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        super().__init__(f"the prompt has {prompt_tokens} tokens, more than the context of {limit}" + (f" ({why})" if why else ""))


class ModelError(LocalToolsError):
    """A model cannot be found, downloaded, verified or loaded."""


class EngineError(LocalToolsError):
    """A serving engine refused or failed a request; ``engine`` names it (with its version when
    known) and ``status`` is its HTTP status (``None`` when no answer came)."""

    def __init__(self, message: str, *, engine: str = "", status: int | None = None) -> None:
        self.engine = engine
        self.status = status
        super().__init__(message)


class EngineUnavailable(EngineError, ConnectionError):
    """The engine could not be reached, did not answer in time, or dropped the connection."""


class EngineIgnoredGrammar(EngineError):
    """The engine replied with text the request's grammar could not have produced: it dropped or
    misread the constraint. The reply is kept in ``raw`` and never read for calls."""

    def __init__(self, message: str, *, engine: str, raw: str) -> None:
        self.raw = raw
        super().__init__(message, engine=engine)


class DataError(LocalToolsError):
    """Benchmark data that cannot be found, downloaded or read."""


class MissingDependency(LocalToolsError, ImportError):
    """An optional package is missing; the message has the pip line."""


class BackendNotInstalled(MissingDependency):
    """A backend's (or a mask engine's) package is missing; the message has the pip line."""
