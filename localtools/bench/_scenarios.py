"""Multi-turn scenarios: a question, tools (some unrelated), their results, and the facts the answer must hold.

Single-turn cases show whether a model calls well; these show whether it then answers: after the
tool result comes back, does it write the answer once, or call again, or echo a call as text? Each
scenario runs through the whole loop of a mode: ``Agent`` for our own modes, a plain client loop
(what PydanticAI or LangChain do) for a peer.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import AgentError, LocalToolsError, MaxStepsExceeded
from ..agent._agent import Agent
from ..families._parse import disguised_calls
from ..model._decide import Decisions
from ..model._model import Model
from ..tools._tools import Tool
from ._peers import Peer

__all__ = ["SCENARIOS", "TRANSLATED", "Scenario", "ScenarioResult", "run_scenario", "summarize_scenarios"]


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
    #: The one call the question needs: tool name and the arguments it must carry (a tuple: any
    #: of these values; a city the user names in their language is the same city).
    call: tuple[str, dict[str, Any]]
    #: What that call returns; any other call returns an error record.
    result: dict[str, Any]
    #: What the final answer must say (case-insensitive): each fact a string, or a tuple of the
    #: ways it may be said in the question's language.
    facts: tuple[str | tuple[str, ...], ...]
    #: The question's language (BCP 47), for the bench's rows.
    language: str = "en"


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


def _translated(language: str, questions: dict[str, str], *, cities: tuple[str, ...], rain: tuple[str, ...],
                shipped: tuple[str, ...], plan: tuple[str, ...] = ("pro",)) -> tuple[Scenario, ...]:
    """The five scenarios asked in ``language``: the same tools (described in English, as users'
    code is), calls and results; the facts as the answer may say them in that language."""
    out = []
    for scenario in SCENARIOS:
        name, arguments = scenario.call
        if scenario.name == "weather":
            arguments = {"city": ("Oslo", *cities)}
        facts = {"customer-plan": (plan,), "weather": (("rain", *rain),), "order": (("shipped", *shipped),)}.get(
            scenario.name, scenario.facts)
        out.append(Scenario(f"{scenario.name}-{language}", questions[scenario.name], scenario.tools, (name, arguments),
                            scenario.result, facts, language))
    return tuple(out)


#: The seeds' scenarios asked in Chinese, Japanese and Spanish (the tools stay in English).
TRANSLATED = (
    *_translated("zh", {"customer-plan": "客户 cust-1001 用的是哪个订阅套餐？", "weather": "奥斯陆现在在下雨吗？",
                        "order": "订单 A-778 发货了吗？", "stock": "ACME 股票现在的价格是多少？",
                        "temperature": "华氏100度是摄氏多少度？"},
                 cities=("奥斯陆",), rain=("雨",), shipped=("发货", "已发", "寄出", "运")),
    *_translated("ja", {"customer-plan": "顧客 cust-1001 はどのサブスクリプションプランを使っていますか？",
                        "weather": "オスロは今、雨が降っていますか？", "order": "注文 A-778 はもう発送されましたか？",
                        "stock": "ACME の株価は今いくらですか？", "temperature": "華氏100度は摂氏何度ですか？"},
                 cities=("オスロ",), rain=("雨",), shipped=("発送", "出荷")),
    *_translated("es", {"customer-plan": "¿Qué plan de suscripción usa el cliente cust-1001?",
                        "weather": "¿Está lloviendo ahora mismo en Oslo?", "order": "¿Ya se envió el pedido A-778?",
                        "stock": "¿Cuál es el precio actual de la acción de ACME?",
                        "temperature": "¿Cuántos grados Celsius son 100 grados Fahrenheit?"},
                 cities=(), rain=("lluv", "llov"), shipped=("envi", "enví", "despach")),
)


@dataclass
class ScenarioResult:
    mode: str
    scenario: str
    answer: str
    language: str = "en"
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
        if _expected(scenario, name, arguments):
            return json.dumps(scenario.result)
        return json.dumps({"error": f"no record for {name}({json.dumps(arguments)})"})

    return execute


def _expected(scenario: Scenario, name: str, arguments: dict[str, Any]) -> bool:
    """Whether a call is the one the scenario needs (a value given as a tuple: any of them)."""
    wanted, values = scenario.call
    if name != wanted or set(arguments) != set(values):
        return False
    return all(_normal({k: arguments[k]}) in [_normal({k: v}) for v in (ways if isinstance(ways, tuple) else (ways,))]
               for k, ways in values.items())


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
                 max_tokens: int = 256, decisions: Decisions | None = None) -> ScenarioResult:
    """One scenario through the whole loop of one mode (``decisions``: the mode's, in place of the
    model's own; ``Decisions()`` is greedy)."""
    if decisions is not None and isinstance(model, Model):
        model = copy.copy(model)
        model.decisions = decisions
    result = ScenarioResult(mode=label, scenario=scenario.name, answer="", language=scenario.language)
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
    result.answered = (not result.error and all(any(way.lower() in answer for way in (f if isinstance(f, tuple) else (f,)))
                                                for f in scenario.facts)
                       and not disguised_calls(result.answer))
    result.called_once = len(result.calls) == 1 and _expected(scenario, *result.calls[0])
    return result


def summarize_scenarios(results: list[ScenarioResult]) -> list[dict[str, Any]]:
    """One row per mode and language: answer rate, called-once rate, mean steps."""
    rows = []
    for mode, language in dict.fromkeys((r.mode, r.language) for r in results):
        mine = [r for r in results if r.mode == mode and r.language == language]
        rows.append({"mode": mode, "language": language, "scenarios": len(mine),
                     "answer_rate": sum(r.answered for r in mine) / len(mine),
                     "called_once_rate": sum(r.called_once for r in mine) / len(mine),
                     "mean_steps": sum(r.steps for r in mine) / len(mine)})
    return rows
