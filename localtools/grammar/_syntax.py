"""A call's arguments in the syntaxes other than a JSON object, from the same JSON Schema.

- ``xml`` (Qwen3.5, Qwen3-Coder): one ``<parameter=K>`` block per argument; a string is written
  raw up to its closing tag, any other value as templates print it (``4``, ``True``, JSON for
  lists and objects);
- ``python`` (LFM2): keyword arguments ``k=v`` of Python literals (``'text'``, ``True``, ``None``,
  lists); an object argument is JSON, as templates print it;
- ``gemma4``: ``{k:v,...}`` with bare keys in sorted order and strings in ``<|"|>`` quotes;
- ``kv``: ``xml``'s form with a family's own tags (``Family.arg_tags``: the text before a key,
  between key and value, after the value), as GLM's ``<arg_key>K</arg_key>\n<arg_value>V</arg_value>``.

Keys come in schema order (``gemma4``: sorted, as its template writes them); optional ones may be
left out; no other keys are allowed. ``localtools.families._args`` reads each syntax back into JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .._errors import UnsupportedSchema
from ._expr import Chars, Expr, Lit, Ref, Repeat, Until, alt, seq
from ._schema import SchemaGrammar, bounded_value, object_members

__all__ = ["GEMMA_QUOTE", "XML_CLOSE", "XML_TAGS", "args_rule", "python_literal"]

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


#: ``xml``'s tags in ``kv`` terms.
XML_TAGS = ("<parameter=", ">\n", XML_CLOSE + "\n")


def args_rule(syntax: str, sg: SchemaGrammar, schema: Any, hint: str, tags: tuple[str, ...] = (),
              values: str = "json") -> Expr:
    """The rule for a call's arguments (the tool's ``parameters`` schema) in ``syntax``
    (``tags``: ``kv``'s; ``values``: how ``kv`` writes lists and objects, "json" or "python")."""
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
        return _Xml(sg, XML_TAGS).arguments(schema, hint)
    if syntax == "kv":
        if len(tags) not in (3, 4) or not all(tags[:2]) or not tags[2].strip():
            raise UnsupportedSchema(f"{hint}: kv arguments need three or four tags (before a key, between key and "
                                    f"value, after a value, the last not blank; between key and a value that is no "
                                    f"string), got {list(tags)}")
        return _Xml(sg, (tags[0], tags[1], tags[2]), tags[3] if len(tags) == 4 else tags[1],
                    values).arguments(schema, hint)
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
    """``xml`` and ``kv``: ``open K mid V close`` per argument; ``close`` up to its trailing
    whitespace is what a raw value may not hold."""

    def __init__(self, sg: SchemaGrammar, tags: tuple[str, str, str], typed_mid: str | None = None,
                 values: str = "json") -> None:
        self.sg = sg
        #: Lists and objects as JSON, or as Python prints them (templates that ``| string`` them).
        self.python = _Python(sg, objects=True) if values == "python" else None
        self.open, self.mid, self.close = tags
        #: Between a key and a value that is no string (DeepSeek's ``string="false"``); ``mid`` in most syntaxes.
        self.typed_mid = self.mid if typed_mid is None else typed_mid
        self.core = self.close.rstrip() or self.close
        self.trail = Lit(self.close[len(self.core):])

    def arguments(self, schema: dict[str, Any], hint: str) -> Expr:
        props, required, free = object_members(schema, hint)
        if not props:
            if free is None:
                return Lit("")
            name = Repeat(_NAME_CHARS, 1, 64)
            block = seq(Lit(self.open), name, alt(Lit(self.mid), Lit(self.typed_mid)), Until(self.core), self.trail)
            return Repeat(block, 0, None)
        blocks = [self._member(k, self.sg.resolve(v, f"{hint}-{k}"), f"{hint}-{k}") for k, v in props.items()]
        # No separator: each block ends with its own closing tag.
        return self.sg.members(hint, blocks, [k in required for k in props], Lit(""))

    def _member(self, key: str, schema: Any, hint: str) -> Expr:
        head = Lit(f"{self.open}{key}")
        if self.typed_mid == self.mid:
            return seq(head, Lit(self.mid), self.value(schema, hint))
        kind = _kind(schema)
        if kind == "string":
            return seq(head, Lit(self.mid), self.value(schema, hint))
        if kind is not None:
            return seq(head, Lit(self.typed_mid), self.value(schema, hint))
        # No one type: a string after the string tag, anything else after the other.
        return seq(head, alt(seq(Lit(self.mid), self.value({"type": "string"}, hint)),
                             seq(Lit(self.typed_mid), self.value(schema, hint))))

    def value(self, schema: Any, hint: str) -> Expr:
        """A value and its closing tag."""
        close = Lit(self.close)
        schema = self.sg.resolve(schema, hint)
        kind = _kind(schema)
        choices = _choices(schema) if isinstance(schema, dict) else None
        if choices is not None:
            return alt(*(Lit(_xml_text(v) + self.close) for v in choices))
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
            return seq(self.python.value(schema, hint) if self.python else self.sg.rule(schema, hint), close)
        if kind == "string" and (bounds := _bounds(schema)) is not None:
            # Counted characters cannot also be kept from spelling the closing tag: a string of
            # bounded length is one line.
            return seq(Repeat(Chars("^\\n"), *bounds), close)
        # A string, or a value of no single type: raw text, typed when read back.
        return seq(Until(self.core), self.trail)


def _xml_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, type(None), int, float)):
        return python_literal(value)
    return json.dumps(value, ensure_ascii=False)


class _Python:
    def __init__(self, sg: SchemaGrammar, *, objects: bool = False) -> None:
        self.sg = sg
        self.comma = Lit(", ")
        #: Objects with properties as Python dicts (``{'k': v}``), not JSON.
        self.objects = objects

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
        if self.objects and kind == "object" and isinstance(schema, dict):
            props, required, free = object_members(schema, hint)
            if props and free is None:
                members = [seq(Lit(f"{python_literal(k)}: "), self.value(v, f"{hint}-{k}")) for k, v in props.items()]
                return seq(Lit("{"), self.sg.members(hint, members, [k in required for k in props], self.comma),
                           Lit("}"))
        # Objects are printed as JSON (``| tojson``), as is anything without one type.
        return self.sg.rule(schema, hint)


class _Gemma:
    def __init__(self, sg: SchemaGrammar) -> None:
        self.sg = sg
        self.comma = Lit(",")

    def string(self) -> Ref:
        return self.sg._prim("gemma-string", seq(Lit(GEMMA_QUOTE), Until(GEMMA_QUOTE)))

    def any_value(self) -> Ref:
        """Any value in Gemma's syntax, nested at most ``MAX_VALUE_DEPTH`` brackets deep."""
        def containers(value: Expr) -> Expr:
            member = seq(_FREE_KEY, Lit(":"), value)
            return alt(seq(Lit("{"), Repeat(seq(member, Repeat(seq(self.comma, member))), 0, 1), Lit("}")),
                       seq(Lit("["), Repeat(seq(value, Repeat(seq(self.comma, value))), 0, 1), Lit("]")))

        scalars = self.sg._prim("gemma-scalar", alt(self.string(), self.sg.number(), Lit("true"), Lit("false"),
                                                    Lit("None"), Lit("null")))
        return bounded_value(self.sg.g, "gemma-value", scalars, containers)

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
