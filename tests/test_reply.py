"""ReplyFormat: one request's reply format, built once from the family record, tools and tool_choice."""

from __future__ import annotations

import dataclasses

import pytest

from localtools import Model, ScriptedBackend, UsageError, get_family
from localtools.families._families import CALL_STYLES
from localtools.families._reply import reply_format

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "", "parameters": {
    "type": "object", "properties": {}}}}
QWEN = get_family("qwen2.5")


def test_a_named_tool_is_required_over_that_tool_alone() -> None:
    fmt = reply_format(QWEN, [WEATHER, TIME], "get_time")
    assert (fmt.tool_choice, fmt.tool_names, fmt.can_call) == ("required", ("get_time",), True)
    assert fmt.grammar is not None and fmt.split('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    with pytest.raises(UsageError, match="'get_date', which is not among the tools: get_weather, get_time"):
        reply_format(QWEN, [WEATHER, TIME], "get_date", constrained=False)


def test_request_stop_strings_reach_the_backend_only_when_no_call_can_follow() -> None:
    # Under the grammar the family's stop strings never reach the backend: text never holds one,
    # and inside a call they are an argument's characters. Free decoding needs them.
    assert reply_format(QWEN, [WEATHER], "auto", stop=["END"]).stop == ()
    assert reply_format(QWEN, [WEATHER], "none", stop=["END"]).stop == ("END",)
    assert reply_format(QWEN, [], "auto", stop=["END"]).stop == ("END",)
    assert reply_format(QWEN, [WEATHER], "auto", stop=["END"], constrained=False).stop == QWEN.stop
    assert reply_format(QWEN, [WEATHER], "none", stop=["END"], constrained=False).stop == (*QWEN.stop, "END")
    assert not reply_format(QWEN, [WEATHER], "none").can_call


def test_reading_a_reply_by_its_format() -> None:
    constrained = reply_format(QWEN, [WEATHER])
    quoted = '{"name": "Ada", "plan": "pro"}'
    assert constrained.split(quoted) is None and constrained.parse(quoted).content == quoted
    preamble = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    parsed = constrained.parse(preamble)
    assert parsed.content == "Let me check." and [c.name for c in parsed.tool_calls] == ["get_weather"]
    assert constrained.cut_inside_call('<tool_call>\n{"name": "get_weather", "argu')
    assert not constrained.cut_inside_call("The weather in Oslo is")
    free = reply_format(QWEN, [WEATHER], constrained=False)
    assert free.grammar is None and free.call_openings == ('{"name": "get_weather"',)
    assert free.cut_inside_call('```json\n{"name": "get_weather", "arguments": {"ci')
    assert not free.cut_inside_call("The weather in Oslo is")


def test_model_chat_hands_the_backend_the_formats_grammar_and_stops() -> None:
    backend = ScriptedBackend(["It is sunny."])
    model = Model(backend, family="qwen2.5")
    fmt = model.reply_format([WEATHER], "auto")
    result = model.chat([{"role": "user", "content": "Weather in Oslo?"}], [WEATHER])
    assert backend.grammars == [fmt.grammar] and result.content == "It is sunny."


def test_call_style_is_checked_and_drives_the_parser() -> None:
    assert {f.call_style for f in (get_family(n) for n in ("qwen2.5", "mistral", "llama3", "lfm2"))} == set(CALL_STYLES)
    llama = get_family("llama3")
    fmt = reply_format(llama, [WEATHER], constrained=False)
    # Llama 3's models may open a call with <|python_tag|>: the record strips it, it is not content.
    parsed = fmt.parse('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}')
    assert parsed.content == "" and parsed.tool_calls[0].arguments == {"city": "Oslo"}
    no_strip = reply_format(dataclasses.replace(llama, strip=()), [WEATHER], constrained=False)
    assert no_strip.parse('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}').content == "<|python_tag|>"
