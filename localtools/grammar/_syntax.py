"""A call's arguments in the syntaxes other than a JSON object, from the same JSON Schema.

- ``xml`` (Qwen3.5, Qwen3-Coder): one ``<parameter=K>`` block per argument; a string is written
  raw up to its closing tag, any other value as templates print it (``4``, ``True``, JSON for
  lists and objects);
- ``python`` (LFM2): keyword arguments ``k=v`` of Python literals (``'text'``, ``True``, ``None``,
  lists); an object argument is JSON, as templates print it;
- ``gemma4``: ``{k:v,...}`` with bare keys in sorted order and strings in ``<|"|>`` quotes.

Keys come in schema order (``gemma4``: sorted, as its template writes them); optional ones may be
left out; no other keys are allowed. ``localtools._args`` reads each syntax back into JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .._errors import UnsupportedSchema
from ._expr import Chars, Expr, Lit, Ref, Repeat, Until, alt, seq
from ._schema import SchemaGrammar, object_members

__all__ = ["GEMMA_QUOTE", "XML_CLOSE", "args_rule", "python_literal"]

#: What ends an ``xml`` parameter's value.
XML_CLOSE = "\n</parameter>"
#: Gemma 4's string quote.
GEMMA_QUOTE = '<|"|>'
# Escapes Python reads without a warning; any other character stands for itself.
_PY_CHAR = alt(Chars("^'\\\\\\x00-\\x1f"), seq(Lit("\\"), Chars("'\"\\\\nrt0")))
_NAME_CHARS = Chars("a-zA-Z0-9_")
#: Keys the python and gemma4 syntaxes can write bare (a keyword argument, a Gemma 4 key).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A free-form object's key in those syntaxes: an identifier, as their readers take it back.
_FREE_KEY = seq(Chars("a-zA-Z_"), Repeat(_NAME_CHARS, 0, 63))


def _bare_keys(props: dict[str, Any], hint: str, syntax: str) -> None:
    bad = [k for k in props if not _IDENTIFIER.fullmatch(k)]
    if bad:
        raise UnsupportedSchema(f"{hint}: {syntax} arguments write keys bare; {bad} are not identifiers")


def python_literal(value: Any) -> str:
    """``value`` as a Python literal, the way a template's ``| string`` prints it."""
    return repr(value)


def args_rule(syntax: str, sg: SchemaGrammar, schema: Any, hint: str) -> Expr:
    """The rule for a call's arguments (the tool's ``parameters`` schema) in ``syntax``."""
    schema = schema or {"type": "object", "properties": {}}
    sg.document(schema)
    schema = sg.resolve(schema, hint)
    if syntax == "json":
        if isinstance(schema, dict) and "type" not in schema:
            schema = {**schema, "type": "object"}  # a call's arguments are an object
        return sg.rule(schema, hint)
    if not isinstance(schema, dict) or (schema.get("type", "object") != "object" and "properties" not in schema):
        raise UnsupportedSchema(f"{hint}: {syntax} arguments need an object schema, got {schema!r}")
    if syntax == "xml":
        return _Xml(sg).arguments(schema, hint)
    if syntax == "python":
        return _Python(sg).arguments(schema, hint)
    if syntax == "gemma4":
        return _Gemma(sg).value(schema, hint)
    raise UnsupportedSchema(f"{hint}: unknown argument syntax {syntax!r}")


def _kind(schema: Any) -> str | None:
    """The one JSON type a schema's values have, if it says (enums and consts included)."""
    if not isinstance(schema, dict):
        return None
    values = schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else None
    if values is not None:
        kinds = {"string" if isinstance(v, str) else "other" for v in values}
        return "string" if kinds == {"string"} else None
    kind = schema.get("type")
    if kind is None and "properties" in schema:
        return "object"
    return kind if isinstance(kind, str) else None


def _bounds(schema: Any) -> tuple[int, int | None] | None:
    """A string schema's (minLength, maxLength), if it sets either."""
    if not isinstance(schema, dict) or ("minLength" not in schema and "maxLength" not in schema):
        return None
    hi = schema.get("maxLength")
    return int(schema.get("minLength") or 0), None if hi is None else int(hi)


def _choices(schema: dict[str, Any]) -> list[Any] | None:
    return schema["enum"] if "enum" in schema else [schema["const"]] if "const" in schema else None


