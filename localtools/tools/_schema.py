"""JSON Schema for tool parameters, built from signatures, docstrings and pydantic models."""

from __future__ import annotations

import copy
import inspect
import re
import typing
from collections.abc import Callable, Iterator
from typing import Any

import docstring_parser
import jsonschema
import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ..grammar._regex import InvalidPattern, read
from ..grammar._schema import budget_spent

__all__ = ["MAX_SCHEMA_DEPTH", "MAX_SCHEMA_OBJECTS", "FunctionSchema", "clean_schema", "function_schema", "model_schema",
           "name_problem", "schema_problem", "spec_problems"]

#: OpenAI's tool-name rule, plus "." (BFCL's names and many real APIs use dotted names).
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: The deepest nesting of objects and arrays a tool's parameters may have. Every walk of a schema
#: (the validator, the grammar builder, the template's JSON dump) recurses, so a deeper one is
#: refused before any of them could run out of stack.
MAX_SCHEMA_DEPTH = 40
#: The most objects one schema may hold. Checking a schema against its metaschema (jsonschema)
#: takes about 0.2 ms an object: a larger one (a 4 MB fan-out of 100k objects: 20 s) is refused
#: before that runs, so no request holds a thread that long.
MAX_SCHEMA_OBJECTS = 5_000


def name_problem(name: Any) -> str | None:
    """What is wrong with a tool name, or ``None``."""
    if isinstance(name, str) and NAME_RE.match(name):
        return None
    return f"name {name!r} must be 1-64 letters, digits, '_', '-' or '.'"


def _too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _object_past_limit(value: Any) -> str | None:
    """The JSON pointer of the object past ``MAX_SCHEMA_OBJECTS`` in ``value`` (document order), or ``None``."""
    stack: list[tuple[Any, str]] = [(value, "")]
    count = 0
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            count += 1
            if count > MAX_SCHEMA_OBJECTS:
                return path or "/"
            stack.extend((v, f"{path}/{_escape(str(k))}")
                         for k, v in reversed(list(item.items())) if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend((v, f"{path}/{i}") for i, v in reversed(list(enumerate(item))) if isinstance(v, (dict, list)))
    return None


def _patterns(schema: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON pointer, pattern) for each ``pattern`` and ``patternProperties`` key, in document
    order; data (enum, const, default, examples) is not looked into."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((v, f"{path}/{i}") for i, v in reversed(list(enumerate(node))))
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("pattern"), str):
            yield f"{path}/pattern", node["pattern"]
        if isinstance(node.get("patternProperties"), dict):
            yield from ((f"{path}/patternProperties", k) for k in node["patternProperties"])
        stack.extend((v, f"{path}/{_escape(str(k))}") for k, v in reversed(list(node.items()))
                     if k not in _DATA and isinstance(v, (dict, list)))


def _pattern_problem(schema: dict[str, Any], what: str) -> str | None:
    """A pattern in ``schema`` that is no ECMA-262 regex, or the build budget spent reading them."""
    for path, pattern in _patterns(schema):
        if (seconds := budget_spent()) is not None:
            return f"{what} took more than {seconds:g} s to check (the build budget; stopped at {path})"
        try:
            read(pattern)
        except InvalidPattern as exc:
            return f"{what} is not a valid JSON Schema: {path}: {pattern!r} is not an ECMA-262 regex ({exc})"
    return None


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


_DATA = frozenset({"enum", "const", "default", "examples"})


def spec_problems(function: dict[str, Any]) -> list[tuple[str, str]]:
    """Every problem with an OpenAI-style function spec (``{"name", "description", "parameters"}``),
    each as (the field, what is wrong); ``Tool.from_schema`` and the server both check with it."""
    problems: list[tuple[str, str]] = []
    name = function.get("name")
    if (problem := name_problem(name)) is not None:
        problems.append(("name", problem))
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(("description", "'description' must be a string"))
    params = function.get("parameters")
    if params is None:
        return problems
    if not isinstance(params, dict):
        problems.append(("parameters", "'parameters' must be a JSON Schema object"))
        return problems
    problem = schema_problem(params, "'parameters'") or _not_an_object(params, params, "'parameters'", 0)
    if problem is not None:
        problems.append(("parameters", problem))
    return problems


