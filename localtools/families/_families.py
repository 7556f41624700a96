"""Model families: one record each in ``templates/families.toml`` (this folder), picked from GGUF metadata.

Users add families without forking: a directory with its own ``families.toml`` (template and
grammar files beside it) named in ``$LOCALTOOLS_FAMILIES``, or ``register_family`` (``_choose``) in process.
Their families come first, so their ``match`` rules and names win over the built-in ones.
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from .._errors import TemplateError
from .._resources import read_text
from .._types import ARGS_SYNTAXES, CALL_STYLES, ArgsSyntax, CallStyle, Family

__all__ = [
    "ARGS_SYNTAXES",
    "CALL_STYLES",
    "FAMILIES_ENV",
    "Family",
    "add_registered",
    "detect_family",
    "families",
    "family_from_record",
    "get_family",
    "table_from_text",
]

#: Directories of user families (``os.pathsep``-separated), each with a ``families.toml``.
FAMILIES_ENV = "LOCALTOOLS_FAMILIES"

_FIELDS = {f for f in Family.__dataclass_fields__ if f not in ("name", "directory")}
#: Fields a record may leave out (their defaults suit most families).
_OPTIONAL = {"args_syntax", "reasoning_start", "reasoning_end", "reply_opening", "arg_tags", "arg_values", "parallel_forms",
             "error_hint"}
_registered: dict[str, Family] = {}


def _family(name: str, rec: dict[str, Any], where: str, directory: str = "") -> Family:
    missing = _FIELDS - _OPTIONAL - set(rec)
    unknown = set(rec) - _FIELDS
    if missing or unknown:
        raise TemplateError(f"family {name!r} in {where}: missing {sorted(missing)}; unknown {sorted(unknown)}")
    for key, allowed in (("call_style", CALL_STYLES), ("args_syntax", ARGS_SYNTAXES)):
        if key in rec and rec[key] not in allowed:
            raise TemplateError(f"family {name!r} in {where}: {key} {rec[key]!r} is not one of {', '.join(allowed)}")
    if rec.get("args_syntax", "json") != "json" and rec["call_style"] != "pattern":
        raise TemplateError(f"family {name!r} in {where}: args_syntax {rec['args_syntax']!r} needs call_style "
                            "'pattern' (the other styles read calls as JSON objects)")
    if (rec.get("args_syntax") == "kv") != bool(rec.get("arg_tags")) or len(rec.get("arg_tags") or "abc") not in (3, 4):
        raise TemplateError(f"family {name!r} in {where}: args_syntax 'kv' needs arg_tags (three strings: before a "
                            "key, between key and value, after a value; a fourth where a value that is no string "
                            "follows its key differently), and arg_tags only goes with 'kv'")
    if rec.get("arg_values", "json") not in ("json", "python"):
        raise TemplateError(f"family {name!r} in {where}: arg_values {rec['arg_values']!r} is not one of json, python")
    if bool(rec.get("reasoning_start")) != bool(rec.get("reasoning_end")):
        raise TemplateError(f"family {name!r} in {where}: give both reasoning_start and reasoning_end, or neither")
    if any(not str(f).startswith("list-") for f in rec.get("parallel_forms") or ()):
        raise TemplateError(f"family {name!r} in {where}: parallel_forms are list-* rules of the grammar file, got "
                            f"{rec['parallel_forms']}")
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in rec.items()}
    values["call_style"] = CallStyle(values["call_style"])
    values["args_syntax"] = ArgsSyntax(values.get("args_syntax", "json"))
    return Family(name=name, directory=directory, **values)


def table_from_text(text: str, where: str, directory: str = "") -> dict[str, Family]:
    """The families of a ``families.toml`` text (``where`` names it in errors; ``directory`` holds its files)."""
    try:
        table = tomllib.loads(text).get("families", {})
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(f"{where} is not valid TOML: {exc}") from None
    return {name: _family(name, rec, where, directory) for name, rec in table.items()}


@cache
def _builtin() -> dict[str, Family]:
    return table_from_text(read_text("templates", "families.toml"), "families.toml")


def _from_env() -> dict[str, Family]:
    out: dict[str, Family] = {}
    for folder in filter(None, os.environ.get(FAMILIES_ENV, "").split(os.pathsep)):
        path = Path(folder).expanduser() / "families.toml"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TemplateError(f"${FAMILIES_ENV} names {folder}, but {path} cannot be read: {exc.strerror}") from None
        out.update({n: f for n, f in table_from_text(text, str(path), str(path.parent)).items() if n not in out})
    return out


def families() -> dict[str, Family]:
    """Every family: registered ones first, then those in ``$LOCALTOOLS_FAMILIES``, then the built-in ones."""
    out = dict(_registered)
    for table in (_from_env(), _builtin()):
        out.update({n: f for n, f in table.items() if n not in out})
    return out


def add_registered(family: Family) -> None:
    """Put ``family`` first, for this process (``register_family`` checks it first)."""
    _registered[family.name] = family


def family_from_record(name: str, record: dict[str, Any], where: str, directory: str = "") -> Family:
    """A family from a ``families.toml`` record; ``TemplateError`` names a missing or unknown field."""
    return _family(name, record, where, directory)


def get_family(name: str) -> Family:
    """A family by name or alias; ``TemplateError`` lists the known ones."""
    table = families()
    if name in table:
        return table[name]
    for fam in table.values():
        if name in fam.aliases:
            return fam
    known = ", ".join(f"{n} ({', '.join(f.aliases)})" if f.aliases else n for n, f in table.items())
    raise TemplateError(f"unknown family {name!r}; known families: {known}")


def detect_family(metadata: dict[str, Any]) -> Family:
    """The first family whose ``match`` rules fit the GGUF metadata."""
    for fam in families().values():
        if fam.matches(metadata):
            return fam
    arch = metadata.get("general.architecture", "?")
    raise TemplateError(
        f"no family matches this model (architecture {arch!r}, name {metadata.get('general.name')!r}); "
        f"pass family=... (one of: {', '.join(families())})"
    )
