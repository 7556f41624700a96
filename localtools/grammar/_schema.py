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
after decoding (``localtools.grammar._check``); ``notes`` records which, per keyword path.

An undeclared key is written in its one canonical spelling and is none of the declared keys; a
string is valid UTF-8 (no lone surrogate escape); a number is below ``10**308`` (``_ranges``).
Building is bounded: ``MAX_DEPTH`` levels of nesting and ``MAX_NODES`` expression nodes (a schema
met again counts one node each time), and inside ``build_budget`` a time in seconds, past which
the schema is refused by name (``UnsupportedSchema`` naming the schema path and the limit); const
and enum values are spelled one rule per object, every key order exactly up to ``MAX_ORDERED_KEYS``
keys, in any order past it (the check holds the count). A value the schema leaves free (``{}``,
``true``, an object or array with no further schema) nests at most ``MAX_VALUE_DEPTH`` brackets.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from typing import Any, TypeGuard
from urllib.parse import unquote

from .._errors import UnsupportedSchema
from ._check import schema_errors
from ._expr import Alt, Chars, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from ._formats import EXACT, FORMATS
from ._ranges import MAX_DIGITS, int_range, number, number_range
from ._regex import Untranslatable, canonical_char, chars_expr, pattern_expr, regex_expr, search

__all__ = ["LAYOUTS", "MAX_VALUE_DEPTH", "Enforcement", "SchemaGrammar", "UnsupportedSchema", "bounded_value",
           "budget_spent", "build_budget", "layout_whitespace", "object_members"]

LAYOUTS = ("compact", "natural")
_INDENT = seq(Lit("\n"), Repeat(Chars(" \\t"), 0, 20))


#: Schemas nested deeper than this (properties in properties, items in items, ...) are refused:
#: building recurses once per level.
MAX_DEPTH = 64
#: Expression nodes one grammar's schemas may add: past it the schema is refused by name.
MAX_NODES = 400_000
#: An object of a const or enum value with at most this many keys is spelled in every key order,
#: exactly (one rule per set of keys still to come, 2**n of them); a larger one as any of its
#: members, each with its exact value, as many times as it has keys (the check does the rest).
MAX_ORDERED_KEYS = 5
#: Expression nodes one const or enum may take spelled exactly; past it, each object's keys are
#: spelled in any order as above, and past 8 times this (or MAX_ENUM values) the grammar leaves
#: the keyword to the check.
MAX_CONST_NODES = 20_000
MAX_ENUM = 10_000
#: How deep a value the schema leaves free nests its brackets: a free value is any JSON, and a
#: reply nested past what Python's parser reads (about 1,000 levels) would be no call at all.
MAX_VALUE_DEPTH = 32

#: (seconds, the monotonic time they run out) of the build budget in force, if any.
_BUDGET: ContextVar[tuple[float, float] | None] = ContextVar("localtools_build_budget", default=None)


@contextmanager
def build_budget(seconds: float) -> Iterator[None]:
    """Schemas built inside (every grammar, together) take at most ``seconds``: past them the
    build stops with ``UnsupportedSchema`` naming the schema path it reached and the limit. A
    server builds a client's schemas under one, so no request holds a thread for longer."""
    token = _BUDGET.set((seconds, time.monotonic() + seconds))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def budget_spent() -> float | None:
    """The seconds of the build budget in force once they have run out, else ``None``."""
    budget = _BUDGET.get()
    return budget[0] if budget is not None and time.monotonic() > budget[1] else None


def bounded_value(g: Grammar, name: str, scalars: Expr, containers: Callable[[Expr], Expr]) -> Ref:
    """The rule ``name`` of a free value in one syntax: ``containers(inner)`` the objects and
    arrays holding ``inner`` values, ``scalars`` the rest. One rule a level, the deepest holding
    scalars only: brackets nest at most ``MAX_VALUE_DEPTH`` deep."""
    if name not in g.rules:
        g.add(name, Lit(""))  # reserved first: the deeper levels are named after it
        inner: Expr = scalars
        for level in range(MAX_VALUE_DEPTH, 1, -1):
            inner = g.add(g.unique_name(f"{name}-{level}"), alt(containers(inner), scalars))
        g.rules[name] = alt(containers(inner), scalars)
    return Ref(name)


