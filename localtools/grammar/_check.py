"""The check every call passes before it leaves: its arguments against its tool's own schema.

The grammar enforces what a context-free grammar can say; this catches the rest (a range, a
pattern, a format the grammar left to it) with ``jsonschema``, draft 2020-12, formats asserted
(its ``format-nongpl`` checkers; ``time``, ``date-time`` and ``email`` by RFC 3339 and 5321 here,
where jsonschema refuses every leap second and only looks for an "@").

It reads a schema as the grammar does: an older draft's schema converted to 2020-12
(``localtools.grammar._drafts``), ``$schema`` never followed, and every regex (``pattern``,
``patternProperties``, ``format: regex``) read as ECMA-262 by the grammar's own reader. A regular
pattern (most) is matched by its linear matcher (``_regex.search``), never by a backtracking
engine: jsonschema is handed, for each, the arguments' own strings it matches, spelled out. One
with look-around or back-references is translated to Python's dialect, unless its shape could make
Python's engine take exponential time (then the schema is refused). Arguments that are not JSON
(NaN, infinities, lone surrogates) never pass.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

import jsonschema

from .._errors import UnsupportedSchema
from ._drafts import to_2020_12

__all__ = ["Violation", "ecma_format_checker", "pointer", "schema_errors", "unsendable", "violations"]


@dataclass(frozen=True)
class Violation:
    """One way a call's arguments break its tool's schema."""

    tool: str
    #: JSON pointer into the arguments ("" for the whole object).
    pointer: str
    #: The schema keyword that failed ("maximum", "pattern", "format", ...).
    keyword: str
    message: str
    #: JSON pointer into the tool's schema, to the keyword that failed: names only what the
    #: schema says (the client's), never a key the model wrote; errors a client reads use it.
    schema_path: str = ""

    def __str__(self) -> str:
        return f"{self.tool}: {self.pointer or '/'} breaks {self.keyword!r}: {self.message}"


_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(\.\d+)?([zZ]|[+-](\d\d):(\d\d))", re.ASCII)
_EMAIL_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|\"([^\"\\]|\\.)*\"",
                          re.ASCII)
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_EMAIL_DOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*|\[IPv6:[0-9A-Fa-f:.]+\]|\[[0-9.]+\]", re.ASCII)


def _is_time(value: object) -> bool:
    """RFC 3339 full-time, a leap second only at 23:59:60 UTC (rfc3339-validator refuses all)."""
    if not isinstance(value, str):
        return True
    m = _TIME.fullmatch(value)
    if not m:
        return False
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    off_h, off_m = (int(m[6]), int(m[7])) if m[6] else (0, 0)
    if hour > 23 or minute > 59 or second > 60 or off_h > 23 or off_m > 59:
        return False
    if second == 60:
        sign = -1 if m[5].startswith("-") else 1
        utc = (hour * 60 + minute - sign * (off_h * 60 + off_m)) % (24 * 60)
        return utc == 23 * 60 + 59
    return True


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    day, sep, time = value.partition("T") if "T" in value else value.partition("t")
    if not sep or not re.fullmatch(r"\d{4}-\d\d-\d\d", day, re.ASCII):
        return False
    try:
        date.fromisoformat(day)
    except ValueError:
        return False
    return _is_time(time)


def _is_email(value: object) -> bool:
    """RFC 5321's mailbox shape (jsonschema only looks for an "@"); IP literals checked as such."""
    if not isinstance(value, str):
        return True
    local, at, domain = value.rpartition("@")
    if not at or not _EMAIL_LOCAL.fullmatch(local) or not _EMAIL_DOMAIN.fullmatch(domain):
        return False
    if domain.startswith("[IPv6:"):
        return _is_ip(domain[6:-1], ipaddress.IPv6Address)
    if domain.startswith("["):
        return _is_ip(domain[1:-1], ipaddress.IPv4Address)
    return True


def _is_ip(text: str, kind: type) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _is_regex(value: object) -> bool:
    """An ECMA-262 regex (jsonschema compiles it as Python's); one we cannot translate is given the benefit."""
    from ._regex import InvalidPattern, read

    if not isinstance(value, str):
        return True
    try:
        read(value)
    except InvalidPattern:
        return False
    return True


def ecma_format_checker(base: jsonschema.FormatChecker) -> jsonschema.FormatChecker:
    """``base`` with ``regex`` read as ECMA-262 (as JSON Schema says) and ``time``, ``date-time``
    and ``email`` as above."""
    checker = jsonschema.FormatChecker(())
    checker.checkers = dict(base.checkers)
    for name, fn in (("time", _is_time), ("date-time", _is_date_time), ("email", _is_email), ("regex", _is_regex)):
        checker.checkers[name] = (fn, ())
    return checker


