"""localtools: prompt-based, grammar-constrained tool calling for local open models."""

from ._agent import Agent, CallTrace, RunResult, StepTrace
from ._catalog import catalog, pull
from ._errors import (
    AgentError,
    ApprovalDenied,
    BackendNotInstalled,
    GenerationTruncated,
    LocalToolsError,
    MaxStepsExceeded,
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
)
from ._families import Family, families, get_family
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
    "CallTrace",
    "ChatResult",
    "Family",
    "GenerationTruncated",
    "LocalToolsError",
    "MaxStepsExceeded",
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
    "catalog",
    "families",
    "get_family",
    "load",
    "parse_reply",
    "pull",
    "tool",
]
