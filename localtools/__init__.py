"""localtools: prompt-based, grammar-constrained tool calling for local open models."""

from ._agent import Agent, CallOutcome, CallTrace, RunResult, StepTrace
from ._catalog import catalog, pull
from ._errors import (
    AgentError,
    ApprovalDenied,
    BackendNotInstalled,
    ContextLengthExceeded,
    DataError,
    GenerationTruncated,
    GrammarError,
    GrammarNotRegular,
    LocalToolsError,
    MaxStepsExceeded,
    MissingDependency,
    ModelError,
    RetryLimitExceeded,
    TemplateError,
    ToolArgumentsError,
    ToolCallParseError,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolNotAllowed,
    ToolTimeout,
    UnknownToolError,
    UnsupportedSchema,
    UsageError,
)
from ._families import Family, families, get_family, register_family
from ._load import BACKENDS, load
from ._model import ChatResult, Model
from ._parse import ToolCall, parse_reply
from ._prompt import Prompt
from ._tools import DESTRUCTIVE, Tool, ToolRegistry, tool
from .backends.scripted import ScriptedBackend

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "DESTRUCTIVE",
    "Agent",
    "AgentError",
    "ApprovalDenied",
    "BackendNotInstalled",
    "CallOutcome",
    "CallTrace",
    "ChatResult",
    "ContextLengthExceeded",
    "DataError",
    "Family",
    "GenerationTruncated",
    "GrammarError",
    "GrammarNotRegular",
    "LocalToolsError",
    "MaxStepsExceeded",
    "MissingDependency",
    "Model",
    "ModelError",
    "Prompt",
    "RetryLimitExceeded",
    "RunResult",
    "ScriptedBackend",
    "StepTrace",
    "TemplateError",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallParseError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotAllowed",
    "ToolRegistry",
    "ToolTimeout",
    "UnknownToolError",
    "UnsupportedSchema",
    "UsageError",
    "catalog",
    "families",
    "get_family",
    "load",
    "parse_reply",
    "pull",
    "register_family",
    "tool",
]
