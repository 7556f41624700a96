"""Tools (a callable plus its JSON Schema) and the registry that holds them."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, overload

import pydantic
from pydantic import BaseModel

from .._errors import ToolArgumentsError, ToolDefinitionError, ToolNotAllowed, UnknownToolError, UnsupportedSchema
from ..grammar._check import Violation, schema_errors, violations
from ._schema import function_schema, model_schema, name_problem, spec_problems

__all__ = ["DESTRUCTIVE", "IDEMPOTENT", "ArgsPassing", "Tool", "ToolRegistry", "tool"]

#: Tag that marks a tool whose calls need approval before they run.
DESTRUCTIVE = "destructive"
#: Tag that marks a tool whose calls may run twice with the same effect: only these are retried
#: or answered from a cache.
IDEMPOTENT = "idempotent"
DEFAULT_TIMEOUT = 30.0


class ArgsPassing(StrEnum):
    """How a tool's validated arguments reach its function."""

    #: As keyword arguments, one per parameter.
    KWARGS = "kwargs"
    #: As one instance of the tool's pydantic model.
    MODEL = "model"


@dataclass(frozen=True)
class Tool:
    """A callable the model may request, described by a JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    tags: frozenset[str] = frozenset()
    timeout: float | None = DEFAULT_TIMEOUT
    args_model: type[BaseModel] | None = None
    #: How validated arguments reach ``fn``: as keyword arguments, or as one model instance.
    call_style: ArgsPassing = ArgsPassing.KWARGS
    #: Execution middleware for this tool alone, outermost first, inside the agent's own.
    middleware: tuple[Any, ...] = ()
    #: What of a result reaches the model (``localtools.Full``, ``Truncate``, ``Pick``,
    #: ``Summarize``); ``None``: the agent's default.
    result: Any = None

    @property
    def destructive(self) -> bool:
        return DESTRUCTIVE in self.tags

    @property
    def idempotent(self) -> bool:
        return IDEMPOTENT in self.tags

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style ``{"type": "function", "function": {...}}`` record templates render."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        tags: Iterable[str] = (),
        destructive: bool = False,
        idempotent: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        middleware: Sequence[Any] = (),
        result: Any = None,
    ) -> Tool:
        """Describe ``fn`` from its signature, type hints and Google/NumPy/reST docstring."""
        tool_name = str(name or getattr(fn, "__name__", ""))
        problems: list[str] = []
        if not callable(fn):
            raise ToolDefinitionError(str(tool_name), [f"{fn!r} is not callable"])
        if (problem := name_problem(tool_name)) is not None:
            problems.append(problem)
        built, schema_problems = function_schema(fn, tool_name or "tool")
        problems += schema_problems
        if problems or built is None:
            raise ToolDefinitionError(tool_name, problems)
        return cls(
            name=tool_name,
            description=description if description is not None else built.description,
            parameters=built.parameters,
            fn=fn,
            tags=_tags(tags, destructive, idempotent),
            timeout=timeout,
            middleware=tuple(middleware),
            result=result,
            args_model=built.args_model,
        )

    @classmethod
    def from_model(
        cls,
        model: type[BaseModel],
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        tags: Iterable[str] = (),
        destructive: bool = False,
        idempotent: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        middleware: Sequence[Any] = (),
        result: Any = None,
    ) -> Tool:
        """A tool whose arguments are the fields of a pydantic model.

        ``fn`` receives one model instance if its only parameter is annotated with ``model``,
        else the fields as keyword arguments.
        """
        tool_name = name or getattr(fn, "__name__", "") or model.__name__
        problems: list[str] = []
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ToolDefinitionError(tool_name, [f"{model!r} is not a pydantic model class"])
        if (problem := name_problem(tool_name)) is not None:
            problems.append(problem)
        try:
            params = model_schema(model)
        except pydantic.PydanticUserError as exc:
            problems.append(f"model {model.__name__} has no JSON Schema: {exc}")
        if problems:
            raise ToolDefinitionError(tool_name, problems)
        sig_params = list(inspect.signature(fn).parameters.values())
        style = ArgsPassing.MODEL if len(sig_params) == 1 and sig_params[0].annotation in (model, model.__name__) \
            else ArgsPassing.KWARGS
        doc = description if description is not None else (inspect.getdoc(fn) or inspect.getdoc(model) or "")
        return cls(
            name=tool_name,
            description=doc.strip(),
            parameters=params,
            fn=fn,
            tags=_tags(tags, destructive, idempotent),
            timeout=timeout,
            middleware=tuple(middleware),
            result=result,
            args_model=model,
            call_style=style,
        )

    @classmethod
    def from_schema(
        cls,
        spec: dict[str, Any],
        fn: Callable[..., Any],
        *,
        tags: Iterable[str] = (),
        destructive: bool = False,
        idempotent: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        middleware: Sequence[Any] = (),
        result: Any = None,
    ) -> Tool:
        """A tool from an OpenAI-style spec (``{"type": "function", "function": {...}}`` or the inner dict)."""
        inner = spec.get("function", spec) if isinstance(spec, dict) else None
        if not isinstance(inner, dict):
            raise ToolDefinitionError("?", [f"expected a dict with 'name' and 'parameters', got {type(spec).__name__}"])
        tool_name = inner.get("name")
        problems = [message for _, message in spec_problems(inner)]
        params = inner.get("parameters") or {"type": "object", "properties": {}}
        description = inner.get("description") or ""
        if not callable(fn):
            problems.append(f"{fn!r} is not callable")
        if problems:
            raise ToolDefinitionError(str(tool_name), problems)
        params = {**params, "type": "object"}
        params.setdefault("properties", {})
        return cls(
            name=str(tool_name),
            description=description,
            parameters=params,
            fn=fn,
            tags=_tags(tags, destructive, idempotent),
            timeout=timeout,
            middleware=tuple(middleware),
            result=result,
        )

    # -- use ------------------------------------------------------------------------------------
    def violations(self, arguments: Any) -> list[Violation]:
        """Every way ``arguments`` break this tool: its JSON Schema, and its pydantic model when it
        has one (a model checks what a schema cannot say: a Decimal's digits, a validator)."""
        found = violations(self.name, self.parameters, arguments)
        if found or self.args_model is None or not isinstance(arguments, dict):
            return found
        try:
            self.args_model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            return [Violation(self.name, "".join(f"/{p}" for p in e["loc"]), f"pydantic:{e['type']}", e["msg"])
                    for e in exc.errors()]
        return []

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check ``arguments`` (a dict from the model) and return what ``fn`` receives.

        Raises ``ToolArgumentsError`` naming every problem.
        """
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(self.name, f"arguments must be a JSON object, got {type(arguments).__name__}", arguments)
        if self.args_model is not None:
            try:
                model = self.args_model.model_validate(arguments)
            except pydantic.ValidationError as exc:
                details = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()
                )
                raise ToolArgumentsError(self.name, details, arguments) from None
            if self.call_style is ArgsPassing.MODEL:
                return {"__model__": model}
            return {k: getattr(model, k) for k in type(model).model_fields}
        # The check's reading (patterns as ECMA-262, in linear time): what it passed, this passes.
        try:
            errors = schema_errors(self.parameters, arguments)
        except UnsupportedSchema as exc:
            raise ToolArgumentsError(self.name, f"its schema cannot be checked: {exc}", arguments) from None
        if errors:
            details = "; ".join(f"{'.'.join(str(p) for p in path) or '(root)'}: {message}" for path, _, message, _ in errors)
            raise ToolArgumentsError(self.name, details, arguments)
        return dict(arguments)

    def bind(self, validated: dict[str, Any]) -> Callable[[], Any]:
        """A zero-argument callable that runs the tool on validated arguments."""
        if "__model__" in validated:
            return lambda: self.fn(validated["__model__"])
        return lambda: self.fn(**validated)


def _tags(tags: Iterable[str], destructive: bool, idempotent: bool) -> frozenset[str]:
    flags = {DESTRUCTIVE: destructive, IDEMPOTENT: idempotent}
    return frozenset(tags) | {tag for tag, on in flags.items() if on}


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] = (),
    destructive: bool = False,
    idempotent: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT,
    middleware: Sequence[Any] = (),
    result: Any = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Decorator: ``@tool`` or ``@tool(tags={"read"}, timeout=5)`` turns a function into a ``Tool``."""
    if fn is not None:
        return Tool.from_function(fn)
    return lambda f: Tool.from_function(f, **options)


def as_tool(obj: Any) -> Tool:
    """A ``Tool`` from a Tool or a plain callable."""
    return obj if isinstance(obj, Tool) else Tool.from_function(obj)


class ToolRegistry:
    """Named tools with per-run allow-lists by tag."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self.register_all(tools)

    def register(self, item: Tool | Callable[..., Any]) -> Tool:
        t = as_tool(item)
        if t.name in self._tools:
            raise ToolDefinitionError(t.name, [f"a tool named {t.name!r} is already registered"])
        self._tools[t.name] = t
        return t

    def register_all(self, items: Iterable[Tool | Callable[..., Any]]) -> None:
        """Register several tools; every problem (bad definitions, duplicates) is reported at once."""
        built: list[Tool] = []
        problems: list[str] = []
        for item in items:
            try:
                built.append(as_tool(item))
            except ToolDefinitionError as exc:
                problems += [f"{exc.name}: {p}" for p in exc.problems]
        seen = set(self._tools)
        for t in built:
            if t.name in seen:
                problems.append(f"{t.name}: a tool named {t.name!r} is already registered")
            seen.add(t.name)
        if problems:
            raise ToolDefinitionError(", ".join(sorted({p.split(':')[0] for p in problems})), problems)
        for t in built:
            self._tools[t.name] = t

    def get(self, name: str, allow: Sequence[str] | None = None) -> Tool:
        """The tool called ``name``; ``UnknownToolError`` lists what exists, ``ToolNotAllowed`` if filtered out."""
        if name not in self._tools:
            raise UnknownToolError(name, [t.name for t in self.list(allow)])
        t = self._tools[name]
        if not _allowed(t, allow):
            raise ToolNotAllowed(f"tool {name!r} is not allowed here (allowed tags: {sorted(allow or [])})")
        return t

    def list(self, allow: Sequence[str] | None = None) -> list[Tool]:
        """Tools whose tags are all within ``allow`` (``None``: every tool)."""
        return [t for t in self._tools.values() if _allowed(t, allow)]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Any:
        return iter(self._tools.values())


def _allowed(t: Tool, allow: Sequence[str] | None) -> bool:
    # Untagged tools count as plain reads, so an allow-list of {"read"} still sees them;
    # "idempotent" says how a tool may be run, not who may run it.
    return allow is None or ((t.tags - {IDEMPOTENT}) or {"read"}) <= set(allow)