#: Most ``$ref`` hops and nested ``allOf``/``anyOf``/``oneOf`` read to tell what a tool's arguments are.
_MAX_RESOLVE = 16


def _not_an_object(schema: Any, root: dict[str, Any], where: str, hops: int) -> str | None:
    """Why the arguments ``schema`` admits need not be a JSON object (a call's arguments are one),
    or ``None``: its type, where its ``$ref`` leads, and each branch of its ``anyOf``/``oneOf``
    (every one) and ``allOf`` (one is enough) are read, not only the top-level ``type``."""
    if hops > _MAX_RESOLVE:
        return f"{where} refers or nests more than {_MAX_RESOLVE} levels deep before it says it is an object"
    if schema is True or schema == {}:
        return None  # any arguments: the grammar writes an object
    if not isinstance(schema, dict):
        return f"{where} must be an object schema"
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    if kinds and set(kinds) != {"object"}:
        return f"{where} must have type 'object', not {kind!r}: a call's arguments are a JSON object"
    for key in ("const", "enum"):
        values = [schema[key]] if key == "const" and key in schema else schema.get(key) if key == "enum" else None
        if isinstance(values, list) and any(not isinstance(v, dict) for v in values):
            return f"{where}.{key} admits a value that is not an object: a call's arguments are a JSON object"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _local_ref(root, ref)
        if target is None:
            return f"{where}.$ref {ref!r} does not point into the tool's own schema"
        if (problem := _not_an_object(target, root, f"{where} (through $ref {ref!r})", hops + 1)) is not None:
            return problem
    if kinds:
        return None
    for key in ("anyOf", "oneOf"):
        for i, branch in enumerate(schema.get(key) or []):
            if (problem := _not_an_object(branch, root, f"{where}.{key}[{i}]", hops + 1)) is not None:
                return problem
    branches = [b for b in schema.get("allOf") or [] if isinstance(b, dict | bool)]
    found = [_not_an_object(b, root, f"{where}.allOf[{i}]", hops + 1) for i, b in enumerate(branches)]
    if found and all(f is not None for f in found):
        return found[0]
    return None


def _local_ref(root: dict[str, Any], ref: str) -> Any:
    """What a local ``$ref`` (``#/$defs/A``, ``#``) points at in ``root``, or ``None``."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def schema_problem(schema: Any, what: str) -> str | None:
    """What is wrong with ``schema`` as a JSON Schema (an object or a boolean; ``what`` names it
    in the message), or ``None``."""
    if not isinstance(schema, (dict, bool)):
        return f"{what} must be a JSON Schema object"
    if isinstance(schema, dict) and _too_deep(schema, MAX_SCHEMA_DEPTH):
        return f"{what} nests objects and arrays more than {MAX_SCHEMA_DEPTH} levels deep"
    if isinstance(schema, dict) and (past := _object_past_limit(schema)) is not None:
        return (f"{what} holds more than {MAX_SCHEMA_OBJECTS} schema objects (the next at {past}): more than "
                "the schema check reads in time")
    if isinstance(schema, dict) and (problem := _pattern_problem(schema, what)) is not None:
        return problem
    # The draft the schema names in "$schema" (2020-12 when it names none); its patterns were read
    # above, as ECMA-262, by the reader the grammar and the check share (not as Python's regexes).
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    formats = jsonschema.FormatChecker(())
    formats.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k != "regex"}
    try:
        cls.check_schema(schema, format_checker=formats)
    except jsonschema.SchemaError as exc:
        return f"{what} is not a valid JSON Schema: {exc.message}"
    return None

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
