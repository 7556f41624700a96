"""JSON Schema for tool parameters, built from signatures, docstrings and pydantic models."""

from __future__ import annotations

import copy
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

import docstring_parser
import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = ["FunctionSchema", "clean_schema", "function_schema", "model_schema"]

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

# Schema keywords whose value is a schema / a map or list of schemas; anything else
# (notably the *names* under "properties") is left alone by the cleaners below.
_SUB_SCHEMA = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")


class FunctionSchema(typing.NamedTuple):
    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel]
    #: Parameter names in signature order, passed to the function as keywords.
    param_names: tuple[str, ...]


def _walk(schema: Any, fn: Callable[[dict[str, Any]], None]) -> None:
    if not isinstance(schema, dict):
        return
    fn(schema)
    for key in _SUB_SCHEMA:
        _walk(schema.get(key), fn)
    for key in _SCHEMA_MAPS:
        for sub in (schema.get(key) or {}).values():
            _walk(sub, fn)
    for key in _SCHEMA_LISTS:
        for sub in schema.get(key) or []:
            _walk(sub, fn)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``$ref``s by their definitions unless a definition is recursive."""
    defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(n, stack) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.split("/")[-1]
            if name in stack or name not in defs:
                raise _Recursive
            merged = {**resolve(defs[name], (*stack, name)), **{k: v for k, v in node.items() if k != "$ref"}}
            return merged
        return {k: (v if k in ("enum", "const", "default", "examples") else resolve(v, stack)) for k, v in node.items()}

    try:
        out = resolve({k: v for k, v in schema.items() if k != "$defs"}, ())
    except _Recursive:
        return schema
    return typing.cast(dict[str, Any], out)


class _Recursive(Exception):
    pass


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` noise and inline non-recursive ``$defs`` (small models read it better)."""
    schema = copy.deepcopy(schema)

    def strip(node: dict[str, Any]) -> None:
        node.pop("title", None)
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]

    _walk(schema, strip)
    return _inline_refs(schema)


def _docs(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    parsed = docstring_parser.parse(doc)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: (p.description or "").strip() for p in parsed.params}
    return "\n\n".join(parts).strip(), params


def function_schema(fn: Callable[..., Any], name: str) -> tuple[FunctionSchema | None, list[str]]:
    """Build the parameter schema of ``fn``; returns ``(schema, problems)``."""
    problems: list[str] = []
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        return None, [f"cannot read the signature: {exc}"]
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, say
        return None, [f"cannot resolve type hints: {exc}"]
    description, param_docs = _docs(fn)
    fields: dict[str, Any] = {}
    names: list[str] = []
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            problems.append(f"parameter {pname!r}: *args/**kwargs cannot be described as JSON; name each parameter")
            continue
        if param.kind is param.POSITIONAL_ONLY:
            problems.append(f"parameter {pname!r}: positional-only parameters are not supported")
            continue
        hint = hints.get(pname, inspect.Parameter.empty)
        if hint is inspect.Parameter.empty:
            problems.append(f"parameter {pname!r} has no type hint (e.g. `{pname}: str`)")
            continue
        try:
            TypeAdapter(hint).json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.errors.PydanticInvalidForJsonSchema) as exc:
            problems.append(f"parameter {pname!r}: type {hint!r} has no JSON Schema ({type(exc).__name__})")
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        desc = param_docs.get(pname) or None
        fields[pname] = (hint, Field(default, description=desc))
        names.append(pname)
    for documented in param_docs:
        if documented not in sig.parameters:
            problems.append(f"the docstring documents {documented!r}, which is not a parameter")
    if problems:
        return None, problems
    model = pydantic.create_model(
        f"{name}_arguments", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False), **fields
    )
    params = clean_schema(model.model_json_schema())
    params.setdefault("properties", {})
    params["type"] = "object"
    return FunctionSchema(description, params, model, tuple(names)), []


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The parameter schema for a pydantic model used as a tool's arguments."""
    params = clean_schema(model.model_json_schema())
    params.setdefault("properties", {})
    params["type"] = "object"
    return params
