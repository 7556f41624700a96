"""Rendered prompts, one small conversation per family, compared in full with tests/snapshots/.

Regenerate after an intended change with: UPDATE_SNAPSHOTS=1 pytest tests/test_templates.py
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from localtools import TemplateError, families, get_family
from localtools.families._families import detect_family
from localtools.families._prompt import render

SNAPSHOTS = Path(__file__).parent / "snapshots"
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "get_customer", "description": "Look up a customer.",
    "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]},
}}]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Plan of cust-1001?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "abcDEF123", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-1001"}'}}]},
    {"role": "tool", "tool_call_id": "abcDEF123", "content": '{"plan": "pro"}'},
]


@pytest.mark.parametrize("family", list(families()))
def test_render_snapshot(family: str) -> None:
    fam = get_family(family)
    # A fixed clock: some templates print today's date.
    text = render(fam.template_source(), CONVERSATION, TOOLS, bos_token="<s>", eos_token="</s>",
                  strftime_now=lambda fmt: datetime(2026, 1, 2).strftime(fmt)).text
    path = SNAPSHOTS / f"{family}.txt"
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_message_text_is_marked_as_data() -> None:
    prompt = render(get_family("qwen2.5").template_source(), CONVERSATION, TOOLS)
    data = [t for t, is_data in prompt.segments if is_data]
    assert data == ["Be brief.", "Plan of cust-1001?", "cust-1001", '{"plan": "pro"}']
    assert "".join(t for t, _ in prompt.segments) == prompt.text


def test_tojson_does_not_html_escape() -> None:
    tools = [{"type": "function", "function": {"name": "f", "description": "a < b & c > 'd'", "parameters": {}}}]
    text = render(get_family("qwen2.5").template_source(), [{"role": "user", "content": "x"}], tools).text
    assert "a < b & c > 'd'" in text


def test_sandbox_blocks_unsafe_templates() -> None:
    with pytest.raises(TemplateError):
        render("{{ messages.__class__.__mro__ }}", [{"role": "user", "content": "x"}])


def test_malformed_history_arguments_are_a_clear_error() -> None:
    call = {"id": "1", "function": {"name": "f", "arguments": "{oops"}}
    bad: list[dict[str, Any]] = [{"role": "assistant", "content": "", "tool_calls": [call]}]
    with pytest.raises(TemplateError, match="not valid JSON"):
        render(get_family("qwen2.5").template_source(), bad)
    call["function"] = {"name": "f", "arguments": "[1, 2]"}  # JSON, but no object to render as arguments
    with pytest.raises(TemplateError, match=r"arguments of 'f' are not a JSON object \(got list\)"):
        render(get_family("qwen2.5").template_source(), bad)


def test_detection_from_metadata() -> None:
    assert detect_family({"general.architecture": "qwen2", "tokenizer.chat_template": "<tool_call>"}).name == "qwen2.5"
    assert detect_family({"general.architecture": "llama", "tokenizer.chat_template": "<|im_start|>"}).name == "chatml"
    assert detect_family({"general.architecture": "llama", "tokenizer.chat_template": "<|start_header_id|>"}).name == "llama3"
    assert detect_family({"general.architecture": "gemma3"}).name == "gemma"
    assert detect_family({"general.architecture": "llama", "tokenizer.chat_template": "[INST]"}).name == "mistral"
    with pytest.raises(TemplateError, match="no family matches"):
        detect_family({"general.architecture": "rwkv"})
    assert get_family("qwen").name == "qwen2.5"


def test_family_hints_go_into_the_prompt_and_never_into_the_history() -> None:
    import dataclasses

    from localtools import Model
    from localtools.backends.scripted import ScriptedBackend

    hint, after = "Write several calls as one JSON list.", "Answer from the results now."
    fam = dataclasses.replace(get_family("qwen2.5"), parallel_hint=hint, result_hint=after)
    model = Model(ScriptedBackend([]), family=fam)
    question = [{"role": "user", "content": "Plans of cust-1 and cust-2?"}]
    assert f"<|im_start|>system\n{hint}\n\n# Tools" in model.render(question, TOOLS).text
    # A system message of the user's keeps its place after the hint.
    assert f"<|im_start|>system\n{hint}\n\nBe brief." in model.render(CONVERSATION[:2], TOOLS).text
    # After tool results the prompt ends with the result hint as a user turn; the system message
    # (and so the prompt's prefix) is the same as on the first turn.
    prompt = model.render(CONVERSATION, TOOLS).text
    assert prompt.endswith(f"</tool_response><|im_end|>\n<|im_start|>user\n{after}<|im_end|>\n<|im_start|>assistant\n")
    assert prompt.startswith(model.render(CONVERSATION[:2], TOOLS).text.split("<|im_start|>user")[0])
    # No parallel hint where at most one call may follow; no hints without tools.
    assert hint not in model.render(question, TOOLS, parallel_tool_calls=False).text
    assert hint not in model.render(question, TOOLS, tool_choice="none").text
    assert after in model.render(CONVERSATION, TOOLS, tool_choice="none").text
    assert hint not in model.render(question, []).text and after not in model.render(CONVERSATION, []).text
    # "{question}" in a result hint is the last user message, restated where the answer is due.
    restating = Model(ScriptedBackend([]), family=dataclasses.replace(fam, result_hint="Now answer: {question}"))
    assert restating.render(CONVERSATION, TOOLS).text.endswith(
        f"<|im_start|>user\nNow answer: {CONVERSATION[1]['content']}<|im_end|>\n<|im_start|>assistant\n")
    # The history is not modified.
    assert question == [{"role": "user", "content": "Plans of cust-1 and cust-2?"}] and len(CONVERSATION) == 4


# Results that are errors, as the loop and as tools write them, and results that are not.
FAILED = ["Error: the call to 'get_customer' failed: KeyError: 'cust-1001'", '{"error": "no such customer"}',
          '{"error": {"code": 404, "message": "找不到客户"}}', "Error: get_customer was not approved."]
FINE = ['{"plan": "pro"}', "pro", '{"errors": []}', '"Error: none"', "[]"]


@pytest.mark.parametrize("result", FAILED + FINE)
def test_the_error_hint_ends_the_prompt_where_every_result_is_an_error(result: str) -> None:
    """After calls that all failed there is nothing to answer from: the family's error hint
    ends the prompt in place of its result hint; one result that is not an error is enough for the
    result hint; a family without an error hint keeps its result hint after errors too."""
    import dataclasses

    from localtools import Model
    from localtools.backends.scripted import ScriptedBackend

    after, failed = "Answer from the results now: {question}", "Say what failed: {question}"
    fam = dataclasses.replace(get_family("qwen2.5"), result_hint=after, error_hint=failed)
    model = Model(ScriptedBackend([]), family=fam)
    asked = CONVERSATION[1]["content"]
    ended = [*CONVERSATION[:3], {**CONVERSATION[3], "content": result}]
    hint = (after if result in FINE else failed).replace("{question}", asked)
    assert model.render(ended, TOOLS).text.endswith(f"<|im_start|>user\n{hint}<|im_end|>\n<|im_start|>assistant\n")
    # Two calls, one of which failed: the other's result is there to answer from.
    two = [*CONVERSATION[:2], {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-1"}'}},
        {"id": "b", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-2"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": FAILED[1]}, {"role": "tool", "tool_call_id": "b", "content": result}]
    assert model.render(two, TOOLS).text.endswith(f"<|im_start|>user\n{hint}<|im_end|>\n<|im_start|>assistant\n")
    plain = Model(ScriptedBackend([]), family=dataclasses.replace(fam, error_hint=""))
    assert after.replace("{question}", asked) in plain.render(ended, TOOLS).text
    assert "Say what failed" not in model.render(ended, []).text  # no hints without tools


def test_the_readmes_family_record_is_a_valid_record() -> None:
    """The one line the docs tell family authors to add has every field, and only known ones."""
    import re
    import tomllib

    from localtools.families._families import _FIELDS, _OPTIONAL

    readme = (Path(__file__).parent.parent / "docs" / "families.md").read_text(encoding="utf-8")
    line = re.search(r"^\s*(myfamily = \{.*\})$", readme, re.MULTILINE)
    assert line, "docs/families.md: the example families.toml line is missing"
    record = tomllib.loads(line.group(1))["myfamily"]
    assert _FIELDS - _OPTIONAL <= set(record) <= _FIELDS