class _TooLarge(UnsupportedSchema):
    """A schema past the bounds on building (depth, size): refused whole, never dropped as one
    branch of many."""


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


_STRENGTH = {Enforcement.GRAMMAR: 3, Enforcement.NARROWED: 2, Enforcement.CHECKED: 1, Enforcement.UNSUPPORTED: 0}


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
_HEX = Chars("0-9a-fA-F")
# A \u escape is valid UTF-16 read as UTF-8 text: a code point outside the surrogates, or a high
# surrogate followed by a low one (a lone surrogate is no character, and no engine emits one).
_UNICODE_ESCAPE = alt(seq(Chars("0-9a-cA-Ce-fE-F"), Repeat(_HEX, 3, 3)), seq(Chars("dD"), Chars("0-7"), Repeat(_HEX, 2, 2)),
                      seq(Chars("dD"), Chars("89abAB"), Repeat(_HEX, 2, 2), Lit("\\u"), Chars("dD"), Chars("c-fC-F"),
                          Repeat(_HEX, 2, 2)))
_ESCAPE = seq(Lit("\\"), alt(Chars('"\\\\/bfnrt'), seq(Lit("u"), _UNICODE_ESCAPE)))
# Integers below 10**308 (finite as a double; see _ranges).
_INT = seq(Repeat(Lit("-"), 0, 1), alt(Chars("0-9"), seq(Chars("1-9"), Repeat(Chars("0-9"), 1, MAX_DIGITS - 1))))
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


