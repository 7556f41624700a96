"""Grammar rules for JSON values that match a JSON Schema, in one of two layouts.

``compact`` is what ``json.dumps`` writes by default (``", "`` and ``": "``), which is what chat
templates render for past calls. ``natural`` also admits the layout models write on their own:
a newline and indentation after an opening bracket, after a comma and before a closing bracket
(each at most one newline and 20 spaces or tabs, so nothing can run away). Declared keys come in
schema order and optional ones may be skipped; undeclared keys follow them where the schema
allows them (``additionalProperties`` or ``patternProperties`` given), and nowhere else: a model
inventing an argument is the commonest broken call.

Every keyword is enforced by the grammar where a context-free grammar says it exactly (types,
``enum``/``const``, ``properties``/``required``, integer ranges, string lengths, ``pattern``,
most ``format``\\s, ``prefixItems``/``items``, item counts, ``anyOf``, ``$ref``), narrowed where
it says part of it (number ranges, ``allOf``, ``oneOf``, dates), and otherwise left to the check
after decoding (``localtools._check``); ``notes`` records which, per keyword path.
"""

from __future__ import annotations

import itertools
import json
import math
from enum import Enum
from typing import Any
from urllib.parse import unquote

from .._errors import UnsupportedSchema
from ._expr import Chars, Expr, Grammar, Lit, Ref, Repeat, alt, seq
from ._formats import EXACT, FORMATS
from ._ranges import int_range, number_range
from ._regex import Untranslatable, canonical_char, chars_expr, pattern_expr, regex_expr

__all__ = ["LAYOUTS", "Enforcement", "SchemaGrammar", "UnsupportedSchema", "layout_whitespace", "object_members"]

LAYOUTS = ("compact", "natural")
_INDENT = seq(Lit("\n"), Repeat(Chars(" \\t"), 0, 20))


class Enforcement(Enum):
    """Who enforces a schema keyword on a call's arguments."""

    #: The grammar: no value that breaks it can be decoded.
    GRAMMAR = "grammar"
    #: The grammar narrows it; the check after decoding enforces the rest.
    NARROWED = "grammar, checked after decoding"
    #: Only the check after decoding (jsonschema, draft 2020-12, formats asserted).
    CHECKED = "checked after decoding"
    #: Nobody: an unknown keyword or format, a remote reference.
    UNSUPPORTED = "unsupported"


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
_TYPES = ("object", "array", "string", "number", "boolean", "null")
#: Keywords that constrain one type only: a schema without "type" that has one constrains that
#: type and leaves the others free.
_TYPED_KEYWORDS = {
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "contains", "minContains", "maxContains", "uniqueItems",
              "unevaluatedItems"),
    "object": ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
               "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "unevaluatedProperties"),
}
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                          "writeOnly", "$schema", "$id", "$anchor", "$defs", "definitions", "$vocabulary"})


def _schema_type(value: Any) -> str:
    """The JSON Schema type of a value (a whole float is an integer, as 2020-12 says)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if value is None:
        return "null"
    kinds: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return kinds.get(type(value), "")


def _fits(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    t = _schema_type(value)
    return t in kinds or (t == "integer" and "number" in kinds)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _spellings(value: Any, fraction: bool = True) -> Expr:
    """The ways a JSON value equal to ``value`` is written: a whole number with or without ".0"
    (with ``fraction``), the keys of a small object in any order."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer() \
            and abs(value) < 2 ** 53:
        whole = str(int(value))
        return alt(Lit(whole), Lit(whole + ".0")) if fraction else Lit(whole)
    if isinstance(value, list):
        parts: list[Expr] = []
        for i, v in enumerate(value):
            parts += [Lit(", ")] if i else []
            parts.append(_spellings(v, fraction))
        return seq(Lit("["), *parts, Lit("]"))
    if isinstance(value, dict):
        orders = list(itertools.permutations(value)) if len(value) <= 4 else [tuple(value)]
        options = []
        for order in orders:
            members: list[Expr] = []
            for i, k in enumerate(order):
                members += [Lit(", ")] if i else []
                members += [Lit(_dump(k) + ": "), _spellings(value[k], fraction)]
            options.append(seq(Lit("{"), *members, Lit("}")))
        return alt(*options)
    return Lit(_dump(value))


