"""Masking secrets in tool arguments and results before they are logged.

A field is sensitive when the tool's JSON Schema marks it (``"writeOnly": true`` or
``"format": "password"``, as pydantic's ``SecretStr`` does, or ``"x-sensitive": true``) or when
its key holds one of the key patterns as whole words. A key is split into words (at ``-``,
``_``, spaces, dots and camelCase); a pattern matches a run of consecutive words written together,
lowercased: ``"X-API-Key"`` and ``"apiKey"`` match ``apikey``, ``"client_secret_value"`` matches
``secret`` and ``"creditCardNumber"`` matches ``creditcard``; ``"max_tokens"`` does not match
``token``, nor ``"business_name"`` ``ssn``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["DEFAULT_SENSITIVE_KEYS", "MASK", "is_sensitive_key", "redact", "redact_json", "sensitive_keys"]

#: Key patterns that mark a field as sensitive whatever the schema says.
DEFAULT_SENSITIVE_KEYS: tuple[str, ...] = (
    "password", "passwd", "secret", "token", "apikey", "authorization", "cookie", "ssn", "creditcard", "cardnumber",
    "privatekey",
)
MASK = "[redacted]"

_Schema = dict[str, Any]


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _normalise(key: object) -> str:
    return str(key).lower().replace("-", "").replace("_", "").replace(" ", "").replace(".", "")


def _word_runs(key: object) -> set[str]:
    """Every run of consecutive words of ``key``, written together and lowercased."""
    words = [w.lower() for w in _WORD.findall(str(key))]
    return {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}


def is_sensitive_key(key: object, keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS) -> bool:
    """Whether ``key`` holds one of the patterns ``keys`` as whole words."""
    return _matches(key, _patterns(keys))


def _matches(key: object, patterns: list[str]) -> bool:
    return bool(patterns) and not _word_runs(key).isdisjoint(patterns)


def redact(value: Any, *, schema: _Schema | None = None, keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS, mask: str = MASK) -> Any:
    """A copy of the JSON-like ``value`` with each sensitive field's value replaced by ``mask``.

    ``schema`` describes ``value`` (a tool's ``parameters``); ``properties``, ``items``,
    ``additionalProperties``, ``anyOf``/``oneOf``/``allOf`` and local ``$ref`` are followed.
    Dicts, lists and tuples are copied; other values are returned as they are. A value nested
    too deep to walk is masked whole.
    """
    patterns = _patterns(keys)
    root = schema if isinstance(schema, dict) else {}
    try:
        return _redact(value, [root] if schema is not None else [], root, patterns, mask)
    except RecursionError:
        return mask  # fail closed: what cannot be inspected is not shown


def redact_json(text: str, *, schema: _Schema | None = None, keys: Iterable[str] = DEFAULT_SENSITIVE_KEYS, mask: str = MASK) -> str:
    """``redact`` for a JSON document in a string (a tool's result as the model sees it).

    Text that is not JSON, or that has nothing to mask, is returned unchanged.
    """
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    cleaned = redact(parsed, schema=schema, keys=keys, mask=mask)
    try:
        unchanged = cleaned == parsed
    except RecursionError:
        unchanged = False
    if unchanged:
        return text
    return json.dumps(cleaned, ensure_ascii=False)


def sensitive_keys(schema: _Schema) -> set[str]:
    """Names of the properties, at any depth, that ``schema`` marks as sensitive."""
    found: set[str] = set()
    seen: set[int] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for branch in _branches([node], schema):
            seen.add(id(branch))
            for name, sub in _dict(branch.get("properties")).items():
                if isinstance(sub, dict):
                    if _marked(_branches([sub], schema)):
                        found.add(name)
                    stack.append(sub)
            for key in ("items", "additionalProperties"):
                if isinstance(branch.get(key), dict):
                    stack.append(branch[key])
            stack += [s for s in branch.get("prefixItems") or () if isinstance(s, dict)]
    return found


def _patterns(keys: Iterable[str]) -> list[str]:
    # One string is one pattern, not a pattern per character.
    return [p for p in map(_normalise, (keys,) if isinstance(keys, str) else keys) if p]


def _redact(value: Any, schemas: list[_Schema], root: _Schema, patterns: list[str], mask: str) -> Any:
    branches = list(_branches(schemas, root))
    if _marked(branches):
        return mask
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if _matches(key, patterns):
                out[key] = mask
            else:
                out[key] = _redact(item, _property(branches, key), root, patterns, mask)
        return out
    if isinstance(value, list | tuple):
        items = [_redact(item, _item(branches, i), root, patterns, mask) for i, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    return value


def _branches(schemas: Iterable[_Schema], root: _Schema) -> Iterator[_Schema]:
    """Each schema, what its ``$ref`` points to and its ``allOf``/``anyOf``/``oneOf`` branches."""
    stack = list(schemas)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _resolve(ref, root)
            if target is not None:
                stack.append(target)
        for key in ("allOf", "anyOf", "oneOf"):
            stack += [s for s in node.get(key) or () if isinstance(s, dict)]


def _resolve(ref: str, root: _Schema) -> _Schema | None:
    if not ref.startswith("#"):
        return None  # a remote schema is not fetched
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, dict) else None


def _marked(branches: Iterable[_Schema]) -> bool:
    return any(b.get("writeOnly") is True or b.get("format") == "password" or b.get("x-sensitive") is True for b in branches)


def _property(branches: list[_Schema], key: Any) -> list[_Schema]:
    found = [p[key] for b in branches if isinstance(p := b.get("properties"), dict) and isinstance(p.get(key), dict)]
    if not found:
        found = [extra for b in branches if isinstance(extra := b.get("additionalProperties"), dict)]
    return found


def _item(branches: list[_Schema], index: int) -> list[_Schema]:
    found: list[_Schema] = []
    for b in branches:
        prefix = b.get("prefixItems")
        if isinstance(prefix, list) and index < len(prefix) and isinstance(prefix[index], dict):
            found.append(prefix[index])
        elif isinstance(b.get("items"), dict):
            found.append(b["items"])
    return found


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
