from __future__ import annotations

from pathlib import Path

import pytest
from conftest import tc

from localtools import Agent, Memory, Model, ScriptedBackend, UsageError, tool


@tool
def get_plan(customer_id: str) -> str:
    """A customer's plan.

    Args:
        customer_id: The id.
    """
    return "pro " + "x" * 300


def agent(replies: list[str], memory: Memory, n_ctx: int | None = None) -> tuple[Agent, ScriptedBackend]:
    backend = ScriptedBackend(replies, n_ctx=n_ctx)
    return Agent(Model(backend, family="qwen2.5"), [get_plan], memory=memory, max_tokens=128), backend


def test_a_session_remembers_earlier_runs_across_instances(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    first, _ = agent([tc("get_plan", customer_id="c1"), "c1 is on pro."], Memory(db, session="alice"))
    first.run("Which plan is c1 on?")
    second, backend = agent(["You asked about c1: pro."], Memory(db, session="alice"))  # a new process, the same file
    result = second.run("What did I ask before?")
    prompt = backend.prompts[0].text
    assert prompt.index("Which plan is c1 on?") < prompt.index("c1 is on pro.") < prompt.index("What did I ask before?")
    assert [m["role"] for m in Memory(db, session="alice").messages()] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert result.messages[0]["content"] == "Which plan is c1 on?"
    # Another session sees none of it.
    other, backend = agent(["hello"], Memory(db, session="bob"))
    other.run("hi")
    assert "c1" not in backend.prompts[0].text


def test_old_turns_leave_the_prompt_first_and_the_question_stays(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "m.db")
    for i in range(6):
        a, _ = agent([tc("get_plan", customer_id=f"c{i}"), f"c{i} is on pro."], memory)
        a.run(f"Which plan is c{i} on?")
    a, backend = agent(["Done."], memory, n_ctx=2000)
    result = a.run("And c9?")
    prompt = backend.prompts[0].text
    assert "And c9?" in prompt and len(prompt) <= 2000 - 128
    assert "Which plan is c0 on?" not in prompt and "c5 is on pro." in prompt
    assert any(c.startswith("left out") for c in result.trace[0].context_cuts)
    assert len(memory.messages()) == 6 * 4 + 2  # the file keeps everything


def test_max_messages_keeps_whole_turns(tmp_path: Path) -> None:
    memory = Memory(tmp_path / "m.db", max_messages=5)
    for i in range(3):
        a, _ = agent([tc("get_plan", customer_id=f"c{i}"), f"answer {i}"], memory)
        a.run(f"question {i}")
    kept = memory.messages()
    assert kept[0] == {"role": "user", "content": "question 2"} and len(kept) == 4
    memory.clear()
    assert memory.messages() == []
    with pytest.raises(UsageError):
        Memory(tmp_path / "m.db", max_messages=0)
