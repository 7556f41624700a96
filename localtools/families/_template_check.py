"""``localtools templates check``: a family's template against another (a GGUF's own, a vendor's
``.jinja``), rendered on the same conversations, byte for byte."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import TemplateError, UsageError
from ._prompt import render

__all__ = ["CONVERSATIONS", "TOOLS", "Comparison", "compare_templates", "load_template"]

_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
                                             "parameters": {"type": "object", "properties": {
                                                 "city": {"type": "string", "description": "City name"},
                                                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                                 "required": ["city"]}}}
_TIME = {"type": "function", "function": {"name": "get_time", "description": "Local time in a time zone.",
                                          "parameters": {"type": "object", "properties": {
                                              "zone": {"type": "string"}}, "required": ["zone"]}}}
_BOOK = {"type": "function", "function": {"name": "book_table", "description": "Book a table.",
                                          "parameters": {"type": "object", "properties": {
                                              "guests": {"type": "integer"},
                                              "terrace": {"type": "boolean"},
                                              "names": {"type": "array", "items": {"type": "string"}},
                                              "contact": {"type": "object", "properties": {
                                                  "phone": {"type": "string"}}}},
                                              "required": ["guests"]}}}
#: The tools offered in the "with tools" renderings.
TOOLS: list[dict[str, Any]] = [_WEATHER, _TIME, _BOOK]


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


#: (label, messages): a system prompt, one call, several calls in one turn, tool results, an
#: answer, a follow-up, text beyond ASCII, typed arguments (numbers, booleans, lists, objects,
#: quotes and newlines in strings) and reasoning kept from an earlier turn. Call ids are 9 letters
#: and digits, which every template accepts (Mistral's require it).
CONVERSATIONS: list[tuple[str, list[dict[str, Any]]]] = [
    ("one question", [{"role": "user", "content": "What is the weather in Oslo?"}]),
    ("plain chat", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi. How can I help?"},
        {"role": "user", "content": "Name a colour."},
    ]),
    ("plain chat, no system message", [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "Hi. How can I help?"},
        {"role": "user", "content": "Name a colour."},
    ]),
    ("system, call, result, answer, follow-up", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call0001A", "get_weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "call0001A", "content": '{"temp": 3, "sky": "snow"}'},
        {"role": "assistant", "content": "3 °C and snowing."},
        {"role": "user", "content": "And in Bergen?"},
    ]),
    ("two calls in one turn", [
        {"role": "user", "content": "Weather in Oslo and the time in Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("call0001A", "get_weather", '{"city": "Oslo", "unit": "celsius"}'),
            _call("call0002B", "get_time", '{"zone": "Asia/Tokyo"}')]},
        {"role": "tool", "tool_call_id": "call0001A", "content": '{"temp": 3}'},
        {"role": "tool", "tool_call_id": "call0002B", "content": '{"time": "21:04"}'},
    ]),
    ("unicode", [
        {"role": "user", "content": "Wie ist das Wetter in Zürich? 天気は？ 🌧"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call0001A", "get_weather", '{"city": "Zürich"}')]},
        {"role": "tool", "tool_call_id": "call0001A", "content": '{"sky": "Regen ☔"}'},
    ]),
    ("typed arguments", [
        {"role": "user", "content": "A table for 4 on the terrace, please."},
        {"role": "assistant", "content": "", "tool_calls": [_call(
            "call0003C", "book_table",
            '{"guests": 4, "terrace": true, "names": ["Ada", "O\'Neil \\"Bo\\""], '
            '"contact": {"phone": "+47 1234\\n5678"}}')]},
        {"role": "tool", "tool_call_id": "call0003C", "content": "booked"},
        {"role": "assistant", "content": "Booked for 4."},
    ]),
    ("reasoning in earlier turns", [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": "The user wants Oslo's weather.",
         "tool_calls": [_call("call0004D", "get_weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "call0004D", "content": '{"temp": 3}'},
        {"role": "assistant", "content": "It is 3 °C.", "reasoning_content": "3 degrees, say so."},
        {"role": "user", "content": "And tomorrow?"},
    ]),
]


@dataclass
class Comparison:
    label: str
    tools: bool
    ours: str = ""
    theirs: str = ""
    #: Why each side could not render ("" when it did).
    our_error: str = ""
    their_error: str = ""

    @property
    def both_refuse(self) -> bool:
        """Both templates refused the conversation (Llama 3's one call per turn, say): they agree."""
        return bool(self.our_error and self.their_error)

    @property
    def error(self) -> str:
        """Why only one side rendered ("" when both did, or both refused)."""
        if self.both_refuse:
            return ""
        return f"ours: {self.our_error}" if self.our_error else (f"theirs: {self.their_error}" if self.their_error else "")

    @property
    def first_difference(self) -> int | None:
        """The index of the first character that differs (``None`` when identical or both refused)."""
        if self.ours == self.theirs or self.both_refuse:
            return None
        return next((i for i, (a, b) in enumerate(zip(self.ours, self.theirs, strict=False)) if a != b),
                    min(len(self.ours), len(self.theirs)))


def load_template(path: str | Path) -> str:
    """A chat template from a ``.jinja`` file or from a GGUF's ``tokenizer.chat_template``."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--against {path}: no such file")
    if path.suffix == ".gguf":
        from ..host._gguf import read_metadata

        source = read_metadata(path).get("tokenizer.chat_template")
        if not source:
            raise TemplateError(f"{path} has no chat template (tokenizer.chat_template)")
        return str(source)
    return path.read_text(encoding="utf-8")


def _string_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.dumps(
        c["function"]["arguments"], ensure_ascii=False) if isinstance(c["function"]["arguments"], dict)
        else c["function"]["arguments"]}} for c in m["tool_calls"]]} if m.get("tool_calls") else m
        for m in messages]


def _render_theirs(source: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   variables: dict[str, Any]) -> str:
    # Templates differ in how they take a call's arguments: most as an object (``| tojson``),
    # some as the JSON string of the API (functionary). As llama.cpp does, the other is tried
    # when one fails; ours always get objects. Reasoning goes under both names templates read
    # (``thinking``: LFM2), as llama.cpp passes it.
    messages = [{**m, "thinking": m["reasoning_content"]} if m.get("reasoning_content") else m for m in messages]
    try:
        return render(source, messages, tools, **variables).text
    except TemplateError:
        return _render_strings(source, messages, tools, variables)


def _render_strings(source: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                    variables: dict[str, Any]) -> str:
    return render(source, _string_arguments(messages), tools, object_arguments=False, **variables).text


Adapter = Callable[[list[dict[str, Any]], list[dict[str, Any]]], tuple[list[dict[str, Any]], list[dict[str, Any]]]]


def compare_templates(ours: str, theirs: str, *, adapt: Adapter | None = None, **variables: Any) -> list[Comparison]:
    """Both templates on every conversation, with and without tools. Both get the same
    ``bos_token`` / ``eos_token`` stand-ins, so a difference in where they go shows; ``variables``
    (``enable_thinking=False``, say) go to both. ``adapt`` gives the other template the
    conversation and tools the way its vendor documents passing them (Phi-4-mini's tools as a
    system message's string), where that differs from the ``tools`` variable."""
    variables = {"bos_token": "<BOS>", "eos_token": "<EOS>", **variables}
    out = []
    for label, messages in CONVERSATIONS:
        for tools in (TOOLS, []):
            result = Comparison(label, bool(tools))
            try:
                result.ours = render(ours, messages, tools, **variables).text
            except TemplateError as exc:
                result.our_error = str(exc)
            their_messages, their_tools = adapt(messages, tools) if adapt else (messages, tools)
            try:
                result.theirs = _render_theirs(theirs, their_messages, their_tools, variables)
            except TemplateError as exc:
                result.their_error = str(exc)
            out.append(result)
    return out
