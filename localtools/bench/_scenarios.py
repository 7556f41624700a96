"""Multi-turn scenarios: a question, tools (some unrelated), their results, and the facts the answer must hold.

Single-turn cases show whether a model calls well; these show whether it then answers: after the
tool result comes back, does it write the answer once, or call again, or echo a call as text? Each
scenario runs through the whole loop of a mode: ``Agent`` for our own modes, a plain client loop
(what PydanticAI or LangChain do) for a peer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import AgentError, LocalToolsError, MaxStepsExceeded
from ..agent._agent import Agent
from ..families._parse import disguised_calls
from ..model._model import Model
from ..tools._tools import Tool
from ._peers import Peer

__all__ = ["SCENARIOS", "Scenario", "ScenarioResult", "run_scenario", "summarize_scenarios"]


def _fn(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in properties.items()}, "required": list(properties)}}}


CUSTOMER = _fn("get_customer", "Look up a customer record (name, subscription plan, status) by customer id.", customer_id="string")
TEMPERATURE = _fn("convert_temperature", "Convert a temperature between Celsius (C) and Fahrenheit (F).", value="number",
                  unit="string")
WEATHER = _fn("get_weather", "Current weather for a city.", city="string")
ORDER = _fn("get_order", "Look up an order's status and carrier by order id.", order_id="string")
STOCK = _fn("get_stock_price", "Current price of a stock by ticker symbol.", symbol="string")
EMAIL = _fn("send_email", "Send an email to an address.", to="string", body="string")


@dataclass(frozen=True)
class Scenario:
    name: str
    question: str
    tools: tuple[dict[str, Any], ...]
    #: The one call the question needs: tool name and the arguments it must carry.
    call: tuple[str, dict[str, Any]]
    #: What that call returns; any other call returns an error record.
    result: dict[str, Any]
    #: Strings the final answer must contain (case-insensitive).
    facts: tuple[str, ...]


SCENARIOS = (
    Scenario("customer-plan", "What subscription plan is customer cust-1001 using?", (CUSTOMER, TEMPERATURE),
             ("get_customer", {"customer_id": "cust-1001"}), {"id": "cust-1001", "name": "Alice", "plan": "pro"}, ("pro",)),
    Scenario("weather", "Is it raining in Oslo right now?", (WEATHER, CUSTOMER),
             ("get_weather", {"city": "Oslo"}), {"city": "Oslo", "condition": "rain", "temperature_c": 4}, ("rain",)),
    Scenario("order", "Has order A-778 shipped yet?", (ORDER, CUSTOMER, EMAIL),
             ("get_order", {"order_id": "A-778"}), {"order_id": "A-778", "status": "shipped", "carrier": "DHL"},
             ("shipped",)),
    Scenario("stock", "What is the current price of ACME stock?", (STOCK, WEATHER),
             ("get_stock_price", {"symbol": "ACME"}), {"symbol": "ACME", "price": 123.45, "currency": "USD"}, ("123.45",)),
    Scenario("temperature", "What is 100 degrees Fahrenheit in Celsius?", (TEMPERATURE, WEATHER),
             ("convert_temperature", {"value": 100, "unit": "F"}), {"celsius": 37.8}, ("37.8",)),
)


@dataclass
class ScenarioResult:
    mode: str
    scenario: str
    answer: str
    #: Every call made, in order, as (name, arguments).
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: The answer holds every fact and is not a call written as text.
    answered: bool = False
    #: The needed tool was called exactly once, with the right arguments, and nothing else was.
    called_once: bool = False
    steps: int = 0
    seconds: float = 0.0
    error: str = ""


def _executor(scenario: Scenario, calls: list[tuple[str, dict[str, Any]]]) -> Callable[[str, dict[str, Any]], str]:
    def execute(name: str, arguments: dict[str, Any]) -> str:
        calls.append((name, arguments))
        if (name, _normal(arguments)) == (scenario.call[0], _normal(scenario.call[1])):
            return json.dumps(scenario.result)
        return json.dumps({"error": f"no record for {name}({json.dumps(arguments)})"})

    return execute


def _normal(arguments: dict[str, Any]) -> dict[str, Any]:
    # 100 and 100.0 are the same temperature; "f" and "F" the same unit.
    return {k: (float(v) if isinstance(v, int | float) else str(v).strip().lower()) for k, v in arguments.items()}


def _agent_loop(model: Model, scenario: Scenario, execute: Callable[[str, dict[str, Any]], str], *, constrained: bool,
                max_steps: int, max_tokens: int) -> tuple[str, int]:
    tools = [Tool.from_schema(spec, (lambda n: lambda **kw: execute(n, kw))(spec["function"]["name"]))
             for spec in scenario.tools]
    result = Agent(model, tools, constrained=constrained, max_steps=max_steps, max_tokens=max_tokens).run(scenario.question)
    return result.answer, len(result.trace)


def _client_loop(peer: Peer, scenario: Scenario, execute: Callable[[str, dict[str, Any]], str], *, max_steps: int,
                 max_tokens: int) -> tuple[str, int]:
    """What a client library does with an OpenAI-compatible reply: run its tool_calls, send the results, repeat."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": scenario.question}]
    for step in range(1, max_steps + 1):
        reply = peer.chat(messages, list(scenario.tools), tool_choice="auto", max_tokens=max_tokens)
        if reply.error:
            raise AgentError(reply.error)
        message = reply.message
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message.get("content") or ""), step
        messages.append({"role": "assistant", "content": message.get("content") or "", "tool_calls": calls})
        for call in calls:
            function = call["function"]
            arguments = json.loads(function.get("arguments") or "{}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": execute(function["name"], arguments)})
    raise MaxStepsExceeded(f"no answer within {max_steps} steps")


def run_scenario(model: Model | Peer, label: str, scenario: Scenario, *, constrained: bool = True, max_steps: int = 4,
                 max_tokens: int = 256) -> ScenarioResult:
    """One scenario through the whole loop of one mode."""
    result = ScenarioResult(mode=label, scenario=scenario.name, answer="")
    execute = _executor(scenario, result.calls)
    started = time.perf_counter()
    try:
        if isinstance(model, Model):
            model.backend.drop_prompt_cache()
            result.answer, result.steps = _agent_loop(model, scenario, execute, constrained=constrained,
                                                      max_steps=max_steps, max_tokens=max_tokens)
        else:
            result.answer, result.steps = _client_loop(model, scenario, execute, max_steps=max_steps, max_tokens=max_tokens)
    except LocalToolsError as exc:
        result.error = f"{type(exc).__name__}: {str(exc)[:200]}"
    result.seconds = time.perf_counter() - started
    answer = result.answer.lower()
    result.answered = (not result.error and all(f.lower() in answer for f in scenario.facts)
                       and not disguised_calls(result.answer))
    expected = (scenario.call[0], _normal(scenario.call[1]))
    result.called_once = [(n, _normal(a)) for n, a in result.calls] == [expected]
    return result


def summarize_scenarios(results: list[ScenarioResult]) -> list[dict[str, Any]]:
    """One row per mode: answer rate, called-once rate, mean steps."""
    rows = []
    for mode in dict.fromkeys(r.mode for r in results):
        mine = [r for r in results if r.mode == mode]
        rows.append({"mode": mode, "scenarios": len(mine), "answer_rate": sum(r.answered for r in mine) / len(mine),
                     "called_once_rate": sum(r.called_once for r in mine) / len(mine),
                     "mean_steps": sum(r.steps for r in mine) / len(mine)})
    return rows
