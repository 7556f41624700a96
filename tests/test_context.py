from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import tc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localtools import Agent, ContextBudget, ContextLengthExceeded, Model, ScriptedBackend, UsageError, tool

PAGES: dict[str, int] = {}


@tool
def fetch(page: int) -> str:
    """Fetch a page of the manual.

    Args:
        page: The page number.
    """
    return f"page {page}: " + "lorem ipsum " * (PAGES.get(str(page), 20) // 12)


def paired(prompt_messages: list[dict[str, Any]]) -> bool:
    """Every tool result follows the assistant turn that made its call."""
    open_ids: set[str] = set()
    for m in prompt_messages:
        if m["role"] == "assistant":
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
        elif m["role"] == "tool" and m["tool_call_id"] not in open_ids:
            return False
    return True


def run(replies: list[str], n_ctx: int | None, **kw: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies, n_ctx=n_ctx)
    kw.setdefault("max_tokens", 128)
    agent = Agent(Model(backend, family="qwen2.5"), [fetch], max_steps=12, **kw)
    return agent.run("Summarise the manual."), backend


def test_a_result_too_big_for_the_context_is_cut_with_a_note_and_kept_whole_in_the_run() -> None:
    PAGES["1"] = 6000
    result, backend = run([tc("fetch", page=1), "It is about lorem ipsum."], n_ctx=2000)
    assert result.answer == "It is about lorem ipsum."
    prompt = backend.prompts[1].text
    assert len(prompt) <= 2000 - 128
    assert "characters left out to fit the context]" in prompt
    cuts = result.trace[1].context_cuts
    assert len(cuts) == 1 and cuts[0].startswith("cut the result of fetch (") and "from 6" in cuts[0]
    # The run's own history keeps the whole result: nothing is lost, only the prompt is shorter.
    assert len(result.messages[2]["content"]) > 6000
    assert result.trace[0].context_cuts == []


def test_old_steps_are_left_out_whole_so_call_ids_stay_paired() -> None:
    for p in range(1, 9):
        PAGES[str(p)] = 400
    replies = [tc("fetch", page=p) for p in range(1, 9)] + ["done"]
    result, backend = run(replies, n_ctx=1500)
    assert result.answer == "done"
    late = backend.prompts[-1].text
    assert "earlier messages were left out to fit the context: calls to fetch.)" in late
    assert "page 8:" in late and "page 1:" not in late
    assert all(len(p.text) <= 1500 - 128 for p in backend.prompts)
    dropped = [c for s in result.trace for c in s.context_cuts if c.startswith("left out")]
    assert dropped and all("messages)" in c for c in dropped)
    # Steps go whole: the prompt has as many results as calls, each after its call.
    assert late.count("<tool_response>") == late.count("<tool_call>\n{\"name\": \"fetch\"")


def history(sizes: list[int]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Read it all."}]
    for i, size in enumerate(sizes):
        calls = [(f"c{i}a", "fetch"), (f"c{i}b", "read")]
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": "{}"}} for id_, name in calls]})
        msgs += [{"role": "tool", "tool_call_id": id_, "name": name, "content": "x" * size} for id_, name in calls]
    return msgs


def size(msgs: list[dict[str, Any]]) -> int:
    return len(json.dumps(msgs))


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=3000), min_size=0, max_size=8),
       room=st.integers(min_value=800, max_value=8000), keep_recent=st.integers(min_value=0, max_value=2))
def test_fit_keeps_the_head_pairs_every_result_and_fits_or_says_why(sizes: list[int], room: int, keep_recent: int) -> None:
    msgs = history(sizes)
    before = json.dumps(msgs)
    try:
        fitted = ContextBudget(keep_recent=keep_recent).fit(msgs, size, room)
    except ContextLengthExceeded as exc:
        # Only when what may not be left out cannot fit even with results at their floor.
        assert exc.prompt_tokens > room
        return
    assert json.dumps(msgs) == before  # the run's own messages are never changed
    out = fitted.messages
    assert size(out) <= room
    assert [m for m in out if m["role"] == "user"] == [msgs[1]]
    assert paired(out)
    if size(msgs) <= room:
        assert out is msgs and fitted.cuts == []
    else:
        assert fitted.cuts
    # Steps go oldest first: what is kept is the latest ones, whole.
    ids = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
    kept = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert kept == ids[len(ids) - len(kept):] and len(kept) % 2 == 0
    # The latest keep_recent steps go only when even they, with every result cut short, do not fit.
    latest = ids[len(ids) - 2 * min(keep_recent, len(sizes)):]
    if not set(latest) <= set(kept):
        assert not kept or all("characters left out" in m["content"] or len(m["content"]) <= 300 for m in out if m["role"] == "tool")


