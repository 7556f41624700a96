"""Records every layer reads: a family's record (``Family``, with ``CallStyle`` and ``ArgsSyntax``)
and a rendered ``Prompt``. They sit at the bottom so the grammar and the backends can read them
without knowing the families' loading or rendering."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ._errors import TemplateError
from ._resources import read_text

__all__ = ["ARGS_SYNTAXES", "CALL_STYLES", "ArgsSyntax", "CallStyle", "Family", "Prompt"]


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
    """One model family's record in ``families/templates/families.toml``; every per-family quirk is here."""

    name: str
    #: The Jinja chat template in ``families/templates/`` that renders messages and tool schemas.
    template: str
    #: The GBNF file in ``families/grammars/`` that spells a call (rules ``tool-call``, ``call``, ``call-sep``,
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
    #: List forms of the grammar file the decisions may offer as the family's parallel form (one
    #: list holding every call) when ``Decisions.form`` is set: then the calls are written as the
    #: list or as single calls on the model's share for each (``docs/decisions.md``).
    parallel_forms: tuple[str, ...] = ()
    #: Wording the prompt ends with in place of ``result_hint`` where every result of the last
    #: calls is an error (``failed_calls``): there is nothing to answer from, and a small model told
    #: to answer from the results makes one up ("" : ``result_hint`` there too). ``{question}``
    #: as in ``result_hint``.
    error_hint: str = ""
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


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt as ``(text, is_data)`` segments; ``is_data`` text is never parsed for special tokens."""

    segments: tuple[tuple[str, bool], ...]

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.segments)

    def __str__(self) -> str:
        return self.text
