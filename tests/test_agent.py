from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import tc

from localtools import (
    Agent,
    CallOutcome,
    GenerationTruncated,
    LocalToolsError,
    MaxStepsExceeded,
    Model,
    RetryLimitExceeded,
    ScriptedBackend,
    Tool,
    tool,
)
from localtools.agent._agent import write_trace

CUSTOMERS = {"cust-1001": {"plan": "pro"}}


@tool
def get_customer(customer_id: str) -> dict:
    """Look up a customer.

    Args:
        customer_id: The id.
    """
    return CUSTOMERS[customer_id]


def agent(replies: list, tools: list, **kw: object) -> tuple[Agent, ScriptedBackend]:
    backend = ScriptedBackend(replies)
    return Agent(Model(backend, family="qwen2.5"), tools, **kw), backend  # type: ignore[arg-type]


def test_seed_scenario_pairs_result_to_call_id() -> None:
    a, backend = agent([tc("get_customer", customer_id="cust-1001"), "The plan is pro."], [get_customer])
    result = a.run("What subscription plan is customer cust-1001 using?")
    assert result.answer == "The plan is pro."
    roles = [m["role"] for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call_id = result.messages[1]["tool_calls"][0]["id"]
    assert result.messages[2] == {"role": "tool", "tool_call_id": call_id, "name": "get_customer", "content": '{"plan": "pro"}'}
    # The second prompt shows the model its call and the result.
    assert '<tool_response>\n{"plan": "pro"}\n</tool_response>' in backend.prompts[1].text
    assert [s.step for s in result.trace] == [1, 2] and result.trace[0].calls[0].ok


def test_unknown_tool_from_free_decoding_is_fed_back() -> None:
    a, backend = agent([tc("get_client", id="x"), tc("get_customer", customer_id="cust-1001"), "pro"], [get_customer],
                       constrained=False)
    result = a.run("plan?")
    assert result.answer == "pro"
    assert "unknown tool 'get_client'; available tools: get_customer" in result.messages[2]["content"]
    assert backend.grammars == [None, None, None]


def test_invalid_arguments_are_fed_back() -> None:
    a, _ = agent([tc("get_customer", customer="x"), tc("get_customer", customer_id="cust-1001"), "pro"], [get_customer],
                 constrained=False)
    result = a.run("plan?")
    assert "customer_id: Field required" in result.messages[2]["content"]
    assert (result.trace[0].calls[0].error or "").startswith("invalid arguments")
    assert result.answer == "pro"


def test_tool_that_raises_becomes_a_message() -> None:
    a, _ = agent([tc("get_customer", customer_id="nobody"), "No such customer."], [get_customer])
    result = a.run("plan of nobody?")
    assert result.messages[2]["content"].startswith("Error: tool 'get_customer' raised KeyError")
    assert result.answer == "No such customer."


def test_tool_that_hangs_times_out() -> None:
    release = threading.Event()

    def slow(x: int) -> int:
        """Slow."""
        release.wait(10)
        return x

    t = Tool.from_function(slow, timeout=0.2)
    a, _ = agent([tc("slow", x=1), "It timed out."], [t])
    started = time.perf_counter()
    result = a.run("go")
    release.set()
    assert "did not finish within 0.2 s" in result.messages[2]["content"]
    assert result.trace[0].calls[0].error == "timeout"
    assert time.perf_counter() - started < 5


def test_async_tool_timeout() -> None:
    async def sleepy() -> str:
        """Sleepy."""
        await asyncio.sleep(5)
        return "late"

    a, _ = agent([tc("sleepy"), "ok"], [Tool.from_function(sleepy, timeout=0.1)])
    assert a.run("go").trace[0].calls[0].error == "timeout"


def test_max_steps_ends_runaway_loops() -> None:
    def ping(n: int) -> int:
        """Ping."""
        return n

    a, _ = agent([tc("ping", n=i) for i in range(10)], [ping], max_steps=3)
    with pytest.raises(MaxStepsExceeded) as info:
        a.run("loop")
    assert len(info.value.trace) == 3 and "max_steps=3" in str(info.value)


def test_parse_errors_are_retried_then_give_up() -> None:
    a, _ = agent(["<tool_call>\n{oops\n</tool_call>"] * 3, [get_customer], constrained=False, max_retries=2)
    with pytest.raises(RetryLimitExceeded) as info:
        a.run("plan?")
    feedback = [m["content"] for m in info.value.messages if m["role"] == "user"][1:]
    assert len(feedback) == 2 and all("could not be read" in f for f in feedback)


def test_truncated_call_is_an_error_fed_back() -> None:
    long_call = tc("get_customer", customer_id="cust-1001")
    # Each turn is tried three times (then with repeat penalties 1.1 and 1.3) before it counts as a failure.
    a, backend = agent([long_call] * 6, [get_customer], max_tokens=20, max_retries=1)
    with pytest.raises(RetryLimitExceeded, match="max_tokens=20"):
        a.run("plan?")
    assert backend.repeat_penalties == [1.0, 1.1, 1.3] * 2


def test_cut_call_is_retried_once_with_a_repeat_penalty() -> None:
    looping = tc("get_customer", customer_id="cust-1001 " * 20)
    good = tc("get_customer", customer_id="cust-1001")
    cap = len(good) + 10
    model = Model(ScriptedBackend([looping, good]), family="qwen2.5")
    result = model.chat([{"role": "user", "content": "plan?"}], [get_customer], max_tokens=cap)
    assert [c.arguments for c in result.tool_calls] == [{"customer_id": "cust-1001"}]
    assert result.attempts == 2 and result.completion_tokens == cap + len(good)
    assert model.backend.repeat_penalties == [1.0, 1.1]  # type: ignore[attr-defined]
    # With the retry off, the cut call is the typed error at once.
    model = Model(ScriptedBackend([looping]), family="qwen2.5")
    with pytest.raises(GenerationTruncated) as info:
        model.chat([{"role": "user", "content": "plan?"}], [get_customer], max_tokens=cap, retry_repeat_penalties=())
    assert info.value.raw == looping[:cap]


def test_destructive_tool_needs_approval() -> None:
    deleted: list[str] = []

    @tool(destructive=True)
    def delete_file(path: str) -> str:
        """Delete."""
        deleted.append(path)
        return "deleted"

    a, _ = agent([tc("delete_file", path="a.txt"), "refused"], [delete_file])
    assert "no approver" in a.run("delete a.txt").messages[2]["content"] and deleted == []
    a, _ = agent([tc("delete_file", path="a.txt"), "no"], [delete_file], approve=lambda call, t: False)
    assert "not approved" in a.run("delete a.txt").messages[2]["content"] and deleted == []
    a, _ = agent([tc("delete_file", path="a.txt"), "done"], [delete_file], approve=lambda call, t: call.arguments["path"] == "a.txt")
    assert a.run("delete a.txt").messages[2]["content"] == "deleted" and deleted == ["a.txt"]


def test_parallel_calls_run_concurrently_and_pair_ids() -> None:
    barrier = threading.Barrier(2, timeout=5)

    def wait_both(tag: str) -> str:
        """Both."""
        barrier.wait()  # deadlocks (and times out) unless both calls run at the same time
        return tag

    reply = tc("wait_both", tag="a") + "\n" + tc("wait_both", tag="b")
    a, _ = agent([reply, "done"], [wait_both])
    result = a.run("go")
    calls = result.messages[1]["tool_calls"]
    tool_msgs = result.messages[2:4]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in calls]
    assert [m["content"] for m in tool_msgs] == ["a", "b"]


