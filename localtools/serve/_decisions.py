"""The decision levers on the wire, the same for every dialect of ``localtools serve``: a request's
``decisions`` setting read into the ``Decisions`` its turn runs under, and the turn's
``ChatResult.decisions`` written back as JSON."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import UsageError
from ..model._decide import Decisions
from ..model._load import resolve_decisions
from ._dialect import BadRequest

if TYPE_CHECKING:
    from ..model._turn import ChatResult

__all__ = ["COUNT_LIMITS", "decisions_json", "read_decisions"]

#: The most a request's own ``decisions`` object may ask of the counts that multiply a turn's work
#: (drawn replies, calls, tokens read and followed at each choice): one request may not hold the
#: model for hours. A named profile is the server's own and is not capped.
COUNT_LIMITS: Mapping[str, int] = {"samples": 16, "max_calls": 64, "k": 100, "depth": 8}

_EXPECTED = ("a profile name (such as 'greedy' or 'calibrated'), or an object of decision settings "
             "(docs/serve.md)")


def read_decisions(value: Any, model: str | None, *, family: str | None = None,
                   template: str | None = None) -> Decisions | None:
    """What a request's ``decisions`` field asks for: ``None`` (absent or null) is the model's own
    default; a string a profile ``resolve_decisions`` knows on ``model`` (one that is greedy comes
    back as ``Decisions()``: no lever, not the model's default); an object exactly those settings,
    the rest off. Raises ``BadRequest`` naming the field and what it takes."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            found = resolve_decisions(value, model, family=family, template=template)
            # None from a profile is greedy; to chat() None would mean the model's default.
            return Decisions() if found is None else found
        if isinstance(value, dict):
            _check_counts(value)
            return Decisions.from_dict(value)
    except UsageError as exc:
        raise BadRequest(f"'decisions' must be {_EXPECTED}: {exc}", "decisions", "invalid_value") from None
    raise BadRequest(f"'decisions' must be {_EXPECTED}, got {type(value).__name__}", "decisions", "invalid_value")


def _check_counts(settings: Mapping[str, Any]) -> None:
    """Counts are whole numbers, up to ``COUNT_LIMITS`` (``Decisions`` itself would take a float there
    and fail on it mid-turn; it checks their least values itself)."""
    counts = {f.name for f in dataclasses.fields(Decisions)
              if isinstance(f.default, int) and not isinstance(f.default, bool)}
    for key in sorted(counts & set(settings)):
        value, most = settings[key], COUNT_LIMITS.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or (most is not None and value > most):
            upto = f" up to {most}" if most is not None else ""
            raise UsageError(f"decision setting {key} takes a whole number{upto}, got {value!r}")


def decisions_json(result: ChatResult) -> list[dict[str, Any]]:
    """``result.decisions`` as JSON: each ``Decision`` an object of all its fields (new fields come
    along as they are added), enums as their value."""
    return [{f.name: _plain(getattr(d, f.name)) for f in dataclasses.fields(d)} for d in result.decisions]


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it: an enum as its value, a float that is not finite as null (JSON
    has no NaN), a tuple as a list, a dataclass as an object; what JSON has no form for as text."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)
