"""The check before a call leaves: arguments that break their schema are repaired or refused, never handed out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import tc
from pydantic import BaseModel, model_validator
from test_serve import post, sse

from localtools import (
    Agent,
    Model,
    SchemaRepair,
    SchemaViolation,
    ScriptedBackend,
    TextDelta,
    Tool,
    ToolCallDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnDone,
    UsageError,
)
from localtools.grammar._check import violations
from localtools.serve._app import ServerConfig, create_app
from localtools.serve._openai import ChunkWriter

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


def test_a_streamed_call_is_sent_only_once_checked_and_a_broken_one_never() -> None:
    events = list(Model(ScriptedBackend([BAD, GOOD]), family="qwen2.5").stream(ASK, [TOOL], tool_choice="required"))
    (at,) = [i for i, e in enumerate(events) if isinstance(e, SchemaRepair)]
    repair = events[at]
    assert isinstance(repair, SchemaRepair) and repair.attempt == 1
    assert [(v.pointer, v.keyword) for v in repair.violations] == [("/tags", "uniqueItems")]
    # Nothing of the broken call went out: no id, no name, no argument.
    assert not [e for e in events[:at] if isinstance(e, ToolCallStarted | ToolCallDelta | ToolCallDone)]
    after = events[at + 1:]
    last = events[-1]
    assert isinstance(last, TurnDone) and last.result.schema_repairs == 1
    assert [(d.index, d.call.arguments) for d in after if isinstance(d, ToolCallDone)] == [(0, {"tags": ["a", "b"]})]
    joined = "".join(e.arguments for e in after if isinstance(e, ToolCallDelta))
    assert json.loads(joined) == last.result.tool_calls[0].arguments
    assert [e.id for e in after if isinstance(e, ToolCallStarted)] == [last.result.tool_calls[0].id]


def test_a_streamed_call_still_broken_after_the_repairs_raises_and_no_call_event_leaves() -> None:
    events: list[Any] = []
    with pytest.raises(SchemaViolation) as caught:
        for event in Model(ScriptedBackend([BAD] * 3), family="qwen2.5").stream(ASK, [TOOL], tool_choice="required"):
            events.append(event)
    assert caught.value.repairs == 2
    assert [e.attempt for e in events if isinstance(e, SchemaRepair)] == [1, 2]
    assert not [e for e in events if isinstance(e, ToolCallStarted | ToolCallDelta | ToolCallDone)]


def test_a_parallel_turn_sends_none_of_its_calls_while_any_of_them_is_broken() -> None:
    events = list(Model(ScriptedBackend([GOOD + "\n" + BAD, GOOD]), family="qwen2.5").stream(
        ASK, [TOOL], tool_choice="required"))
    (at,) = [i for i, e in enumerate(events) if isinstance(e, SchemaRepair)]
    # The valid call 0 of the failed turn was never sent: the turn's calls leave together or not at all.
    assert not [e for e in events[:at] if isinstance(e, ToolCallStarted | ToolCallDelta | ToolCallDone)]
    assert [e.index for e in events[at:] if isinstance(e, ToolCallStarted)] == [0]


def test_calls_are_sent_after_the_last_token_never_while_decoding() -> None:
    # Whatever the schema, no call event comes before the generation is over and checked.
    log: list[str] = []
    backend = ScriptedBackend([GOOD])
    generate = backend.generate

    def spy(*args: Any, on_text: Any, **kwargs: Any) -> Any:
        def seen(piece: str) -> None:
            log.append("generated")
            on_text(piece)
        out = generate(*args, on_text=seen, **kwargs)
        log.append("end")
        return out

    backend.generate = spy  # type: ignore[method-assign,assignment]
    Model(backend, family="qwen2.5").chat(ASK, [TOOL], tool_choice="required",
                                         on_event=lambda e: log.append(type(e).__name__))
    assert log.index("ToolCallStarted") > log.index("end") and log.count("generated") > 10


class Span(BaseModel):
    start: int
    end: int

    @model_validator(mode="after")
    def ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError("end comes before start")
        return self


def test_a_streamed_call_its_pydantic_model_refuses_is_not_sent_as_done() -> None:
    # No schema says end >= start: only the tool's own model does, and the stream asks it too.
    tool = Tool.from_model(Span, lambda span: "ok", name="span")
    backward, forward = tc("span", start=5, end=1), tc("span", start=1, end=5)
    events = list(Model(ScriptedBackend([backward, forward]), family="qwen2.5").stream(ASK, [tool],
                                                                                      tool_choice="required"))
    (repair,) = [e for e in events if isinstance(e, SchemaRepair)]
    assert repair.violations[0].keyword == "pydantic:value_error"
    assert [d.call.arguments for d in events if isinstance(d, ToolCallDone)] == [{"start": 1, "end": 5}]


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


def test_serve_streams_only_the_repaired_call_when_a_keyword_is_checked_after_decoding() -> None:
    app = create_app(Model(ScriptedBackend([BAD, GOOD]), family="qwen2.5"), ServerConfig(model_name="m"))
    chunks = sse(post(app, {"model": "m", "messages": ASK, "tools": [TOOL], "tool_choice": "required", "stream": True}))
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert {d["index"] for d in deltas} == {0} and sum("id" in d for d in deltas) == 1
    assert json.loads("".join(d["function"]["arguments"] for d in deltas)) == {"tags": ["a", "b"]}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_serve_streams_no_call_at_all_when_it_stays_broken_and_says_where_not_what() -> None:
    app = create_app(Model(ScriptedBackend([BAD] * 3), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": ASK, "tools": [TOOL], "tool_choice": "required", "stream": True})
    assert res.status_code == 200
    chunks = sse(res)
    assert not [c for c in chunks if c.get("choices") and c["choices"][0]["delta"].get("tool_calls")]
    error = chunks[-1]["error"]
    assert error["code"] == "schema_violation" and "/tags" in error["message"]
    # The client is told where the call broke its schema, never what the model wrote.
    assert "label" in error["message"] and '"a", "a"' not in res.text and "tool_call>" not in res.text


def test_the_422_says_where_not_what_the_model_wrote() -> None:
    app = create_app(Model(ScriptedBackend([BAD] * 3), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": ASK, "tools": [TOOL], "tool_choice": "required"})
    assert res.status_code == 422 and "/tags" in res.text
    assert "tool_call>" not in res.text and '"a", "a"' not in res.json()["error"]["message"]
    assert "'a', 'a'" not in res.json()["error"]["message"]


def test_the_chunk_writer_sends_a_repaired_attempt_s_text_past_what_the_client_has() -> None:
    def sent(events: list[Any]) -> str:
        writer = ChunkWriter(model="m", completion_id="c")
        chunks = [writer.event(e) for e in events]
        return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c is not None)

    repair = SchemaRepair(1, tuple(violations("label", TAGS, {"tags": ["a", "a"]})))
    # A new attempt that repeats the text goes on from where the client is; one that does not
    # follows after a blank line: no answer is lost, nothing is sent twice.
    assert sent([TextDelta("Let me "), TextDelta("check."), repair, TextDelta("Let me check."),
                 TextDelta(" Done.")]) == "Let me check. Done."
    assert sent([TextDelta("Let me check."), repair, TextDelta("The plan "), TextDelta("is pro.")]) == \
        "Let me check.\n\nThe plan is pro."
    assert sent([repair, TextDelta("Hi.")]) == "Hi."
    writer = ChunkWriter(model="m", completion_id="c")
    assert writer.event(ToolCallStarted(0, "call_2", "f")) is not None


def test_each_call_of_a_rejected_turn_reads_its_own_result() -> None:
    backend = ScriptedBackend([GOOD + "\n" + BAD, GOOD])
    result = Model(backend, family="qwen2.5").chat(ASK, [TOOL], tool_choice="required")
    assert result.schema_repairs == 1 and len(result.tool_calls) == 1
    second = backend.prompts[1].text
    assert second.count("non-unique") == 1 and "not run: another call of this turn" in second
