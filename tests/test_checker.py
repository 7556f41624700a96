"""Our BFCL-format checker and data loading, on hand-written cases."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from localtools import get_family
from localtools._errors import DataError
from localtools.bench._bfcl import CATEGORIES, bfcl_data_dir, load_cases, sample, to_json_schema
from localtools.bench._checker import check_calls, normalize_string
from localtools.grammar import build_grammar

AREA = {"area": {"base": [10], "height": [5], "unit": ["units", ""]}}
SCHEMAS = {
    "area": {"type": "object", "properties": {"base": {"type": "integer"}, "height": {"type": "number"},
                                              "unit": {"type": "string"}}},
    "play": {"type": "object", "properties": {"artist": {"type": "string"}, "minutes": {"type": "integer"}}},
    "route": {"type": "object", "properties": {"stops": {"type": "array", "items": {"type": "string"}},
                                               "options": {"type": "object", "properties": {"avoid_tolls": {"type": "boolean"}}}}},
}


@pytest.mark.parametrize(("calls", "ok", "reason"), [
    ([("area", {"base": 10, "height": 5})], True, ""),
    ([("area", {"base": 10, "height": 5, "unit": "Units"})], True, ""),  # optional, allowed value, case-insensitive
    ([("area", {"base": 10, "height": 5.0})], True, ""),  # number: 5.0 == 5
    ([("area", {"base": 10.0, "height": 5})], False, "base=10.0"),  # integer schema: a float is wrong
    ([("area", {"base": 10, "height": 5, "unit": "cm"})], False, "unit='cm'"),
    ([("area", {"base": 10})], False, "missing argument 'height'"),
    ([("area", {"base": 10, "height": 5, "color": "red"})], False, "unexpected argument(s) color"),
    ([("volume", {"base": 10, "height": 5})], False, "called 'volume', expected 'area'"),
    ([("area", {"base": "10", "height": 5})], False, "base='10'"),
    ([("area", {"base": True, "height": 5})], False, "base=True"),
    ([], False, "expected 1 call(s), got 0"),
])
def test_single_call(calls: list, ok: bool, reason: str) -> None:
    verdict = check_calls(calls, [AREA], SCHEMAS)
    assert verdict.ok is ok
    assert reason in verdict.reason


def test_parallel_calls_match_in_any_order_each_used_once() -> None:
    expected = [{"play": {"artist": ["Taylor Swift"], "minutes": [20]}}, {"play": {"artist": ["Maroon 5"], "minutes": [15]}}]
    swift, maroon = ("play", {"artist": "taylor swift", "minutes": 20}), ("play", {"artist": "Maroon 5", "minutes": 15})
    assert check_calls([swift, maroon], expected, SCHEMAS).ok
    assert check_calls([maroon, swift], expected, SCHEMAS).ok
    assert not check_calls([swift, swift], expected, SCHEMAS).ok
    assert not check_calls([swift], expected, SCHEMAS).ok


def test_lists_and_nested_dicts_compare_element_wise() -> None:
    expected = [{"route": {"stops": [["New York, NY", "Boston"]], "options": [{"avoid_tolls": [True]}, ""]}}]
    assert check_calls([("route", {"stops": ["new york ny", "BOSTON"]})], expected, SCHEMAS).ok
    assert check_calls([("route", {"stops": ["New York, NY", "Boston"], "options": {"avoid_tolls": True}})], expected, SCHEMAS).ok
    assert not check_calls([("route", {"stops": ["Boston", "New York, NY"]})], expected, SCHEMAS).ok
    assert not check_calls([("route", {"stops": ["New York, NY"]})], expected, SCHEMAS).ok
    assert not check_calls([("route", {"stops": ["New York, NY", "Boston"], "options": {"avoid_tolls": False}})], expected,
                           SCHEMAS).ok
    assert not check_calls([("route", {"stops": ["New York, NY", "Boston"], "options": {"ferry": True}})], expected,
                           SCHEMAS).ok


def test_irrelevance_means_no_call() -> None:
    assert check_calls([], []).ok
    verdict = check_calls([("area", {"base": 1, "height": 1})], [])
    assert not verdict.ok and verdict.reason == "expected no call, got 1"


def test_normalize_string() -> None:
    assert normalize_string("  New-York, N.Y.! ") == normalize_string("new york ny") == "newyorkny"


def test_bfcl_types_map_to_json_schema() -> None:
    assert to_json_schema({"type": "dict", "properties": {
        "a": {"type": "float"}, "b": {"type": "tuple", "items": {"type": "integer"}}, "c": {"type": "any"},
        "d": {"type": "array", "items": {"type": "dict", "properties": {"x": {"type": "float"}}}}}, "required": ["a"]}) == {
        "type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "array", "items": {"type": "integer"}}, "c": {},
            "d": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}}}, "required": ["a"]}


def _write_folder(tmp: Path) -> Path:
    (tmp / "possible_answer").mkdir()
    fn = {"name": "area", "description": "Area.", "parameters": {"type": "dict", "properties": {"base": {"type": "integer"}},
                                                                   "required": ["base"]}}
    questions = [{"id": f"simple_python_{i}", "question": [[{"role": "user", "content": f"Area for base {i}"}]], "function": [fn]}
                 for i in range(10)]
    answers = [{"id": f"simple_python_{i}", "ground_truth": [{"area": {"base": [i]}}]} for i in range(10)]
    (tmp / "BFCL_v4_simple_python.json").write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    (tmp / "possible_answer" / "BFCL_v4_simple_python.json").write_text("\n".join(json.dumps(a) for a in answers) + "\n")
    (tmp / "BFCL_v4_irrelevance.json").write_text(json.dumps({**questions[0], "id": "irrelevance_0"}) + "\n")
    return tmp


def test_load_cases_and_sample(tmp_path: Path) -> None:
    folder = _write_folder(tmp_path)
    cases = load_cases(folder, "simple_python")
    assert [c.id for c in cases][:2] == ["simple_python_0", "simple_python_1"] and len(cases) == 10
    assert cases[3].messages == [{"role": "user", "content": "Area for base 3"}]
    assert cases[3].tools[0]["function"]["parameters"]["type"] == "object"
    assert cases[3].expected == [{"area": {"base": [3]}}]
    assert load_cases(folder, "irrelevance")[0].expected == []
    picked = sample(cases, 4, seed=0)
    assert len(picked) == 4 and len({c.id for c in picked}) == 4
    gaps = [int(b.id.split("_")[-1]) - int(a.id.split("_")[-1]) for a, b in itertools.pairwise(picked)]
    assert all(g in (2, 3) for g in gaps)  # evenly spread over 10
    assert sample(cases, 4, seed=0) == picked and sample(cases, None) == cases
    with pytest.raises(Exception, match="categories there: irrelevance, simple_python"):
        load_cases(folder, "parallel")


def test_every_bfcl_case_loads_and_gets_a_grammar() -> None:
    # The first run downloads the bfcl-eval wheel (about 2 MB, no dependencies) into the cache.
    folder = bfcl_data_dir()
    family = get_family("qwen2.5")
    for category in CATEGORIES:
        cases = load_cases(folder, category)
        assert len(cases) >= 200
        for case in cases:
            build_grammar(family, case.tools, "auto")
        assert all(case.expected for case in cases) == (category != "irrelevance")


def _call_case(tmp: Path, question: object, answer: object = None) -> Path:
    (tmp / "possible_answer").mkdir(exist_ok=True)
    fn = {"name": "get_weather", "description": "Weather.", "parameters": {
        "type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    (tmp / "BFCL_v4_multiple.json").write_text(json.dumps({"id": "mt_0", "question": question, "function": [fn]},
                                                          ensure_ascii=False) + "\n")
    truth = [{"get_weather": {"city": ["Rome"]}}] if answer is None else answer
    (tmp / "possible_answer" / "BFCL_v4_multiple.json").write_text(json.dumps({"id": "mt_0", "ground_truth": truth}) + "\n")
    return tmp


def test_a_second_request_after_a_tool_result_loads_in_openai_shape(tmp_path: Path) -> None:
    # Written as a data file is easiest to write: arguments and results as objects, no ids.
    question = [[{"role": "user", "content": "Weather in Paris?"}],
                [{"role": "assistant", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                 {"role": "tool", "content": {"temp_c": 18}},
                 {"role": "user", "content": "And in Rome?"}]]
    (case,) = load_cases(_call_case(tmp_path, question), "multiple")
    assert [m["role"] for m in case.messages] == ["user", "assistant", "tool", "user"]
    call = case.messages[1]["tool_calls"][0]
    assert call == {"id": "call00001", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    assert case.messages[1]["content"] == ""
    assert case.messages[2] == {"role": "tool", "tool_call_id": "call00001", "content": '{"temp_c": 18}'}
    assert case.expected == [{"get_weather": {"city": ["Rome"]}}]
    # One turn holding it all, in OpenAI's own shape, keeps its ids; a ground truth [] is no call.
    own = [{"role": "user", "content": "Weather in Paris and Oslo?"},
           {"role": "assistant", "content": "", "tool_calls": [
               {"id": "callA0001", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
               {"id": "callB0002", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
           {"role": "tool", "tool_call_id": "callB0002", "content": "3 C"},
           {"role": "tool", "tool_call_id": "callA0001", "content": "18 C"},
           {"role": "user", "content": "Which is warmer?"}]
    (case,) = load_cases(_call_case(tmp_path, [own], answer=[]), "multiple")
    assert case.messages == own and case.expected == []
    assert check_calls([], case.expected).ok


@pytest.mark.parametrize(("question", "error"), [
    ([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]], "does not begin with the assistant"),
    ([[{"role": "user", "content": "a"}, {"role": "tool", "content": "x"}, {"role": "user", "content": "b"}]],
     "answers no call"),
    ([[{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"name": "get_weather", "arguments": {}}]},
       {"role": "user", "content": "b"}]], "comes before the result"),
    ([[{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"name": "get_weather", "arguments": "{"}]},
       {"role": "tool", "content": "x"}, {"role": "user", "content": "b"}]], "not JSON"),
    ([[{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"name": "get_weather", "arguments": {}}]},
       {"role": "tool", "tool_call_id": "other", "content": "x"}, {"role": "user", "content": "b"}]], "answers 'other'"),
    ([[{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [{"name": "get_weather", "arguments": {}}]},
       {"role": "tool", "content": "x"}]], "does not end with the user"),
    ([[{"role": "robot", "content": "a"}]], "role 'robot'"),
    ([], "not a list of turns"),
])
def test_a_written_conversation_that_does_not_hold_together_is_refused(tmp_path: Path, question: object,
                                                                       error: str) -> None:
    with pytest.raises(DataError, match=error):
        load_cases(_call_case(tmp_path, question), "multiple")