class _Xml:
    def __init__(self, sg: SchemaGrammar) -> None:
        self.sg = sg

    def arguments(self, schema: dict[str, Any], hint: str) -> Expr:
        props, required, free = object_members(schema, hint)
        if not props:
            if free is None:
                return Lit("")
            name = Repeat(_NAME_CHARS, 1, 64)
            block = seq(Lit("<parameter="), name, Lit(">\n"), Until(XML_CLOSE), Lit("\n"))
            return Repeat(block, 0, None)
        blocks = [seq(Lit(f"<parameter={k}>\n"), self.value(self.sg.resolve(v, f"{hint}-{k}"), f"{hint}-{k}"))
                  for k, v in props.items()]
        # No separator: each block ends with its own line break.
        return self.sg.members(hint, blocks, [k in required for k in props], Lit(""))

    def value(self, schema: Any, hint: str) -> Expr:
        """A value and its closing tag."""
        close = Lit(XML_CLOSE + "\n")
        schema = self.sg.resolve(schema, hint)
        kind = _kind(schema)
        choices = _choices(schema) if isinstance(schema, dict) else None
        if choices is not None:
            return alt(*(Lit(_xml_text(v) + XML_CLOSE + "\n") for v in choices))
        if (branches := _branches(schema, hint, self.value)) is not None:
            return branches
        if kind == "integer":
            return seq(self.sg.integer(), close)
        if kind == "number":
            return seq(self.sg.number(), close)
        if kind == "boolean":
            return seq(alt(Lit("True"), Lit("False"), Lit("true"), Lit("false")), close)
        if kind == "null":
            return seq(alt(Lit("None"), Lit("null")), close)
        if kind in ("array", "object"):
            return seq(self.sg.rule(schema, hint), close)
        if kind == "string" and (bounds := _bounds(schema)) is not None:
            # Counted characters cannot also be kept from spelling the closing tag: a string of
            # bounded length is one line.
            return seq(Repeat(Chars("^\\n"), *bounds), close)
        # A string, or a value of no single type: raw text, typed when read back.
        return seq(Until(XML_CLOSE), Lit("\n"))


def _xml_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, type(None), int, float)):
        return python_literal(value)
    return json.dumps(value, ensure_ascii=False)


class _Python:
    def __init__(self, sg: SchemaGrammar) -> None:
        self.sg = sg
        self.comma = Lit(", ")

    def string(self) -> Ref:
        return self.sg._prim("py-string", seq(Lit("'"), Repeat(_PY_CHAR), Lit("'")))

    def arguments(self, schema: dict[str, Any], hint: str) -> Expr:
        props, required, free = object_members(schema, hint)
        if not props:
            if free is None:
                return Lit("")
            member = seq(_FREE_KEY, Lit("="), self.value(free, f"{hint}-value"))
            return Repeat(seq(member, Repeat(seq(self.comma, member))), 0, 1)
        _bare_keys(props, hint, "python")
        members = [seq(Lit(f"{k}="), self.value(v, f"{hint}-{k}")) for k, v in props.items()]
        return self.sg.members(hint, members, [k in required for k in props], self.comma)

    def value(self, schema: Any, hint: str) -> Expr:
        schema = self.sg.resolve(schema, hint)
        kind = _kind(schema)
        choices = _choices(schema) if isinstance(schema, dict) else None
        if choices is not None:
            return alt(*(Lit(python_literal(v)) for v in choices))
        if (branches := _branches(schema, hint, self.value)) is not None:
            return branches
        scalar = _scalar(self.sg, kind, schema, self.string(), lambda lo, hi: seq(Lit("'"), Repeat(_PY_CHAR, lo, hi), Lit("'")),
                         {"boolean": alt(Lit("True"), Lit("False")), "null": Lit("None")})
        if scalar is not None:
            return scalar
        if kind == "array" and isinstance(schema, dict):
            return _array(self.value(schema.get("items", {}), f"{hint}-item"), schema, self.comma)
        # Objects are printed as JSON (``| tojson``), as is anything without one type.
        return self.sg.rule(schema, hint)