def _pointer(path: str, *parts: Any) -> str:
    return path + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


#: Keywords whose evaluation of keys (items) depends on the value: folded in, the keys (items)
#: they evaluated can no longer be told apart.
_EVALUATE_KEYS = ("unevaluatedProperties", "additionalProperties", "patternProperties", "dependentSchemas", "if",
                  "then", "else", "anyOf", "oneOf", "$ref")
_EVALUATE_ITEMS = ("unevaluatedItems", "items", "prefixItems", "contains", "if", "then", "else", "anyOf", "oneOf",
                   "$ref")


def _unfolded(schema: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    """A schema folded from ``parts``: its ``unevaluated*`` kept where the parts only declare
    properties (items) the fold joins, so what was evaluated is what was declared; dropped
    otherwise (the check enforces them), undeclared keys then free."""
    out = dict(schema)
    dicts = [p for p in parts if isinstance(p, dict)]
    if "unevaluatedProperties" in schema and any(k in p for p in dicts for k in _EVALUATE_KEYS):
        del out["unevaluatedProperties"]
        out.setdefault("additionalProperties", True)
    tuples = sum(1 for p in [schema, *dicts] if "prefixItems" in p or "items" in p)
    if "unevaluatedItems" in schema and (tuples > 1 or any(k in p for p in dicts for k in _EVALUATE_ITEMS)):
        del out["unevaluatedItems"]
    return out


def _joined(base: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``base`` and ``part`` as one schema for a branch: properties and required joined, the
    branch's value of any other keyword (valid values meet both, so either is necessary)."""
    out = _unfolded({**base, **part}, [part])
    if isinstance(base.get("properties"), dict) and isinstance(part.get("properties"), dict):
        out["properties"] = {**base["properties"], **part["properties"]}
    if isinstance(base.get("required"), list) and isinstance(part.get("required"), list):
        out["required"] = [*base["required"], *(k for k in part["required"] if k not in base["required"])]
    return out


class SchemaGrammar:
    """Adds rules to ``grammar`` for schemas; identical schemas share one rule."""

    def __init__(self, grammar: Grammar, layout: str = "compact") -> None:
        self.g = grammar
        self._cache: dict[str, Ref] = {}
        self._defs: dict[str, Any] = {}
        self._in, sep = layout_whitespace(grammar, layout)
        self._comma = seq(Lit(","), sep)
        self._root: Any = None
        self._root_key = ""
        self._anchors: dict[str, Any] = {}
        #: (schema path, keyword) -> who enforces it, for what the grammar took on.
        self.notes: dict[tuple[str, str], Enforcement] = {}
        # A schema met again shares its first rule, and so its notes: path -> the first path.
        self._paths: dict[str, str] = {}
        self._aliases: dict[str, str] = {}

    def _bracketed(self, open_: str, body: Expr, close: str) -> Expr:
        return seq(Lit(open_), self._in, body, self._in, Lit(close))

    def _note(self, path: str, keyword: str, how: Enforcement) -> None:
        self.notes.setdefault((path, keyword), how)

    def note_at(self, path: str, keyword: str) -> Enforcement | None:
        """Who enforces ``keyword`` of the schema at ``path``, where the grammar took it on."""
        seen: set[str] = set()
        while path not in seen:
            seen.add(path)
            if (path, keyword) in self.notes:
                return self.notes[(path, keyword)]
            prefix = max((a for a in self._aliases if path == a or path.startswith(a + "/")), key=len, default=None)
            if prefix is None:
                return None
            path = self._aliases[prefix] + path[len(prefix):]
        return None

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

    # -- documents and references ---------------------------------------------------------------
    def document(self, schema: Any) -> None:
        """Make ``schema`` (a tool's parameters) the document its ``$ref``\\s point into."""
        self._root = schema
        self._root_key = json.dumps(schema, sort_keys=True, default=str)
        self._anchors = {}

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                if isinstance(node.get("$anchor"), str):
                    self._anchors[node["$anchor"]] = node
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(schema)

    def _target(self, ref: Any, name: str, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedSchema(f"{name}: only references inside the schema (#...) can be followed, got {ref!r}",
                                    keyword="$ref", path=path)
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):
            if fragment in self._anchors:
                return self._anchors[fragment]
            raise UnsupportedSchema(f"{name}: $ref {ref!r} names no $anchor", keyword="$ref", path=path)
        node = self._root
        try:
            for part in fragment.split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            # Definitions seen on the way (a $defs below the root, as some generators write).
            last = fragment.split("/")[-1]
            if fragment.startswith(("/$defs/", "/definitions/")) and last in self._defs:
                return self._defs[last]
            raise UnsupportedSchema(f"{name}: $ref {ref!r} has no definition", keyword="$ref", path=path) from None
        return node

    def _enter(self, schema: Any) -> None:
        """The document is the first schema seen, unless ``document`` named one; definitions on
        the way are remembered."""
        if self._root is None:
            self.document(schema)
        if isinstance(schema, dict):
            for key in ("$defs", "definitions"):
                if isinstance(schema.get(key), dict):
                    self._defs.update(schema[key])

    # -- schemas ----------------------------------------------------------------------------------
    def rule(self, schema: Any, hint: str, path: str = "") -> Ref:
        """A rule matching JSON text valid under ``schema``; ``hint`` names it, ``path`` is where
        it sits in the document (for ``notes``)."""
        self._enter(schema)
        key = json.dumps(schema, sort_keys=True, default=str)
        if "$ref" in key:
            key = self._root_key + "\0" + key
        if key in self._cache:
            first = self._paths.get(key)
            if first is not None and first != path:
                self._aliases.setdefault(path, first)
            return self._cache[key]
        self._paths[key] = path
        name = self.g.unique_name(hint)
        ref = self.g.add(name, Lit(""))  # reserve the name first: schemas may be recursive
        self._cache[key] = ref
        self.g.rules[name] = self._expr(schema, name, path)
        return ref

    def _expr(self, schema: Any, name: str, path: str) -> Expr:
        if schema is True or schema == {} or schema is None:
            return self.any_value()
        if schema is False:
            raise UnsupportedSchema(f"{name}: the schema 'false' admits no value", keyword="false", path=path)
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"{name}: a schema must be an object, got {schema!r}", path=path)
        if "$ref" in schema:
            ref = schema["$ref"]
            target = self._target(ref, name, path)
            self._note(path, "$ref", Enforcement.GRAMMAR)
            siblings = {k: v for k, v in schema.items() if k not in ("$ref", *_ANNOTATIONS)}
            if siblings and isinstance(target, dict):
                # Keywords beside a reference apply too (2020-12): folded in as allOf would be.
                self._note(path, "$ref", Enforcement.NARROWED)
                return self._expr(self._merged({**siblings, "allOf": [{"$ref": ref}]}, name, path), name, path)
            at = unquote(ref[1:]) if unquote(ref[1:]).startswith("/") or ref == "#" else path
            # Keywords beside the reference are the check's (an intersection a grammar cannot say).
            return self.rule(target, ref.split("/")[-1] or "root", at)
        if "const" in schema or "enum" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            keyword = "const" if "const" in schema else "enum"
            if not isinstance(values, list) or not values:
                raise UnsupportedSchema(f"{name}: {keyword} admits no value", keyword=keyword, path=path)
            if "type" in schema:
                self._note(path, "type", Enforcement.GRAMMAR)
                values = [v for v in values if _fits(v, schema["type"])]
                if not values:
                    raise UnsupportedSchema(f"{name}: no {keyword} value has the type {schema['type']!r}",
                                            keyword=keyword, path=path)
            self._note(path, keyword, Enforcement.GRAMMAR)
            # An integer typed so is written as one; untyped, 1.0 equals 1 and may be written so.
            kinds = schema.get("type")
            fraction = kinds is None or "number" in (kinds if isinstance(kinds, list) else [kinds])
            return alt(*(_spellings(v, fraction) for v in values))
        if "anyOf" in schema or "oneOf" in schema:
            key = "anyOf" if "anyOf" in schema else "oneOf"
            self._note(path, key, Enforcement.GRAMMAR if key == "anyOf" else Enforcement.NARROWED)
            base = {k: v for k, v in schema.items() if k not in (key, *_ANNOTATIONS)}
            branches = []
            for i, s in enumerate(schema[key]):
                if s is False:
                    continue
                part = _joined(base, s) if isinstance(s, dict) else (base or s)
                try:
                    branches.append(self.rule(part, f"{name}-{i}", _pointer(path, key, i)))
                except UnsupportedSchema as exc:
                    if len(schema[key]) == 1 or exc.keyword == "$ref":
                        raise
                    # A branch that admits nothing (or that the grammar cannot say) is one less
                    # way to be valid, never a way to be invalid.
            if not branches:
                raise UnsupportedSchema(f"{name}: no branch of {key} can be built", keyword=key, path=path)
            return alt(*branches)
        if "if" in schema and "then" in schema and "else" in schema and all(
                isinstance(schema[k], dict) for k in ("then", "else")):
            # A valid value meets "then" or "else", whichever "if" picks: either branch, narrowed.
            self._note(path, "if", Enforcement.NARROWED)
            base = {k: v for k, v in schema.items() if k not in ("if", "then", "else", *_ANNOTATIONS)}
            # A value down the "then" branch met "if" as well.
            met = _joined(base, schema["if"]) if isinstance(schema["if"], dict) else base
            return alt(self.rule(_joined(met, schema["then"]), f"{name}-then", _pointer(path, "then")),
                       self.rule(_joined(base, schema["else"]), f"{name}-else", _pointer(path, "else")))
        if "allOf" in schema:
            self._note(path, "allOf", Enforcement.NARROWED)
            return self._expr(self._merged(schema, name, path), name, path)
        if "not" in schema:
            schema = self._without(schema, name, path)
        kind = schema.get("type")
        if isinstance(kind, list):
            self._note(path, "type", Enforcement.GRAMMAR)
            return self._each_type(schema, name, path, kind)
        if kind is None:
            typed = [t for t, words in _TYPED_KEYWORDS.items() if any(w in schema for w in words)]
            if not typed:
                return self.any_value()
            # Each type's keywords constrain that type; every other type stays free.
            return self._each_type(schema, name, path, list(_TYPES))
        # unevaluated* read as additional* only where no applicator could evaluate more (folded
        # schemas drop them: see _unfolded), else they are the check's.
        local = not any(k in schema for k in ("if", "then", "else", "dependentSchemas", "contains"))
        if local and "unevaluatedProperties" in schema and "additionalProperties" not in schema and kind == "object":
            # What no applicator evaluated: with the applicators folded in above, that is what
            # additionalProperties would say. Narrowed: if/then and dependentSchemas are the check's.
            self._note(path, "unevaluatedProperties", Enforcement.NARROWED)
            schema = {**schema, "additionalProperties": schema["unevaluatedProperties"]}
        if local and "unevaluatedItems" in schema and "items" not in schema and kind == "array":
            self._note(path, "unevaluatedItems", Enforcement.NARROWED)
            schema = {**schema, "items": schema["unevaluatedItems"]}
        self._note(path, "type", Enforcement.GRAMMAR)
        if kind == "string":
            return self._string(schema, name, path)
        if kind == "integer":
            return self._integer(schema, name, path)
        if kind == "number":
            return self._number(schema, name, path)
        if kind == "boolean":
            return self.boolean()
        if kind == "null":
            return Lit("null")
        if kind == "array":
            return self._array(schema, name, path)
        if kind == "object":
            return self._object(schema, name, path)
        raise UnsupportedSchema(f"{name}: unsupported type {kind!r}", keyword="type", path=path)

    def _each_type(self, schema: dict[str, Any], name: str, path: str, kinds: list[Any]) -> Expr:
        """One branch per type; a type whose keywords admit nothing is one fewer branch."""
        branches: list[Expr] = []
        for t in kinds:
            try:
                branches.append(self.rule({**schema, "type": t}, f"{name}-{t}", path))
            except UnsupportedSchema as exc:
                if len(kinds) == 1 or exc.keyword == "$ref":
                    raise  # a reference it cannot follow is refused, never dropped with its type
        if not branches:
            raise UnsupportedSchema(f"{name}: no type the schema allows admits a value", keyword="type", path=path)
        return alt(*branches)

    def _without(self, schema: dict[str, Any], name: str, path: str) -> dict[str, Any]:
        """``schema`` with a ``not`` the grammar can say taken into its types: ``not: true`` admits
        nothing, ``not: {"type": ...}`` strikes those types; any other ``not`` is the check's."""
        bar = schema["not"]
        if bar is True or bar == {}:
            raise UnsupportedSchema(f"{name}: 'not' of a schema that admits everything admits nothing",
                                    keyword="not", path=path)
        if not (isinstance(bar, dict) and set(bar) <= {"type", *_ANNOTATIONS} and "type" in bar):
            return schema
        barred = set(bar["type"] if isinstance(bar["type"], list) else [bar["type"]])
        kinds = schema.get("type", [*_TYPES, "integer"])
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        left = [t for t in kinds if t not in barred and not (t == "integer" and "number" in barred)]
        # "number but not integer" keeps number: the grammar cannot say "has a fraction"; the check does.
        if "integer" not in barred and "integer" in left and "number" in left:
            left.remove("integer")
        if not left:
            raise UnsupportedSchema(f"{name}: 'not' strikes every type the schema allows", keyword="not", path=path)
        self._note(path, "not", Enforcement.GRAMMAR if "integer" not in barred or "number" not in left
                   else Enforcement.NARROWED)
        rest = {k: v for k, v in schema.items() if k != "not"}
        return {**rest, "type": left[0] if len(left) == 1 else left}

    def _merged(self, schema: dict[str, Any], name: str, path: str) -> dict[str, Any]:
        """``allOf`` folded into one schema: properties and required joined, the first value of any
        other keyword kept (the check enforces the others)."""
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            for _ in range(32):  # a chain of references; a loop of them ends here
                if not (isinstance(part, dict) and "$ref" in part):
                    break
                target = self._target(part["$ref"], name, path)
                part = {**{k: v for k, v in part.items() if k != "$ref"}, **target} if isinstance(target, dict) else target
            if part is False:
                raise UnsupportedSchema(f"{name}: allOf holds 'false', which admits no value", keyword="allOf",
                                        path=path)
            if not isinstance(part, dict):
                continue
            if "allOf" in part:
                part = self._merged(part, name, path)
            for k, v in part.items():
                if k == "properties" and isinstance(v, dict):
                    own = merged.get("properties", {})
                    merged["properties"] = {**own, **{key: sub for key, sub in v.items() if key not in own}}
                elif k == "required":
                    merged["required"] = [*merged.get("required", []), *v]
                else:
                    merged.setdefault(k, v)
        return _unfolded(merged, list(schema["allOf"]))

    # -- strings ----------------------------------------------------------------------------------
    def _string(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        pattern, fmt = schema.get("pattern"), schema.get("format")
        if isinstance(pattern, str):
            try:
                expr = pattern_expr(pattern)
            except Untranslatable:
                pass  # the check after decoding enforces it
            else:
                self._note(path, "pattern", Enforcement.GRAMMAR)
                return expr
        if isinstance(fmt, str) and fmt in FORMATS:
            self._note(path, "format", Enforcement.GRAMMAR if fmt in EXACT else Enforcement.NARROWED)
            return seq(Lit('"'), self._prim(f"format-{fmt}", regex_expr(FORMATS[fmt], search=False)), Lit('"'))
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if lo is None and hi is None:
            return self.string()
        for keyword in ("minLength", "maxLength"):
            if keyword in schema:
                self._note(path, keyword, Enforcement.GRAMMAR)
        char = self._prim("json-char", alt(_STRING_CHAR, _ESCAPE))
        lo_n, hi_n = math.ceil(lo or 0), None if hi is None else math.floor(hi)
        if hi_n is not None and hi_n < lo_n:
            raise UnsupportedSchema(f"{name}: maxLength {hi} is below minLength {lo}", keyword="maxLength", path=path)
        return seq(Lit('"'), Repeat(char, lo_n, hi_n), Lit('"'))

    # -- numbers ----------------------------------------------------------------------------------
    @staticmethod
    def _bounds(schema: dict[str, Any]) -> tuple[float | None, bool, float | None, bool]:
        lo: float | None = None
        hi: float | None = None
        lo_open = hi_open = False
        for key, is_open in (("minimum", False), ("exclusiveMinimum", True)):
            v = schema.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (lo is None or v > lo or (v == lo and is_open)):
                lo, lo_open = v, is_open
        for key, is_open in (("maximum", False), ("exclusiveMaximum", True)):
            v = schema.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and (hi is None or v < hi or (v == hi and is_open)):
                hi, hi_open = v, is_open
        return lo, lo_open, hi, hi_open

    def _integer(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        lo, lo_open, hi, hi_open = self._bounds(schema)
        if lo is None and hi is None:
            return self.integer()
        low = None if lo is None else (math.floor(lo) + 1 if lo_open else math.ceil(lo))
        high = None if hi is None else (math.ceil(hi) - 1 if hi_open else math.floor(hi))
        expr = int_range(low, high)
        if expr is None:
            raise UnsupportedSchema(f"{name}: no integer lies between the bounds", keyword="minimum", path=path)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in schema:
                self._note(path, key, Enforcement.GRAMMAR)
        return expr

    def _number(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        lo, lo_open, hi, hi_open = self._bounds(schema)
        if lo is None and hi is None:
            return self.number()
        expr, exact = number_range(lo, lo_open, hi, hi_open)
        if expr is None:
            raise UnsupportedSchema(f"{name}: no number lies between the bounds", keyword="minimum", path=path)
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if key in schema:
                self._note(path, key, Enforcement.GRAMMAR if exact else Enforcement.NARROWED)
        return expr

    # -- arrays -----------------------------------------------------------------------------------
    def _array(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # drafts before 2020-12 wrote tuples so
            prefix, items = items, schema.get("additionalItems", True)
        prefix = list(prefix) if isinstance(prefix, list) else []
        lo = math.ceil(schema.get("minItems", 0) or 0)
        hi = schema.get("maxItems")
        hi = None if hi is None else math.floor(hi)
        if "contains" in schema and schema.get("minContains", 1) != 0:
            lo = max(lo, 1)
        # An item that admits nothing ends the array before it.
        for i, p in enumerate(prefix):
            if p is False:
                hi = i if hi is None else min(hi, i)
                prefix = prefix[:i]
                break
        if items is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        for key in ("prefixItems", "items", "minItems", "maxItems", "additionalItems"):
            if key in schema:
                self._note(path, key, Enforcement.GRAMMAR)
        if hi is not None and hi < lo:
            raise UnsupportedSchema(f"{name}: no array length fits the schema", keyword="maxItems", path=path)
        if hi == 0:
            return self._bracketed("[", Lit(""), "]")
        rules = [self.rule(p, f"{name}-{i}", _pointer(path, "prefixItems", i)) for i, p in enumerate(prefix)]
        rest = None if items is False else self.rule(items, f"{name}-item", _pointer(path, "items"))

        def after(i: int) -> Expr:
            """What follows once ``i`` items are written."""
            if hi is not None and i >= hi:
                return Lit("")
            if i < len(rules):
                more = seq(self._comma, rules[i], after(i + 1))
                return more if i < lo else alt(Lit(""), more)
            if rest is None:
                return Lit("")
            return Repeat(seq(self._comma, rest), max(lo - i, 0), None if hi is None else hi - i)

        contained = self._contains(schema, name, path, rest, lo, hi, bool(rules))
        if contained is not None:
            return contained
        first = rules[0] if rules else rest
        if first is None:
            return self._bracketed("[", Lit(""), "]")
        body = seq(first, after(1))
        return self._bracketed("[", body if lo > 0 else Repeat(body, 0, 1), "]")

    def _contains(self, schema: dict[str, Any], name: str, path: str, rest: Ref | None, lo: int, hi: int | None,
                  prefixed: bool) -> Expr | None:
        """An array with at least ``minContains`` (default 1) items that match ``contains``, the
        others ``items``: each such item has its own slot. None where counts or tuples interfere."""
        contains, least = schema.get("contains"), schema.get("minContains", 1)
        if contains is None or rest is None or prefixed or hi is not None or not isinstance(least, int) or least < 1:
            return None
        if least > 8 or lo > least:
            return None
        items = schema.get("items", True)
        slot_schema = _joined(items, contains) if isinstance(items, dict) and isinstance(contains, dict) else contains
        slot = self.rule(slot_schema, f"{name}-contains", _pointer(path, "contains"))
        self._note(path, "contains", Enforcement.GRAMMAR)
        if "minContains" in schema:
            self._note(path, "minContains", Enforcement.GRAMMAR)
        before = Repeat(seq(rest, self._comma))
        body: list[Expr] = [before, slot]
        for _ in range(least - 1):
            body += [self._comma, before, slot]
        body.append(Repeat(seq(self._comma, rest)))
        return self._bracketed("[", seq(*body), "]")

    # -- objects ----------------------------------------------------------------------------------
    def _object(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        if schema.get("propertyNames") is False:
            self._note(path, "propertyNames", Enforcement.GRAMMAR)
            if schema.get("required"):
                raise UnsupportedSchema(f"{name}: propertyNames false admits no key, yet some are required",
                                        keyword="propertyNames", path=path)
            return self._bracketed("{", Lit(""), "}")
        props, required, _ = object_members(schema, name, path)
        for key in ("properties", "required"):
            if key in schema:
                self._note(path, key, Enforcement.GRAMMAR)
        members = [seq(Lit(_dump(k) + ": "), self.rule(v, f"{name}-{k}", _pointer(path, "properties", k)))
                   for k, v in props.items()]
        extra = self._extra_member(schema, name, path, list(props))
        if extra is None:
            if not members:
                return self._bracketed("{", Lit(""), "}")
            return self._bracketed("{", self.members(name, members, [k in required for k in props], self._comma), "}")
        counts = (math.ceil(schema.get("minProperties", 0) or 0), schema.get("maxProperties"))
        if not members:
            lo, hi = counts[0], None if counts[1] is None else math.floor(counts[1])
            for key in ("minProperties", "maxProperties"):
                if key in schema:
                    self._note(path, key, Enforcement.NARROWED)  # a repeated key counts once when read
            if hi == 0:
                return self._bracketed("{", Lit(""), "}")
            body = seq(extra, Repeat(seq(self._comma, extra), max(lo - 1, 0), None if hi is None else hi - 1))
            return self._bracketed("{", body if lo > 0 else Repeat(body, 0, 1), "}")
        tails = (Repeat(seq(extra, Repeat(seq(self._comma, extra))), 0, 1), Repeat(seq(self._comma, extra)))
        body = self.members(name, members, [k in required for k in props], self._comma, tails)
        return self._bracketed("{", body, "}")

    def _extra_member(self, schema: dict[str, Any], name: str, path: str, declared: list[str]) -> Expr | None:
        """A member under an undeclared key, or None where the schema (or our rule) admits none."""
        patterns = schema.get("patternProperties") or {}
        extra = schema.get("additionalProperties")
        names = schema.get("propertyNames")
        if extra is None and not patterns:
            if "properties" in schema or "required" in schema:
                return None  # declared keys only: the tool-call rule, see the module's docstring
            extra = True  # a bare {"type": "object"}: a free-form dict
        if extra is False and not patterns:
            self._note(path, "additionalProperties", Enforcement.GRAMMAR)
            return None
        options: list[Expr] = []
        any_key: Expr = self.string()
        if isinstance(names, dict):
            any_key = self.rule({**names, "type": "string"}, f"{name}-key", _pointer(path, "propertyNames"))
            self._note(path, "propertyNames", Enforcement.GRAMMAR)
        for i, (pat, sub) in enumerate(patterns.items()):
            if sub is False:
                continue
            value = self.rule(sub, f"{name}-p{i}", _pointer(path, "patternProperties", pat))
            try:
                key = pattern_expr(pat) if not isinstance(names, dict) else any_key
            except Untranslatable:
                key = any_key
            options.append(seq(key, Lit(": "), value))
        if patterns:
            self._note(path, "patternProperties", Enforcement.NARROWED)
        if extra is not False:
            key = any_key if isinstance(names, dict) or not declared else self._key_not_in(declared)
            value = self.rule(True if extra is None else extra, f"{name}-value", _pointer(path, "additionalProperties"))
            if "additionalProperties" in schema:
                self._note(path, "additionalProperties", Enforcement.NARROWED if patterns else Enforcement.GRAMMAR)
            options.append(seq(key, Lit(": "), value))
        if not options:
            return None
        return self._named(f"{name}-extra", alt(*options))

    def _key_not_in(self, keys: list[str]) -> Expr:
        """A JSON string (canonical spelling) that is none of ``keys``."""
        char = canonical_char()
        tail = Repeat(char)

        def node(prefix: str) -> Expr:
            children = sorted({k[len(prefix)] for k in keys if k.startswith(prefix) and len(k) > len(prefix)})
            options: list[Expr] = [] if prefix in keys else [Lit('"')]
            cps = [ord(c) for c in children]
            others = [(0, 0x10FFFF)]
            for cp in cps:
                others = [r for a, b in others for r in ((a, cp - 1), (cp + 1, b)) if r[0] <= r[1]]
            if others:
                options.append(seq(chars_expr(others), tail, Lit('"')))
            for ch in children:
                options.append(seq(chars_expr([(ord(ch), ord(ch))]), node(prefix + ch)))
            return alt(*options)

        return self._named("key-other", seq(Lit('"'), node("")))

    def members(self, name: str, members: list[Expr], required: list[bool], comma: Expr,
                tails: tuple[Expr, Expr] | None = None) -> Expr:
        """``members`` in order, each optional unless ``required``, ``comma`` between two; ``tails``
        (when nothing / something was written before) may follow the last."""
        # first[i]: members i.. when none has been written yet; rest[i]: after one was written.
        # One rule pair per member keeps the grammar linear in their number.
        first: list[Expr] = [Lit("")] * (len(members) + 1)
        rest: list[Expr] = [Lit("")] * (len(members) + 1)
        if tails is not None:
            first[-1], rest[-1] = tails
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
        self._enter(schema)
        while isinstance(schema, dict) and "$ref" in schema:
            schema = self._target(schema["$ref"], name, "")
        return schema

    def _named(self, base: str, expr: Expr) -> Expr:
        if isinstance(expr, Lit):
            return expr
        return self.g.add(self.g.unique_name(base), expr)


def _nothing(schema: Any) -> bool:
    """Whether ``schema`` admits no value at all (``false``, ``{"not": {}}``)."""
    return schema is False or (isinstance(schema, dict) and schema.get("not") in (True, {}))


def object_members(schema: dict[str, Any], name: str, path: str = "") -> tuple[dict[str, Any], set[str], Any]:
    """(properties, required keys, the schema of a free-form dict's values or ``None``)."""
    props: dict[str, Any] = {k: v for k, v in (schema.get("properties") or {}).items() if not _nothing(v)}
    required = set(schema.get("required") or [])
    barred = [k for k in required if _nothing((schema.get("properties") or {}).get(k, True))]
    if barred:
        raise UnsupportedSchema(f"{name}: required keys {barred} have the schema 'false'", keyword="required", path=path)
    extra = schema.get("additionalProperties")
    missing = [k for k in schema.get("required") or [] if k not in props]
    if missing:
        if extra is False and not schema.get("patternProperties"):
            raise UnsupportedSchema(f"{name}: required keys {missing} are not in 'properties' and no other keys "
                                    "are allowed", keyword="required", path=path)
        # Required but undescribed keys must be present; any JSON value will do (BFCL has these).
        props.update({k: extra if isinstance(extra, dict) else {} for k in missing})
    if props:
        return props, required, None
    # An explicit empty "properties" means "no arguments" in tool specs; only an
    # additionalProperties schema (or a bare {"type": "object"}) opens a free-form dict.
    if extra is False or ("properties" in schema and extra in (None, False)):
        return {}, set(), None
    return {}, set(), extra if isinstance(extra, dict) else {}
