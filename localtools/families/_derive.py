"""A call syntax read off a chat template, the way its own renderings spell calls.

The template renders an assistant turn with text, with one call, with another call and with
both; the parts that differ are the calls. In them the tool's name, its arguments (in one of the
syntaxes the grammar writes) and the call id are found; what is left are literals: the text that
opens and closes the calls, the text around one call and the separator between two. Reasoning
tags come from a turn rendered with reasoning, stop strings from the text turn's end. The record
is a ``families.toml`` entry with a grammar file, so it is a family like any other; a round trip
(calls the template renders parse back to the same calls and are in the grammar) decides whether
it is used.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import DeriveError, TemplateError
from ._families import Family, table_from_text
from ._prompt import render_text

__all__ = ["AUTO_FAMILY", "DeriveError", "Derived", "RoundTrip", "derive", "rendered_reply", "round_trip"]

#: The name a family derived from a model's own template goes by.
AUTO_FAMILY = "auto"

_TOKENS = {"bos_token": "<BOS>", "eos_token": "<EOS>"}
_QUESTION = [{"role": "user", "content": "What is the weather in Oslo?"}]
_TEXT = "It is sunny."
_REASONING = "The user asks about Oslo."
_A = ("get_weather", {"city": "Oslo", "unit": "celsius"}, "call0001A")
_B = ("get_time", {"zone": "Asia/Tokyo"}, "call0002B")
_C = ("get_weather", {"city": "Bergen"}, "call0003C")
#: A call with a value that is no string: where a template writes those differently (DeepSeek's
#: ``string="false"``), ``kv`` gets a fourth tag.
_D = ("get_weather", {"city": "Oslo", "days": 3, "hours": ["am"]}, "call0004D")
_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                                          "days": {"type": "integer"},
                                          "hours": {"type": "array", "items": {"type": "string"}}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone.",
                                      "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                     "required": ["zone"]}}},
]
_NAME, _NAME_RAW, _ARGS, _ID = "NAME", "NAME-RAW", "ARGS", "ID"


@dataclass
class Derived:
    """A derived family: its ``families.toml`` record, its grammar file and the template itself."""

    record: dict[str, Any]
    grammar: str
    template: str
    #: What the derivation noticed that a user may want to know (one call a turn, say).
    notes: list[str] = field(default_factory=list)

    def toml(self, name: str = AUTO_FAMILY) -> str:
        """The record as a ``families.toml`` file (the template and grammar file names it gives beside it)."""
        body = ", ".join(f"{k} = {_toml(v)}" for k, v in self.record.items())
        return f"[families]\n{_toml(name)} = {{ {body} }}\n"

    def family(self, directory: Path | None = None, name: str = AUTO_FAMILY) -> Family:
        """The family, its files written to ``directory`` (by default a cache folder named by the template's hash)."""
        folder = directory or _auto_dir(self.template)
        folder.mkdir(parents=True, exist_ok=True)
        files = {"families.toml": self.toml(name), self.record["template"]: self.template,
                 self.record["grammar"]: self.grammar}
        for file, text in files.items():
            path = folder / file
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
                partial.write_text(text, encoding="utf-8")
                partial.replace(path)
        return table_from_text(files["families.toml"], str(folder / "families.toml"), str(folder))[name]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is a JSON string


def _auto_dir(template: str) -> Path:
    import platformdirs

    digest = hashlib.sha256(template.encode()).hexdigest()[:16]
    base = os.environ.get("LOCALTOOLS_CACHE")
    root = Path(base).expanduser() if base else Path(platformdirs.user_cache_dir("localtools"))
    return root / "families" / f"auto-{digest}"


def _call(call: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    name, args, call_id = call
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _render(source: str, messages: list[dict[str, Any]], *, generation: bool = False) -> str:
    tokens: dict[str, Any] = dict(_TOKENS)
    try:
        return render_text(source, messages, _TOOLS, add_generation_prompt=generation, **tokens)
    except TemplateError:
        # A few templates take a call's arguments as the API's JSON string (functionary).
        return render_text(source, messages, _TOOLS, add_generation_prompt=generation, object_arguments=False,
                           **tokens)


def _turn(content: str = "", calls: tuple[tuple[str, dict[str, Any], str], ...] = (), reasoning: str = ""
          ) -> list[dict[str, Any]]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [_call(c) for c in calls]
    if reasoning:
        msg["reasoning_content"] = reasoning
        msg["thinking"] = reasoning
    return [*_QUESTION, msg]


def _lcp(texts: list[str]) -> str:
    """The longest common prefix of ``texts``."""
    if not texts:
        return ""
    first, last = min(texts), max(texts)
    k = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), min(len(first), len(last)))
    return first[:k]


