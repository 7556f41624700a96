"""Reading a call's arguments back into JSON from each syntax the grammar writes them in.

``read_args(syntax, text, pos, schema)`` returns ``(arguments, end)``; it raises ``ValueError``
saying what it expected where the text is not in the syntax. The schema (the tool's
``parameters``, when known) types ``xml`` values, which are written without quotes.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

from ..grammar._syntax import GEMMA_QUOTE, XML_CLOSE

__all__ = ["read_args"]

_DECODER = json.JSONDecoder()
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_PY_STRING = re.compile(r"""'(?:[^'\\\x00-\x1f]|\\.)*'|"(?:[^"\\\x00-\x1f]|\\.)*\"""")


def read_args(syntax: str, text: str, pos: int, schema: Any = None, tags: tuple[str, ...] = ()
              ) -> tuple[dict[str, Any], int]:
    if syntax == "json":
        value, end = _DECODER.raw_decode(text, pos)
        if not isinstance(value, dict):
            raise ValueError(f"the arguments must be a JSON object, got {type(value).__name__}")
        return value, end
    if syntax == "xml":
        return _read_xml(text, pos, schema)
    if syntax == "kv" and len(tags) in (3, 4):
        return _read_kv(text, pos, schema, (tags[0], tags[1], tags[2]), tags[3] if len(tags) == 4 else tags[1])
    if syntax == "python":
        try:
            return _read_kwargs(text, pos)
        except (SyntaxError, RecursionError) as exc:
            raise ValueError(f"not a Python literal: {exc}") from None
    if syntax == "gemma4":
        value, end = _Gemma(text).value(pos)
        if not isinstance(value, dict):
            raise ValueError("the arguments must be a {key:value} object")
        return value, end
    raise ValueError(f"unknown argument syntax {syntax!r}")


# -- xml ------------------------------------------------------------------------------------------
def _read_xml(text: str, pos: int, schema: Any) -> tuple[dict[str, Any], int]:
    props, extra, defs = _members(schema)
    out: dict[str, Any] = {}
    while text.startswith("<parameter=", pos):
        close = text.find(">", pos)
        if close < 0:
            raise ValueError("a <parameter= tag is not closed")
        key = text[pos + len("<parameter="):close]
        start = close + 1 + (text.startswith("\n", close + 1))
        end = text.find(XML_CLOSE, start - 1)
        if end < start - 1:
            raise ValueError(f"parameter {key!r} has no {XML_CLOSE.strip()}")
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        out[key] = _xml_value(text[start:max(end, start)], _resolved(sub, defs))
        pos = end + len(XML_CLOSE)
        pos += text.startswith("\n", pos)
    return out, pos


def _read_kv(text: str, pos: int, schema: Any, tags: tuple[str, str, str], typed_mid: str
             ) -> tuple[dict[str, Any], int]:
    open_, mid, close = tags
    core = close.rstrip() or close
    props, extra, defs = _members(schema)
    out: dict[str, Any] = {}
    while text.startswith(open_, pos):
        found = sorted((at, len(m)) for m in {mid, typed_mid} if (at := text.find(m, pos + len(open_))) >= 0)
        if not found:
            raise ValueError(f"an argument's key is not followed by {mid!r}")
        key_end, length = found[0]
        key = text[pos + len(open_):key_end]
        start = key_end + length
        end = text.find(core, start)
        if end < 0:
            raise ValueError(f"argument {key!r} has no {core!r}")
        sub = props.get(key, extra if isinstance(extra, dict) else None)
        out[key] = _xml_value(text[start:end], _resolved(sub, defs))
        pos = end + len(core)
        pos += len(close) - len(core) if text.startswith(close[len(core):], pos) else 0
    return out, pos


def _members(schema: Any) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """An arguments schema's properties, its ``additionalProperties`` and its definitions, ``$ref`` followed."""
    schema = schema if isinstance(schema, dict) else {}
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    schema = _resolved(schema, defs)
    return schema.get("properties") or {}, schema.get("additionalProperties"), defs


