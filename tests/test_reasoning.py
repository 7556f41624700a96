"""Thinking families: free to think, strict to answer. Reasoning is kept apart, never read for
calls, and a budget closes it. On the scripted backend (no thinking weights exist offline)."""

from __future__ import annotations

from typing import Any

import pytest

from localtools import Model, ScriptedBackend, UsageError, get_family
from localtools.families._reply import reasoning_mode, reply_format
from localtools.grammar import matches

WEATHER: dict[str, Any] = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
QUESTION = [{"role": "user", "content": "Weather in Oslo?"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def test_qwen3_thinks_then_calls_and_the_reasoning_is_kept_apart() -> None:
    backend = ScriptedBackend([f"<think>\nThe user wants the weather; call the tool.\n</think>\n\n{CALL}"])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER])
    assert result.reasoning == "The user wants the weather; call the tool."
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert result.content == ""
    assert result.message()["reasoning_content"] == result.reasoning


def test_a_draft_call_inside_the_reasoning_is_never_a_call() -> None:
    draft = f"<think>\nMaybe {CALL}? No: I know it.\n</think>\n\nIt is sunny in Oslo."
    result = Model(ScriptedBackend([draft]), family="qwen3").chat(QUESTION, [WEATHER])
    assert result.tool_calls == [] and result.content == "It is sunny in Oslo."
    assert "<tool_call>" in result.reasoning


def test_required_and_named_choices_apply_after_the_thinking() -> None:
    fam = get_family("qwen3")
    for choice in ("required", "get_weather"):
        fmt = reply_format(fam, [WEATHER], choice, reasoning="may")
        assert fmt.grammar is not None
        assert matches(fmt.grammar, f"<think>free <tool_call> text</think>\n\n{CALL}")
        assert not matches(fmt.grammar, "<think>x</think>\n\nIt is sunny.")
    auto = reply_format(fam, [WEATHER], "auto", reasoning="may")
    assert auto.grammar is not None and matches(auto.grammar, "<think>x</think>\n\nIt is sunny.")
    assert matches(auto.grammar, "It is sunny.")  # "may": thinking is the model's choice
    must = reply_format(fam, [WEATHER], "auto", reasoning="must")
    assert must.grammar is not None and not matches(must.grammar, "It is sunny.")


def test_thinking_off_closes_the_reasoning_in_the_prompt_and_the_grammar_has_none() -> None:
    model = Model(ScriptedBackend([CALL]), family="qwen3")
    prompt = model.render(QUESTION, [WEATHER], thinking=False).text
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert reasoning_mode(model.family, prompt) == ""
    result = model.chat(QUESTION, [WEATHER], thinking=False)
    assert result.tool_calls and result.reasoning == ""
    grammar = model.backend.grammars[-1]  # type: ignore[attr-defined]
    assert grammar is not None and not matches(grammar, f"<think>x</think>\n\n{CALL}")


def test_a_prompt_that_opens_the_reasoning_starts_the_reply_inside_it() -> None:
    # Qwen3.5's generation prompt ends with "<think>\n"; its calls are XML.
    reply = ("Oslo, so call it.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
             "</parameter>\n</function>\n</tool_call>")
    model = Model(ScriptedBackend([reply]), family="qwen3.5")
    result = model.chat(QUESTION, [WEATHER])
    assert model.backend.prompts[-1].text.endswith("<think>\n")  # type: ignore[attr-defined]
    assert result.reasoning == "Oslo, so call it."
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Oslo"})]


def test_a_reasoning_budget_closes_the_thought_and_the_answer_follows() -> None:
    endless = "<think>\n" + "I am still thinking about it. " * 20 + "</think>"
    backend = ScriptedBackend([endless, f"\n\n{CALL}"])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], reasoning_budget=40)
    assert result.attempts == 2 and result.completion_tokens == 40 + len(f"\n\n{CALL}")
    assert result.reasoning == endless[len("<think>\n"):40].strip()
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    # The second prompt holds the reasoning as data and both tags as template text.
    second = backend.prompts[1]
    assert second.text.endswith(endless[:40] + "</think>")
    assert second.segments[-3:] == (("<think>", False), (endless[len("<think>"):40], True), ("</think>", False))
    # The first generation ran under the reasoning alone, the second under the answer's grammar.
    first_grammar, second_grammar = backend.grammars
    assert first_grammar is not None and matches(first_grammar, "<think>x</think>")
    assert second_grammar is not None and matches(second_grammar, f"\n\n{CALL}")
    assert not matches(second_grammar, f"<think>x</think>{CALL}")


def test_a_thought_that_ends_within_the_budget_is_not_cut() -> None:
    backend = ScriptedBackend(["<think>\nShort.\n</think>", f"\n\n{CALL}"])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], reasoning_budget=500)
    assert result.reasoning == "Short." and result.tool_calls
    assert backend.prompts[1].text.endswith("<think>\nShort.\n</think>")


