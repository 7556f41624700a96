"""Tools from a real stdio MCP server (tests/mcp_server.py, written with the official SDK) in the
loop: calls, results, errors, timeouts, approval, allow-lists, a server that dies, the CLI; and on
Qwen2.5-Coder-0.5B, a model that calls an MCP tool and answers from its result."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from localtools import Agent, CallOutcome, MCPServerError, MCPTools, Model, ScriptedBackend, mcp_tools

SERVER = [sys.executable, str(Path(__file__).with_name("mcp_server.py"))]


def call(name: str, **arguments: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


@pytest.fixture
def tools() -> Iterator[MCPTools]:
    with mcp_tools(SERVER, timeout=2) as listed:
        yield listed


def agent(tools: Any, *replies: str, **options: Any) -> Agent:
    return Agent(Model(ScriptedBackend(list(replies)), family="qwen2.5"), tools, **options)


def test_the_server_tools_become_tools_with_their_schemas_and_annotations(tools: MCPTools) -> None:
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"get_customer", "add", "fail", "sleep", "delete_customer", "crash"}
    assert by_name["get_customer"].parameters["required"] == ["customer_id"]
    assert "subscription plan" in by_name["get_customer"].description
    assert by_name["get_customer"].tags == {"mcp", "read"} and by_name["add"].tags == {"mcp", "write"}
    assert by_name["delete_customer"].destructive and not by_name["add"].destructive
    assert all(t.timeout == 2 for t in tools)


def test_a_call_goes_to_the_server_and_its_result_back_to_the_model(tools: MCPTools) -> None:
    result = agent(tools, call("get_customer", customer_id="cust-1001"), call("add", a=2, b=40),
                   "Ada is on the pro plan.").run("plan?")
    (first,), (second,) = result.trace[0].calls, result.trace[1].calls
    assert first.ok and "Ada Lovelace is on the pro plan" in first.result
    assert second.ok and json.loads(second.result) == {"sum": 42}  # structured content comes back as JSON
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [first.id, second.id]
    assert result.answer == "Ada is on the pro plan."


def test_a_tool_that_fails_or_hangs_is_reported_to_the_model(tools: MCPTools) -> None:
    started = time.perf_counter()
    result = agent(tools, call("fail", reason="no"), call("sleep", seconds=30), "Sorry.").run("go")
    failed, slept = result.trace[0].calls[0], result.trace[1].calls[0]
    assert failed.outcome is CallOutcome.RAISED and "answered with an error" in failed.result
    assert slept.outcome is CallOutcome.TIMEOUT and "within 2" in slept.result
    assert time.perf_counter() - started < 25  # the sleeping call was not waited for
    assert result.answer == "Sorry."


def test_destructive_tools_need_approval_and_allow_lists_apply(tools: MCPTools) -> None:
    refused = agent(tools, call("delete_customer", customer_id="cust-1002"), "Not done.").run("delete")
    assert refused.trace[0].calls[0].outcome is CallOutcome.NOT_APPROVED
    approved = agent(tools, call("delete_customer", customer_id="cust-1002"), "Done.",
                     approve=lambda c, t: True).run("delete")
    assert approved.trace[0].calls[0].ok and approved.trace[0].calls[0].result == "deleted cust-1002"
    backend = ScriptedBackend([call("get_customer", customer_id="cust-1001"), "Pro."])
    Agent(Model(backend, family="qwen2.5"), tools, allow=["mcp", "read"]).run("plan?")
    offered = backend.prompts[0].text
    assert '"name": "get_customer"' in offered and '"name": "add"' not in offered


def test_a_server_that_dies_is_a_typed_error_not_a_hang(tools: MCPTools) -> None:
    started = time.perf_counter()
    result = agent(tools, call("crash"), call("add", a=1, b=2), "It stopped.").run("crash")
    died, after = result.trace[0].calls[0], result.trace[1].calls[0]
    assert died.outcome is CallOutcome.RAISED and "MCPServerError" in died.result and "exited" in died.result
    assert after.outcome is CallOutcome.RAISED and "is not running" in after.result
    assert time.perf_counter() - started < 10
    by_name = {t.name: t for t in tools}
    with pytest.raises(MCPServerError, match="is not running"):
        by_name["add"].fn(a=1, b=2)


def test_a_closed_session_refuses_calls_and_a_bad_server_does_not_start() -> None:
    with mcp_tools(SERVER) as listed:
        add = next(t for t in listed if t.name == "add")
        assert add.fn(a=1, b=2) == {"sum": 3}
    with pytest.raises(MCPServerError, match="not running"):
        add.fn(a=1, b=2)
    with pytest.raises(MCPServerError, match="could not be started"):
        mcp_tools([sys.executable, "-c", "import sys; sys.exit(2)"])
    with pytest.raises(MCPServerError, match=r"could not be started.*FileNotFoundError"):
        mcp_tools("no-such-mcp-server-command")


def test_a_server_over_streamable_http() -> None:
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([*SERVER, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        with mcp_tools(url=f"http://127.0.0.1:{port}/mcp") as listed:
            result = agent(listed, call("add", a=20, b=22), "42.").run("add")
        assert result.trace[0].calls[0].ok and json.loads(result.trace[0].calls[0].result) == {"sum": 42}
    finally:
        server.terminate()
        server.wait(10)


def test_cli_run_offers_the_tools_of_mcp_servers(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import localtools.cli as cli
    from localtools.cli import _common

    replies = [call("get_customer", customer_id="cust-1001"), "Ada is on the pro plan."]
    monkeypatch.setattr(_common, "load_model", lambda args: Model(ScriptedBackend(replies), family="qwen2.5"))
    command = " ".join(f"'{part}'" for part in SERVER)
    assert cli.main(["run", "What plan is cust-1001 on?", "--mcp", command]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == '→ get_customer({"customer_id": "cust-1001"})'
    assert "Ada Lovelace is on the pro plan" in out[1] and out[-1] == "Ada is on the pro plan."


@pytest.mark.model
def test_qwen_calls_an_mcp_tool_and_answers_from_its_result(qwen: Model) -> None:
    with mcp_tools(SERVER) as listed:
        tools = [t for t in listed if t.name in ("get_customer", "add")]
        result = Agent(qwen, tools).run("What subscription plan is customer cust-1001 using?")
    calls = [c for step in result.trace for c in step.calls]
    assert [(c.name, c.arguments) for c in calls][:1] == [("get_customer", {"customer_id": "cust-1001"})]
    assert calls[0].ok and "pro" in calls[0].result
    assert "pro" in result.answer.lower()
