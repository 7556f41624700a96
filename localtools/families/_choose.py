"""Which family a model gets: one that renders as the model's own chat template does, or the
template itself with a call syntax read off it; never a wrong family in silence.

A family's ``match`` rules only name candidates. A candidate is taken when it renders the probe
conversations (``_template_check.CONVERSATIONS``) byte for byte as the GGUF's template does; when
none does, the family is ``auto``: the GGUF's template with a derived call syntax that round-trips.
A family named by the user is checked too and used even if it differs, with a warning.
"""

from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._errors import DeriveError, FamilyNotFound, TemplateError
from ..grammar._build import _family_grammar, call_shape
from ._derive import AUTO_FAMILY, derive, round_trip
from ._families import CallStyle, Family, add_registered, detect_family, families, family_from_record, get_family
from ._template_check import CONVERSATIONS, compare_templates

__all__ = ["FamilyCheck", "FamilyMismatchWarning", "Verdict", "check_family", "choose_family", "register_family"]


class Verdict(enum.Enum):
    """How a model's family was chosen."""

    #: The family renders every probe conversation as the model's own template does.
    IDENTICAL = "identical"
    #: The model's template knows no tools; on plain chat the family renders as it does, and the
    #: family's own tool prompt and call syntax are used.
    CHAT_ONLY = "identical on plain chat"
    #: The model file has no chat template: the family is the one its match rules name, unchecked.
    NO_TEMPLATE = "no template to check"
    #: The model's own template, with a call syntax derived from it.
    AUTO = "auto"
    #: Named by the user, and it renders differently from the model's template.
    DIFFERS = "differs"


class FamilyMismatchWarning(UserWarning):
    """A family named by the user renders differently from the model's own chat template."""


@dataclass(frozen=True)
class FamilyCheck:
    """The outcome: the family, how it was chosen, and the candidates turned down (with where they differ)."""

    family: str
    verdict: Verdict
    detail: str = ""
    rejected: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.family}: {self.verdict.value}"
        if self.detail:
            text += f" ({self.detail})"
        if self.rejected:
            text += "; turned down: " + "; ".join(self.rejected)
        return text


def _plain(messages: list[dict[str, Any]]) -> bool:
    return not any(m.get("tool_calls") or m.get("role") == "tool" or m.get("reasoning_content") for m in messages)


@lru_cache(maxsize=64)
def check_family(family: Family, source: str) -> tuple[Verdict | None, str]:
    """``(verdict, detail)``: IDENTICAL or CHAT_ONLY when ``family`` renders as ``source`` does,
    ``None`` and where they first differ otherwise. Conversations ``source`` itself refuses
    are not held against the family; ``source`` that never mentions tools is compared on plain chat."""
    plain_only = "tool" not in source
    plain = {label for label, messages in CONVERSATIONS if _plain(messages)}
    compared = 0
    for r in compare_templates(family.template_source(), source):
        if plain_only and (r.tools or r.label not in plain):
            continue
        if r.their_error:
            continue
        if r.our_error:
            return None, f"{r.label!r}{' with tools' if r.tools else ''}: the family cannot render it ({r.our_error})"
        at = r.first_difference
        if at is not None:
            return None, (f"{r.label!r}{' with tools' if r.tools else ''} differs at character {at}: "
                          f"the family writes {r.ours[at:at + 32]!r}, the model's template {r.theirs[at:at + 32]!r}")
        compared += 1
    if not compared:
        return None, "the model's template renders none of the probe conversations"
    return (Verdict.CHAT_ONLY if plain_only else Verdict.IDENTICAL), ""


@lru_cache(maxsize=16)
def _auto(source: str) -> Family:
    derived = derive(source)
    family = derived.family()
    trip = round_trip(family)
    if not trip.ok:
        raise DeriveError("calls the template renders do not read back through the derived syntax: "
                          + ("; ".join(trip.failures[:2]) or "it renders no calls"))
    return family


def choose_family(metadata: dict[str, Any], family: str | Family | None = None) -> tuple[Family, FamilyCheck]:
    """The family for a model with GGUF ``metadata``, and how it was chosen.

    ``family`` (a name or a ``Family``) is used as given, checked against the model's template:
    when it differs, ``FamilyMismatchWarning`` names where. Without it, the first candidate of
    the match rules that renders as the model's template does; else ``auto``; else
    ``FamilyNotFound`` saying what was tried and the fix.
    """
    source = metadata.get("tokenizer.chat_template")
    source = source if isinstance(source, str) and source.strip() else None
    if family is not None:
        fam = family if isinstance(family, Family) else get_family(family)
        if source is None or fam.name == AUTO_FAMILY:
            return fam, FamilyCheck(fam.name, Verdict.NO_TEMPLATE if source is None else Verdict.AUTO)
        verdict, detail = check_family(fam, source)
        if verdict is None:
            warnings.warn(FamilyMismatchWarning(
                f"family {fam.name!r} renders prompts differently from this model's own chat template: {detail}; "
                "it is used because it was named"), stacklevel=3)
            return fam, FamilyCheck(fam.name, Verdict.DIFFERS, detail)
        return fam, FamilyCheck(fam.name, verdict)
    if source is None:
        fam = detect_family(metadata)
        return fam, FamilyCheck(fam.name, Verdict.NO_TEMPLATE, "the model file has no chat template")
    rejected: list[str] = []
    for candidate in families().values():
        if not candidate.matches(metadata):
            continue
        verdict, detail = check_family(candidate, source)
        if verdict is not None:
            return candidate, FamilyCheck(candidate.name, verdict, rejected=tuple(rejected))
        rejected.append(f"{candidate.name}: {detail}")
    try:
        fam = _auto(source)
    except DeriveError as exc:
        tried = "; ".join(rejected) if rejected else "no family's match rules fit it"
        raise FamilyNotFound(
            f"no family renders this model's chat template as it does ({tried}), and its call syntax cannot be "
            f"derived: {exc}. Fix: add a family for it (docs/families.md, 'How a model's family is chosen'); "
            "'localtools templates derive MODEL.gguf' shows what was found; or name a family (family=...) to use "
            "it anyway") from None
    return fam, FamilyCheck(fam.name, Verdict.AUTO, "the model's own template; call syntax derived from it",
                            tuple(rejected))


def register_family(name: str, *, template: str | Path, grammar: str | Path, **record: Any) -> Family:
    """Adds a family for this process, its template and grammar read from the given files; the
    other fields are those of a ``families.toml`` record. It comes before every other family."""
    paths = {"template": Path(template).expanduser().resolve(), "grammar": Path(grammar).expanduser().resolve()}
    if paths["template"].parent != paths["grammar"].parent:
        raise TemplateError(f"family {name!r}: keep the template and the grammar in one directory "
                            f"(got {paths['template'].parent} and {paths['grammar'].parent})")
    for kind, path in paths.items():
        if not path.is_file():
            raise TemplateError(f"family {name!r}: no {kind} file at {path}")
    family = family_from_record(name, {**record, "template": paths["template"].name, "grammar": paths["grammar"].name},
                                "register_family", str(paths["template"].parent))
    family.template_source()
    _family_grammar(family)  # a grammar file that does not parse or lacks a rule fails here, not mid-request
    if family.call_style is CallStyle.PATTERN:
        call_shape(family)  # and a tool-call rule the parser cannot follow
    add_registered(family)
    return family