def _resolved(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with local ``$ref`` followed and ``allOf`` parts merged, as the grammar reads it."""
    for _ in range(32):  # a $ref cycle ends here, untyped
        if not isinstance(schema, dict) or "$ref" not in schema:
            break
        schema = defs.get(str(schema["$ref"]).split("/")[-1])
    if isinstance(schema, dict) and "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolved(part, defs)
            if isinstance(part, dict):
                merged = {**part, **merged, "properties": {**part.get("properties", {}), **merged.get("properties", {})}}
        return merged
    return schema


def _xml_value(raw: str, schema: Any) -> Any:
    """A raw ``xml`` value, typed: a string stays as written; other types are read as the
    template prints them (JSON, or Python's ``True`` / ``None``)."""
    kinds = _types(schema)
    if kinds == {"string"}:
        return raw
    try:
        value = _WORDS[raw] if raw in _WORDS else json.loads(raw)
    except json.JSONDecodeError:
        try:  # a list or dict as Python prints it (templates that ``| string`` them)
            value = ast.literal_eval(raw) if raw[:1] in "[{" else raw
        except (ValueError, SyntaxError, RecursionError):
            return raw
        if value is raw:
            return raw
    kind = _json_type(value)
    fits = kind in kinds or (kind == "integer" and "number" in kinds)
    if kinds and not fits and "string" in kinds:
        return raw  # text that reads as another type ("12345", "[1, 2]") where a string may go
    if "string" in kinds and not _valid(value, schema) and _valid(raw, schema):
        return raw  # both readings are allowed by type; only the text fits the schema ("\t8" where 8 is too small)
    return value


def _valid(value: Any, schema: Any) -> bool:
    import jsonschema

    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(value))
    except Exception:  # a schema (or a $ref in it) this cannot read alone: the check after parsing judges
        return True


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    if "enum" in schema or "const" in schema:
        values: list[Any] = schema["enum"] if "enum" in schema else [schema.get("const")]
        return {_json_type(v) for v in values}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {str(k) for k in kind}
    return {t for s in schema.get("anyOf") or schema.get("oneOf") or [] for t in _types(s)}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "array" if isinstance(value, list) else "object"


# -- python ---------------------------------------------------------------------------------------
class _Literal:
    """Python literals, with JSON's spellings accepted too (``true``, ``null``, double quotes)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, pos: int) -> int:
        while pos < len(self.text) and self.text[pos] in " \t\r\n":
            pos += 1
        return pos

    def value(self, pos: int) -> tuple[Any, int]:
        t = self.text
        pos = self.skip(pos)
        if pos >= len(t):
            raise ValueError("a value was expected at the end of the text")
        ch = t[pos]
        if ch in "'\"":
            m = _PY_STRING.match(t, pos)
            if not m:
                raise ValueError(f"a string opening at character {pos} is not closed")
            if ch == '"':
                # Double quotes come from JSON (``| tojson`` of an object): read as JSON, whose
                # escapes (\/, surrogate pairs) Python's differ from.
                try:
                    return json.loads(m.group()), m.end()
                except json.JSONDecodeError:
                    pass
            with warnings.catch_warnings():  # an unknown escape ('\d') stands for itself, as Python reads it
                warnings.simplefilter("ignore")
                return ast.literal_eval(m.group()), m.end()
        if ch in "[(":
            return self.items(pos + 1, "]" if ch == "[" else ")")
        if ch == "{":
            return self.mapping(pos + 1)
        m = _NUMBER.match(t, pos)
        if m:
            return json.loads(m.group()), m.end()
        m = _NAME.match(t, pos)
        if m and m.group() in _WORDS:
            return _WORDS[m.group()], m.end()
        raise ValueError(f"no value at character {pos}")  # where, never what the model wrote

    def items(self, pos: int, close: str) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = self.skip(pos)
        while not self.text.startswith(close, pos):
            item, pos = self.value(pos)
            out.append(item)
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif not self.text.startswith(close, pos):
                raise ValueError(f"expected ',' or {close!r} at character {pos}")
        return out, pos + 1

    def mapping(self, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        pos = self.skip(pos)
        while not self.text.startswith("}", pos):
            key, pos = self.value(pos)
            pos = self.skip(pos)
            if not self.text.startswith(":", pos):
                raise ValueError(f"expected ':' at character {pos}")
            out[str(key)], pos = self.value(pos + 1)
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif not self.text.startswith("}", pos):
                raise ValueError(f"expected ',' or '}}' at character {pos}")
        return out, pos + 1


def _read_kwargs(text: str, pos: int) -> tuple[dict[str, Any], int]:
    """``k=v, ...`` up to (not including) the closing parenthesis."""
    lit = _Literal(text)
    out: dict[str, Any] = {}
    pos = lit.skip(pos)
    while pos < len(text) and text[pos] != ")":
        m = _NAME.match(text, pos)
        if not m or not text.startswith("=", m.end()):
            raise ValueError(f"expected a keyword argument (name=value) at character {pos}")
        out[m.group()], pos = lit.value(m.end() + 1)
        pos = lit.skip(pos)
        if text.startswith(",", pos):
            pos = lit.skip(pos + 1)
        elif not text.startswith(")", pos):
            raise ValueError(f"expected ',' or ')' at character {pos}")
    return out, pos


# -- gemma4 ---------------------------------------------------------------------------------------
class _Gemma(_Literal):
    """Gemma 4's values: ``<|"|>`` strings, bare keys, JSON's numbers and words."""

    def value(self, pos: int) -> tuple[Any, int]:
        if self.text.startswith(GEMMA_QUOTE, pos):
            end = self.text.find(GEMMA_QUOTE, pos + len(GEMMA_QUOTE))
            if end < 0:
                raise ValueError(f"a {GEMMA_QUOTE} string opening at character {pos} is not closed")
            return self.text[pos + len(GEMMA_QUOTE):end], end + len(GEMMA_QUOTE)
        return super().value(pos)

    def mapping(self, pos: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        while not self.text.startswith("}", pos):
            m = _NAME.match(self.text, pos)
            if not m or not self.text.startswith(":", m.end()):
                raise ValueError(f"expected key: at character {pos}")
            out[m.group()], pos = self.value(m.end() + 1)
            if self.text.startswith(",", pos):
                pos += 1
            elif not self.text.startswith("}", pos):
                raise ValueError(f"expected ',' or '}}' at character {pos}")
        return out, pos + 1