def test_allow_list_hides_tools_from_prompt_and_calls() -> None:
    @tool(tags={"write"})
    def set_plan(plan: str) -> str:
        """Set."""
        return plan

    a, backend = agent(["fine"], [get_customer, set_plan], allow=["read"])
    a.run("x")
    assert "set_plan" not in backend.prompts[0].text and "get_customer" in backend.prompts[0].text


def test_repeated_identical_call_is_not_rerun() -> None:
    runs: list[str] = []

    def lookup(key: str) -> str:
        """Lookup."""
        runs.append(key)
        return "value"

    call = tc("lookup", key="k")
    a, _backend = agent([call, call, "The value is value."], [lookup])
    result = a.run("k?")
    assert runs == ["k"] and result.answer == "The value is value."
    assert result.trace[1].calls[0].error == "repeated call"
    assert result.trace[2].tool_choice == "none"


def test_trace_written_as_json_lines(tmp_path: Path) -> None:
    a, _ = agent([tc("get_customer", customer_id="cust-1001"), "pro"], [get_customer])
    result = a.run("plan?")
    path = tmp_path / "trace.jsonl"
    result.write_trace(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["calls"][0]["name"] == "get_customer" and rows[0]["constrained"] is True
    assert {"prompt_tokens", "completion_tokens", "latency", "decode_seconds"} <= set(rows[0])


def test_run_inside_event_loop_says_use_arun() -> None:
    a, _ = agent(["hi"], [get_customer])

    async def inside() -> str:
        with pytest.raises(Exception, match="arun"):
            a.run("x")
        return (await a.arun("x")).answer

    assert asyncio.run(inside()) == "hi"


def test_a_call_after_a_preamble_is_a_constrained_call_and_the_preamble_its_content() -> None:
    call = '```json\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n```'
    tagged = tc("get_customer", customer_id="cust-1001")
    model = Model(ScriptedBackend([f"Let me look that up.\n\n{call}", f"Checking. {tagged}",
                                   'The record: {"name": "get_customer", "arguments": {}} was not a call.',
                                   "The plan is pro."]),
                  family="qwen2.5")
    question = [{"role": "user", "content": "plan?"}]
    for content in ("Let me look that up.", "Checking."):
        result = model.chat(question, [get_customer])
        assert result.content == content
        assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_customer", {"customer_id": "cust-1001"})]
        assert result.finish_reason == "tool_calls"
    # A call written further into a text answer, in no call form, is no answer and never runs: the
    # turn is decoded again.
    result = model.chat(question, [get_customer])
    assert (result.tool_calls, result.content, result.disguise_retries) == ([], "The plan is pro.", 1)


def test_text_may_not_open_a_fenced_call_it_does_not_finish() -> None:
    model = Model(ScriptedBackend(['Here:\n```json\n{"plan": "pro"}\n```']), family="qwen2.5")
    # The fence's opening starts a call, so a record in a json fence is not an answer under auto.
    with pytest.raises(LocalToolsError, match="violates the grammar"):
        model.chat([{"role": "user", "content": "plan?"}], [get_customer])


def test_call_outcomes_are_typed_and_only_model_mistakes_use_up_retries(tmp_path: Path) -> None:
    @tool
    def broken(x: int) -> int:
        """Always fails."""
        raise RuntimeError("disk on fire")

    # Three turns whose every call raised: the tool's fault, not the model's, so no RetryLimitExceeded
    # with max_retries=1; then two turns of model mistakes, which do exhaust it.
    replies = [tc("broken", x=i) for i in range(3)] + [tc("nope"), tc("broken", x="not a number")]
    a, _ = agent(replies, [broken], constrained=False, max_retries=1, max_steps=10)
    with pytest.raises(RetryLimitExceeded, match="invalid arguments") as caught:
        a.run("go")
    outcomes = [c.outcome for step in caught.value.trace for c in step.calls]
    assert outcomes == [CallOutcome.RAISED] * 3 + [CallOutcome.UNKNOWN_TOOL, CallOutcome.INVALID_ARGUMENTS]
    assert [o.is_model_mistake for o in outcomes] == [False] * 3 + [True, True]
    trace = caught.value.trace[-1]
    assert trace.calls[0].error is not None and trace.calls[0].error.startswith("invalid arguments: ")
    path = tmp_path / "trace.jsonl"
    write_trace(caught.value.trace, path)
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert [c["outcome"] for s in written for c in s["calls"]] == [o.value for o in outcomes]


@pytest.mark.parametrize(("reply", "kw", "failed"), [
    (tc("get_customer", customer_id="cust-1001"), {}, False),
    (tc("get_customer", customer_id="cust-0000"), {}, True),  # the tool raised
    (tc("get_client", id="x"), {"constrained": False}, True),  # no such tool
    (tc("get_customer", customer=1), {"constrained": False}, True),  # arguments its schema refuses
])
def test_each_error_the_loop_writes_ends_the_next_prompt_with_the_error_hint(reply: str, kw: dict, failed: bool) -> None:
    """The family's error hint reads the loop's own wording of a failed call (``failed_calls``):
    a call that raised, an unknown tool and refused arguments bring the error hint, a result the
    result hint (a drift in the loop's wording would turn the error hint off unseen)."""
    a, backend = agent([reply, "Sorry."], [get_customer], **kw)
    a.run("Plan of cust-1001?")
    family = a.model.family
    assert family.error_hint and family.result_hint
    hint = (family.error_hint if failed else family.result_hint).replace("{question}", "Plan of cust-1001?")
    assert backend.prompts[1].text.endswith(f"<|im_start|>user\n{hint}<|im_end|>\n<|im_start|>assistant\n")
