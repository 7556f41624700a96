"""BFCL's multi-turn categories through the agent loop, scored by BFCL's own checker.

Each case's API classes (a file system, messaging, posting, tickets, trading, travel, a vehicle,
math) are instantiated from its ``initial_config``; their methods are the agent's tools, run for
real on those instances (an error comes back as the API returns it). Each user turn runs through
``Agent`` until the model answers or the step limit; the calls the agent ran, step by step, are
then scored by ``multi_turn_checker`` from the ``bfcl-eval`` wheel, run in process: it runs them
and the ground truth on fresh instances and compares the state and the results.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import AgentError, DataError, LocalToolsError
from ..agent._agent import Agent
from ..agent._routing import Router
from ..agent._trace import CallOutcome
from ..host._catalog import cache_dir
from ..model._decide import Decisions
from ..model._model import Model
from ..tools._tools import Tool
from ._bfcl import _lines, bfcl_data_dir, sample, to_tool_spec, unpack_bfcl_eval

__all__ = ["MULTI_TURN_CATEGORIES", "MultiTurnCase", "MultiTurnMode", "MultiTurnResult", "bfcl_eval_root", "bfcl_instruction",
           "load_multi_turn", "run_multi_turn_case", "score"]

#: BFCL v4's multi-turn categories.
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
#: What BFCL says as the user where a turn adds the functions held out until then (miss_func).
ADDED_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"
#: The wheel's files the checker and the APIs need (no dependency of the wheel is installed).
_MEMBERS = ("bfcl_eval/__init__.py", "bfcl_eval/constants/__init__.py", "bfcl_eval/constants/executable_backend_config.py",
            "bfcl_eval/constants/default_prompts.py",
            "bfcl_eval/eval_checker/__init__.py", "bfcl_eval/eval_checker/multi_turn_eval/")
_CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
_CONFIG = "bfcl_eval.constants.executable_backend_config"
_PROMPTS = "bfcl_eval.constants.default_prompts"


def bfcl_eval_root(*, download: bool = True) -> Path:
    """The folder holding the ``bfcl_eval`` package's checker and API classes, unpacked from the
    ``bfcl-eval`` wheel under the cache, and importable (it is put on ``sys.path``)."""
    target = cache_dir().parent / "bfcl"
    checker = target / "bfcl_eval" / "eval_checker" / "multi_turn_eval" / "multi_turn_checker.py"
    prompts = target / "bfcl_eval" / "constants" / "default_prompts.py"
    if not checker.is_file() or not prompts.is_file():
        if not download:
            raise DataError("BFCL's multi-turn checker is not downloaded yet (run once with download on)")
        unpack_bfcl_eval(target, lambda m: any(m == p or (p.endswith("/") and m.startswith(p)) for p in _MEMBERS))
        for needed in (checker, prompts):
            if not needed.is_file():
                raise DataError(f"the bfcl-eval wheel has no {needed.relative_to(target)}")
    if str(target) not in sys.path:
        sys.path.append(str(target))
    return target


@dataclass(frozen=True)
class MultiTurnCase:
    id: str
    category: str
    #: The user's messages, turn by turn (a turn that adds held-out functions is empty in the data).
    turns: list[list[dict[str, Any]]]
    #: BFCL's function docs offered from the start, and those added at a turn (miss_func).
    functions: list[dict[str, Any]]
    added: dict[int, list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    #: The ground truth: each turn's calls as Python call strings.
    ground_truth: list[list[str]]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


def load_multi_turn(category: str, data: Path | None = None) -> list[MultiTurnCase]:
    """A multi-turn category's cases with their function docs, as BFCL builds them."""
    if category not in MULTI_TURN_CATEGORIES:
        raise DataError(f"{category!r} is not a multi-turn category ({', '.join(MULTI_TURN_CATEGORIES)})")
    data = data or bfcl_data_dir()
    bfcl_eval_root()
    docs = importlib.import_module(_CONFIG).MULTI_TURN_FUNC_DOC_FILE_MAPPING
    answers = {row["id"]: row["ground_truth"] for row in _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")}
    cases = []
    for row in _lines(data / f"BFCL_v4_{category}.json"):
        functions = [f for cls in row["involved_classes"] for f in _lines(data / "multi_turn_func_doc" / docs[cls])]
        added: dict[int, list[dict[str, Any]]] = {}
        for turn, names in (row.get("missed_function") or {}).items():
            added[int(turn)] = [f for f in functions if f["name"] in names]
            functions = [f for f in functions if f["name"] not in names]
        cases.append(MultiTurnCase(row["id"], category, row["question"], functions, added, row.get("initial_config") or {},
                                   row["involved_classes"], answers[row["id"]], row))
    return cases


def bfcl_instruction() -> str:
    """What BFCL's system prompt tells every prompting model of a multi-turn case (its classic
    style's ``multiturn_behavior``): go on calling until the request is done."""
    bfcl_eval_root()
    return str(importlib.import_module(_PROMPTS).PROMPT_STYLE_TEMPLATES["classic"]["multiturn_behavior"])


def _as_bfcl(value: Any) -> str:
    """A method's result as BFCL's executor hands it on: a string as is, a dict as JSON, else ``str``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def instances(case: MultiTurnCase) -> dict[str, Any]:
    """The case's API classes, fresh, loaded with its initial state."""
    config = importlib.import_module(_CONFIG)
    out = {}
    for name in case.involved_classes:
        instance = getattr(importlib.import_module(config.CLASS_FILE_PATH_MAPPING[name]), name)()
        if name not in config.STATELESS_CLASSES:
            instance._load_scenario(copy.deepcopy(case.initial_config.get(name, {})),
                                    long_context="long_context" in case.category)
        out[name] = instance
    return out


def tools_for(functions: Sequence[dict[str, Any]], apis: dict[str, Any]) -> list[Tool]:
    """Each function doc as a tool whose call runs the method of that name on the case's instances."""
    methods = {n: getattr(api, n) for api in apis.values() for n in dir(api) if not n.startswith("_") and callable(getattr(api, n))}
    out = []
    for doc in functions:
        method = methods.get(doc["name"])
        if method is None:
            raise DataError(f"no API class of the case has a method {doc['name']!r}")

        def run(_method: Callable[..., Any] = method, **arguments: Any) -> str:
            return _as_bfcl(_method(**arguments))

        out.append(Tool.from_schema(to_tool_spec(doc), run))
    return out


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call as BFCL's ground truth writes it: ``cd(folder='document')``."""
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


@dataclass(frozen=True)
class MultiTurnMode:
    label: str
    constrained: bool
    #: ``None``: greedy where the grammar leaves a choice.
    decisions: Decisions | None
    #: Picks the tools each model turn is offered (``None``: all of the case's).
    router: Router | None = None


@dataclass
class MultiTurnResult:
    mode: str
    category: str
    case_id: str
    #: BFCL's checker passed the whole case.
    correct: bool
    #: Turns passed before the first that failed, of all.
    turns_passed: int
    turns: int
    calls: int
    steps: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    #: The checker's reason, or the loop's error, where it failed.
    error: str = ""
    #: The calls the agent ran, turn by turn and step by step (what the checker scored).
    decoded: list[list[list[str]]] = field(default_factory=list)
    #: The conversation as the agent left it (tool results included).
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: The decisions taken (each changed a reply), by where they were made (``DecisionPoint``).
    taken: dict[str, int] = field(default_factory=dict)
    #: Turns reached whose ground truth makes no call (miss_func: the function is not there yet;
    #: miss_param: a value is missing), and of them those in which the agent ran no call.
    no_call_turns: int = 0
    no_call_kept: int = 0


def score(case: MultiTurnCase, decoded: list[list[list[str]]], label: str) -> tuple[bool, int, str]:
    """BFCL's checker on the calls made: whether the case passes, how many turns pass before the
    first that fails, and the checker's reason."""
    checker = importlib.import_module(_CHECKER).multi_turn_checker
    turns = len(case.ground_truth)
    if len(decoded) != turns:
        return False, 0, f"ended after {len(decoded)} of {turns} turns"
    passed, reason = 0, ""
    for k in range(1, turns + 1):
        # A name of its own per check: the checker keeps instances by name between turns.
        verdict = checker(decoded[:k], case.ground_truth[:k], case.raw, case.category, f"lt_{label}_{k}_{time.monotonic_ns()}")
        if not verdict.get("valid"):
            reason = str(verdict.get("error_message") or verdict.get("error_type") or "")
            break
        passed = k
    return passed == turns, passed, reason


def run_multi_turn_case(model: Model, case: MultiTurnCase, mode: MultiTurnMode, *, max_steps: int = 10,
                        max_tokens: int = 256, system: str | None = None) -> MultiTurnResult:
    """One case through ``Agent``, turn by turn, scored by BFCL's checker. ``system``: the agent's
    system message (``None``: none; ``bfcl_instruction()`` is what BFCL tells prompting models)."""
    apis = instances(case)
    functions = list(case.functions)
    messages: list[dict[str, Any]] = []
    decoded: list[list[list[str]]] = []
    result = MultiTurnResult(mode.label, case.category, case.id, False, 0, len(case.turns), 0, 0, 0, 0, 0.0)
    started = time.perf_counter()
    saved = model.decisions
    model.decisions = mode.decisions
    try:
        for index, turn in enumerate(case.turns):
            if index in case.added:
                functions += case.added[index]
                turn = turn or [{"role": "user", "content": ADDED_FUNCTIONS}]
            messages += [dict(m) for m in turn]
            agent = Agent(model, tools_for(functions, apis), system=system, max_steps=max_steps,
                          constrained=mode.constrained, max_tokens=max_tokens, router=mode.router)
            try:
                run = agent.run(messages)
            except (AgentError, LocalToolsError) as exc:  # the step limit, a model that kept failing
                result.error = f"turn {index + 1}: {type(exc).__name__}: {exc}"
                trace = getattr(exc, "trace", None) or []
                decoded.append(_ran(trace))
                _count(result, trace)
                messages = list(getattr(exc, "messages", None) or messages)
                break
            decoded.append(_ran(run.trace))
            _count(result, run.trace)
            messages = list(run.messages)
    finally:
        model.decisions = saved
    result.seconds = time.perf_counter() - started
    result.decoded = decoded
    result.messages = messages
    empty = [i for i, calls in enumerate(case.ground_truth[:len(decoded)]) if not calls]
    result.no_call_turns, result.no_call_kept = len(empty), sum(not decoded[i] for i in empty)
    correct, passed, reason = score(case, decoded, mode.label.replace(" ", "_"))
    result.correct, result.turns_passed = correct and not result.error, passed
    result.error = result.error or reason
    return result


#: Outcomes of a call that ran on the instances.
_RAN = (CallOutcome.OK, CallOutcome.RAISED, CallOutcome.TIMEOUT)


def _ran(trace: Sequence[Any]) -> list[list[str]]:
    """The calls the loop ran, step by step (refused and repeated calls were not run)."""
    steps = []
    for step in trace:
        ran = [call_text(c.name, c.arguments) for c in step.calls if c.outcome in _RAN]
        if ran:
            steps.append(ran)
    return steps


def _count(result: MultiTurnResult, trace: Sequence[Any]) -> None:
    result.steps += len(trace)
    result.calls += sum(len(s.calls) for s in trace)
    result.prompt_tokens += sum(s.prompt_tokens for s in trace)
    result.completion_tokens += sum(s.completion_tokens for s in trace)
    for step in trace:
        for decision in getattr(step, "decisions", None) or ():
            if decision.taken:
                result.taken[str(decision.point)] = result.taken.get(str(decision.point), 0) + 1


def pick_cases(category: str, n: int | None, seed: int = 0) -> list[MultiTurnCase]:
    """``n`` cases of the category, evenly spread (``sample``; ``None`` or 0: all)."""
    cases = load_multi_turn(category)
    return cases if not n else sample(cases, n, seed)