def _whole(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer() \
        and abs(value) < 2 ** 53


def _cost(value: Any, ordered: bool, depth: int = 0) -> int:
    """About how many expression nodes ``SchemaGrammar._values`` takes for ``value`` (too many past MAX_DEPTH)."""
    if depth > MAX_DEPTH:
        return MAX_NODES + 1
    if isinstance(value, dict):
        n = len(value)
        members = n * 2 ** (n - 1) if ordered and n <= MAX_ORDERED_KEYS else n
        return 2 + 4 * members + sum(_cost(v, ordered, depth + 1) for v in value.values())
    if isinstance(value, list):
        return 2 + sum(2 + _cost(v, ordered, depth + 1) for v in value)
    return 1 + len(_dump(value)) // 16


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
        #: Paths built as one branch among others that need not exclude each other (then, else).
        self._loose: set[str] = set()
        self._depth = 0
        self._where = ""  # the path of the schema being built, for errors
        #: Expression nodes added so far, against MAX_NODES.
        self.size = 0
        self._budget = _BUDGET.get()
        # A schema object's cache key, by identity (the object is kept, so its id is not reused):
        # a schema met again is not serialized again.
        self._keys: dict[int, tuple[Any, str]] = {}
        self._serial = 0
        self._tries: dict[tuple[str, ...], Expr] = {}

    def _bracketed(self, open_: str, body: Expr, close: str) -> Expr:
        return seq(Lit(open_), self._in, body, self._in, Lit(close))

    def _note(self, path: str, keyword: str, how: Enforcement) -> None:
        # A keyword built more than once at one path (one rule per type) is as strong as its
        # weakest build.
        old = self.notes.get((path, keyword))
        if old is None or _STRENGTH[how] < _STRENGTH[old]:
            self.notes[(path, keyword)] = how

    def note_at(self, path: str, keyword: str) -> Enforcement | None:
        """Who enforces ``keyword`` of the schema at ``path``, where the grammar took it on."""
        how = self._note_at(path, keyword)
        if how is Enforcement.GRAMMAR and any(path == p or path.startswith(p + "/") for p in self._loose):
            # Down one branch of if/then/else, the other branch is a way around the keyword.
            return Enforcement.NARROWED
        return how

    def _note_at(self, path: str, keyword: str) -> Enforcement | None:
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
        return self._prim("json-number", number())

    def boolean(self) -> Ref:
        return self._prim("json-bool", alt(Lit("true"), Lit("false")))

    def any_value(self) -> Ref:
        """Any JSON value, nested at most ``MAX_VALUE_DEPTH`` brackets deep."""
        def containers(value: Expr) -> Expr:
            member = seq(self.string(), Lit(": "), value)
            return alt(self._bracketed("{", Repeat(seq(member, Repeat(seq(self._comma, member))), 0, 1), "}"),
                       self._bracketed("[", Repeat(seq(value, Repeat(seq(self._comma, value))), 0, 1), "]"))

        scalars = self._prim("json-scalar", alt(self.string(), self.number(), self.boolean(), Lit("null")))
        return bounded_value(self.g, "json-value", scalars, containers)

    # -- documents and references ---------------------------------------------------------------
    def document(self, schema: Any) -> None:
        """Make ``schema`` (a tool's parameters) the document its ``$ref``\\s point into."""
        self._root = schema
        # A digest, not the text: it prefixes every key of a schema holding a $ref.
        text = json.dumps(schema, sort_keys=True, default=str)
        self._root_key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        self._keys = {}  # a subschema's $ref now points into this document
        self._anchors = {}

        # A loop, not recursion: a schema may nest deeper than Python recurses. An anchor inside
        # a nested resource (a subschema with its own $id) is that resource's: the document's own
        # anchor of the same name wins.
        nested: dict[str, Any] = {}
        stack: list[tuple[Any, bool]] = [(schema, False)]
        while stack:
            node, inner = stack.pop()
            if isinstance(node, dict):
                inner = inner or (node is not schema and "$id" in node)
                if isinstance(node.get("$anchor"), str):
                    (nested if inner else self._anchors)[node["$anchor"]] = node
                stack.extend((v, inner) for v in reversed(list(node.values())))
            elif isinstance(node, list):
                stack.extend((v, inner) for v in reversed(node))
        self._anchors = {**nested, **self._anchors}

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
        key = self._key(schema)
        if key in self._cache:
            # A hit costs a node: a schema met many times (a fan-out of $refs) is bounded too.
            self.size += 1
            self._spent(path)
            first = self._paths.get(key)
            if first is not None and first != path:
                self._aliases.setdefault(path, first)
            return self._cache[key]
        self._paths[key] = path
        if len(hint) > 48:
            # Names grow with nesting ("args-v-item-item-..."): keep them short, so the grammar's
            # text grows with the schema's, not with its square.
            hint = hint[:24] + "-" + hint[-23:]
        name = self.g.unique_name(hint)
        ref = self.g.add(name, Lit(""))  # reserve the name first: schemas may be recursive
        self._cache[key] = ref
        if self._depth >= MAX_DEPTH:
            raise _TooLarge(f"{name}: schemas nest deeper than {MAX_DEPTH} levels", keyword=_last_keyword(path),
                                    path=path)
        self._spent(path)
        self._depth += 1
        outer, self._where = self._where, path
        try:
            expr = self._expr(schema, name, path)
        finally:
            self._depth -= 1
            self._where = outer
        self._count(expr, path)
        self.g.rules[name] = expr
        return ref

    def _key(self, schema: Any) -> str:
        """The cache key of ``schema``: its text, after the document's digest where it holds a $ref."""
        known = self._keys.get(id(schema))
        if known is not None and known[0] is schema:
            return known[1]
        key = json.dumps(schema, sort_keys=True, default=str)
        if "$ref" in key:
            key = self._root_key + "\0" + key
        if isinstance(schema, (dict, list)):
            self._keys[id(schema)] = (schema, key)
        return key

    def _count(self, expr: Expr, path: str, keyword: str = "") -> None:
        """Adds ``expr``'s size (as rendered: shared parts counted each time) to the grammar's."""
        self.size += _size(expr)
        self._spent(path, keyword)

    def _spent(self, path: str, keyword: str = "") -> None:
        """``_TooLarge`` once the build is past its node budget or its time budget."""
        if self.size > MAX_NODES:
            path = path or self._where
            raise _TooLarge(f"the schema needs a grammar of more than {MAX_NODES} expression nodes (at {path or '/'})",
                            keyword=keyword or _last_keyword(path) or "type", path=path)
        if self._budget is not None and time.monotonic() > self._budget[1]:
            path = path or self._where
            raise _TooLarge(f"the schema took more than {self._budget[0]:g} s to build (the build budget; stopped "
                            f"at {path or '/'})", keyword=keyword or _last_keyword(path) or "type", path=path)

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
            # An integer typed so is written as one; untyped, 1.0 equals 1 and may be written so.
            kinds = schema.get("type")
            fraction = kinds is None or "number" in (kinds if isinstance(kinds, list) else [kinds])
            return self._values(schema, values, keyword, fraction, name, path)
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
                    if len(schema[key]) == 1 or exc.keyword == "$ref" or isinstance(exc, _TooLarge):
                        raise
                    # A branch that admits nothing (or that the grammar cannot say) is one less
                    # way to be valid, never a way to be invalid.
            if not branches:
                raise UnsupportedSchema(f"{name}: no branch of {key} can be built", keyword=key, path=path)
            return alt(*branches)
        if "if" in schema and ("then" in schema or "else" in schema):
            return self._conditional(schema, name, path)
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

    def _values(self, schema: dict[str, Any], values: list[Any], keyword: str, fraction: bool, name: str,
                path: str) -> Expr:
        """The spellings of ``values`` (a const or enum): exact while small, bounded always."""
        ordered = sum(_cost(v, True) for v in values) <= MAX_CONST_NODES
        if not ordered and (len(values) > MAX_ENUM or sum(_cost(v, False) for v in values) > 8 * MAX_CONST_NODES):
            # Too large to spell: the grammar holds the value to the rest of its schema only.
            self._note(path, keyword, Enforcement.CHECKED)
            rest = {k: v for k, v in schema.items() if k not in ("const", "enum")}
            return self._expr(rest, name, path)
        exact = [True]
        memo: dict[tuple[str, bool], Expr] = {}

        def spell(value: Any, depth: int) -> Expr:
            if depth > MAX_DEPTH:
                raise _TooLarge(f"{name}: {keyword} nests deeper than {MAX_DEPTH} levels", keyword=keyword,
                                        path=path)
            if _whole(value):
                whole = str(int(value))
                return alt(Lit(whole), Lit(whole + ".0")) if fraction else Lit(whole)
            if not isinstance(value, (dict, list)):
                return Lit(_dump(value))
            key = (json.dumps(value, sort_keys=True), ordered)
            if key not in memo:
                memo[key] = self._container(value, lambda v: spell(v, depth + 1), ordered, exact, name, (keyword, path))
            return memo[key]

        out = alt(*(spell(v, 0) for v in values))
        self._note(path, keyword, Enforcement.GRAMMAR if exact[0] else Enforcement.NARROWED)
        return out

    def _container(self, value: Any, spell: Callable[[Any], Expr], ordered: bool, exact: list[bool], name: str,
                   where: tuple[str, str]) -> Expr:
        """A list or object of a const/enum value as a rule of its own (so nesting adds, not multiplies)."""
        if isinstance(value, list):
            parts: list[Expr] = []
            for i, v in enumerate(value):
                parts += [Lit(", ")] if i else []
                parts.append(spell(v))
            return self._value_rule(name, where, seq(Lit("["), *parts, Lit("]")))
        if not value:
            return Lit("{}")
        members = {k: seq(Lit(_dump(k) + ": "), spell(v)) for k, v in value.items()}
        if ordered and len(value) <= MAX_ORDERED_KEYS:
            # Every key order, exactly: one rule per set of keys still to come.
            after: dict[frozenset[str], Expr] = {}

            def rest(left: frozenset[str]) -> Expr:
                if not left:
                    return Lit("}")
                if left not in after:
                    after[left] = self._value_rule(name, where, alt(*(seq(Lit(", "), members[k], rest(left - {k}))
                                                               for k in value if k in left)))
                return after[left]

            everything = frozenset(value)
            return self._value_rule(name, where, alt(*(seq(Lit("{"), members[k], rest(everything - {k})) for k in value)))
        # Any of its members, as many as it has keys: linear, but a repeated or missing key is the check's.
        exact[0] = False
        member = self._value_rule(name, where, alt(*members.values()))
        return self._value_rule(name, where, seq(Lit("{"), member, Repeat(seq(Lit(", "), member), len(value) - 1,
                                                                     len(value) - 1), Lit("}")))

    def _value_rule(self, name: str, where: tuple[str, str], expr: Expr) -> Expr:
        self._count(expr, where[1], where[0])
        return self.g.add(self._serial_name(f"{name}-c"), expr)

    def _conditional(self, schema: dict[str, Any], name: str, path: str) -> Expr:
        """``if``/``then``/``else``: a valid value meets "then" or "else", whichever "if" picks, and
        the grammar offers either branch (a missing one admits anything). Keys any of the three
        declares are declared in both branches (any value where the branch says nothing), so a
        value valid down one branch never loses a key another one names."""
        self._note(path, "if", Enforcement.NARROWED)
        cond, then, other = schema["if"], schema.get("then", True), schema.get("else", True)
        base = {k: v for k, v in schema.items() if k not in ("if", "then", "else", *_ANNOTATIONS)}
        parts = [p for p in (cond, then, other) if isinstance(p, dict)]
        declared: dict[str, Any] = {k: {} for p in parts for k in (p.get("properties") or {}) if isinstance(p.get("properties"), dict)}
        free = not any(k in base for k in ("properties", "required", "additionalProperties", "patternProperties",
                                           "unevaluatedProperties", "propertyNames"))
        branches: list[Expr] = []
        for word, steps in (("then", [cond, then]), ("else", [other])):
            if any(p is False for p in steps[-1:]):
                continue  # a branch that admits nothing
            out = base
            for part in steps:
                if isinstance(part, dict):
                    out = _joined(out, part)
            kinds = out.get("type", "object")
            if declared and (kinds == "object" or (isinstance(kinds, list) and "object" in kinds)):
                known: dict[str, Any] = out["properties"] if isinstance(out.get("properties"), dict) else {}
                out = {**out, "properties": {**known, **{k: v for k, v in declared.items() if k not in known}}}
                if free:
                    # The schema itself declares no keys: its objects stay free-form.
                    out.setdefault("additionalProperties", True)
            where = _pointer(path, word)
            self._loose.add(where)
            try:
                branches.append(self.rule(out, f"{name}-{word}", where))
            except UnsupportedSchema as exc:
                if exc.keyword == "$ref" or isinstance(exc, _TooLarge):
                    raise
        if not branches:
            raise UnsupportedSchema(f"{name}: neither branch of if/then/else admits a value", keyword="if", path=path)
        return alt(*branches)

    def _each_type(self, schema: dict[str, Any], name: str, path: str, kinds: list[Any]) -> Expr:
        """One branch per type; a type whose keywords admit nothing is one fewer branch."""
        branches: list[Expr] = []
        for t in kinds:
            try:
                branches.append(self.rule({**schema, "type": t}, f"{name}-{t}", path))
            except UnsupportedSchema as exc:
                if len(kinds) == 1 or exc.keyword == "$ref" or isinstance(exc, _TooLarge):
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
        """One of ``pattern``, ``format`` and the lengths in the grammar, in that order: the grammar
        cannot intersect them; the others are the check's."""
        pattern, fmt = schema.get("pattern"), schema.get("format")
        chosen: Expr | None = None
        if isinstance(pattern, str):
            try:
                chosen = pattern_expr(pattern)
            except Untranslatable:
                pass  # the check after decoding enforces it
            except UnsupportedSchema as exc:
                raise UnsupportedSchema(str(exc), keyword="pattern", path=path) from None
            else:
                self._note(path, "pattern", Enforcement.GRAMMAR)
        if isinstance(fmt, str) and fmt in FORMATS:
            if chosen is None:
                self._note(path, "format", Enforcement.GRAMMAR if fmt in EXACT else Enforcement.NARROWED)
                chosen = seq(Lit('"'), self._prim(f"format-{fmt}", regex_expr(FORMATS[fmt], search=False)), Lit('"'))
            else:
                self._note(path, "format", Enforcement.CHECKED)
        if chosen is not None:
            for keyword in ("minLength", "maxLength"):
                if keyword in schema:
                    self._note(path, keyword, Enforcement.CHECKED)
            return chosen
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
            if _finite(v) and (lo is None or v > lo or (v == lo and is_open)):
                lo, lo_open = v, is_open
        for key, is_open in (("maximum", False), ("exclusiveMaximum", True)):
            v = schema.get(key)
            if _finite(v) and (hi is None or v < hi or (v == hi and is_open)):
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
        # additionalItems is no 2020-12 keyword: followed with a list "items", never reported as enforced.
        for key in ("prefixItems", "items", "minItems", "maxItems"):
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
        # At least so many: a most (maxContains) is the check's.
        self._note(path, "contains", Enforcement.NARROWED if "maxContains" in schema else Enforcement.GRAMMAR)
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
        # Every declared key, those propertyNames bars included: none may come back as an
        # undeclared key (a barred one may not be written at all).
        declared = list(props)
        if isinstance(schema.get("propertyNames"), dict) and props:
            props = self._named_keys(props, required, schema["propertyNames"], name, path)
        for key in ("properties", "required"):
            if key in schema:
                self._note(path, key, Enforcement.GRAMMAR)
        if props and any(sub is not False for sub in (schema.get("patternProperties") or {}).values()) \
                and any(_may_match(pat, k) for pat in schema["patternProperties"] for k in props):
            # A declared key a pattern matches could also be written as the pattern's member, its
            # value held to the pattern's schema alone: the check holds it to both.
            self._note(path, "properties", Enforcement.NARROWED)
            self._loose.update(_pointer(path, "properties", k) for k in props
                               if any(_may_match(pat, k) for pat in schema["patternProperties"]))
        members = [seq(Lit(_dump(k) + ": "), self.rule(v, f"{name}-{k}", _pointer(path, "properties", k)))
                   for k, v in props.items()]
        extra = self._extra_member(schema, name, path, declared)
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
        if isinstance(names, dict) and declared:
            # An undeclared key is none of the declared ones (else a declared key could come back
            # with the wrong value); the grammar cannot also hold it to propertyNames, the check does.
            any_key = self._key_not_in(declared)
            self._note(path, "propertyNames", Enforcement.NARROWED)
        elif isinstance(names, dict):
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
            except UnsupportedSchema as exc:
                raise UnsupportedSchema(str(exc), keyword="patternProperties", path=path) from None
            options.append(seq(key, Lit(": "), value))
        if patterns:
            self._note(path, "patternProperties", Enforcement.NARROWED)
            # An undeclared key may go by a pattern's member or the additional one, whichever
            # its key and value fit: what sits below either is narrowed, the check holds both.
            self._loose.update((_pointer(path, "patternProperties"), _pointer(path, "additionalProperties")))
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
        """A JSON string in its canonical spelling that is none of ``keys``: a trie of the keys
        whose every node may leave it (a character no key has there, then anything), and whose
        end quote closes only where no key ends. Canonical only, so no key comes back as an
        escape (``\\u0061`` for ``a``). One rule per trie node: linear in the keys' length."""
        known = tuple(sorted(set(keys)))
        if known in self._tries:
            return self._tries[known]
        tail = self._prim("key-tail", seq(Repeat(canonical_char()), Lit('"')))
        escaped = self._prim("key-escaped-char", chars_expr([(c, c) for c in _SPECIAL_CPS]))
        nodes: dict[str, Expr] = {}

        def node(prefix: str) -> Expr:
            if prefix in nodes:
                return nodes[prefix]
            children = sorted({k[len(prefix)] for k in keys if k.startswith(prefix) and len(k) > len(prefix)})
            options: list[Expr] = [] if prefix in keys else [Lit('"')]
            codes = {ord(c) for c in children}
            plain = _ranges_without(_PLAIN, codes)
            special = [c for c in _SPECIAL_CPS if c not in codes]
            others: list[Expr] = [chars_expr(plain)] if plain else []
            if len(special) == len(_SPECIAL_CPS):
                others.append(escaped)
            elif special:
                others.append(chars_expr([(c, c) for c in special]))
            if others:
                options.append(seq(alt(*others), tail))
            for ch in children:
                if _is_surrogate(ch):
                    continue  # no UTF-8 text holds it: nothing to exclude
                options.append(seq(chars_expr([(ord(ch), ord(ch))]), node(prefix + ch)))
            expr = alt(*options)
            self._count(expr, "")
            nodes[prefix] = self.g.add(self._serial_name("key-other") if prefix else self.g.unique_name("key-other"),
                                       expr)
            return nodes[prefix]

        self._tries[known] = seq(Lit('"'), node(""))
        return self._tries[known]

    def _named_keys(self, props: dict[str, Any], required: set[str], names: dict[str, Any], name: str,
                    path: str) -> dict[str, Any]:
        """The declared keys ``propertyNames`` admits (a required one it refuses admits nothing)."""
        try:
            barred = [k for k in props if schema_errors(names, k)]
        except Exception:  # a reference it cannot follow alone, say: the check judges the keys
            self._note(path, "propertyNames", Enforcement.CHECKED)
            return props
        if barred and any(k in required for k in barred):
            raise UnsupportedSchema(f"{name}: required keys {[k for k in barred if k in required]} break "
                                    "propertyNames", keyword="propertyNames", path=path)
        return {k: v for k, v in props.items() if k not in barred}

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
        self._count(expr, "")
        return self.g.add(self.g.unique_name(base), expr)

    def _serial_name(self, base: str) -> str:
        """A fresh rule name without a search (``unique_name`` counts up from 1 each time)."""
        while True:
            self._serial += 1
            name = f"{base}-v{self._serial}"
            if name not in self.g.rules and name not in self.g.reserved:
                return name


#: Characters a JSON string holds raw, and those it must escape (controls, quote, backslash).
_PLAIN = [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)]
_SPECIAL_CPS = [*range(0x20), 0x22, 0x5C]


