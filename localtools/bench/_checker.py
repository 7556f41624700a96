"""Scoring calls against BFCL-format possible answers (our own rules, written from the format).

A possible answer is a list of expected calls, each ``{function_name: {param: [allowed, ...]}}``.
An allowed list holding ``""`` means the parameter may be left out. A call matches an expected
call when the name is the same, every parameter it passes is known and has an allowed value, and
every parameter whose allowed list lacks ``""`` is present. Values compare type-aware: an integer
passes where the schema says number, strings compare after normalisation (case, whitespace and
punctuation ignored), lists element by element, dicts key by key with the same rules.
Several expected calls match as a multiset: in any order, each actual call used once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "check_calls", "normalize_string"]

_PUNCT = re.compile(r"[\s,./\-_*^'\"!?;:()\[\]{}]+")


def normalize_string(text: str) -> str:
    """Lower-case, with whitespace and punctuation removed: "New York, NY" == "new york ny"."""
    return _PUNCT.sub("", text).lower()


@dataclass(frozen=True)
class Verdict:
    ok: bool
    #: Why not, for reports ("" when ok).
    reason: str = ""


def _value_ok(value: Any, allowed: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(allowed, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(allowed, bool) and value == allowed
    if isinstance(allowed, int | float) and not isinstance(allowed, bool):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and kind == "integer":
            return False
        return float(value) == float(allowed)
    if isinstance(allowed, str):
        return isinstance(value, str) and normalize_string(value) == normalize_string(allowed)
    if isinstance(allowed, list):
        if not isinstance(value, list) or len(value) != len(allowed):
            return False
        item_schema = schema.get("items") or {}
        return all(_value_ok(v, a, item_schema) for v, a in zip(value, allowed, strict=True))
    if isinstance(allowed, dict):
        if not isinstance(value, dict):
            return False
        props = schema.get("properties") or {}
        # Nested possible answers list allowed values per key, like the top level.
        for key, options in allowed.items():
            choices = options if isinstance(options, list) else [options]
            if key not in value:
                if "" not in choices:
                    return False
                continue
            if not any(_value_ok(value[key], c, props.get(key) or {}) for c in choices if c != ""):
                return False
        return set(value) <= set(allowed)
    if allowed is None:
        return value is None
    return bool(value == allowed)


def _match_one(name: str, arguments: dict[str, Any], expected: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> Verdict:
    ((want, params),) = expected.items()
    if name != want:
        return Verdict(False, f"called {name!r}, expected {want!r}")
    props = (schemas.get(name) or {}).get("properties") or {}
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        return Verdict(False, f"{name}: unexpected argument(s) {', '.join(unknown)}")
    for param, allowed in params.items():
        if param not in arguments:
            if "" not in allowed:
                return Verdict(False, f"{name}: missing argument {param!r}")
            continue
        choices = [a for a in allowed if a != ""] if isinstance(allowed, list) else [allowed]
        if not any(_value_ok(arguments[param], a, props.get(param) or {}) for a in choices):
            return Verdict(False, f"{name}: {param}={arguments[param]!r} is not among {choices!r}")
    return Verdict(True)


def check_calls(
    calls: Sequence[tuple[str, dict[str, Any]]],
    expected: Sequence[dict[str, Any]],
    schemas: dict[str, dict[str, Any]] | None = None,
) -> Verdict:
    """Whether ``calls`` (name, arguments) match ``expected`` as a multiset.

    ``schemas`` maps function names to their JSON Schema parameters (for type-aware numbers and
    nested values). An empty ``expected`` means the right answer is no call at all (irrelevance).
    """
    schemas = schemas or {}
    if not expected:
        return Verdict(not calls, "" if not calls else f"expected no call, got {len(calls)}")
    if len(calls) != len(expected):
        return Verdict(False, f"expected {len(expected)} call(s), got {len(calls)}")
    first_failure = ""
    for order in itertools.permutations(range(len(calls))):
        for want, i in zip(expected, order, strict=True):
            verdict = _match_one(calls[i][0], calls[i][1], want, schemas)
            if not verdict.ok:
                first_failure = first_failure or verdict.reason
                break
        else:
            return Verdict(True)
    return Verdict(False, first_failure)
