"""Each family's own template renders what the vendor's official template renders, byte for byte.

The official copies and where each comes from: tests/official_templates/SOURCES.md. The
conversations (a system prompt, calls, several calls in one turn, tool results, unicode, typed
arguments, reasoning from earlier turns; with and without tools): localtools/_template_check.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localtools import get_family
from localtools.families._families import detect_family
from localtools.families._template_check import CONVERSATIONS, compare_templates

OFFICIAL = Path(__file__).parent / "official_templates"

#: (family, official file, template variables): every variable setting the official template reads.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja", {}),
    ("llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja", {}),
    # 3.2 prints today's date unless given one; 3.1's is fixed.
    ("llama3", "meta-llama-Llama-3.2-3B-Instruct.jinja", {"date_string": "26 Jul 2024"}),
    *(("qwen3", "Qwen-Qwen3-0.6B.jinja", v) for v in ({}, {"enable_thinking": True}, {"enable_thinking": False})),
    *(("qwen3.5", "Qwen3.5-4B.jinja", v) for v in ({}, {"enable_thinking": True}, {"enable_thinking": False})),
    ("qwen3-coder", "Qwen3-Coder.jinja", {}),
    *(("smollm3", "HuggingFaceTB-SmolLM3-3B-upstream.jinja", v) for v in ({}, {"enable_thinking": False})),
    ("granite", "ibm-granite-granite-3.3-2B-Instruct.jinja", {}),
    ("granite", "ibm-granite-granite-3.3-2B-Instruct.jinja", {"thinking": True}),
    ("granite4", "ibm-granite-granite-4.0.jinja", {}),
    *(("lfm2", "LFM2.5-8B-A1B.jinja", v) for v in ({}, {"preserve_thinking": True})),
    ("mistral-nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja", {}),
    ("mistral-tekken", "Mistral-Small-3.2-24B-Instruct-2506.jinja", {}),
    ("ministral3", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", {}),
    *(("gemma4", "google-gemma-4-31B-it.jinja", v) for v in ({}, {"enable_thinking": True}, {"enable_thinking": False})),
    ("functionary", "meetkai-functionary-medium-v3.2.jinja", {}),
    *(("deepseek-r1", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", v) for v in ({}, {"enable_thinking": True})),
]


def tools_in_the_system_message(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Phi-4-mini's way (model card, cookbook): the functions as a JSON string on the system message."""
    if not tools:
        return messages, []
    listed = json.dumps([t["function"] for t in tools], ensure_ascii=False)
    first = messages[0] if messages and messages[0]["role"] == "system" else {"role": "system", "content": ""}
    rest = messages[1:] if first is messages[0] else messages
    return [{**first, "tools": listed}, *rest], []


def test_phi4_mini_matches_microsofts_template_given_tools_as_microsoft_documents() -> None:
    results = compare_templates(get_family("phi4-mini").template_source(),
                                (OFFICIAL / "microsoft-Phi-4-mini-instruct.jinja").read_text(), adapt=tools_in_the_system_message)
    assert [r.first_difference for r in results] == [None] * len(results) and not any(r.error for r in results)
    with_tools = next(r for r in results if r.tools)
    assert '<|tool|>[{"name": "get_weather", "description": "Current weather in a city."' in with_tools.ours


@pytest.mark.parametrize(("family", "official", "variables"), CASES,
                         ids=[f"{f}-{o.removesuffix('.jinja')}-{v}" for f, o, v in CASES])
def test_family_template_is_byte_identical_to_the_official(family: str, official: str, variables: dict[str, Any]) -> None:
    results = compare_templates(get_family(family).template_source(), (OFFICIAL / official).read_text(), **variables)
    assert len(results) == 2 * len(CONVERSATIONS)
    for r in results:
        assert not r.error, f"{r.label} (tools={r.tools}): {r.error}"
        at = r.first_difference
        assert at is None, (f"{r.label} (tools={r.tools}) differs at {at}:\n ours:   {r.ours[max(0, at - 60):at + 60]!r}\n"
                            f" theirs: {r.theirs[max(0, at - 60):at + 60]!r}")


def test_hermes_matches_its_tool_use_template_and_renders_without_tools() -> None:
    # The official tool_use template cannot render without tools (it iterates them unchecked);
    # the models' default template for that case is plain ChatML, which ours then writes.
    results = compare_templates(get_family("hermes").template_source(),
                                (OFFICIAL / "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja").read_text())
    with_tools = [r for r in results if r.tools]
    assert with_tools and all(r.first_difference is None and not r.error for r in with_tools)
    without = [r for r in results if not r.tools]
    assert all(r.their_error and not r.our_error for r in without)
    assert without[0].ours == "<BOS><|im_start|>user\nWhat is the weather in Oslo?<|im_end|>\n<|im_start|>assistant\n"


def test_families_byte_identical_to_an_official_template() -> None:
    identical = {family for family, _, _ in CASES} | {"hermes", "phi4-mini"}
    assert len(identical) >= 12, sorted(identical)


@pytest.mark.parametrize("official", sorted(p.name for p in OFFICIAL.glob("*.jinja")))
def test_each_official_template_is_detected_as_its_family(official: str) -> None:
    expected = {o: f for f, o, _ in CASES} | {
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek-r1",
        "google-gemma-2-2b-it.jinja": "gemma",
        "HuggingFaceTB-SmolLM3-3B.jinja": "smollm3",
        "microsoft-Phi-4-mini-instruct.jinja": "phi4-mini",
    }
    metadata = {"general.architecture": "unknown", "tokenizer.chat_template": (OFFICIAL / official).read_text()}
    assert detect_family(metadata).name == expected[official]
