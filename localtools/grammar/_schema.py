"""Grammar rules for JSON values that match a JSON Schema, in one of two layouts.

``compact`` is what ``json.dumps`` writes by default (``", "`` and ``": "``), which is what chat
templates render for past calls. ``natural`` also admits the layout models write on their own:
a newline and indentation after an opening bracket, after a comma and before a closing bracket
(each at most one newline and 20 spaces or tabs, so nothing can run away). Keys come in schema
order; optional keys may be skipped; no other keys are allowed.
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import UnsupportedSchema
from ._expr import Chars, Expr, Grammar, Lit, Ref, Repeat, alt, seq

__all__ = ["LAYOUTS", "SchemaGrammar", "UnsupportedSchema", "layout_whitespace", "object_members"]

LAYOUTS = ("compact", "natural")
_INDENT = seq(Lit("\n"), Repeat(Chars(" \\t"), 0, 20))


def layout_whitespace(grammar: Grammar, layout: str) -> tuple[Expr, Expr]:
    """(inside, separator): the whitespace after an opening / before a closing bracket, and after a comma."""
    if layout == "compact":
        return Lit(""), Lit(" ")
    if layout != "natural":
        raise ValueError(f"unknown JSON layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if "ws-in" not in grammar.rules:
        grammar.add("ws-in", Repeat(_INDENT, 0, 1))
        grammar.add("ws-sep", alt(Lit(" "), _INDENT))
    return Ref("ws-in"), Ref("ws-sep")

_STRING_CHAR = Chars('^"\\\\\\x00-\\x1f')
_ESCAPE = seq(Lit("\\"), alt(Chars('"\\\\/bfnrt'), seq(Lit("u"), Repeat(Chars("0-9a-fA-F"), 4, 4))))
_INT = seq(Repeat(Lit("-"), 0, 1), alt(Chars("0-9"), seq(Chars("1-9"), Repeat(Chars("0-9"), 1, 15))))
_FRAC = Repeat(seq(Lit("."), Repeat(Chars("0-9"), 1, 16)), 0, 1)
_EXP = Repeat(seq(Chars("eE"), Repeat(Chars("-+"), 0, 1), Repeat(Chars("0-9"), 1, 3)), 0, 1)


class SchemaGrammar:
    """Adds rules to ``grammar`` for schemas; identical schemas share one rule."""

    def __init__(self, grammar: Grammar, layout: str = "compact") -> None:
        self.g = grammar
        self._cache: dict[str, Ref] = {}
        self._defs: dict[str, Any] = {}
        self._in, sep = layout_whitespace(grammar, layout)
        self._comma = seq(Lit(","), sep)

    def _bracketed(self, open_: str, body: Expr, close: str) -> Expr:
        return seq(Lit(open_), self._in, body, self._in, Lit(close))

    # -- primitives, each defined once ----------------------------------------------------------
    def _prim(self, name: str, expr: Expr) -> Ref:
        if name not in self.g.rules:
            self.g.add(name, expr)
        return Ref(name)

    def string(self) -> Ref:
        char = self._prim("json-char", alt(_STRING_CHAR, _ESCAPE))
        return self._prim("json-string", seq(Lit('"'), Repeat(char), Lit('"')))

    def integer(self) -> Ref:
        return self._prim("json-int", _INT)

    def number(self) -> Ref:
        return self._prim("json-number", seq(_INT, _FRAC, _EXP))

    def boolean(self) -> Ref:
        return self._prim("json-bool", alt(Lit("true"), Lit("false")))

    def any_value(self) -> Ref:
        if "json-value" not in self.g.rules:
            self.g.add("json-value", Lit(""))  # placeholder, filled below (the value is recursive)
            value = Ref("json-value")
            member = seq(self.string(), Lit(": "), value)
            obj = self._bracketed("{", Repeat(seq(member, Repeat(seq(self._comma, member))), 0, 1), "}")
            arr = self._bracketed("[", Repeat(seq(value, Repeat(seq(self._comma, value))), 0, 1), "]")
            self.g.rules["json-value"] = alt(
                self._prim("json-object", obj), self._prim("json-array", arr), self.string(), self.number(),
                self.boolean(), Lit("null"),
            )
        return Ref("json-value")

    # -- schemas ----------------------------------------------------------------------------------
    def rule(self, schema: Any, hint: str) -> Ref:
        """A rule matching JSON text valid under ``schema``; ``hint`` names it."""
        if isinstance(schema, dict) and "$defs" in schema:
            self._defs.update(schema["$defs"])
        key = json.dumps(schema, sort_keys=True, default=str)
        if key in self._cache:
            return self._cache[key]
        name = self.g.unique_name(hint)
        ref = self.g.add(name, Lit(""))  # reserve the name first: schemas may be recursive
        self._cache[key] = ref
        self.g.rules[name] = self._expr(schema, name)
        return ref

    def _expr(self, schema: Any, name: str) -> Expr:
        if schema is True or schema == {} or schema is None:
            return self.any_value()
        if schema is False:
            raise UnsupportedSchema(f"{name}: the schema 'false' admits no value")
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"{name}: a schema must be an object, got {schema!r}")
        if "$ref" in schema:
            target = schema["$ref"]
            if not isinstance(target, str) or not target.startswith(("#/$defs/", "#/definitions/")):
                raise UnsupportedSchema(f"{name}: only local $ref to #/$defs/... is supported, got {target!r}")
            sub = self._defs.get(target.split("/")[-1])
            if sub is None:
                raise UnsupportedSchema(f"{name}: $ref {target!r} has no definition")
            return self.rule(sub, target.split("/")[-1])
        if "const" in schema:
            return Lit(json.dumps(schema["const"], ensure_ascii=False))
        if "enum" in schema:
            values = schema["enum"]
            if not values:
                raise UnsupportedSchema(f"{name}: empty enum")
            return alt(*(Lit(json.dumps(v, ensure_ascii=False)) for v in values))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                base = {k: v for k, v in schema.items() if k not in (key, "description", "default", "title")}
                return alt(*(self.rule({**base, **s} if isinstance(s, dict) else s, f"{name}-{i}")
                             for i, s in enumerate(schema[key])))
        if "allOf" in schema:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                if isinstance(part, dict) and "$ref" in part:
                    part = self._defs.get(part["$ref"].split("/")[-1], {})
                for k, v in part.items():
                    if k == "properties":
                        merged["properties"] = {**merged.get("properties", {}), **v}
                    elif k == "required":
                        merged["required"] = [*merged.get("required", []), *v]
                    else:
                        merged.setdefault(k, v)
            return self._expr(merged, name)
        kind = schema.get("type")
        if isinstance(kind, list):
            return alt(*(self.rule({**schema, "type": t}, f"{name}-{t}") for t in kind))
        if kind == "string":
            return self._string(schema)
        if kind == "integer":
            return self.integer()
        if kind == "number":
            return self.number()
        if kind == "boolean":
            return self.boolean()
        if kind == "null":
            return Lit("null")
        if kind == "array" or "items" in schema:
            return self._array(schema, name)
        if kind == "object" or "properties" in schema:
            return self._object(schema, name)
        if kind is None:
            return self.any_value()
        raise UnsupportedSchema(f"{name}: unsupported type {kind!r}")

    def _string(self, schema: dict[str, Any]) -> Expr:
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if lo is None and hi is None:
            return self.string()
        char = self._prim("json-char", alt(_STRING_CHAR, _ESCAPE))
        return seq(Lit('"'), Repeat(char, int(lo or 0), None if hi is None else int(hi)), Lit('"'))

    def _array(self, schema: dict[str, Any], name: str) -> Expr:
        item = self.rule(schema.get("items", {}), f"{name}-item")
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        if hi is not None and int(hi) == 0:
            return Lit("[]")
        rest_hi = None if hi is None else int(hi) - 1
        rest = Repeat(seq(self._comma, item), max(lo - 1, 0), rest_hi)
        body = seq(item, rest)
        return self._bracketed("[", body if lo > 0 else Repeat(body, 0, 1), "]")

    def _object(self, schema: dict[str, Any], name: str) -> Expr:
        props, required, free = object_members(schema, name)
        if not props:
            if free is None:
                return Lit("{}")
            # A free-form dict: string keys, values per additionalProperties (any JSON if unset).
            value = self.rule(free, f"{name}-value")
            member = seq(self.string(), Lit(": "), value)
            return self._bracketed("{", Repeat(seq(member, Repeat(seq(self._comma, member))), 0, 1), "}")
        members = [seq(Lit(json.dumps(k, ensure_ascii=False) + ": "), self.rule(v, f"{name}-{k}")) for k, v in props.items()]
        return self._bracketed("{", self.members(name, members, [k in required for k in props], self._comma), "}")

    def members(self, name: str, members: list[Expr], required: list[bool], comma: Expr) -> Expr:
        """``members`` in order, each optional unless ``required``, ``comma`` between two."""
        # first[i]: members i.. when none has been written yet; rest[i]: after one was written.
        # One rule pair per member keeps the grammar linear in their number.
        first: list[Expr] = [Lit("")] * (len(members) + 1)
        rest: list[Expr] = [Lit("")] * (len(members) + 1)
        for i in range(len(members) - 1, -1, -1):
            after = rest[i + 1]
            with_key_rest = seq(comma, members[i], after)
            with_key_first = seq(members[i], after)
            if required[i]:
                rest[i] = with_key_rest
                first[i] = with_key_first
            else:
                rest[i] = self._named(f"{name}-r{i}", alt(with_key_rest, rest[i + 1]))
                first[i] = self._named(f"{name}-f{i}", alt(with_key_first, first[i + 1]))
        return first[0]

    def resolve(self, schema: Any, name: str) -> Any:
        """``schema`` with a local ``$ref`` followed (its definitions are remembered on the way)."""
        if isinstance(schema, dict) and "$defs" in schema:
            self._defs.update(schema["$defs"])
        while isinstance(schema, dict) and "$ref" in schema:
            target = schema["$ref"]
            sub = self._defs.get(str(target).split("/")[-1]) if str(target).startswith(("#/$defs/", "#/definitions/")) else None
            if sub is None:
                raise UnsupportedSchema(f"{name}: $ref {target!r} has no local definition")
            schema = sub
        return schema

    def _named(self, base: str, expr: Expr) -> Expr:
        if isinstance(expr, Lit):
            return expr
        return self.g.add(self.g.unique_name(base), expr)


def object_members(schema: dict[str, Any], name: str) -> tuple[dict[str, Any], set[str], Any]:
    """(properties, required keys, the schema of a free-form dict's values or ``None``)."""
    props: dict[str, Any] = dict(schema.get("properties") or {})
    required = set(schema.get("required") or [])
    extra = schema.get("additionalProperties")
    missing = [k for k in schema.get("required") or [] if k not in props]
    if missing:
        if extra is False:
            raise UnsupportedSchema(f"{name}: required keys {missing} are not in 'properties' and no other keys are allowed")
        # Required but undescribed keys must be present; any JSON value will do (BFCL has these).
        props.update({k: extra if isinstance(extra, dict) else {} for k in missing})
    if props:
        return props, required, None
    # An explicit empty "properties" means "no arguments" in tool specs; only an
    # additionalProperties schema (or a bare {"type": "object"}) opens a free-form dict.
    if extra is False or ("properties" in schema and extra in (None, False)):
        return {}, set(), None
    return {}, set(), extra if isinstance(extra, dict) else {}
