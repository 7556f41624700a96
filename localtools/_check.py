"""The check every call passes before it leaves: its arguments against its tool's own schema.

The grammar enforces what a context-free grammar can say; this catches the rest (a range, a
pattern, a format the grammar left to it) with ``jsonschema``, draft 2020-12, formats asserted
(its ``format-nongpl`` checkers; ``time``, ``date-time`` and ``email`` by RFC 3339 and 5321 here,
where jsonschema refuses every leap second and only looks for an "@").
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

import jsonschema

__all__ = ["Violation", "violations"]


@dataclass(frozen=True)
class Violation:
    """One way a call's arguments break its tool's schema."""

    tool: str
    #: JSON pointer into the arguments ("" for the whole object).
    pointer: str
    #: The schema keyword that failed ("maximum", "pattern", "format", ...).
    keyword: str
    message: str

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


def _format_checker(base: jsonschema.FormatChecker) -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(())
    checker.checkers = dict(base.checkers)
    for name, fn in (("time", _is_time), ("date-time", _is_date_time), ("email", _is_email)):
        checker.checkers[name] = (fn, ())
    return checker


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=_format_checker(cls.FORMAT_CHECKER))


def _pointer(path: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def violations(tool: str, parameters: Mapping[str, Any], arguments: Any) -> list[Violation]:
    """Every way ``arguments`` break ``parameters`` (empty when they validate), in path order."""
    validator = _validator(json.dumps(parameters, sort_keys=True))
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return [Violation(tool, _pointer(e.absolute_path), str(e.validator), e.message) for e in errors]