def _ranges_without(ranges: list[tuple[int, int]], codes: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        start = a
        for c in sorted(c for c in codes if a <= c <= b):
            if start < c:
                out.append((start, c - 1))
            start = c + 1
        if start <= b:
            out.append((start, b))
    return out


def _is_surrogate(ch: str) -> bool:
    return "\ud800" <= ch <= "\udfff"


def _may_match(pattern: str, key: str) -> bool:
    """Whether ``pattern`` may match ``key``: read as the check reads it, in linear time (a pattern
    it cannot read safely may)."""
    try:
        return search(pattern, key)
    except Untranslatable:
        return True


def _finite(v: Any) -> TypeGuard[float]:
    """A bound the grammar can use (an infinite one bounds nothing; NaN is the check's)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (isinstance(v, int) or math.isfinite(v))


def _size(expr: Expr) -> int:
    memo: dict[int, int] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:  # a loop: expressions nest as deep as the text they spell
        e, done = stack.pop()
        if id(e) in memo:
            continue
        kids: tuple[Expr, ...] = e.items if isinstance(e, Seq) else e.options if isinstance(e, Alt) else \
            (e.item,) if isinstance(e, Repeat) else ()
        if done or not kids:
            memo[id(e)] = 1 + sum(memo[id(k)] for k in kids) + (len(e.text) // 16 if isinstance(e, Lit) else 0)
        else:
            stack.append((e, True))
            stack.extend((k, False) for k in kids)
    return memo[id(expr)]


_KEYWORDS_IN_PATHS = frozenset({"properties", "items", "prefixItems", "additionalProperties", "patternProperties",
                                "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "contains", "propertyNames",
                                "$defs", "definitions", "dependentSchemas", "unevaluatedItems",
                                "unevaluatedProperties"})


def _last_keyword(path: str) -> str:
    """The last keyword on a schema path ("properties" for ``/properties/a/properties/b``)."""
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in _KEYWORDS_IN_PATHS and (i == 1 or parts[i - 1] not in ("properties", "$defs", "definitions",
                                                                                "patternProperties", "dependentSchemas")):
            return parts[i]
    return ""


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
