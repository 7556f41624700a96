"""What a reply may be for one request, computed once: the backend decodes under it, the truncation
check and the parser read the reply by it, and none of them works out again what the grammar allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import UsageError
from ._families import Family
from ._parse import BARE_CALL_OPENING, ParsedReply, parse_reply
from .grammar import Grammar, Text, build_grammar, call_openings, matches

__all__ = ["ReplyFormat", "reply_format"]


@dataclass(frozen=True)
class ReplyFormat:
    """One request's reply format (llama.cpp's ``common_chat_params`` is the model)."""

    family: Family
    #: "auto", "required" or "none"; a named tool is "required" over that tool alone.
    tool_choice: str
    #: The tools a call may name.
    tool_names: tuple[str, ...]
    #: The grammar the reply is decoded under; ``None`` for free decoding.
    grammar: Grammar | None
    #: How a bare JSON call to each offered tool opens (``{"name": "get_customer"``), if the
    #: family's calls are bare JSON objects.
    call_openings: tuple[str, ...]
    #: Strings that end generation: the family's, plus the request's when no call can follow
    #: (a stop string inside a call's JSON must not cut it; text answers are cut after parsing).
    stop: tuple[str, ...]

    @property
    def can_call(self) -> bool:
        return bool(self.tool_names) and self.tool_choice != "none"

    def split(self, raw: str) -> tuple[str, str] | None:
        """(text, calls): calls alone, or text and then calls in a marked form (a tag, a fence);
        ``None`` when the reply is a text answer. Free output is all "calls" for the tolerant parser."""
        grammar = self.grammar
        if grammar is None:
            return "", raw
        rules = grammar.rules
        if "calls" not in rules:
            return None
        if matches(Grammar(rules, "calls"), raw):
            return "", raw
        text = rules.get("text")
        if not isinstance(text, Text) or matches(Grammar(rules, "text"), raw):
            return None
        # Text never holds a marked form's opening, so the first one is where the calls begin.
        found = [i for m in text.markers if (i := raw.find(m)) >= 0]
        if not found or not matches(grammar, raw):
            return None
        return raw[: min(found)], raw[min(found):]

    def cut_inside_call(self, raw: str) -> bool:
        """Whether a reply that ``max_tokens`` ended stopped inside a call."""
        if self.grammar is not None:
            # Constrained output is always a prefix of the grammar's language; text answers are
            # complete at every character, a call only once it is closed.
            return not matches(self.grammar, raw)
        return any(o in raw for o in (self.family.call_start, BARE_CALL_OPENING, *self.call_openings) if o)

    def parse(self, raw: str) -> ParsedReply:
        """The reply as content and calls. A text answer stays as written, whatever JSON it quotes;
        calls in any of the family's forms (tagged, fenced, bare, a list; any layout), perhaps after
        text, are read by the tolerant parser."""
        split = self.split(raw)
        if split is None:
            return ParsedReply(content=raw.strip())
        parsed = parse_reply(split[1], self.family, tolerant=True)
        content = "\n\n".join(p for p in (split[0].strip(), parsed.content) if p)
        return ParsedReply(content=content, tool_calls=parsed.tool_calls)


def reply_format(
    family: Family,
    tools: Sequence[dict[str, Any]],
    tool_choice: str = "auto",
    parallel_tool_calls: bool = True,
    *,
    constrained: bool = True,
    stop: Sequence[str] = (),
) -> ReplyFormat:
    """The format of a reply to ``tools`` (OpenAI-style specs) under ``tool_choice``."""
    names = tuple(t["function"]["name"] for t in tools)
    grammar = build_grammar(family, list(tools), tool_choice, parallel_tool_calls) if constrained else None
    choice, offered = tool_choice, names
    if tool_choice not in ("auto", "required", "none"):
        if tool_choice not in names:  # build_grammar says the same when constrained
            raise UsageError(f"tool_choice names {tool_choice!r}, which is not among the tools: "
                             f"{', '.join(names) or '(none)'}")
        choice, offered = "required", (tool_choice,)
    text_only = not names or choice == "none"
    return ReplyFormat(
        family=family,
        tool_choice=choice,
        tool_names=offered,
        grammar=grammar,
        call_openings=call_openings(family, [t for t in tools if t["function"]["name"] in offered]),
        stop=(*family.stop, *stop) if text_only else family.stop,
    )