def _common_prefix(texts: list[str]) -> int:
    return len(_lcp(texts))


def _common_suffix(texts: list[str]) -> int:
    return len(_lcp([t[::-1] for t in texts]))


def _writings(args: dict[str, Any]) -> dict[str, list[str]]:
    """How each argument syntax the grammar writes spells ``args`` (strings only)."""
    return {
        "json": [json.dumps(args, ensure_ascii=False), json.dumps(args, ensure_ascii=False, separators=(",", ":"))],
        "xml": ["".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())],
        "python": [", ".join(f"{k}={v!r}" for k, v in args.items())],
        "gemma4": ["{" + ",".join(f'{k}:<|"|>{v}<|"|>' for k, v in sorted(args.items())) + "}"],
    }


@dataclass
class _Shape:
    """One call as literals and placeholders, in order: ``pieces[0] P pieces[1] P ... pieces[-1]``."""

    pieces: list[str]
    holes: list[str]
    syntax: str
    #: Which of the syntax's writings the template uses.
    variant: int
    #: ``kv``'s tags.
    tags: tuple[str, ...] = ()

    def fill(self, call: tuple[str, dict[str, Any], str]) -> str:
        """The call's text, holes filled."""
        name, args, call_id = call
        if self.syntax == "kv":
            written = "".join(f"{self.tags[0]}{k}{self.tags[1]}{v}{self.tags[2]}" for k, v in args.items())
        else:
            written = _writings(args)[self.syntax][self.variant]
        values = {_NAME: json.dumps(name), _NAME_RAW: name, _ID: call_id, _ARGS: written}
        return self.pieces[0] + "".join(values[h] + p for h, p in zip(self.holes, self.pieces[1:], strict=True))


def _kv_tags(text: str, args: dict[str, Any]) -> tuple[str, str, str] | None:
    """The three tags of a ``kv`` writing of ``args`` (two or more string arguments) in ``text``."""
    items = list(args.items())
    if len(items) < 2:
        return None
    spans, pos = [], 0
    for key, value in items:
        k = text.find(key, pos)
        v = text.find(str(value), k + len(key)) if k >= 0 else -1
        if v < 0:
            return None
        spans.append((k, k + len(key), v, v + len(str(value))))
        pos = v + len(str(value))
    mids = {text[k_end:v] for _, k_end, v, _ in spans}
    between = {text[spans[i][3]:spans[i + 1][0]] for i in range(len(spans) - 1)}
    if len(mids) != 1 or len(between) != 1:
        return None
    (mid,), (glue,) = mids, between
    before = text[:spans[0][0]]
    cut = len(glue) - len(_lcp([before[::-1], glue[::-1]]))
    cut = _tag_ceiling(glue, cut) if cut < len(glue) else cut
    open_, close = glue[cut:], glue[:cut]
    if not open_ or not mid or not close.strip() or not text.startswith(close, spans[-1][3]):
        return None
    return open_, mid, close


def _typed_tags(source: str, tags: tuple[str, ...], start: int, end: int) -> tuple[tuple[str, ...], str]:
    """``kv`` tags, with a fourth (the text between key and a value that is no string) where it
    differs; and how lists are written ("json", or "python" as ``| string`` prints them)."""
    try:
        turn = _render(source, _turn(calls=(_D,)))
    except TemplateError:
        return tags, "json"
    text = turn[start:len(turn) - end]
    key = f"{tags[0]}days"
    at = text.find(key)
    value = text.find(f"3{tags[2]}", at) if at >= 0 else -1
    if value < 0:
        return tags, "json"
    mid = text[at + len(key):value]
    values = "python" if f"['am']{tags[2]}" in text else "json"
    return (tags if mid == tags[1] else (*tags[:3], mid)), values


