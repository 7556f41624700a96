"""What a reply may be for one request, computed once: the backend decodes under it, the truncation
check and the parser read the reply by it, and none of them works out again what the grammar allowed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from .._errors import ToolCallParseError, UsageError
from ..grammar import (
    MAX_PARALLEL_CALLS,
    Chars,
    Grammar,
    Lit,
    Ref,
    Repeat,
    Seq,
    Text,
    Until,
    build_grammar,
    call_openings,
    call_shape,
    matches,
    rewrite,
    seq,
)
from ._families import CallStyle, Family
from ._parse import BARE_CALL_OPENING, ParsedReply, parse_reply
from ._prompt import Prompt

__all__ = ["REASONING_MODES", "DisguiseRetry", "ReplyFormat", "reasoning_mode", "reply_format"]

#: Whether a reply holds reasoning: "" no; "open" the prompt opened it (the reply starts inside);
#: "may" the reply may open it; "must" the reply opens it (thinking asked for).
REASONING_MODES = ("", "open", "may", "must")
#: Whitespace a model writes between its reasoning's end tag and its answer.
_AFTER_REASONING = Repeat(Chars(" \\n"), 0, 4)


class DisguiseRetry(Enum):
    """How a turn is decoded again when its text answer reads as a call (``disguised_calls``)."""

    #: Under the same tool_choice, the text barred from opening as the disguised one did (from
    #: its first character through the call's opening bracket): the model may still answer in text.
    BAR = "bar"
    #: As a call (tool_choice "required"): the model meant to call, so its call is checked.
    REQUIRED = "required"


def reasoning_mode(family: Family, prompt: Prompt | str, thinking: bool | None = None) -> str:
    """How the reply to ``prompt`` holds reasoning, from the family's tags and the prompt's end.

    Only the template's text after the last message is read (message text saying "<think>" is
    data): ending with the end tag means thinking was turned off (``enable_thinking=False``); a
    start tag still open there has the reply begin inside the reasoning (Qwen3.5, R1).
    """
    start, end = family.reasoning_start, family.reasoning_end
    tail = prompt if isinstance(prompt, str) else _template_tail(prompt)
    if not start or thinking is False or tail.rstrip().endswith(end):
        return ""
    if tail.rfind(start) > tail.rfind(end):
        return "open"
    return "must" if thinking else "may"


def _template_tail(prompt: Prompt) -> str:
    """The template text after the last piece of message text (the generation prompt)."""
    tail: list[str] = []
    for text, is_data in reversed(prompt.segments):
        if is_data:
            break
        tail.append(text)
    return "".join(reversed(tail))


class _Cut(Enum):
    """A constrained reply that is not whole in its grammar: cut inside a call."""

    CUT = "cut"


_CUT = _Cut.CUT


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
    #: Each offered tool's parameters schema, by name (types the values of unquoted syntaxes).
    schemas: Mapping[str, Any] = field(default_factory=dict)
    #: See ``REASONING_MODES``.
    reasoning: str = ""
    #: The grammar of the answer after the reasoning (``grammar`` when there is none).
    answer_grammar: Grammar | None = None
    #: Structured output: the JSON schema an answer that is no call follows (``None``: free text).
    answer_schema: Any = None

    @property
    def can_call(self) -> bool:
        return bool(self.tool_names) and self.tool_choice != "none"

    def split_reasoning(self, raw: str) -> tuple[str | None, str, bool]:
        """(reasoning, answer, closed): the reasoning without its tags (``None`` when the reply
        has none) and the answer after it; ``closed`` is False when the reply ended inside it."""
        start, end = self.family.reasoning_start, self.family.reasoning_end
        if not self.reasoning:
            return None, raw, True
        body = raw
        if self.reasoning != "open":
            lead = raw.lstrip()
            if not lead.startswith(start):
                return None, raw, True
            body = lead[len(start):]
        at = body.find(end)
        if at < 0:
            return body.strip(), "", False
        return body[:at].strip(), body[at + len(end):].lstrip(), True

    def reasoning_grammar(self) -> Grammar:
        """The grammar of the reasoning alone, through its end tag (a reasoning budget's first step)."""
        opening = () if self.reasoning == "open" else (Lit(self.family.reasoning_start),)
        return Grammar({"root": seq(*opening, Until(self.family.reasoning_end))})

    @property
    def text_can_call(self) -> bool:
        """Whether a text answer may stand beside calls here (tool_choice auto, constrained):
        then a text that reads as a call is a call in disguise."""
        grammar = self.answer_grammar
        return self.can_call and grammar is not None and _text_node(grammar) is not None

    def barring(self, openings: Sequence[str]) -> ReplyFormat:
        """This format with a text answer that may not open with any of ``openings`` (what a
        disguised call's text began with), beside the bars it already has."""
        if not openings:
            return self

        def bar(e: Any) -> Any:
            if not isinstance(e, Text):
                return None
            return replace(e, avoid=(*e.avoid, *(o for o in openings if o not in e.avoid)))

        def barred(grammar: Grammar | None) -> Grammar | None:
            if grammar is None:
                return grammar
            rules = {name: rewrite(rule, bar) for name, rule in grammar.rules.items()}
            return grammar if rules == grammar.rules else Grammar(rules, grammar.root, grammar.reserved)

        return replace(self, grammar=barred(self.grammar), answer_grammar=barred(self.answer_grammar))

    def after_reasoning(self) -> ReplyFormat:
        """This format for the answer alone, once the reasoning is in the prompt."""
        grammar = self.answer_grammar
        if grammar is not None:
            grammar = _with_prefix(grammar, _AFTER_REASONING)
        return replace(self, reasoning="", grammar=grammar, answer_grammar=grammar)

    def split(self, raw: str) -> tuple[str, str] | None:
        """(text, calls): calls alone, or text and then calls in a marked form (a tag, a fence);
        ``None`` when the reply is a text answer, or is not whole in the grammar (cut inside a
        call: ``parse(strict=True)`` refuses it). Free output is all "calls" for the tolerant parser."""
        split = self._split(raw)
        return split if isinstance(split, tuple) else None

    def _split(self, raw: str) -> tuple[str, str] | _Cut | None:
        grammar = self.answer_grammar
        if grammar is None:
            return "", raw
        rules = grammar.rules
        if "calls" not in rules:
            return None
        if matches(Grammar(rules, "calls"), raw):
            return "", raw
        text = rules.get("text")
        if text is not None and matches(Grammar(rules, "text"), raw):
            return None
        node = _text_node(grammar)
        if node is not None:
            # Text never holds a marked form's opening, so the first one is where the calls begin.
            found = [i for m in node.markers if (i := raw.find(m)) >= 0]
            if found and matches(grammar, raw):
                return raw[: min(found)], raw[min(found):]
        return _CUT

    def cut_inside_call(self, raw: str) -> bool:
        """Whether a reply that ``max_tokens`` ended stopped inside a call (not inside reasoning:
        that reply is an unfinished thought, with no answer yet)."""
        _, raw, closed = self.split_reasoning(raw)
        if not closed:
            return False
        if self.answer_grammar is not None:
            # Constrained output is always a prefix of the grammar's language; text answers are
            # complete at every character, a call only once it is closed.
            return not matches(self.answer_grammar, raw)
        return any(o in raw for o in (self.family.call_start, BARE_CALL_OPENING, *self.call_openings) if o)

    def parse(self, raw: str, *, strict: bool = False) -> ParsedReply:
        """The reply as reasoning, content and calls. Reasoning is never read for calls. A text
        answer stays as written, whatever JSON it quotes; calls in any of the family's forms
        (tagged, fenced, bare, a list; any layout), perhaps after text, are read by the tolerant
        parser. ``strict``: a constrained reply that is not whole in its grammar (a stop string or
        an engine cut it inside a call) raises ``ToolCallParseError``, never reads as text: what
        a turn hands out is read so; its decisions read partial replies too."""
        reasoning, raw, closed = self.split_reasoning(raw)
        # A thought cut before it ended has no answer yet; an empty answer holds no call.
        split = self._split(raw) if closed and raw.strip() else None
        if split is _CUT:
            if strict:
                raise ToolCallParseError("the reply stopped inside a call: it is not whole in its grammar", raw)
            split = None
        if not isinstance(split, tuple):
            return ParsedReply(content=self._text(raw), reasoning=reasoning or "")
        parsed = parse_reply(split[1], self.family, tolerant=True, schemas=self.schemas)
        content = "\n\n".join(p for p in (self._text(split[0]), parsed.content) if p)
        return ParsedReply(content=content, tool_calls=parsed.tool_calls, reasoning=reasoning or "")

    @property
    def text_open(self) -> str:
        """What opens a text answer ("" for most families; functionary's "all\n")."""
        return call_shape(self.family).text_open if self.family.call_style is CallStyle.PATTERN else ""

    def _text(self, raw: str) -> str:
        text_open = self.text_open
        return raw.strip().removeprefix(text_open).strip() if text_open else raw.strip()


def reply_format(
    family: Family,
    tools: Sequence[dict[str, Any]],
    tool_choice: str = "auto",
    parallel_tool_calls: bool = True,
    *,
    constrained: bool = True,
    stop: Sequence[str] = (),
    reasoning: str = "",
    answer_schema: Any = None,
    calls: tuple[int, int] | None = None,
) -> ReplyFormat:
    """The format of a reply to ``tools`` (OpenAI-style specs) under ``tool_choice``; ``reasoning``
    (see ``reasoning_mode``) puts free reasoning before the answer the grammar constrains;
    ``answer_schema`` makes the answer that is no call a JSON value under that schema; ``calls``
    (least, most) bounds how many calls a reply with calls holds (default 1 to ``MAX_PARALLEL_CALLS``)."""
    if answer_schema is not None and not constrained:
        raise UsageError("a structured answer (answer_schema) is decoded under its grammar; it cannot be "
                         "asked for with constrained=False")
    if reasoning not in REASONING_MODES:
        raise UsageError(f"reasoning must be one of {REASONING_MODES}, got {reasoning!r}")
    if reasoning and not family.reasoning_start:
        raise UsageError(f"family {family.name!r} has no reasoning tags")
    names = tuple(t["function"]["name"] for t in tools)
    least, most = calls or (1, MAX_PARALLEL_CALLS)
    answer = build_grammar(family, list(tools), tool_choice, parallel_tool_calls, most, answer_schema=answer_schema,
                           min_calls=least) if constrained else None
    grammar = answer
    if answer is not None and reasoning:
        opening = () if reasoning == "open" else (Lit(family.reasoning_start),)
        thought = seq(*opening, Until(family.reasoning_end), _AFTER_REASONING)
        grammar = _with_prefix(answer, thought if reasoning != "may" else Repeat(thought, 0, 1))
    choice, offered = tool_choice, names
    if tool_choice not in ("auto", "required", "none"):
        if tool_choice not in names:  # build_grammar says the same when constrained
            raise UsageError(f"tool_choice names {tool_choice!r}, which is not among the tools: "
                             f"{', '.join(names) or '(none)'}")
        choice, offered = "required", (tool_choice,)
    text_only = not names or choice == "none"
    family_stop = () if constrained else family.stop
    return ReplyFormat(
        family=family,
        tool_choice=choice,
        tool_names=offered,
        grammar=grammar,
        call_openings=call_openings(family, [t for t in tools if t["function"]["name"] in offered]),
        # The request's stop strings end a text answer; they never cut a call or the reasoning
        # (they are applied to the answer after parsing). Under a grammar the family's do not
        # apply either: a text answer never holds one (the grammar bars them) and the grammar
        # ends each call; in a call they are an argument's characters ("a<|im_end|>b").
        stop=(*family_stop, *stop) if text_only and not reasoning else family_stop,
        schemas={t["function"]["name"]: t["function"].get("parameters") or {} for t in tools},
        reasoning=reasoning,
        answer_grammar=answer,
        answer_schema=answer_schema,
    )


def _text_node(grammar: Grammar) -> Text | None:
    """The text answer's node (the "text" rule, after a family's text opening)."""
    rule = grammar.rules.get("text")
    items = rule.items if isinstance(rule, Seq) else (rule,)
    return next((i for i in items if isinstance(i, Text)), None)


def _with_prefix(grammar: Grammar, prefix: Any) -> Grammar:
    """``grammar`` with ``prefix`` before what its root matches. The root keeps its name: GBNF
    engines (llama.cpp, xgrammar) start at the rule named "root"."""
    g = Grammar(dict(grammar.rules), grammar.root, grammar.reserved)
    answer = g.unique_name("answer")
    g.rules[answer] = g.rules.pop(grammar.root)
    g.add(grammar.root, seq(prefix, Ref(answer)))
    return g
