"""The multi-turn scenarios, scored on scripted replies: answered, called once, in how many steps."""

from __future__ import annotations

from typing import Any

from localtools import Model, ScriptedBackend
from localtools.bench._peers import PeerReply
from localtools.bench._scenarios import SCENARIOS, run_scenario, summarize_scenarios

PLAN = next(s for s in SCENARIOS if s.name == "customer-plan")
CALL = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'


def model(*replies: str) -> Model:
    return Model(ScriptedBackend(list(replies)), family="qwen2.5")


def test_a_call_then_an_answer_is_answered_once() -> None:
    result = run_scenario(model(CALL, "Customer cust-1001 is on the pro plan."), "m", PLAN)
    assert (result.answered, result.called_once, result.steps) == (True, True, 2)
    assert result.calls == [("get_customer", {"customer_id": "cust-1001"})]


def test_calling_again_after_the_result_is_not_once() -> None:
    result = run_scenario(model(CALL, CALL.replace("1001", "1001 "), "It is pro."), "m", PLAN)
    assert result.answered and not result.called_once and result.steps == 3


def test_an_answer_that_is_a_call_written_as_text_is_no_answer() -> None:
    echo = '<json>{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}} pro</json>'
    result = run_scenario(model(CALL, echo), "m", PLAN)
    assert result.called_once and not result.answered


def test_a_wrong_argument_gets_an_error_record_and_no_facts() -> None:
    wrong = CALL.replace("cust-1001", "cust-9")
    result = run_scenario(model(wrong, "I could not find that customer."), "m", PLAN)
    assert not result.answered and not result.called_once
    assert result.calls == [("get_customer", {"customer_id": "cust-9"})]


def test_the_step_limit_is_an_error_not_an_answer() -> None:
    result = run_scenario(model(*[CALL.replace("1001", f"100{i}") for i in range(9)]), "m", PLAN, max_steps=3)
    assert result.error.startswith("MaxStepsExceeded") and not result.answered


class Client:
    """A peer that answers like an OpenAI server: a call first, then text."""

    name = model = "fake"
    tool_choices: tuple[str, ...] = ("auto",)

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, tool_choice: str,
             max_tokens: int) -> PeerReply:
        self.seen.append([dict(m) for m in messages])
        if len(messages) == 1:
            call = {"id": "c1", "type": "function", "function": {"name": "get_customer", "arguments": '{"customer_id": "cust-1001"}'}}
            return PeerReply({"role": "assistant", "content": None, "tool_calls": [call]}, 0.1)
        return PeerReply({"role": "assistant", "content": "The plan is pro."}, 0.1)


def test_a_peer_runs_through_a_client_loop_with_results_paired_to_ids() -> None:
    client = Client()
    result = run_scenario(client, "peer", PLAN)
    assert (result.answered, result.called_once, result.steps) == (True, True, 2)
    tool_message = client.seen[1][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "c1" and '"plan": "pro"' in tool_message["content"]
    rows = summarize_scenarios([result, run_scenario(model(CALL, "no idea"), "m", PLAN)])
    assert [(r["mode"], r["answer_rate"], r["called_once_rate"]) for r in rows] == [("peer", 1.0, 1.0), ("m", 0.0, 1.0)]


def scenario_reply(prompt: Any, grammar: object) -> str:
    """Calls each scenario's tool with the right arguments, then answers with its facts."""
    import json

    from localtools.bench._scenarios import TRANSLATED

    scenario = next((s for s in (*SCENARIOS, *TRANSLATED) if s.question in prompt.text), None)
    if scenario is None:  # a BFCL case of the same run
        return "No tool is needed."
    if "<tool_response>" not in prompt.text:
        name, arguments = scenario.call
        first = {k: v[0] if isinstance(v, tuple) else v for k, v in arguments.items()}
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": first}, ensure_ascii=False) + "\n</tool_call>"
    return "The answer: " + ", ".join(f if isinstance(f, str) else f[0] for f in scenario.facts) + "."


def test_cli_bench_runs_the_scenarios(tmp_path: Any, monkeypatch: Any, capsys: Any) -> None:
    import json

    from test_bench import _folder

    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: Model(ScriptedBackend([scenario_reply] * 500), family="qwen2.5"))
    out = tmp_path / "bench.json"
    assert main(["bench", "--data", str(_folder(tmp_path)), "--category", "irrelevance", "--sample", "1",
                 "--model", "fake", "--mode", "constrained", "--scenarios", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    (row,) = report["scenario_summary"]
    assert (row["mode"], row["scenarios"], row["answer_rate"], row["called_once_rate"]) == (
        "fake llama-cpp constrained auto", len(SCENARIOS), 1.0, 1.0)
    assert len(report["scenarios"]) == len(SCENARIOS)
    assert "multi-turn scenarios" in capsys.readouterr().out


def test_the_scenarios_are_asked_in_chinese_japanese_and_spanish_with_the_same_calls() -> None:
    from localtools.bench._scenarios import TRANSLATED

    assert {s.language for s in TRANSLATED} == {"zh", "ja", "es"} and len(TRANSLATED) == 3 * len(SCENARIOS)
    for scenario in TRANSLATED:
        english = next(s for s in SCENARIOS if scenario.name.startswith(s.name + "-"))
        assert scenario.tools == english.tools and scenario.result == english.result
        assert scenario.question != english.question
    weather = next(s for s in TRANSLATED if s.name == "weather-zh")
    for city, found in (("奥斯陆", True), ("Oslo", True), ("oslo", True), ("北京", False)):
        call = CALL.replace("get_customer", "get_weather").replace('"customer_id": "cust-1001"', f'"city": "{city}"')
        for answer, said in (("奥斯陆正在下雨。", True), ("It is raining.", True), ("天气晴朗。", False)):
            result = run_scenario(model(call, answer), "m", weather)
            assert result.called_once is found and result.answered is said, (city, answer)
            assert result.language == "zh"


def test_a_mode_s_decisions_replace_the_model_s_own_for_its_scenarios() -> None:
    from localtools.model._decide import Decisions

    mine = model(CALL + "\n" + CALL, "Customer cust-1001 is on the pro plan.")
    mine.decisions = Decisions()
    # Greedy leaves the repeated call in; distinct, given as the mode's decisions, takes it out.
    result = run_scenario(mine, "m", PLAN, decisions=Decisions(distinct=True))
    assert result.calls == [("get_customer", {"customer_id": "cust-1001"})] and result.called_once
    assert mine.decisions == Decisions()


def test_cli_bench_runs_the_scenarios_alone_in_every_language_per_setting(tmp_path: Any, monkeypatch: Any) -> None:
    import json

    from test_bench import _folder

    from localtools.cli import main
    from localtools.model import _load

    monkeypatch.setattr(_load, "load", lambda name, backend: Model(ScriptedBackend([scenario_reply] * 500), family="qwen2.5"))
    out = tmp_path / "bench.json"
    assert main(["bench", "--data", str(_folder(tmp_path)), "--category", "irrelevance", "--sample", "0",
                 "--model", "fake", "--mode", "constrained", "--scenarios", "--scenario-language", "all",
                 "--decisions", "greedy", "--decisions", "distinct", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["cases"] == [] and report["summary"] == []  # --sample 0: the scenarios alone
    rows = {(r["mode"].split()[-1], r["language"]): r for r in report["scenario_summary"]}
    assert set(rows) == {(s, lang) for s in ("greedy", "distinct") for lang in ("en", "zh", "ja", "es")}
    assert all(r["scenarios"] == len(SCENARIOS) and r["called_once_rate"] == 1.0 for r in rows.values())