def test_without_the_budget_the_same_run_overflows() -> None:
    PAGES["1"] = 6000
    with pytest.raises(ContextLengthExceeded):
        run([tc("fetch", page=1), "x"], n_ctx=2000, context=None)


def test_a_summary_hook_stands_for_what_was_left_out() -> None:
    for p in range(1, 7):
        PAGES[str(p)] = 400
    seen: list[int] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        seen.append(len(messages))
        return f"Summary: {len(messages)} messages about the manual."

    result, backend = run([tc("fetch", page=p) for p in range(1, 7)] + ["ok"], n_ctx=1500,
                          context=ContextBudget(summarize=summarize))
    assert seen and "Summary: " in backend.prompts[-1].text
    assert result.answer == "ok"


def test_when_even_the_question_cannot_fit_the_error_is_typed() -> None:
    backend = ScriptedBackend(["x"], n_ctx=300)
    agent = Agent(Model(backend, family="qwen2.5"), [fetch], max_tokens=128)
    with pytest.raises(ContextLengthExceeded):
        agent.run("why " * 200)


def test_budget_settings_are_checked() -> None:
    with pytest.raises(UsageError, match="n_ctx"):
        ContextBudget(n_ctx=0)
    with pytest.raises(UsageError, match="reserve"):
        ContextBudget(reserve=-1)


def test_an_explicit_n_ctx_applies_to_a_backend_that_does_not_say() -> None:
    PAGES["1"] = 6000
    result, backend = run([tc("fetch", page=1), "fine"], n_ctx=None, context=ContextBudget(n_ctx=2500, reserve=100))
    assert len(backend.prompts[1].text) <= 2400 and result.trace[1].context_cuts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(min_value=10, max_value=5000), min_size=1, max_size=7),
       n_ctx=st.integers(min_value=1000, max_value=4000))
def test_no_run_overflows_while_the_budget_is_on(sizes: list[int], n_ctx: int) -> None:
    for p, size in enumerate(sizes, 1):
        PAGES[str(p)] = size
    replies = [tc("fetch", page=p) for p in range(1, len(sizes) + 1)] + ["done"]
    result, backend = run(replies, n_ctx=n_ctx)
    assert result.answer == "done"
    assert all(len(p.text) <= n_ctx - 128 for p in backend.prompts)


@pytest.mark.model
def test_a_real_model_with_a_small_context_finishes_a_run_whose_result_would_overflow_it() -> None:
    from conftest import load_once

    model = load_once("qwen2.5-coder-0.5b", n_ctx=1024)

    @tool
    def read_log(service: str) -> str:
        """Read a service's log.

        Args:
            service: The service name.
        """
        return "\n".join(f"2026-12-01 10:{i % 60:02d} {service} request {i} ok" for i in range(400))  # ~16 000 characters

    agent = Agent(model, [read_log], max_tokens=128, tool_choice="required", max_steps=3)
    result = agent.run("Read the log of the billing service and say whether it shows errors.")
    assert result.trace[0].calls and result.trace[0].calls[0].name == "read_log"
    assert len(result.messages[2]["content"]) > 15000  # the run keeps the whole result
    assert any(c.startswith("cut the result of read_log") for c in result.trace[1].context_cuts)
    assert all(s.prompt_tokens <= 1024 - 128 for s in result.trace)


def test_max_tokens_as_large_as_the_context_still_runs() -> None:
    PAGES["1"] = 100
    result, _ = run([tc("fetch", page=1), "fine"], n_ctx=1800, max_tokens=2000)
    assert result.answer == "fine"