def _shape(text: str, call: tuple[str, dict[str, Any], str], tags: tuple[str, ...] = ()) -> _Shape:
    name, args, call_id = call
    writings = _writings(args)
    kv = tags or _kv_tags(text, args)
    if kv:
        writings["kv"] = ["".join(f"{kv[0]}{k}{kv[1]}{v}{kv[2]}" for k, v in args.items())]
    found = [(syntax, i, w) for syntax, ws in writings.items() for i, w in enumerate(ws) if w in text]
    if not found:
        if all(str(v) not in text for v in args.values()):
            raise DeriveError("the template drops the call's arguments")
        raise DeriveError("the template writes the call's arguments in a syntax localtools does not write "
                          "(JSON object, <parameter=K> blocks, Python keywords, Gemma 4's)")
    syntax, variant, written = found[0]
    if text.count(written) > 1:
        raise DeriveError("the template writes the call's arguments twice")
    spots = [(text.index(written), len(written), _ARGS)]
    if call_id in text:
        if text.count(call_id) > 1:
            raise DeriveError("the template writes the call id twice")
        spots.append((text.index(call_id), len(call_id), _ID))
    rest = text.replace(written, "\0" * len(written))
    count = rest.count(name)
    if count == 0:
        raise DeriveError("the template drops the call's name")
    if count > 2:
        raise DeriveError("the template writes the call's name more than twice")
    at = -1
    for _ in range(count):
        at = rest.index(name, at + 1)
        if count == 1 and at and text[at - 1] == '"' and text[at + len(name):at + len(name) + 1] == '"':
            spots.append((at - 1, len(name) + 2, _NAME))
        else:
            spots.append((at, len(name), _NAME_RAW))  # written twice (gpt-oss style headers): bare both times
    spots.sort()
    pieces, holes, pos = [], [], 0
    for start, length, hole in spots:
        pieces.append(text[pos:start])
        holes.append(hole)
        pos = start + length
    pieces.append(text[pos:])
    return _Shape(pieces, holes, syntax, variant, tuple(kv) if syntax == "kv" and kv else ())


def _without_end(text: str, stops: Sequence[str]) -> str:
    """``text`` without the stop strings and end-of-sequence token that end it (and the space before them)."""
    while ends := [e for e in (*stops, _TOKENS["eos_token"]) if text.endswith(e)]:
        text = text[:-len(ends[0])].rstrip()
    return text


def _first_tag(text: str) -> str:
    """The first tag of ``text`` (``<|im_end|>`` of ``<|im_end|>\n<|im_start|>``), or its first line."""
    text = text.strip()
    for left, right in ("<>", "[]"):
        if text.startswith(left) and (close := text.find(right)) > 0:
            return text[:close + 1]
    return text.split("\n")[0].strip()


def _tag_floor(text: str, pos: int) -> int:
    """``pos``, moved back to the start of a tag it falls inside (``<...>`` or ``[...]``)."""
    for left, right in ("<>", "[]"):
        if (at := text.rfind(left, 0, pos)) > text.rfind(right, 0, pos):
            pos = at
    return pos


def _tag_ceiling(text: str, pos: int) -> int:
    """``pos``, moved on past the end of a tag it falls inside."""
    for left, right in ("<>", "[]"):
        close, opening = text.find(right, pos), text.find(left, pos)
        if close >= 0 and (opening < 0 or close < opening):
            pos = close + 1
    return pos