# Keywords whose values are data, never schemas: nothing inside them is translated.
_DATA = frozenset({"enum", "const", "default", "examples", "required", "dependentRequired", "$comment"})
# Keywords whose values map names to schemas: the names stay as they are.
_NAMED = frozenset({"properties", "dependentSchemas", "$defs", "definitions"})
# Keywords whose values are schemas (or lists of them); anything else unknown is read leniently.
_SCHEMA_KEYWORDS = frozenset({
    "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "items", "prefixItems", "allOf", "anyOf", "oneOf", "additionalItems",
})


def _python_patterns(node: Any, path: str, patterns: _Patterns, *, strict: bool = True) -> Any:
    """The schema with each ECMA regex as the Python one meaning the same (a stand-in, for a
    regular one), and no ``$schema`` (jsonschema follows one in a subschema). ``strict`` off under
    unknown keywords, whose content is a schema only if a ``$ref`` makes it one: a regex there that
    cannot be read is left as is."""
    if isinstance(node, list):
        return [_python_patterns(v, f"{path}/{i}", patterns, strict=strict) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        at = f"{path}/{_escape(key)}"
        if key == "$schema" or key in _DATA:
            if key != "$schema":
                out[key] = value
        elif key == "pattern" and isinstance(value, str):
            out[key] = patterns.read(value, "pattern", path, strict=strict)
        elif key == "patternProperties" and isinstance(value, dict):
            out[key] = {patterns.read(k, key, path, strict=strict):
                        _python_patterns(v, f"{at}/{_escape(k)}", patterns, strict=strict) for k, v in value.items()}
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {k: _python_patterns(v, f"{at}/{_escape(k)}", patterns, strict=strict) for k, v in value.items()}
        else:
            out[key] = _python_patterns(value, at, patterns, strict=strict and key in _SCHEMA_KEYWORDS)
    return out


class _Patterns:
    """The patterns of one schema as the check reads them: each translated one's Python regex and
    the stand-in of each regular one, with the ECMA pattern it came from."""

    def __init__(self) -> None:
        self.originals: dict[str, str] = {}
        #: Stand-in -> the regular ECMA pattern, matched by the linear matcher on each call's strings.
        self.linear: dict[str, str] = {}

    def read(self, pattern: str, keyword: str, path: str, *, strict: bool) -> str:
        # Imported here: the grammar package imports this module, and its reader is the one to share.
        from ._regex import Untranslatable, linear, python_regex

        try:
            if linear(pattern):
                stand_in = f"{_tag(pattern)}(?!)"  # never matched: replaced on each call
                self.linear[stand_in] = pattern
                return stand_in
            translated = python_regex(pattern)
        except Untranslatable as exc:
            if not strict:
                return pattern
            raise UnsupportedSchema(f"{keyword} {pattern!r} at {path or '/'}: the check cannot read it: {exc}",
                                    keyword=keyword, path=path) from None
        self.originals[translated] = pattern
        return translated


def _tag(pattern: str) -> str:
    # As python_regex writes it: two patterns' regexes stay apart (as keys of one patternProperties).
    return f"(?#{hashlib.sha1(pattern.encode('utf-8', 'surrogatepass')).hexdigest()[:12]})"


@dataclass(frozen=True)
class _Checker:
    """A schema read for jsonschema: its validator, unless a regular pattern waits for the strings."""

    schema: Any
    validator: Any
    originals: tuple[tuple[str, str], ...]
    linear: tuple[tuple[str, str], ...]


@lru_cache(maxsize=1)
def _formats() -> jsonschema.FormatChecker:
    return ecma_format_checker(jsonschema.Draft202012Validator.FORMAT_CHECKER)


@lru_cache(maxsize=256)
def _checker(schema_json: str) -> _Checker:
    patterns = _Patterns()
    schema = _python_patterns(to_2020_12(json.loads(schema_json)), "", patterns)
    # Never the class ``$schema`` names: one reading, the grammar's.
    validator = None if patterns.linear else jsonschema.Draft202012Validator(schema, format_checker=_formats())
    return _Checker(schema, validator, tuple((repr(py), repr(ecma)) for py, ecma in patterns.originals.items()),
                    tuple(patterns.linear.items()))


def _validator(parameters: Any, arguments: Any) -> tuple[Any, tuple[tuple[str, str], ...]]:
    """The validator of ``parameters`` for ``arguments``, and (Python regex, ECMA pattern) reprs
    for its messages. A regular pattern becomes the exact list of the arguments' strings (keys and
    values) it matches, by the linear matcher: the only strings jsonschema will ask it about."""
    from ._regex import search

    checker = _checker(json.dumps(parameters, sort_keys=True))
    if checker.validator is not None:
        return checker.validator, checker.originals
    strings = sorted(_strings(arguments))
    table: dict[str, str] = {}
    for stand_in, pattern in checker.linear:
        found = [re.escape(text) for text in strings if search(pattern, text)]
        table[stand_in] = _tag(pattern) + (f"(?:\\A(?:{'|'.join(found)})\\Z)" if found else "(?!)")
    validator = jsonschema.Draft202012Validator(_stood_in(checker.schema, table), format_checker=_formats())
    return validator, checker.originals + tuple((repr(table[s]), repr(p)) for s, p in checker.linear)


def _strings(value: Any) -> set[str]:
    """Every string in ``value``, keys included (a loop: arguments may nest deep)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, Mapping):
            found.update(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


def _stood_in(node: Any, table: dict[str, str]) -> Any:
    """The schema with each stand-in (a ``pattern``, a ``patternProperties`` key) replaced from ``table``."""
    if isinstance(node, list):
        return [_stood_in(v, table) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DATA:
            out[key] = value
        elif key == "pattern" and isinstance(value, str):
            out[key] = table.get(value, value)
        elif key == "patternProperties" and isinstance(value, dict):
            out[key] = {table.get(k, k): _stood_in(v, table) for k, v in value.items()}
        else:
            out[key] = _stood_in(value, table)
    return out


def _escape(part: str) -> str:
    # A lone surrogate is written as its escape: a pointer must encode to UTF-8.
    text = part.replace("~", "~0").replace("/", "~1")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def pointer(path: Any) -> str:
    """A JSON pointer to ``path`` that encodes to UTF-8 whatever its keys."""
    return "".join("/" + _escape(str(part)) for part in path)


def unsendable(value: Any, path: list[Any] | None = None) -> Iterator[tuple[list[Any], str, Any]]:
    """Where ``value`` holds what JSON cannot carry, in document order: (path, "number" for a NaN
    or an infinity, "string" or "key" for a lone surrogate, the value)."""
    path = path or []
    if isinstance(value, float) and not math.isfinite(value):
        yield path, "number", value
    elif isinstance(value, str):
        if not _is_unicode(value):
            yield path, "string", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and not _is_unicode(key):
                yield [*path, key], "key", key
            yield from unsendable(item, [*path, key])
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from unsendable(item, [*path, i])


_NOT_JSON = {"number": "{!r} is not a finite number (JSON has no NaN or Infinity)",
             "string": "{!r} is not valid Unicode (lone surrogate)",
             "key": "the key {!r} is not valid Unicode (lone surrogate)"}


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def violations(tool: str, parameters: Mapping[str, Any], arguments: Any) -> list[Violation]:
    """Every way ``arguments`` break ``parameters`` (empty when they validate), in path order.

    Arguments that are not JSON (NaN, infinities, lone surrogates) get only those violations,
    under any schema. ``UnsupportedSchema`` for a schema whose regex cannot be read exactly.
    """
    broken = sorted(unsendable(arguments), key=lambda v: [str(p) for p in v[0]])
    if broken:
        return [Violation(tool, pointer(path), "type", _NOT_JSON[kind].format(bad), "#") for path, kind, bad in broken]
    return [Violation(tool, pointer(path), keyword, message, "#" + pointer(where)) for path, keyword, message, where in
            schema_errors(parameters, arguments)]


def schema_errors(parameters: Any, arguments: Any) -> list[tuple[list[Any], str, str, list[Any]]]:
    """(path into the arguments, keyword, message, path into the schema) for each way
    ``arguments`` break ``parameters`` as the check reads them (``violations`` less the JSON-only
    checks), in path order; what an agent's ``Tool.validate`` reports. ``UnsupportedSchema`` as
    for ``violations``."""
    validator, originals = _validator(parameters, arguments)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return [(list(e.absolute_path), str(e.validator), _message(e.message, originals), list(e.absolute_schema_path))
            for e in errors]


def _message(message: str, originals: tuple[tuple[str, str], ...]) -> str:
    """jsonschema's message with each regex written as the schema wrote it, not as translated."""
    for py, ecma in originals:
        message = message.replace(py, ecma)
    return message
