"""Model families: one record each in ``templates/families.toml``, picked from GGUF metadata."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any

from ._errors import TemplateError
from ._resources import read_text

__all__ = ["CALL_STYLES", "Family", "detect_family", "families", "get_family"]

#: How calls are spelled, for the parser (``Family.call_style``).
CALL_STYLES = ("tagged", "marker", "bare")


@dataclass(frozen=True)
class Family:
    """One model family's record in ``templates/families.toml``; every per-family quirk is here."""

    name: str
    #: The Jinja chat template in ``templates/`` that renders messages and tool schemas.
    template: str
    #: The GBNF file in ``grammars/`` that spells a call (rules ``tool-call``, ``call``, ``call-sep``,
    #: ``calls-open``, ``calls-close``; placeholders ``NAME``, ``ARGS``, ``WS-IN``, ``WS-SEP``).
    grammar: str
    #: The call forms the grammar admits: rules of the GBNF file. A ``call-*`` rule is one call
    #: (several are joined by ``call-sep``); a ``list-*`` rule is several calls at once (its ``CALLS``
    #: placeholder is ``tool-call`` items joined by ``list-sep``). Empty: the file's ``call`` rule.
    call_forms: tuple[str, ...]
    #: The text that opens a call (a tag or marker; ``{"name"`` for bare JSON families).
    call_start: str
    #: The text that closes a tagged call ("" when calls are not tagged).
    call_end: str
    #: The key that holds a call's arguments: "arguments" or "parameters".
    args_key: str
    #: Whether the family's models make several calls in one reply.
    parallel: bool
    #: Call-id style: "call" (call_<24 hex>) or "alnum9" (Mistral's 9 letters and digits).
    id: str
    #: How GGUF metadata selects the family: "template:TEXT", "arch:NAME" or "name:TEXT" rules.
    match: tuple[str, ...]
    #: Strings that end generation.
    stop: tuple[str, ...]
    #: Other names the family answers to.
    aliases: tuple[str, ...]
    #: Wording put first in the system message when tools are offered and several calls are
    #: allowed: how this family's models should write several calls ("" for none; measured in
    #: BENCHMARKS.md).
    parallel_hint: str
    #: Wording the prompt ends with when the last message is a tool result, as a user turn that
    #: stays out of the history: answer now, call again only if needed ("" for none). ``{question}``
    #: stands for the last user message: restating it is what makes small models answer it.
    result_hint: str
    #: JSON layout inside calls: "compact" (json.dumps's one-space style) or "natural" (also the
    #: newlines and indentation the family's models write when free; BENCHMARKS.md measures both).
    layout: str
    #: How the parser finds calls in a reply: "tagged" (``call_start`` JSON ``call_end``, one call a
    #: block), "marker" (``call_start`` then a JSON list of calls) or "bare" (JSON objects that open
    #: with ``call_start``). Free output is also read for fenced and bare JSON calls in any style.
    call_style: str
    #: Strings the family's models write that are no part of a reply (Llama 3's ``<|python_tag|>``),
    #: removed before it is read.
    strip: tuple[str, ...]

    def template_source(self) -> str:
        return read_text("templates", self.template)

    def grammar_source(self) -> str:
        return read_text("grammars", self.grammar)

    def matches(self, metadata: dict[str, Any]) -> bool:
        arch = str(metadata.get("general.architecture", "")).lower()
        name = str(metadata.get("general.name", "")).lower()
        template = str(metadata.get("tokenizer.chat_template", ""))
        for rule in self.match:
            kind, _, value = rule.partition(":")
            if (kind == "arch" and arch == value.lower()) or (kind == "name" and value.lower() in name):
                return True
            if kind == "template" and value in template:
                return True
        return False


_FIELDS = {f for f in Family.__dataclass_fields__ if f != "name"}


@cache
def families() -> dict[str, Family]:
    """Every family in table order."""
    table = tomllib.loads(read_text("templates", "families.toml")).get("families", {})
    out: dict[str, Family] = {}
    for name, rec in table.items():
        missing = _FIELDS - set(rec)
        unknown = set(rec) - _FIELDS
        if missing or unknown:
            raise TemplateError(
                f"family {name!r} in families.toml: missing {sorted(missing)}; unknown {sorted(unknown)}"
            )
        if rec["call_style"] not in CALL_STYLES:
            raise TemplateError(f"family {name!r} in families.toml: call_style {rec['call_style']!r} is not one of "
                                f"{', '.join(CALL_STYLES)}")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in rec.items()}
        out[name] = Family(name=name, **values)
    return out


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
