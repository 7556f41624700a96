"""The check every call passes before it leaves: its arguments against its tool's own schema.

The grammar enforces what a context-free grammar can say; this catches the rest (a range, a
pattern, a format the grammar left to it) with ``jsonschema``, draft 2020-12, formats asserted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
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


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _pointer(path: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def violations(tool: str, parameters: Mapping[str, Any], arguments: Any) -> list[Violation]:
    """Every way ``arguments`` break ``parameters`` (empty when they validate), in path order."""
    validator = _validator(json.dumps(parameters, sort_keys=True))
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return [Violation(tool, _pointer(e.absolute_path), str(e.validator), e.message) for e in errors]