class _Gemma:
    def __init__(self, sg: SchemaGrammar) -> None:
        self.sg = sg
        self.comma = Lit(",")

    def string(self) -> Ref:
        return self.sg._prim("gemma-string", seq(Lit(GEMMA_QUOTE), Until(GEMMA_QUOTE)))

    def any_value(self) -> Ref:
        if "gemma-value" not in self.sg.g.rules:
            self.sg.g.add("gemma-value", Lit(""))  # recursive: filled below
            value = Ref("gemma-value")
            member = seq(_FREE_KEY, Lit(":"), value)
            obj = seq(Lit("{"), Repeat(seq(member, Repeat(seq(self.comma, member))), 0, 1), Lit("}"))
            arr = seq(Lit("["), Repeat(seq(value, Repeat(seq(self.comma, value))), 0, 1), Lit("]"))
            self.sg.g.rules["gemma-value"] = alt(obj, arr, self.string(), self.sg.number(), Lit("true"), Lit("false"),
                                                 Lit("None"), Lit("null"))
        return Ref("gemma-value")

    def value(self, schema: Any, hint: str) -> Expr:
        schema = self.sg.resolve(schema, hint)
        if not isinstance(schema, dict) or schema in ({}, True):
            return self.any_value()
        choices = _choices(schema)
        if choices is not None:
            return alt(*(Lit(_gemma_literal(v)) for v in choices))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return alt(*(self.value(s, f"{hint}-{i}") for i, s in enumerate(schema[key])))
        kind = schema.get("type")
        if isinstance(kind, list):
            return alt(*(self.value({**schema, "type": t}, f"{hint}-{t}") for t in kind))
        if kind is None and "properties" in schema:
            kind = "object"
        # A string of bounded length holds no "<", so it cannot spell the closing quote.
        scalar = _scalar(self.sg, kind, schema, self.string(),
                         lambda lo, hi: seq(Lit(GEMMA_QUOTE), Repeat(Chars("^<"), lo, hi), Lit(GEMMA_QUOTE)),
                         {"boolean": alt(Lit("true"), Lit("false")), "null": alt(Lit("None"), Lit("null"))})
        if scalar is not None:
            return scalar
        if kind == "array":
            return _array(self.value(schema.get("items", {}), f"{hint}-item"), schema, self.comma)
        if kind == "object":
            props, required, free = object_members(schema, hint)
            if not props:
                if free is None:
                    return Lit("{}")
                member = seq(_FREE_KEY, Lit(":"), self.value(free, f"{hint}-value"))
                return seq(Lit("{"), Repeat(seq(member, Repeat(seq(self.comma, member))), 0, 1), Lit("}"))
            _bare_keys(props, hint, "gemma4")
            # Gemma 4's template writes keys sorted, case aside.
            keys = sorted(props, key=str.lower)
            members = [seq(Lit(f"{k}:"), self.value(props[k], f"{hint}-{k}")) for k in keys]
            body = self.sg.members(hint, members, [k in required for k in keys], self.comma)
            return seq(Lit("{"), body, Lit("}"))
        return self.any_value()


def _scalar(sg: SchemaGrammar, kind: str | None, schema: Any, string: Expr, bounded: Callable[[int, int | None], Expr],
            words: dict[str, Expr]) -> Expr | None:
    """A string, number, boolean or null in a syntax: ``string`` (``bounded`` when the schema
    bounds its length) and the syntax's ``words`` for booleans and null; ``None`` for other kinds."""
    if kind == "string":
        bounds = _bounds(schema)
        return string if bounds is None else bounded(*bounds)
    if kind == "integer":
        return sg.integer()
    if kind == "number":
        return sg.number()
    return words.get(kind or "")


def _branches(schema: Any, hint: str, value: Callable[[Any, str], Expr]) -> Expr | None:
    """The alternatives of an ``anyOf`` / ``oneOf`` or a list of types, each written by ``value``."""
    if not isinstance(schema, dict):
        return None
    for key in ("anyOf", "oneOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k not in (key, "description", "default", "title")}
            return alt(*(value({**base, **s} if isinstance(s, dict) else s, f"{hint}-{i}")
                         for i, s in enumerate(schema[key])))
    if isinstance(schema.get("type"), list):
        return alt(*(value({**schema, "type": t}, f"{hint}-{t}") for t in schema["type"]))
    return None


def _array(item: Expr, schema: dict[str, Any], comma: Expr) -> Expr:
    """``[item, ...]`` within the schema's minItems / maxItems."""
    lo, hi = int(schema.get("minItems", 0)), schema.get("maxItems")
    if hi is not None and int(hi) == 0:
        return Lit("[]")
    body = seq(item, Repeat(seq(comma, item), max(lo - 1, 0), None if hi is None else int(hi) - 1))
    return seq(Lit("["), body if lo > 0 else Repeat(body, 0, 1), Lit("]"))


def _gemma_literal(value: Any) -> str:
    if isinstance(value, str):
        return GEMMA_QUOTE + value + GEMMA_QUOTE
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "None"
    if isinstance(value, list):
        return "[" + ",".join(_gemma_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma_literal(value[k])}" for k in sorted(value, key=str.lower)) + "}"
    return json.dumps(value)
