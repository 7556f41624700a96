"""BFCL's multi-turn categories through the agent loop: the cases load as BFCL builds them, the
APIs run for real on each case's instances, and BFCL's own checker scores the calls the loop ran."""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from conftest import tc

from localtools import Model, ScriptedBackend
from localtools.bench._multiturn import (
    MULTI_TURN_CATEGORIES,
    MultiTurnMode,
    bfcl_instruction,
    call_text,
    instances,
    load_multi_turn,
    run_multi_turn_case,
    score,
    tools_for,
)


def _parsed(call: str) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string as a name and keyword arguments (positional ones by the doc's order)."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return node.func.id, {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}


def _keywords_only(call: str) -> bool:
    node = ast.parse(call, mode="eval").body
    return isinstance(node, ast.Call) and not node.args


def _truth_replies(case: Any, *, empty_turn: Sequence[str] = ("Done.",)) -> list[str]:
    """The ground truth's calls as scripted replies, each in a step of its own (a later call may
    read an earlier one's effect), then an answer; a turn with no call gets ``empty_turn``."""
    replies: list[str] = []
    for calls in case.ground_truth:
        replies += [tc(name, **arguments) for name, arguments in map(_parsed, calls)]
        replies += ["Done."] if calls else list(empty_turn)
    return replies


@pytest.fixture(scope="module")
def cases() -> dict[str, list[Any]]:
    return {category: load_multi_turn(category) for category in MULTI_TURN_CATEGORIES}


def test_every_category_loads_with_its_ground_truth_and_the_ground_truth_passes_the_checker(cases: dict[str, list[Any]]) -> None:
    rng = random.Random(3)
    for category, rows in cases.items():
        assert len(rows) == 200, category
        for case in rng.sample(rows, 5):
            assert len(case.turns) == len(case.ground_truth)
            decoded = [[calls] if calls else [] for calls in case.ground_truth]
            assert score(case, decoded, "truth") == (True, len(case.turns), ""), case.id


def test_a_wrong_turn_fails_there_and_the_turns_before_it_count(cases: dict[str, list[Any]]) -> None:
    case = next(c for c in cases["multi_turn_base"] if len(c.turns) >= 3 and all(c.ground_truth))
    decoded = [[calls] for calls in case.ground_truth]
    decoded[1] = [["ls()"]]  # the second turn does something else
    correct, passed, why = score(case, decoded, "wrong")
    assert (correct, passed) == (False, 1) and why
    assert score(case, decoded[:1], "short")[:2] == (False, 0)  # a run cut short passes nothing


def test_miss_func_holds_functions_back_until_their_turn(cases: dict[str, list[Any]]) -> None:
    for case in cases["multi_turn_miss_func"][:20]:
        assert case.added
        held = {f["name"] for docs in case.added.values() for f in docs}
        assert held and not held & {f["name"] for f in case.functions}
        assert all(not case.turns[i] for i in case.added)  # BFCL's data leaves that turn's message out


def test_the_tools_run_the_apis_methods_on_the_cases_own_instances(cases: dict[str, list[Any]]) -> None:
    case = next(c for c in cases["multi_turn_base"] if "GorillaFileSystem" in c.involved_classes)
    apis = instances(case)
    tools = {t.name: t for t in tools_for(case.functions, apis)}
    assert {"ls", "cd", "mkdir"} <= set(tools)
    listing = tools["ls"].fn()
    assert isinstance(listing, str) and "current_directory_content" in listing
    # Another case's instances are its own: state does not leak between them.
    assert instances(case)["GorillaFileSystem"] is not apis["GorillaFileSystem"]


@pytest.mark.parametrize("seed", range(4))
def test_a_model_that_makes_the_ground_truths_calls_passes_through_the_agent(cases: dict[str, list[Any]], seed: int) -> None:
    rng = random.Random(seed)
    # Cases whose calls name every argument (the scripted replies write keyword arguments).
    case = rng.choice([c for c in cases["multi_turn_base"] if all(_keywords_only(s) for t in c.ground_truth for s in t)])
    model = Model(ScriptedBackend(_truth_replies(case)), family="qwen2.5")
    result = run_multi_turn_case(model, case, MultiTurnMode("scripted", True, None), max_steps=20)
    assert result.error == "" and result.correct and result.turns_passed == len(case.turns), (result.error, result.decoded)
    assert result.decoded == [[[call_text(*_parsed(s))] for s in calls] for calls in case.ground_truth]
    assert result.calls == sum(len(t) for t in case.ground_truth)
    assert result.taken == {}  # greedy: no decision changed a reply


@pytest.mark.parametrize("category", ["multi_turn_miss_param", "multi_turn_miss_func"])
@pytest.mark.parametrize("calls_there", [False, True])
def test_turns_that_need_no_call_count_those_the_agent_made_none_in(cases: dict[str, list[Any]], category: str,
                                                                     calls_there: bool) -> None:
    # A turn whose ground truth makes no call (a value or a function is missing): answered in text,
    # it is kept; a call made there (one that needs no argument) is counted against it.
    case = next(c for c in cases[category] if all(_keywords_only(s) for t in c.ground_truth for s in t)
                and any(not t for t in c.ground_truth)
                and any(not f["parameters"].get("required") for f in c.functions))
    free = next(f["name"] for f in case.functions if not f["parameters"].get("required"))
    there = [tc(free)] if calls_there else []
    model = Model(ScriptedBackend(_truth_replies(case, empty_turn=[*there, "Which one do you mean?"])), family="qwen2.5")
    result = run_multi_turn_case(model, case, MultiTurnMode("scripted", True, None), max_steps=20)
    empty = sum(not t for t in case.ground_truth)
    assert result.no_call_turns == empty
    assert result.no_call_kept == (0 if calls_there else empty)
    # Without a call there the case passes; with one, BFCL's checker judges the state it left (a
    # read-only call may leave it as it was), so only the count is asserted.
    assert result.correct or calls_there


class Answering(ScriptedBackend):
    """A backend of one's own for the CLI (``--backend test_multiturn:Answering``): every reply a question."""

    def __init__(self, model: Any = None, **options: Any) -> None:
        from localtools.host._gguf import read_metadata

        super().__init__(["Which one do you mean?"] * 500, metadata=read_metadata(model))


def test_the_bench_table_and_json_count_the_no_call_turns_kept(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli._main import main
    from localtools.host._catalog import pull

    out = tmp_path / "mt.json"
    assert main(["bench", "--bfcl", "--category", "multi_turn_miss_param", "--sample", "2", "-m",
                 str(pull("qwen2.5-coder-0.5b")), "--backend", "test_multiturn:Answering", "--mode", "constrained",
                 "--max-steps", "2", "--json", str(out)]) == 0
    assert "no-call turns kept" in capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))
    # A model that never calls keeps every turn that needs no call, and no other.
    wanted = sum(c["no_call_turns"] for c in data["cases"])
    assert wanted >= 2 and data["summary"][0]["no_call_turns"] == wanted == data["summary"][0]["no_call_kept"]
    assert all(c["calls"] == 0 for c in data["cases"])


