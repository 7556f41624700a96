"""Every call syntax round-trips: what a family's template renders for an assistant's calls (its
official template renders the same bytes: test_official_templates.py) is in the language of our
grammar for that request, and the parser reads it back into the same calls and JSON arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localtools import families, get_family
from localtools.families._derive import rendered_reply
from localtools.families._families import Family
from localtools.families._reply import reasoning_mode, reply_format
from localtools.families._template_check import CONVERSATIONS, TOOLS
from localtools.grammar import matches

#: Families whose official template does not render an assistant's calls at all (they leave
#: them out of the history), so there is nothing to read back.
NO_CALLS_RENDERED = {"granite", "smollm3", "phi4-mini"}
FAMILIES = [n for n in families() if n not in NO_CALLS_RENDERED]
TURNS = [(label, k) for label, messages in CONVERSATIONS for k, m in enumerate(messages) if m.get("tool_calls")]


_TOKENS: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>"}


def reply_after_prompt(family: Family, messages: list[dict[str, Any]], k: int, **variables: Any) -> tuple[str, str]:
    """(prompt, reply): the prompt for turn ``k`` and what the template writes after it for that turn."""
    return rendered_reply(family.template_source(), messages, k, TOOLS, family.stop, **_TOKENS, **variables)


def expected_calls(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("label", "k"), TURNS, ids=[f"{label}-{k}" for label, k in TURNS])
def test_rendered_calls_parse_back_and_are_in_the_grammar(family: str, label: str, k: int) -> None:
    fam = get_family(family)
    messages = dict(CONVERSATIONS)[label]
    expected = expected_calls(messages[k])
    if len(expected) > 1 and not fam.parallel:
        pytest.skip(f"{family} makes one call a turn")
    # The syntax alone: no reasoning (test_reasoning_then_calls_as_templates_render_them has it).
    messages = [{key: v for key, v in m.items() if key != "reasoning_content"} for m in messages]
    prompt, reply = reply_after_prompt(fam, messages, k, enable_thinking=False)
    if messages[k - 1]["content"] in reply:
        pytest.skip(f"{family}'s template writes the last user turn differently once an answer follows "
                    "(the system message goes into the last user turn)")
    assert reasoning_mode(fam, prompt, thinking=False) == ""
    for choice in ("auto", "required"):
        fmt = reply_format(fam, TOOLS, choice)
        assert fmt.grammar is not None and matches(fmt.grammar, reply), f"{family} ({choice}): {reply!r}"
        parsed = fmt.parse(reply)
        assert [(c.name, c.arguments) for c in parsed.tool_calls] == expected, reply
        assert parsed.content == ""


REASONING = [n for n in families() if get_family(n).reasoning_start and n not in NO_CALLS_RENDERED]


@pytest.mark.parametrize("family", REASONING)
def test_reasoning_then_calls_as_templates_render_them(family: str) -> None:
    # The turn after the question, as the template writes it: reasoning (or the empty block
    # that stands for none), then the calls. The reasoning is kept apart and never read for calls.
    fam = get_family(family)
    messages = dict(CONVERSATIONS)["reasoning in earlier turns"]
    prompt, reply = reply_after_prompt(fam, messages, 1, enable_thinking=True)
    if fam.reasoning_end not in reply:
        pytest.skip(f"{family}'s template leaves reasoning out of the history")
    mode = reasoning_mode(fam, prompt, thinking=True)
    fmt = reply_format(fam, TOOLS, "auto", reasoning=mode)
    assert fmt.grammar is not None and matches(fmt.grammar, reply), f"{family} ({mode}): {reply!r}"
    parsed = fmt.parse(reply)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == expected_calls(messages[1])
    assert parsed.content == ""
    assert parsed.reasoning in ("", "The user wants Oslo's weather.")


def test_the_round_trip_covers_every_syntax() -> None:
    syntaxes = {(get_family(n).call_style, get_family(n).args_syntax) for n in FAMILIES}
    assert {s for _, s in syntaxes} == {"json", "xml", "python", "gemma4"}
    assert {c for c, _ in syntaxes} == {"tagged", "marker", "bare", "pattern"}


def test_python_strings_hold_no_control_characters_and_bad_literals_are_parse_errors() -> None:
    from localtools import ToolCallParseError
    from localtools.families._args import read_args

    tool = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}}}]
    fmt = reply_format(get_family("lfm2"), tool, "required")
    assert fmt.grammar is not None
    assert matches(fmt.grammar, "<|tool_call_start|>[f(s='a\\nb')]<|tool_call_end|>")
    assert not matches(fmt.grammar, "<|tool_call_start|>[f(s='a\rb')]<|tool_call_end|>")
    with pytest.raises(ValueError):
        read_args("python", "s='a\rb')", 0)
    with pytest.raises(ToolCallParseError):
        reply_format(get_family("lfm2"), tool, "auto", constrained=False).parse("<|tool_call_start|>[f(s='a\rb')]")


def test_python_arguments_take_optional_values_as_python_writes_them() -> None:
    tool = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "s": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "n": {"type": ["integer", "null"]}}}}}]
    fmt = reply_format(get_family("lfm2"), tool, "required")
    assert fmt.grammar is not None
    for text in ("f(s=None, n=None)", "f(s='a', n=3)"):
        reply = f"<|tool_call_start|>[{text}]<|tool_call_end|>"
        assert matches(fmt.grammar, reply), reply
    assert fmt.parse("<|tool_call_start|>[f(s=None, n=3)]<|tool_call_end|>").tool_calls[0].arguments == {"s": None, "n": 3}


def test_keys_a_syntax_cannot_write_bare_are_refused_by_name() -> None:
    from localtools import UnsupportedSchema

    tool = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"first-name": {"type": "string"}}}}}]
    for family in ("lfm2", "gemma4"):
        with pytest.raises(UnsupportedSchema, match="first-name"):
            reply_format(get_family(family), tool, "auto")


def test_xml_values_are_typed_by_the_schema_the_grammar_used() -> None:
    from localtools.families._args import read_args

    schema = {"type": "object", "$defs": {"E": {"enum": ["1", "2"]}}, "properties": {
        "a": {"$ref": "#/$defs/E"}, "b": {"type": ["string", "null"]}, "n": {"type": "integer"}},
        "additionalProperties": {"type": "string"}}
    text = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in (("a", "1"), ("b", "[1, 2]"), ("n", "7"), ("c", "12345")))
    assert read_args("xml", text, 0, schema)[0] == {"a": "1", "b": "[1, 2]", "n": 7, "c": "12345"}


@pytest.mark.parametrize(("raw", "read"), [("\t8", "\t8"), ("8", "8"), ("12", 12), (" 12", 12), ("true", "true"),
                                         ("[1]", "[1]"), ("3.5", "3.5")])
def test_an_xml_value_two_types_could_read_is_the_one_the_schema_takes(raw: str, read: Any) -> None:
    """Where a string and a number (or another type) may both go, text that reads as a number the
    schema refuses (8 under a minimum of 10) stays the text, which it takes."""
    from localtools.families._args import read_args

    schema = {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": 10},
                                                               {"type": "string"}]}}}
    assert read_args("xml", f"<parameter=v>\n{raw}\n</parameter>\n", 0, schema)[0] == {"v": read}


def test_an_argument_syntax_the_parser_would_not_read_is_refused_when_the_family_loads() -> None:
    import dataclasses

    from localtools import TemplateError
    from localtools.families._families import _family

    record = {k: v for k, v in dataclasses.asdict(get_family("qwen3.5")).items() if k not in ("name", "directory")}
    with pytest.raises(TemplateError, match="pattern"):
        _family("broken", {**record, "call_style": "tagged"}, "test")


@pytest.mark.parametrize("family", ["gemma4", "lfm2"])
def test_free_form_keys_the_grammar_writes_read_back(family: str) -> None:
    import random

    from sampler import sample

    from localtools import Model, ScriptedBackend
    from localtools.grammar import build_grammar

    tool = {"type": "function", "function": {"name": "f", "description": "", "parameters": {
        "type": "object", "properties": {"extra": {"type": "object"}}, "required": ["extra"]}}}
    grammar = build_grammar(families()[family], [tool], "required")
    for seed in range(150):
        text = sample(grammar, random.Random(seed))
        result = Model(ScriptedBackend([text]), family=family).chat(
            [{"role": "user", "content": "go"}], [tool], tool_choice="required", max_tokens=100_000,
            retry_repeat_penalties=())
        assert [c.name for c in result.tool_calls][:1] == ["f"], text
