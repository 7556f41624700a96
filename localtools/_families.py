"""Model families: one record each in ``templates/families.toml``, picked from GGUF metadata.

Users add families without forking: a directory with its own ``families.toml`` (template and
grammar files beside it) named in ``$LOCALTOOLS_FAMILIES``, or ``register_family`` (``_choose``) in process.
Their families come first, so their ``match`` rules and names win over the built-in ones.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from ._errors import TemplateError
from ._resources import read_text

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

class CallStyle(StrEnum):
    """How the parser finds a family's calls in a reply (``Family.call_style``)."""

    #: ``call_start`` JSON ``call_end``, one call a block.
    TAGGED = "tagged"
    #: ``call_start`` then a JSON list of calls.
    MARKER = "marker"
    #: JSON objects that open with ``call_start``.
    BARE = "bare"
    #: As the grammar file's ``tool-call`` rule spells a call.
    PATTERN = "pattern"


class ArgsSyntax(StrEnum):
    """How a call's arguments are written (``Family.args_syntax``; ``grammar._syntax`` has each)."""

    JSON = "json"
    XML = "xml"
    PYTHON = "python"
    GEMMA4 = "gemma4"
    KV = "kv"


#: The values each may take, as ``families.toml`` spells them.
CALL_STYLES = tuple(CallStyle)
ARGS_SYNTAXES = tuple(ArgsSyntax)


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
    #: block), "marker" (``call_start`` then a JSON list of calls), "bare" (JSON objects that open
    #: with ``call_start``), or "pattern" (calls spelled as the grammar file's ``tool-call`` rule:
    #: literals around the name, an id and the arguments, as in ``[TOOL_CALLS]NAME[ARGS]{...}``).
    #: Free output is also read for fenced and bare JSON calls in any style.
    call_style: CallStyle
    #: Strings the family's models write that are no part of a reply (Llama 3's ``<|python_tag|>``),
    #: removed before it is read.
    strip: tuple[str, ...]
    #: How a call's arguments are written: "json" (an object), "xml" (``<parameter=K>`` blocks,
    #: strings raw), "python" (keyword arguments, Python literals) or "gemma4" (Gemma 4's own
    #: ``{k:<|"|>v<|"|>}``). The grammar writes them from the tool's JSON Schema in this syntax; the
    #: parser reads them back into JSON arguments.
    args_syntax: ArgsSyntax = ArgsSyntax.JSON
    #: The tags around a model's reasoning (``<think>``, ``</think>``); "" when the family's models
    #: do not reason in text. Reasoning is free (the grammar applies after it), kept apart from the
    #: answer, and never read for calls.
    reasoning_start: str = ""
    reasoning_end: str = ""
    #: Text the generation prompt ends with that the reply continues (functionary's ``>>>``): the
    #: reply is read with it in front.
    reply_opening: str = ""
    #: For ``args_syntax = "kv"``: the text before an argument's key, between key and value, and
    #: after the value (GLM: ``["\n<arg_key>", "</arg_key>\n<arg_value>", "</arg_value>"]``), and
    #: optionally between a key and a value that is no string (DeepSeek V3.2's ``" string="false">``).
    arg_tags: tuple[str, ...] = ()
    #: For ``kv``: how lists and objects are written, "json" or "python" (as ``| string`` prints them).
    arg_values: str = "json"
    #: Where ``template`` and ``grammar`` are, for a user family ("": the package's own files).
    directory: str = ""

    def template_source(self) -> str:
        return self._read("templates", self.template)

    def grammar_source(self) -> str:
        return self._read("grammars", self.grammar)

    def _read(self, package: str, name: str) -> str:
        if not self.directory:
            return read_text(package, name)
        path = Path(self.directory) / name
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TemplateError(f"family {self.name!r}: cannot read {path}: {exc.strerror}") from None

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


_FIELDS = {f for f in Family.__dataclass_fields__ if f not in ("name", "directory")}
#: Fields a record may leave out (their defaults suit most families).
_OPTIONAL = {"args_syntax", "reasoning_start", "reasoning_end", "reply_opening", "arg_tags", "arg_values"}
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
