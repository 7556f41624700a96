"""``localtools run``: answer a question, calling tools as needed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from . import _common


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="answer a question, calling tools as needed",
                         description="Run the tool-calling loop on QUESTION; the final answer is printed last.")
    run.add_argument("question")
    _common.model_args(run)
    _common.tool_args(run)
    run.add_argument("--free", action="store_true", help="free decoding (no grammar) with the tolerant parser")
    run.add_argument("--max-steps", type=int, default=8, help="most model turns before giving up (default 8)")
    run.add_argument("--max-tokens", type=int, default=512, help="most tokens per model turn (default 512)")
    run.add_argument("--system", help="system prompt")
    run.add_argument("--trace", metavar="FILE", help="write the per-step trace as JSON lines")
    run.add_argument("--yes", action="store_true", help="approve destructive tools without asking")
    run.add_argument("--run-file", metavar="FILE",
                     help="write the run's state to FILE (JSON lines) as it happens; if FILE exists, continue that run "
                          "instead (after a crash or a kill): calls that finished are not run again, and QUESTION is "
                          "read from the file")
    run.add_argument("--route", type=int, metavar="K",
                     help="offer each model turn only the K tools nearest the question (all-MiniLM-L6-v2 embeddings; "
                          "needs the routing extra), plus those called before: for large tool sets")
    run.add_argument("--audit-log", metavar="FILE",
                     help="append one JSON line per tool call to FILE: run id, tool, arguments (secrets masked), "
                          "outcome, seconds")
    run.add_argument("--mcp", action="append", default=[], metavar="COMMAND|URL",
                     help="also offer the tools of an MCP server: a command started and spoken to over stdio "
                          "(\"python my_server.py\") or an http(s) URL (streamable HTTP); repeatable. Tools the "
                          "server marks destructive need --yes or an answer at the prompt")
    run.add_argument("--quiet", "-q", action="store_true",
                     help="print only the final answer, once the run ends (by default the reasoning, text and calls "
                          "show as the model writes them)")
    think = run.add_mutually_exclusive_group()
    think.add_argument("--think", dest="thinking", action="store_true", default=None,
                       help="thinking families (qwen3, deepseek-r1, ...): reason before answering (shown dimmed)")
    think.add_argument("--no-think", dest="thinking", action="store_false",
                       help="thinking families: answer without reasoning")
    run.add_argument("--reasoning-budget", type=int, metavar="N",
                     help="thinking families: close the reasoning after N tokens and answer")


def main(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as servers:
        tools = _common.load_tools(args.tools) + _mcp_tools(args.mcp, servers)
        return _run(args, tools)


def _approver(assume_yes: bool) -> Any:
    def approve(call: Any, tool: Any) -> bool:
        if assume_yes:
            return True
        if not sys.stdin.isatty():
            print(f"! {tool.name} is destructive; not run (pass --yes to approve)", file=sys.stderr)
            return False
        answer = input(f"Run destructive tool {tool.name}({json.dumps(call.arguments)})? [y/N] ")
        return answer.strip().lower() in ("y", "yes")

    return approve


def _mcp_tools(specs: list[str], servers: contextlib.ExitStack) -> list[Any]:
    """The tools of each ``--mcp`` server; each session closes with ``servers``."""
    from ..tools._mcp import mcp_tools

    out: list[Any] = []
    for spec in specs:
        is_url = spec.startswith(("http://", "https://"))
        out += servers.enter_context(mcp_tools(url=spec) if is_url else mcp_tools(spec))
    return out


def _run(args: argparse.Namespace, tools: list[Any]) -> int:
    from .._errors import AgentError
    from ..agent._agent import Agent, RunResult, write_trace
    from ..agent._middleware import AuditLog
    from ..agent._routing import EmbeddingRouter

    model = _common.load_model(args)
    resume = args.run_file is not None and Path(args.run_file).exists()
    agent = Agent(
        model,
        tools,
        system=args.system,
        max_steps=args.max_steps,
        constrained=not args.free,
        tool_choice=args.tool_choice,
        parallel_tool_calls=not args.no_parallel,
        max_tokens=args.max_tokens,
        approve=_approver(args.yes),
        thinking=args.thinking,
        reasoning_budget=args.reasoning_budget,
        middleware=[AuditLog(args.audit_log)] if args.audit_log else [],
        router=EmbeddingRouter(args.route) if args.route else None,
    )
    try:
        if resume:
            print(f"continuing the run in {args.run_file}", file=sys.stderr)
            result: RunResult = agent.resume(args.run_file)
            if not args.quiet:
                print(result.answer)
        elif args.quiet:
            result = agent.run(args.question, run_file=args.run_file)
        else:
            result = asyncio.run(_show_run(agent, args.question, args.run_file))
    except AgentError as exc:
        if args.trace:
            write_trace(exc.trace, args.trace)
        raise
    if args.trace:
        result.write_trace(args.trace)
    if args.quiet:
        print(result.answer)
    return 0


async def _show_run(agent: Any, question: str, run_file: str | None = None) -> Any:
    """The run as it happens: reasoning (dimmed) and text as the model writes them, each call
    once whole (→), its result (←), and the answer last."""
    from rich.console import Console

    from ..agent._agent import RunDone, StepDone, ToolResult
    from ..model._stream import DisguiseCaught, ReasoningDelta, SchemaRepair, TextDelta, ToolCallDone

    console = Console(highlight=False, soft_wrap=True)
    writing = ""  # what the line being written holds: "", "reasoning" or "text"

    def write(text: str, style: str | None = None) -> None:
        console.print(text, style=style, end="", markup=False, emoji=False)
        console.file.flush()

    def end_line() -> None:
        nonlocal writing
        if writing:
            write("\n")
        writing = ""

    async for event in agent.astream(question, run_file=run_file):
        if isinstance(event, ReasoningDelta):
            if writing != "reasoning":
                end_line()
                write("… ", "dim")
                writing = "reasoning"
            write(event.text, "dim")  # the model's thinking, not its answer
        elif isinstance(event, TextDelta):
            if writing != "text":
                end_line()
                writing = "text"
            write(event.text)
        elif isinstance(event, ToolCallDone):
            end_line()
            write(f"→ {event.call.name}({json.dumps(event.call.arguments, ensure_ascii=False)})\n")
        elif isinstance(event, SchemaRepair):
            end_line()
            write(f"! call sent back (repair {event.attempt}): {event.violations[0]}\n")
        elif isinstance(event, DisguiseCaught):
            end_line()
            write(f"! the answer's text held a call to {event.name!r}; decoding again (retry {event.attempt})\n")
        elif isinstance(event, ToolResult):
            write(f"← {event.call.result}\n")
        elif isinstance(event, StepDone) and event.step.error:
            end_line()
            write(f"! step {event.step.step}: {event.step.error}\n")
        elif isinstance(event, RunDone):
            if writing != "text":
                # An answer that streamed nothing (empty) still ends with its line.
                end_line()
                write(event.result.answer)
            writing = "text"
            end_line()
            return event.result
    raise AssertionError("a run ends with RunDone or an error")  # pragma: no cover
