"""The exception tree: every error localtools raises is a ``LocalToolsError``."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "ApprovalDenied",
    "BackendNotInstalled",
    "GenerationTruncated",
    "LocalToolsError",
    "MaxStepsExceeded",
    "ModelError",
    "RetryLimitExceeded",
    "TemplateError",
    "ToolArgumentsError",
    "ToolCallParseError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotAllowed",
    "ToolTimeout",
    "UnknownToolError",
]


class LocalToolsError(Exception):
    """Base class of every localtools error."""


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
    """Model output that looks like a tool call but cannot be parsed; keeps the raw text."""

    def __init__(self, message: str, raw: str) -> None:
        self.raw = raw
        super().__init__(f"{message} (raw output: {raw[:200]!r})")


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


class GenerationTruncated(LocalToolsError):
    """Generation stopped at ``max_tokens`` in the middle of a tool call."""

    def __init__(self, max_tokens: int, raw: str) -> None:
        self.max_tokens = max_tokens
        self.raw = raw
        super().__init__(
            f"generation hit max_tokens={max_tokens} inside a tool call; the call is incomplete "
            f"and was not run (raise max_tokens). Raw output ends with: {raw[-120:]!r}"
        )


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


class ModelError(LocalToolsError):
    """A model cannot be found, downloaded, verified or loaded."""


class BackendNotInstalled(LocalToolsError, ImportError):
    """An optional backend's package is missing; the message has the pip line."""
