"""The check before a call leaves: arguments that break their schema are repaired or refused, never handed out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import tc
from test_serve import post

from localtools import Agent, Model, SchemaViolation, ScriptedBackend, Tool, ToolCallDone, UsageError
from localtools._check import violations
from localtools.serve._app import ServerConfig, create_app

# uniqueItems is a keyword no context-free grammar can say for strings in general: the check's.
TAGS = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["tags"]}
TOOL = {"type": "function", "function": {"name": "label", "description": "Label an item.", "parameters": TAGS}}
BAD, GOOD = tc("label", tags=["a", "a"]), tc("label", tags=["a", "b"])
ASK = [{"role": "user", "content": "Label it a and b."}]


def test_violations_name_the_pointer_and_the_keyword_and_assert_formats() -> None:
    (found,) = violations("label", TAGS, {"tags": ["a", "a"]})
    assert (found.tool, found.pointer, found.keyword) == ("label", "/tags", "uniqueItems")
    assert violations("label", TAGS, {"tags": ["a", "b"]}) == []
    when = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}
    assert [v.keyword for v in violations("f", when, {"day": "yesterday"})] == ["format"]
    assert violations("f", when, {"day": "2026-12-03"}) == []


def test_a_call_that_breaks_its_schema_is_sent_back_and_the_repaired_one_leaves() -> None:
    backend = ScriptedBackend([BAD, GOOD])
    result = Model(backend, family="qwen2.5").chat(ASK, [TOOL], tool_choice="required")
    assert [c.arguments for c in result.tool_calls] == [{"tags": ["a", "b"]}]
    assert result.schema_repairs == 1
    # The second generation read the rejected call and what was wrong with it, as the call's result.
    second = backend.prompts[1].text
    assert '"a", "a"' in second and "/tags" in second and "non-unique" in second


def test_a_call_still_broken_after_the_repairs_is_a_typed_error_never_a_call() -> None:
    model = Model(ScriptedBackend([BAD, BAD, BAD]), family="qwen2.5")
    with pytest.raises(SchemaViolation) as caught:
        model.chat(ASK, [TOOL], tool_choice="required")
    assert (caught.value.tool, caught.value.pointer, caught.value.keyword, caught.value.repairs) == \
        ("label", "/tags", "uniqueItems", 2)
    with pytest.raises(SchemaViolation):
        Model(ScriptedBackend([BAD]), family="qwen2.5").chat(ASK, [TOOL], tool_choice="required", schema_retries=0)
    with pytest.raises(UsageError, match="schema_retries"):
        model.chat(ASK, [TOOL], schema_retries=-1)


def test_free_output_is_handed_out_as_parsed_for_the_loop_to_check() -> None:
    # Free decoding is what constrained decoding is compared with: its calls come out as written.
    result = Model(ScriptedBackend([BAD]), family="qwen2.5").chat(ASK, [TOOL], constrained=False)
    assert [c.arguments for c in result.tool_calls] == [{"tags": ["a", "a"]}] and result.schema_repairs == 0


def test_a_streamed_call_that_breaks_its_schema_is_never_sent_as_done() -> None:
    events: list[Any] = []
    model = Model(ScriptedBackend([BAD, GOOD]), family="qwen2.5")
    with pytest.raises(SchemaViolation):
        for event in model.stream(ASK, [TOOL], tool_choice="required"):
            events.append(event)
    assert events and not any(isinstance(e, ToolCallDone) for e in events)


def test_the_agent_runs_the_repaired_call() -> None:
    seen: list[list[str]] = []

    def label(tags: list[str]) -> str:
        seen.append(tags)
        return "labelled"

    tool = Tool.from_schema(TOOL, label)
    agent = Agent(Model(ScriptedBackend([BAD, GOOD, "Done."]), family="qwen2.5"), [tool])
    run = agent.run("Label it a and b.")
    assert run.answer == "Done." and seen == [["a", "b"]]
    # The trace counts the repair on the step it happened in.
    assert [(st.schema_repairs, st.schema_refused) for st in run.trace] == [(1, False), (0, False)]
    stuck = Agent(Model(ScriptedBackend([BAD, BAD, BAD, "Gave up."]), family="qwen2.5"), [tool]).run("Label it.")
    assert stuck.trace[0].schema_refused and stuck.trace[0].schema_repairs == 2 and "uniqueItems" in (stuck.trace[0].error or "")


def test_the_bench_counts_calls_repaired_and_calls_refused() -> None:
    from localtools.bench import Case, Mode, run_bench, summarize

    case = Case("label-0", "simple_python", ASK, [TOOL], [{"label": {"tags": [["a", "b"]]}}])
    mode = Mode(model="scripted", backend="scripted", constrained=True, tool_choice="auto")
    repaired = run_bench({("scripted", "scripted"): Model(ScriptedBackend([BAD, GOOD]), family="qwen2.5")}, [mode], [case])
    refused = run_bench({("scripted", "scripted"): Model(ScriptedBackend([BAD] * 3), family="qwen2.5")}, [mode], [case])
    assert (repaired[0].repairs, repaired[0].refused, repaired[0].correct) == (1, False, True)
    assert (refused[0].repairs, refused[0].refused, refused[0].correct) == (2, True, False)
    row = next(r for r in summarize(repaired + refused, [mode]) if r["category"] == "simple_python")
    assert (row["calls_repaired"], row["calls_refused"]) == (2, 1)


def test_serve_answers_a_call_that_stays_broken_with_a_422_naming_the_keyword() -> None:
    app = create_app(Model(ScriptedBackend([BAD, BAD, BAD]), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": ASK, "tools": [TOOL], "tool_choice": "required"})
    assert res.status_code == 422, res.text
    error = res.json()["error"]
    assert error["code"] == "schema_violation" and "uniqueItems" in error["message"] and "/tags" in error["message"]
    ok = create_app(Model(ScriptedBackend([BAD, GOOD]), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(ok, {"model": "m", "messages": ASK, "tools": [TOOL]})
    call = res.json()["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"tags": ["a", "b"]}


def test_each_call_of_a_rejected_turn_reads_its_own_result() -> None:
    backend = ScriptedBackend([GOOD + "\n" + BAD, GOOD])
    result = Model(backend, family="qwen2.5").chat(ASK, [TOOL], tool_choice="required")
    assert result.schema_repairs == 1 and len(result.tool_calls) == 1
    second = backend.prompts[1].text
    assert second.count("non-unique") == 1 and "not run: another call of this turn" in second