def _gbnf_literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def derive(source: str) -> Derived:
    """The call syntax, reasoning tags and stop strings of the chat template ``source``.

    ``DeriveError`` names the part that cannot be read (the template drops the arguments, say).
    """
    if "tool" not in source:
        raise DeriveError("the template renders no tools (it never mentions them)")
    try:
        turns = {"text": _render(source, _turn(_TEXT)), "a": _render(source, _turn(calls=(_A,))),
                 "b": _render(source, _turn(calls=(_B,)))}
    except TemplateError as exc:
        raise DeriveError(f"the template cannot render an assistant turn with a call: {exc}") from None
    try:
        turns["ab"] = _render(source, _turn(calls=(_A, _B)))
    except TemplateError:
        turns["ab"] = ""
    texts = [turns["text"], turns["a"], turns["b"]]
    # The turns part outside any tag: "<|tool_calls|>" and "<|content|>" share "<|".
    start = _tag_floor(texts[0], _common_prefix(texts))
    if start and texts[0][start - 1] in "=:":
        # A header's key shared by text and calls (" to=user" / " to=get_weather") goes with the calls.
        while start and not texts[0][start - 1].isspace() and texts[0][start - 1] not in ">]":
            start -= 1
    end = _tag_ceiling(texts[0], len(texts[0]) - _common_suffix([t[start:] for t in texts]))
    end = len(texts[0]) - end
    middle = {k: v[start:len(v) - end] for k, v in turns.items() if k != "ab"}
    if _TEXT not in middle["text"]:
        raise DeriveError("the template drops an assistant's text")
    notes: list[str] = []
    # The end of a text turn is what stops a reply.
    # (what every turn ends with, and the rest of a text turn after its text).
    ends = [turns["text"][len(turns["text"]) - end:],
            middle["text"][middle["text"].index(_TEXT) + len(_TEXT):] + turns["text"][len(turns["text"]) - end:]]
    stops = list(dict.fromkeys(s for e in ends if (s := _first_tag(e)) and s != _TOKENS["eos_token"]))
    # Text the generation prompt already ends with is no part of what the model writes (Command
    # R7B's prompt closes an empty thinking block that its call turns open with).
    try:
        prompt = _render(source, _QUESTION, generation=True)
    except TemplateError:
        prompt = ""
    def calls_of(text: str) -> str:
        # Whitespace around the calls belongs to neither call (the parser skips it), and the end
        # of the turn (a stop string, the end-of-sequence token) is no part of them.
        text = _without_end(text.strip(), stops)
        for k in range(min(len(text), len(prompt)), 0, -1):
            if text[0] in "<[" and text[k - 1] in ">]" and prompt.endswith(text[:k]):
                return text[k:].lstrip()
        return text

    one = calls_of(middle["a"])
    if not one:
        raise DeriveError("the template drops an assistant's calls")
    shape = _shape(one, _A)
    shape_b = _shape(calls_of(middle["b"]), _B, shape.tags)
    if shape_b.pieces != shape.pieces or shape_b.holes != shape.holes:
        raise DeriveError("the template spells two calls to different tools differently (beyond name and arguments)")
    opening, closing, sep, parallel = shape.pieces[0], shape.pieces[-1], "", False
    both = calls_of(turns["ab"][start:len(turns["ab"]) - end]) if turns["ab"].startswith(turns["text"][:start]) else ""
    whole_a, whole_b = shape.fill(_A), shape.fill(_B)
    first, second = whole_a[:len(whole_a) - len(closing)], whole_b[len(opening):]
    if both.startswith(first) and both.endswith(second) and len(both) >= len(first) + len(second):
        # Two calls: the first up to its last hole, then (its closing, the separator, the
        # second's opening), then the second from its first hole; which part of the glue is
        # whose is read off the one-call turn.
        between = both[len(first):len(both) - len(second)]
        k_close = _tag_floor(closing, len(_lcp([closing, between])))
        k_open = len(opening) - _tag_ceiling(opening, len(opening) - len(_lcp(
            [opening[::-1], between[k_close:][::-1]])))
        call_open, call_close = opening[len(opening) - k_open:], closing[:k_close]
        calls_open, calls_close = opening[:len(opening) - k_open], closing[k_close:]
        sep = between[k_close:len(between) - k_open]
        parallel = calls_open + call_open + first[len(opening):] + call_close + sep + call_open + second == both
        if parallel:
            # A third call shows what two cannot: a counter in the glue (Cohere's "tool_call_id": "1").
            try:
                three = _render(source, _turn(calls=(_A, _B, _C)))
            except TemplateError:
                three = ""
            body = [shape.fill(c)[len(opening):len(shape.fill(c)) - len(closing)] for c in (_A, _B, _C)]
            spelled = calls_open + sep.join(call_open + b + call_close for b in body) + calls_close
            parallel = calls_of(three[start:len(three) - end]) == spelled
    if not parallel:
        calls_open, call_open, call_close, calls_close, sep = "", opening, closing, "", ""
        notes.append("one call a turn: the template does not render two calls as one call repeated"
                     if turns["ab"] else "one call a turn: the template refuses two calls in one turn")
    # Leading whitespace of a call's opening belongs to the separator (the parser skips whitespace first).
    lead = len(call_open) - len(call_open.lstrip())
    if lead:
        sep, calls_open, call_open = sep + call_open[:lead], calls_open + call_open[:lead], call_open[lead:]
    values = "json"
    if shape.syntax == "kv":
        shape.tags, values = _typed_tags(source, shape.tags, start, end)
    reasoning_start, reasoning_end = _reasoning(source, start, end, turns["text"])
    call_start = (calls_open + call_open).strip().split()[0] if (calls_open + call_open).strip() else ""
    if not call_start:
        raise DeriveError("the template writes a call with no text before its name (nothing marks where a call starts)")
    tool_call = " ".join(part for i, hole in enumerate(shape.holes)
                         for part in ((_gbnf_literal(shape.pieces[i]),) if i and shape.pieces[i] else ()) + (hole,))
    gbnf = "\n".join([
        "# Derived from a chat template's own renderings of calls (localtools templates derive).",
        f"tool-call   ::= {tool_call}",
        f"call        ::= {_gbnf_literal(call_open)} tool-call {_gbnf_literal(call_close)}",
        f"call-sep    ::= {_gbnf_literal(sep)}",
        f"calls-open  ::= {_gbnf_literal(calls_open)}",
        f"calls-close ::= {_gbnf_literal(calls_close)}",
        "",
    ])
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    record: dict[str, Any] = {
        "template": f"auto-{digest}.jinja", "grammar": f"auto-{digest}.gbnf", "call_forms": [],
        "call_start": call_start, "call_end": "", "args_key": "arguments", "parallel": parallel,
        "id": "alnum9" if _ID in shape.holes else "call", "match": [], "stop": stops, "aliases": [],
        "parallel_hint": "", "result_hint": "", "layout": "compact", "call_style": "pattern", "strip": [],
        "args_syntax": shape.syntax, "reasoning_start": reasoning_start, "reasoning_end": reasoning_end,
        **({"arg_tags": list(shape.tags), "arg_values": values} if shape.tags else {}),
    }
    return Derived(record, gbnf, source, notes)