def test_the_system_message_is_what_bfcl_tells_prompting_models_and_every_turn_sees_it(cases: dict[str, list[Any]]) -> None:
    instruction = bfcl_instruction()
    assert "Continue to output functions to call" in instruction
    case = cases["multi_turn_base"][0]
    backend = ScriptedBackend(["Done."] * len(case.turns))
    run_multi_turn_case(Model(backend, family="qwen2.5"), case, MultiTurnMode("scripted", True, None), system=instruction)
    assert len(backend.prompts) == len(case.turns)
    assert all(p.text.count(instruction) == 1 for p in backend.prompts)
    backend = ScriptedBackend(["Done."] * len(case.turns))
    run_multi_turn_case(Model(backend, family="qwen2.5"), case, MultiTurnMode("scripted", True, None))
    assert not any(instruction in p.text for p in backend.prompts)


def test_a_decision_that_changed_a_reply_is_counted_in_the_case(cases: dict[str, list[Any]]) -> None:
    from localtools.model._decide import Decisions

    case = next(c for c in cases["multi_turn_base"] if len(c.turns) == 2 and _keywords_only(c.ground_truth[0][0]))
    name, arguments = _parsed(case.ground_truth[0][0])
    # The model writes the request back; the echo is decoded again as the call.
    call = "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    replies = [case.turns[0][-1]["content"], call, "Done.", "Done."]
    model = Model(ScriptedBackend(replies), family="qwen2.5")
    result = run_multi_turn_case(model, case, MultiTurnMode("echo", True, Decisions(echo=True)))
    assert result.taken == {"echo": 1} and result.decoded[0] == [[call_text(name, arguments)]]


def _tc(call: str) -> str:
    name, arguments = _parsed(call)
    return tc(name, **arguments)


def _offered_in(prompt: str, names: set[str]) -> set[str]:
    return {n for n in names if f'"name": "{n}"' in prompt}


