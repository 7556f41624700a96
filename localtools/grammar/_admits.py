"""Whether the constrained path could return given arguments, and who enforces which keyword.

``admits`` is the measure of the guarantee: the grammar a tool's arguments are decoded under,
and (unless ``check=False``) the check they pass before a call leaves. ``schema_report`` says,
per keyword path, which of the two enforces it, or that neither does.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .._errors import UnsupportedSchema
from ._check import violations
from ._drafts import IGNORED_IN_2020_12
from ._expr import Grammar
from ._match import matches
from ._schema import _ANNOTATIONS, Enforcement, SchemaGrammar
from ._syntax import args_rule

__all__ = ["KeywordEnforcement", "admits", "schema_report", "unsupported"]


class _Raw(str):
    """A number as written."""


def _render(value: Any) -> str:
    """``value`` (read with its objects' pairs in order and numbers as written) in the compact layout."""
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, _Obj):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + _render(v) for k, v in value.pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


class _Obj:
    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


@lru_cache(maxsize=256)
def _grammar(parameters_json: str) -> Grammar:
    g = Grammar()
    sg = SchemaGrammar(g, "compact")
    g.add("root", args_rule("json", sg, json.loads(parameters_json), "args"))
    return g


def admits(parameters: dict[str, Any], arguments: str, *, check: bool = True) -> bool:
    """True exactly when the constrained path could return ``arguments`` (JSON text, any layout)
    for a call to a tool with these ``parameters``: the grammar admits them, re-rendered in its
    own layout with key order kept, and (``check``) they pass the check before a call leaves.

    Raises ``UnsupportedSchema`` for a schema the grammar refuses.
    """
    grammar = _grammar(json.dumps(parameters, sort_keys=False))
    try:
        shaped = json.loads(arguments, object_pairs_hook=_Obj, parse_float=_Raw, parse_int=_Raw,
                            parse_constant=_Raw)
        text = _render(shaped)
    except (ValueError, TypeError, RecursionError):  # nested past what the parser reads: no call either
        return False
    if not matches(grammar, text):
        return False
    # Read plainly only once the grammar took it: the check wants Python values.
    return not check or not violations("", parameters, json.loads(arguments))


@dataclass(frozen=True)
class KeywordEnforcement:
    """One keyword of a schema and who enforces it."""

    #: JSON pointer to the schema object holding the keyword ("" for the root).
    path: str
    keyword: str
    enforcement: Enforcement

    def __str__(self) -> str:
        return f"{self.path or '/'} {self.keyword}: {self.enforcement.value}"


#: Keywords draft 2020-12 asserts (jsonschema checks every one of them).
_ASSERTIONS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "maxProperties", "minProperties", "required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "if",
    "then", "else", "dependentSchemas", "prefixItems", "items", "contains", "properties", "patternProperties",
    "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "$ref", "$dynamicRef",
    "format",
})
#: Keywords jsonschema reports as themselves when a value breaks a subschema below them: labelled
#: grammar only where the grammar says those subschemas whole.
_WHOLE = ("anyOf", "contains")
_ONE = ("additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames",
        "unevaluatedItems", "unevaluatedProperties")
_MANY = ("prefixItems", "anyOf", "oneOf", "allOf")
_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


def _known_formats() -> frozenset[str]:
    import jsonschema

    return frozenset(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)


def schema_report(parameters: dict[str, Any]) -> list[KeywordEnforcement]:
    """Every constraint keyword of ``parameters``, with who enforces it, in document order.

    Raises ``UnsupportedSchema`` when the grammar refuses the schema outright.
    """
    g = Grammar()
    sg = SchemaGrammar(g, "compact")
    g.add("root", args_rule("json", sg, parameters, "args"))
    checked = _known_formats()
    out: list[KeywordEnforcement] = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key in _ANNOTATIONS:
                how = None
            elif key in IGNORED_IN_2020_12:
                # No 2020-12 keyword: the check ignores it, so nobody enforces it whatever the grammar does.
                how = Enforcement.UNSUPPORTED
            elif key == "format":
                how = sg.note_at(path, key)
                if how in (None, Enforcement.CHECKED):
                    # Not said by the grammar here (another keyword took the string): the check's, if it knows it.
                    how = Enforcement.CHECKED if value in checked else Enforcement.UNSUPPORTED
            elif (how := sg.note_at(path, key)) is not None:
                pass
            elif key in _ASSERTIONS:
                how = Enforcement.CHECKED
            else:
                how = Enforcement.UNSUPPORTED
            if how is not None:
                out.append(KeywordEnforcement(path, key, how))
        for key in _ONE:
            walk(node.get(key), _sub(path, key))
        for key in _MANY:
            if isinstance(node.get(key), list):
                for i, sub in enumerate(node[key]):
                    walk(sub, _sub(path, key, i))
        for key in _MAP:
            if isinstance(node.get(key), dict):
                for name, sub in node[key].items():
                    walk(sub, _sub(path, key, name))

    walk(parameters, "")
    return _whole_branches(out)


def _whole_branches(report: list[KeywordEnforcement]) -> list[KeywordEnforcement]:
    """``report`` with each ``anyOf``/``contains`` labelled grammar only where every assertion
    below it is: a value may break them through any keyword of theirs."""
    out = list(report)
    # The paths of the keywords the grammar does not say whole, sorted: those below a path are a run.
    weak = sorted(e.path for e in out if e.enforcement in (Enforcement.NARROWED, Enforcement.CHECKED))
    # Deepest first: an inner anyOf settles before the one around it.
    for i in sorted(range(len(out)), key=lambda i: -out[i].path.count("/")):
        e = out[i]
        if e.keyword not in _WHOLE or e.enforcement is not Enforcement.GRAMMAR:
            continue
        below = _sub(e.path, e.keyword)
        j = bisect.bisect_left(weak, below)
        while j < len(weak) and weak[j].startswith(below):
            if weak[j] == below or weak[j].startswith(below + "/"):
                out[i] = KeywordEnforcement(e.path, e.keyword, Enforcement.NARROWED)
                bisect.insort(weak, e.path)
                break
            j += 1
    return out


def unsupported(parameters: dict[str, Any]) -> list[KeywordEnforcement]:
    """The keywords of ``parameters`` that neither the grammar nor the check enforces."""
    try:
        return [e for e in schema_report(parameters) if e.enforcement is Enforcement.UNSUPPORTED]
    except UnsupportedSchema as exc:
        return [KeywordEnforcement(exc.path, exc.keyword or "(schema)", Enforcement.UNSUPPORTED)]


def _sub(path: str, *parts: Any) -> str:
    return path + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
