"""``localtools templates check``: a family's template against another (a GGUF's own, a vendor's
``.jinja``), rendered on the same conversations, byte for byte."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import TemplateError, UsageError
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
#: The tools offered in the "with tools" renderings.
TOOLS: list[dict[str, Any]] = [_WEATHER, _TIME]


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


#: (label, messages): a system prompt, one call, several calls in one turn, tool results, an
#: answer, a follow-up, and text beyond ASCII.
CONVERSATIONS: list[tuple[str, list[dict[str, Any]]]] = [
    ("one question", [{"role": "user", "content": "What is the weather in Oslo?"}]),
    ("system, call, result, answer, follow-up", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "get_weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3, "sky": "snow"}'},
        {"role": "assistant", "content": "3 °C and snowing."},
        {"role": "user", "content": "And in Bergen?"},
    ]),
    ("two calls in one turn", [
        {"role": "user", "content": "Weather in Oslo and the time in Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("call_1", "get_weather", '{"city": "Oslo", "unit": "celsius"}'),
            _call("call_2", "get_time", '{"zone": "Asia/Tokyo"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"time": "21:04"}'},
    ]),
    ("unicode", [
        {"role": "user", "content": "Wie ist das Wetter in Zürich? 天気は？ 🌧"},
        {"role": "assistant", "content": "", "tool_calls": [_call("call_1", "get_weather", '{"city": "Zürich"}')]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "Regen ☔"}'},
    ]),
]


@dataclass
class Comparison:
    label: str
    tools: bool
    ours: str = ""
    theirs: str = ""
    #: Why one side could not render ("" when both did).
    error: str = ""

    @property
    def first_difference(self) -> int | None:
        """The index of the first character that differs (``None`` when identical)."""
        if self.ours == self.theirs:
            return None
        return next((i for i, (a, b) in enumerate(zip(self.ours, self.theirs, strict=False)) if a != b),
                    min(len(self.ours), len(self.theirs)))


def load_template(path: str | Path) -> str:
    """A chat template from a ``.jinja`` file or from a GGUF's ``tokenizer.chat_template``."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--against {path}: no such file")
    if path.suffix == ".gguf":
        from ._gguf import read_metadata

        source = read_metadata(path).get("tokenizer.chat_template")
        if not source:
            raise TemplateError(f"{path} has no chat template (tokenizer.chat_template)")
        return str(source)
    return path.read_text(encoding="utf-8")


def compare_templates(ours: str, theirs: str) -> list[Comparison]:
    """Both templates on every conversation, with and without tools. Both get the same
    ``bos_token`` / ``eos_token`` stand-ins, so a difference in where they go shows."""
    out = []
    for label, messages in CONVERSATIONS:
        for tools in (TOOLS, []):
            result = Comparison(label, bool(tools))
            try:
                result.ours = render(ours, messages, tools, bos_token="<BOS>", eos_token="<EOS>").text
                result.theirs = render(theirs, messages, tools, bos_token="<BOS>", eos_token="<EOS>").text
            except TemplateError as exc:
                result.error = str(exc)
            out.append(result)
    return out