@pytest.mark.parametrize("seed", range(3))
def test_a_routed_mode_offers_each_turn_only_the_routers_tools_and_the_case_still_passes(cases: dict[str, list[Any]],
                                                                                       seed: int) -> None:
    from localtools.agent._routing import RuleRouter

    rng = random.Random(seed)
    case = rng.choice([c for c in cases["multi_turn_base"] if all(_keywords_only(s) for t in c.ground_truth for s in t)
                       and len(c.functions) > 8])
    needed = {_parsed(s)[0] for t in case.ground_truth for s in t}
    replies = [r for calls in case.ground_truth for r in [*(_tc(s) for s in calls), "Done."]]
    backend = ScriptedBackend(replies)
    mode = MultiTurnMode("routed", True, None, RuleRouter(names=sorted(needed)))
    result = run_multi_turn_case(Model(backend, family="qwen2.5"), case, mode, max_steps=20)
    assert result.correct, (result.error, result.decoded)
    every = {f["name"] for f in case.functions}
    # Every prompt lists the router's tools and none of the others.
    assert all(_offered_in(p.text, every) == needed for p in backend.prompts)


def test_an_embedding_router_offers_each_model_turn_its_k_nearest_tools(cases: dict[str, list[Any]]) -> None:
    from localtools.agent._routing import EmbeddingRouter

    def embed(texts: list[str]) -> list[list[float]]:  # letters counted: a stand-in for meaning, deterministic
        return [[float(t.lower().count(ch)) + 0.01 for ch in "abcdefghijklmnopqrstuvwxyz"] for t in texts]

    case = next(c for c in cases["multi_turn_base"] if len(c.functions) > 10 and len(c.turns) > 2)
    backend = ScriptedBackend(["Done."] * len(case.turns))
    router = EmbeddingRouter(3, embed=embed)
    result = run_multi_turn_case(Model(backend, family="qwen2.5"), case, MultiTurnMode("routed", True, None, router))
    tools = tools_for(case.functions, instances(case))
    every = {t.name for t in tools}
    asked: list[dict[str, Any]] = []
    for turn, prompt in zip(case.turns, backend.prompts, strict=True):
        asked += turn
        # Nearest the turn's own request, whatever came before it.
        assert _offered_in(prompt.text, every) == {t.name for t in router.select(asked, tools, keep=())}
        assert len(_offered_in(prompt.text, every)) == 3
        asked.append({"role": "assistant", "content": "Done."})
    assert result.turns == len(case.turns)


def test_a_run_cut_by_the_step_limit_fails_the_case(cases: dict[str, list[Any]]) -> None:
    case = next(c for c in cases["multi_turn_base"] if "GorillaFileSystem" in c.involved_classes)
    model = Model(ScriptedBackend([tc("ls"), tc("pwd"), tc("ls", a=True)]), family="qwen2.5")
    result = run_multi_turn_case(model, case, MultiTurnMode("scripted", True, None), max_steps=2)
    assert not result.correct and "MaxStepsExceeded" in result.error and result.turns_passed == 0


@pytest.mark.model
def test_a_short_case_runs_end_to_end_on_real_weights_and_the_checker_scores_what_ran(cases: dict[str, list[Any]]) -> None:
    """Whatever the weights write: every turn is asked, the calls scored are calls to the case's
    functions that ran, and the verdict is BFCL's checker's on them."""
    from conftest import load_once

    model = load_once("qwen2.5-coder-0.5b")
    case = min(cases["multi_turn_base"], key=lambda c: (len(c.turns), len(c.functions)))
    result = run_multi_turn_case(model, case, MultiTurnMode("greedy", True, None), max_steps=3, max_tokens=128)
    offered = {f["name"] for f in case.functions}
    assert result.steps >= 1 and result.prompt_tokens > 0
    assert all(_parsed(call)[0] in offered for turn in result.decoded for step in turn for call in step)
    if not result.error.startswith("turn "):  # not cut short by the step limit
        assert len(result.decoded) == len(case.turns)
        assert (result.correct, result.turns_passed) == score(case, result.decoded, "again")[:2]


@pytest.mark.parametrize("argv, wanted", [
    (["--category", "multi_turn_base", "--category", "simple_python"], "only the multi-turn categories"),
    (["--category", "multi_turn_base", "--scenarios"], "drop --peer"),
    (["--category", "simple_python", "--max-steps", "3"], "--max-steps applies to the multi-turn categories"),
    (["--category", "simple_python", "--route-k", "3"], "--route-k applies to --pooled and the multi-turn categories"),
    (["--category", "multi_turn_base", "--route-k", "-1"], "--route-k takes a number of tools, at least 1"),
    (["--category", "simple_python", "--router", "model"], "--router applies to --route-k on the multi-turn"),
    (["--pooled", "--router", "model"], "--router model applies to the multi-turn categories"),
])
def test_the_bench_refuses_what_a_multi_turn_run_cannot_mix(argv: list[str], wanted: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli._main import main

    assert main(["bench", "--bfcl", *argv]) == 2
    assert wanted in capsys.readouterr().err