def _reasoning(source: str, start: int, end: int, text_turn: str) -> tuple[str, str]:
    """The tags a text turn with reasoning puts around it ("", "" when it shows none)."""
    try:
        turn = _render(source, _turn(_TEXT, reasoning=_REASONING))
    except TemplateError:
        return "", ""
    if _REASONING not in turn or _TEXT not in turn:
        return "", ""
    at = turn.index(_REASONING)
    shared = _tag_floor(turn, _common_prefix([turn, text_turn]))
    before = turn[min(shared, at):at].strip()
    after = turn[at + len(_REASONING):turn.index(_TEXT, at)].strip()
    if not before or not after:
        return "", ""
    return before.split()[-1], after.split()[0]


def rendered_reply(source: str, messages: list[dict[str, Any]], k: int, tools: list[dict[str, Any]],
                   stops: tuple[str, ...] = (), **variables: Any) -> tuple[str, str]:
    """(prompt, reply): the prompt for turn ``k`` and what ``source`` writes after it for that turn."""
    variables = {**_TOKENS, **variables}
    prompt = render_text(source, messages[:k], tools, **variables)
    history = render_text(source, messages[:k + 1], tools, add_generation_prompt=False, **variables)
    shared = _common_prefix([prompt, history])
    # Back to the end of a tag or line: "<|channel>" and "<|tool_call>" share "<|".
    while shared and history[shared - 1] not in "\n>]":
        shared -= 1
    turn = history[shared:]
    ends = [i for stop in stops if (i := turn.find(stop)) >= 0]
    return prompt, turn[:min(ends)] if ends else turn


@dataclass
class RoundTrip:
    """How a family reads back the calls a template renders: one line per turn that failed."""

    turns: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.turns > 0 and not self.failures


def round_trip(family: Family, source: str | None = None) -> RoundTrip:
    """Each probe conversation's calls as ``source`` (by default the family's template) renders
    them: in the grammar of that request (``auto`` and ``required``), and parsed back to the same
    calls and arguments. Turns with several calls count only for a family that makes them."""
    from ..grammar import matches
    from ._reply import reply_format  # the reply layer sits above the templates
    from ._template_check import CONVERSATIONS, TOOLS

    source = family.template_source() if source is None else source
    out = RoundTrip()
    for label, messages in CONVERSATIONS:
        messages = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]
        for k, message in enumerate(messages):
            if not message.get("tool_calls"):
                continue
            expected = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
            if len(expected) > 1 and not family.parallel:
                continue
            try:
                _, reply = rendered_reply(source, messages, k, TOOLS, family.stop, enable_thinking=False)
            except TemplateError as exc:
                out.failures.append(f"{label}: the template cannot render it ({exc})")
                continue
            out.turns += 1
            # What the template writes before the calls (an empty reasoning block, a channel) is
            # no call, nor is the end of the turn after them.
            at = reply.find(family.call_start)
            reply = reply[at:] if at >= 0 else reply
            reply = _without_end(reply.rstrip(), family.stop)
            for choice in ("auto", "required"):
                try:
                    fmt = reply_format(family, TOOLS, choice)
                    assert fmt.grammar is not None
                    if not matches(fmt.grammar, reply):
                        out.failures.append(f"{label}: the grammar ({choice}) does not admit {reply!r}")
                        break
                    got = [(c.name, c.arguments) for c in fmt.parse(reply).tool_calls]
                except (TemplateError, ValueError) as exc:
                    out.failures.append(f"{label}: {type(exc).__name__}: {exc}")
                    break
                if got != expected:
                    out.failures.append(f"{label}: read back as {got}, rendered from {expected}")
                    break
    return out
