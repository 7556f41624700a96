"""One reading of a schema: an older draft's schema rewritten to mean the same under draft 2020-12.

The grammar reads 2020-12 and so does the check (it never follows ``$schema``), so a schema that
declares draft-04, -06, -07 or 2019-09 is converted first: ``items: [...]`` becomes
``prefixItems`` (and ``additionalItems`` then ``items``), ``dependencies`` becomes
``dependentRequired``/``dependentSchemas``, the keywords beside a draft-07 ``$ref`` are dropped
(they were ignored), draft-04's boolean ``exclusiveMinimum``/``exclusiveMaximum`` become numbers,
``id`` and ``#name`` ids become ``$id`` and ``$anchor``. ``definitions`` stays where it is, and
``#/...`` references are rewritten where they pass a renamed keyword.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import unquote

from .._errors import UnsupportedSchema

__all__ = ["DRAFT_2020_12", "IGNORED_IN_2020_12", "draft_of", "to_2020_12"]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
#: Keywords of older drafts that mean nothing under 2020-12: a report must say nobody enforces
#: them (``unsupported``), never that the check does.
IGNORED_IN_2020_12 = frozenset({"additionalItems", "dependencies", "$recursiveRef", "$recursiveAnchor"})

_DRAFTS = {"draft-03": 3, "draft-04": 4, "draft-06": 6, "draft-07": 7, "2019-09": 2019, "2020-12": 2020}
# Keywords whose value is one schema, a list of schemas, or a map of them, in every draft we read.
_ONE = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems",
        "unevaluatedProperties", "additionalItems", "items")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
# What a draft <= 7 "$ref" keeps beside it: nothing it reads, but what a "#/..." pointer may reach.
_KEPT_BESIDE_REF = frozenset({"$ref", "definitions", "$defs", "title", "description", "$comment", "default",
                              "examples"})
_KEYWORDS = frozenset({
    *_ONE, *_MANY, *_MAP, "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies", "format",
    "$id", "id", "$anchor", "$schema", "$recursiveRef", "$recursiveAnchor", "$dynamicRef", "$dynamicAnchor",
    "contentMediaType", "contentEncoding", "contentSchema", "readOnly", "writeOnly", "deprecated",
})


def draft_of(schema: Any) -> int:
    """The draft ``schema`` declares (4, 6, 7, 2019 or 2020); 2020 when it declares none we know."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return 2020
    return next((n for name, n in _DRAFTS.items() if name in uri and "json-schema.org" in uri), 2020)


def to_2020_12(schema: Any) -> Any:
    """``schema`` meaning under draft 2020-12 what it means under the draft its ``$schema`` names
    (the very object when that is 2020-12 or none). ``UnsupportedSchema`` for draft-03, and for
    2019-09's ``$recursiveRef`` where it cannot be a plain ``$ref``."""
    draft = draft_of(schema)
    if draft == 2020:
        return schema
    if draft == 3:
        raise UnsupportedSchema("draft-03 schemas are not read; declare draft-04 or later", keyword="$schema")
    out = _convert(copy.deepcopy(schema), draft, schema, "")
    out["$schema"] = DRAFT_2020_12
    return out


# Keywords a later draft added: the declared draft ignores them, so 2020-12 must not see them.
_LATER = {
    2019: frozenset({"prefixItems", "$dynamicRef", "$dynamicAnchor"}),
    7: frozenset({"dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems", "minContains",
                  "maxContains", "$anchor", "$recursiveRef", "$recursiveAnchor"}),
    6: frozenset({"if", "then", "else"}),
    4: frozenset({"const", "contains", "propertyNames"}),
}


def _convert(node: Any, draft: int, root: Any, path: str) -> Any:
    if not isinstance(node, dict):
        return node
    later = frozenset().union(*(kws for d, kws in _LATER.items() if d >= draft))
    node = {k: v for k, v in node.items() if k not in later}
    if draft <= 7 and "$ref" in node:
        node = {k: v for k, v in node.items() if k in _KEPT_BESIDE_REF or k not in _KEYWORDS}
    if isinstance(node.get("$ref"), str):
        node["$ref"] = _moved_ref(node["$ref"], root, draft)
    if draft == 2019:
        _recursive(node, root, path)
    if draft == 4:
        if "id" in node and "$id" not in node:
            node["$id"] = node.pop("id")
        for bound, exclusive in (("maximum", "exclusiveMaximum"), ("minimum", "exclusiveMinimum")):
            # Popped either way: "true" moves the bound over, "false" means nothing.
            if isinstance(node.get(exclusive), bool) and node.pop(exclusive) and bound in node:
                node[exclusive] = node.pop(bound)
    if draft <= 7 and isinstance(node.get("$id"), str) and node["$id"].startswith("#"):
        node["$anchor"] = node.pop("$id")[1:]  # a plain-name id is 2020-12's anchor
    if isinstance(node.get("items"), list):
        node["prefixItems"] = node.pop("items")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
    else:
        node.pop("additionalItems", None)  # beside a single "items" schema (or none) it was ignored
    if draft <= 7 and isinstance(node.get("dependencies"), dict):
        for key, dep in node.pop("dependencies").items():
            target = "dependentRequired" if isinstance(dep, list) else "dependentSchemas"
            node.setdefault(target, {})[key] = dep
    for key in _ONE:
        if key in node:
            node[key] = _convert(node[key], draft, root, f"{path}/{key}")
    for key in _MANY:
        if isinstance(node.get(key), list):
            node[key] = [_convert(s, draft, root, f"{path}/{key}/{i}") for i, s in enumerate(node[key])]
    for key in _MAP:
        if isinstance(node.get(key), dict):
            node[key] = {k: _convert(s, draft, root, f"{path}/{key}/{k}") for k, s in node[key].items()}
    return node


def _recursive(node: dict[str, Any], root: Any, path: str) -> None:
    """2019-09's ``$recursiveRef``: a plain ``$ref`` where the document holds one resource (no
    nested ``$id``), so the dynamic scope has nowhere else to go."""
    node.pop("$recursiveAnchor", None)
    if "$recursiveRef" not in node:
        return
    target = node.pop("$recursiveRef")
    if target != "#" or _nested_ids(root, top=True) or "$ref" in node:
        raise UnsupportedSchema(f"$recursiveRef {target!r} at {path or '/'}: only '#' in a single-resource schema is read",
                                keyword="$recursiveRef", path=path)
    node["$ref"] = "#"


def _nested_ids(node: Any, *, top: bool = False) -> bool:
    if isinstance(node, dict):
        return (not top and "$id" in node) or any(_nested_ids(v) for k, v in node.items() if k not in ("enum", "const"))
    if isinstance(node, list):
        return any(_nested_ids(v) for v in node)
    return False


def _moved_ref(ref: str, root: Any, draft: int) -> str:
    """A ``#/...`` pointer into the original document, pointing at the same schema after the
    renames (``items/0`` -> ``prefixItems/0``, ``dependencies/x`` -> ``dependentSchemas/x``)."""
    if not ref.startswith("#/"):
        return ref
    parts = ref[2:].split("/")
    node = root
    out: list[str] = []
    for raw in parts:
        key = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if key == "items" and isinstance(node.get("items"), list):
                raw = "prefixItems"
            elif key == "additionalItems" and isinstance(node.get("items"), list):
                raw = "items"
            elif key == "dependencies" and draft <= 7 and isinstance(node.get("dependencies"), dict):
                out.append("dependentSchemas")
                node = node["dependencies"]
                continue
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            node = None
        out.append(raw)
    return "#/" + "/".join(out)
