"""The loop's checks against the ways small models loop (seed 001): each is detected, fed back in
words the model can act on, and shown in the trace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import tc

from localtools import Agent, CallOutcome, Model, ScriptedBackend, UsageError, tool

RUNS: dict[str, int] = {}


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    RUNS["lookup"] = RUNS.get("lookup", 0) + 1
    raise KeyError(key)


@tool
def search(query: str) -> list:
    """Search.

    Args:
        query: Words.
    """
    RUNS["search"] = RUNS.get("search", 0) + 1
    return []


def agent(replies: list[str], **kw: object) -> tuple[Agent, ScriptedBackend]:
    RUNS.clear()
    backend = ScriptedBackend(replies)
    return Agent(Model(backend, family="qwen2.5"), [lookup, search], max_steps=8, **kw), backend  # type: ignore[arg-type]


def test_a_call_that_failed_is_not_run_again_with_the_same_arguments() -> None:
    a, _ = agent([tc("lookup", key="x"), tc("lookup", key="x"), "I could not find x."])
    result = a.run("Find x.")
    assert RUNS == {"lookup": 1}
    second = result.trace[1].calls[0]
    assert second.outcome is CallOutcome.REPEATED_ERROR and not second.ok
    assert "This exact call already failed" in result.messages[4]["content"]
    assert "KeyError" in result.messages[4]["content"]
    assert result.trace[1].loop_checks == [f"lookup ({second.id}): repeated error, not run again"]
    assert result.trace[2].tool_choice == "none"  # the next turn must answer
    assert result.answer == "I could not find x."


def test_other_arguments_after_a_failure_do_run() -> None:
    a, _ = agent([tc("lookup", key="x"), tc("lookup", key="y"), "no"])
    a.run("Find x.")
    assert RUNS == {"lookup": 2}


@tool
def read(key: str) -> str:
    """Read a value.

    Args:
        key: The key.
    """
    RUNS["read"] = RUNS.get("read", 0) + 1
    return f"the value of {key} is 42"


@pytest.mark.parametrize("key", ["x", "注文-778", "A B"])
def test_a_result_asked_again_comes_back_with_a_note_that_it_is_the_same(key: str) -> None:
    # The result comes back with a note that it is a repeat, the trace says so, and the next turn
    # must answer.
    RUNS.clear()
    backend = ScriptedBackend([tc("read", key=key), tc("read", key=key), "It is 42."])
    result = Agent(Model(backend, family="qwen2.5"), [read], max_steps=8).run(f"Read {key}.")
    assert RUNS == {"read": 1}
    first, again = result.messages[2]["content"], result.messages[4]["content"]
    assert first == f"the value of {key} is 42"
    # The same result again, told that it is the one it had.
    assert again.startswith(first) and "already made" in again
    assert result.trace[1].calls[0].outcome is CallOutcome.REPEATED
    assert result.trace[2].tool_choice == "none"
    assert result.answer == "It is 42."


def test_an_empty_result_asked_again_says_it_will_stay_empty() -> None:
    a, _ = agent([tc("search", query="q"), tc("search", query="q"), "Nothing found."])
    result = a.run("Search q.")
    assert RUNS == {"search": 1}
    assert result.trace[1].calls[0].outcome is CallOutcome.REPEATED
    assert "returned nothing; it will return nothing again" in result.messages[4]["content"]


def test_two_tools_called_in_turn_without_progress_are_stopped() -> None:
    replies = [tc("search", query="a"), tc("lookup", key="a"), tc("search", query="b"), tc("lookup", key="b"), "I found nothing."]
    a, backend = agent(replies)
    result = a.run("Find a or b.")
    assert [s.calls[0].name for s in result.trace[:4]] == ["search", "lookup", "search", "lookup"]
    note = result.messages[-2]
    assert note["role"] == "user" and "lookup and search in turn four times" in note["content"]
    assert result.trace[3].loop_checks == ["lookup and search called in turn for 4 steps without a new result"]
    assert result.trace[4].tool_choice == "none" and "in turn four times" in backend.prompts[4].text
    assert result.answer == "I found nothing."


def test_turns_that_bring_something_new_are_progress() -> None:
    @tool
    def page(n: int) -> str:
        """A page.

        Args:
            n: Which.
        """
        return f"text of page {n}"

    replies = [tc("page", n=1), tc("search", query="a"), tc("page", n=2), tc("search", query="b"), tc("page", n=3), "done"]
    RUNS.clear()
    result = Agent(Model(ScriptedBackend(replies), family="qwen2.5"), [page, search], max_steps=8).run("read")
    assert all(not s.loop_checks for s in result.trace) and result.answer == "done"


def test_a_call_id_the_model_used_before_is_renamed_so_results_pair() -> None:
    def call(id_: str, key: str) -> str:
        return "[TOOL_CALLS]" + json.dumps([{"name": "search", "arguments": {"query": key}, "id": id_}])

    RUNS.clear()
    backend = ScriptedBackend([call("abc123def", "a"), call("abc123def", "b"), "done"])
    result = Agent(Model(backend, family="mistral-nemo"), [search], constrained=False).run("find")
    first, second = result.trace[0].calls[0], result.trace[1].calls[0]
    assert first.id == "abc123def" and second.id != "abc123def" and len(second.id) == 9
    assert result.messages[3]["tool_calls"][0]["id"] == second.id and result.messages[4]["tool_call_id"] == second.id
    assert "Your call had the id 'abc123def'" in result.messages[4]["content"]
    assert result.trace[1].loop_checks == [f"search: call id 'abc123def' was used before; renamed {second.id!r}"]


CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}


@pytest.mark.parametrize("history, problem", [
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}], "which no call"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "", "tool_calls": [CALL]},
      {"role": "user", "content": "and?"}], "have no result"),
    ([{"role": "user", "content": "q"},
      {"role": "assistant", "content": "", "tool_calls": [CALL]},
      {"role": "tool", "tool_call_id": "c2", "content": "r"}], "'c2'"),
])
def test_a_history_whose_results_do_not_pair_is_refused(history: list[dict], problem: str) -> None:
    a, _ = agent(["x"])
    with pytest.raises(UsageError, match=problem):
        a.run(history)


def test_a_history_without_ids_pairs_results_by_position() -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "q"},
               {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "search"}}]},
               {"role": "tool", "content": "[]"}, {"role": "user", "content": "and now?"}]
    a, _ = agent(["Nothing."])
    assert a.run(history).answer == "Nothing."


def test_an_id_from_the_history_the_model_writes_again_is_renamed() -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "find a"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
                                                                    "function": {"name": "search", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "abc123def", "content": "[]"}, {"role": "assistant", "content": "None."},
               {"role": "user", "content": "find b"}]
    reply = "[TOOL_CALLS]" + json.dumps([{"name": "search", "arguments": {"query": "b"}, "id": "abc123def"}])
    RUNS.clear()
    result = Agent(Model(ScriptedBackend([reply, "no"]), family="mistral-nemo"), [search], constrained=False).run(history)
    assert result.trace[0].calls[0].id != "abc123def" and result.trace[0].loop_checks


def test_a_middleware_or_observer_that_fails_does_not_end_the_run() -> None:
    async def broken(ctx: object, call_next: object) -> object:
        raise ValueError("middleware bug")

    def bad_observer(run_id: str, event: object) -> None:
        raise RuntimeError("observer bug")

    a, _ = agent([tc("search", query="q"), "fine"], middleware=[broken], observers=[bad_observer])
    result = a.run("go")
    call = result.trace[0].calls[0]
    assert call.outcome is CallOutcome.RAISED and "ValueError: middleware bug" in call.result
    assert result.answer == "fine"