def test_reasoning_cut_by_max_tokens_is_an_unfinished_thought_not_a_broken_call() -> None:
    backend = ScriptedBackend(["<think>\n" + "hmm " * 50 + "</think>\n\nIt is sunny."])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], max_tokens=30, retry_repeat_penalties=())
    assert result.finish_reason == "length" and result.tool_calls == [] and result.content == ""
    assert result.reasoning.startswith("hmm hmm")


def test_template_kwargs_reach_the_template_but_not_the_variables_render_sets() -> None:
    model = Model(ScriptedBackend([]), family="granite")
    assert "Today's Date: 1999" in model.render(QUESTION, template_kwargs={"strftime_now": lambda f: "1999"}).text
    with pytest.raises(UsageError, match="messages"):
        model.render(QUESTION, template_kwargs={"messages": []})


@pytest.mark.parametrize("family", ["qwen3", "deepseek-r1", "lfm2", "ministral3", "smollm3", "gemma4", "qwen3.5"])
def test_every_thinking_family_thinks_then_answers_on_the_scripted_backend(family: str) -> None:
    fam = get_family(family)
    model = Model(ScriptedBackend([]), family=family)
    prompt = model.render(QUESTION, [WEATHER], thinking=True).text
    mode = reasoning_mode(fam, prompt, thinking=True)
    assert mode in ("open", "must")
    opening = "" if mode == "open" else fam.reasoning_start
    model.backend = ScriptedBackend([f"{opening}\nweather, so Oslo\n{fam.reasoning_end}\n\nIt is sunny."])
    result = model.chat(QUESTION, [WEATHER], thinking=True, tool_choice="none")
    assert result.reasoning == "weather, so Oslo" and result.content == "It is sunny."


def test_message_text_saying_think_does_not_open_the_reasoning() -> None:
    model = Model(ScriptedBackend([]), family="qwen3")
    prompt = model.render([{"role": "user", "content": "What is the <think> tag for?"}], [WEATHER])
    assert reasoning_mode(model.family, prompt) == "may"
    assert reasoning_mode(model.family, prompt.text) == "open"  # what reading the whole text would say


def test_request_stop_strings_never_cut_the_reasoning() -> None:
    backend = ScriptedBackend(["<think>\nplan. then more.\n</think>\n\nHello. World."])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], tool_choice="none", stop=["."])
    assert result.reasoning == "plan. then more." and result.content == "Hello"


def test_a_budget_never_spends_more_than_max_tokens() -> None:
    backend = ScriptedBackend(["<think>\n" + "long " * 30 + "</think>"])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], reasoning_budget=100, max_tokens=20,
                                                 retry_repeat_penalties=())
    assert result.completion_tokens == 20 and result.finish_reason == "length"
    assert result.content == "" and result.tool_calls == [] and result.reasoning.startswith("long")
    assert len(backend.prompts) == 1  # no answer generation with no tokens left


def test_a_budget_in_free_decoding_takes_an_answer_without_thinking_as_the_answer() -> None:
    backend = ScriptedBackend([CALL])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], constrained=False, reasoning_budget=100)
    assert [c.name for c in result.tool_calls] == ["get_weather"] and result.reasoning == ""
    assert len(backend.prompts) == 1
    # Cut by the budget, it is generated again as a whole answer.
    backend = ScriptedBackend([CALL, CALL])
    result = Model(backend, family="qwen3").chat(QUESTION, [WEATHER], constrained=False, reasoning_budget=20)
    assert [c.name for c in result.tool_calls] == ["get_weather"] and len(backend.prompts) == 2
    assert backend.prompts[0].text == backend.prompts[1].text


def test_free_output_holding_a_thought_is_read_as_one_even_with_thinking_off() -> None:
    # LFM2's template ignores enable_thinking; what the model thinks is still not read for calls.
    reply = "<think>\nmaybe <|tool_call_start|>[get_weather(city='Bergen')]<|tool_call_end|>\n</think>\nSunny."
    result = Model(ScriptedBackend([reply]), family="lfm2").chat(QUESTION, [WEATHER], constrained=False, thinking=False)
    assert result.tool_calls == [] and result.content == "Sunny." and "Bergen" in result.reasoning


def test_a_budget_cut_inside_the_end_tag_writes_the_tag_once() -> None:
    thought = "<think>\nab</think>"
    backend = ScriptedBackend([thought, f"\n\n{CALL}"])
    Model(backend, family="qwen3").chat(QUESTION, [WEATHER], reasoning_budget=len(thought) - 3)
    assert backend.prompts[1].text.endswith("<think>\nab</think>")
