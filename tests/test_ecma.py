"""One reading of a schema: patterns as ECMA-262 in the grammar and in the check alike, older drafts
converted to 2020-12 for both, and arguments that are not JSON refused by the check."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from localtools import UnsupportedSchema
from localtools.grammar import Enforcement, admits, schema_report
from localtools.grammar._admits import _grammar
from localtools.grammar._check import violations
from localtools.grammar._drafts import DRAFT_2020_12, IGNORED_IN_2020_12, to_2020_12
from localtools.grammar._regex import MAX_COUNT, InvalidPattern, Untranslatable, python_regex, regex_expr

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_04 = "http://json-schema.org/draft-04/schema#"


def one(schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": schema}, "required": ["v"]}


def checked(schema: Any, value: Any) -> bool:
    return not violations("t", one(schema), {"v": value})


def grammar_admits(schema: Any, value: Any) -> bool:
    return admits(one(schema), json.dumps({"v": value}), check=False)


def report(parameters: dict[str, Any]) -> dict[tuple[str, str], Enforcement]:
    return {(e.path, e.keyword): e.enforcement for e in schema_report(parameters)}


# -- the check reads ECMA-262 ---------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "good", "bad"), [
    (r"^(?!x)\d+$", ["123"], ["٣", "12٣"]),            # \d is [0-9]
    (r"^(?!x)[a-z]+$", ["ab"], ["ab\n"]),               # $ is the end of input, not before a last newline
    (r"^(?=.)\w+$", ["a_1"], ["é", "aé"]),              # \w is ASCII
    (r"^\s$", [" ", "\u00a0", "\ufeff", "\u3000", "\u2028"], ["x", "\u200b"]),
    (r"^\S$", ["x", "\u200b"], ["\ufeff", "\u00a0"]),
    (r"^.$", ["x", "é"], ["\n", "\r", "\u2028", "\u2029"]),
    (r"^a\b", ["a", "a é", "aé"], ["ab", "a_"]),          # word boundaries by ASCII word characters
    (r"^a\B", ["ab"], ["aé", "a"]),
    (r"^\cJ$", ["\n"], ["cJ", "J"]),
    (r"^(?<y>a+)-\k<y>$", ["a-a", "aa-aa"], ["aa-a", "a-aa"]),
    (r"^[^]$", ["\n", "x"], ["", "xy"]),
    (r"^x|[]", ["x", "xy"], ["y", ""]),                  # [] admits nothing
    (r"^\u{1F600}$", ["😀"], ["u{1F600}"]),
    (r"^\ud83d\ude00$", ["😀"], ["x"]),                   # a pair written as two escapes is one code point
    (r"^[\d-z]+$", ["1-z"], ["a"]),                       # Annex B: a class at a range's end is literal '-'
    (r"(a)|\1b", ["b", "a"], ["c"]),                      # a group that took no part matches empty
    (r"^\1(a)$", ["a"], ["aa"]),                           # a reference before its group is empty
    (r"^\p{Lu}\P{Lu}$", ["Éa", "A1"], ["ab", "AB"]),
    (r"^a{2}$", ["aa"], ["aaa", "a"]),
    (r"^a{,2}$", ["a{,2}"], ["aa"]),                     # not a quantifier: literal (Annex B)
])
def test_the_check_reads_patterns_as_ecma(pattern: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "pattern": pattern}
    for s in good:
        assert checked(schema, s), s
    for s in bad:
        assert not checked(schema, s), s


@pytest.mark.parametrize(("pattern", "good", "bad"), [
    (r"^\d+$", ["123"], ["٣"]),
    (r"^\S$", ["x", "\u200b", "٣"], ["\ufeff", "\u00a0", "\u3000"]),
    (r"^\s$", ["\u3000", "\ufeff", "\u1680"], ["x"]),
    (r"^\D\W$", ["٣é", "a "], ["1a", "a_"]),
    (r"^\cC$", ["\x03"], ["cC"]),
    (r"^[^]$", ["\n", "x"], ["xy"]),
])
def test_the_grammar_reads_them_alike(pattern: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "pattern": pattern}
    for s in good:
        assert grammar_admits(schema, s) and checked(schema, s), s
    for s in bad:
        assert not grammar_admits(schema, s) and not checked(schema, s), s


def test_pattern_properties_keys_are_ecma_too() -> None:
    schema = {"type": "object", "patternProperties": {r"^\d+$": {"type": "integer"}}, "additionalProperties": False}
    assert not violations("t", schema, {"12": 1})
    assert [v.keyword for v in violations("t", schema, {"٣": 1})] == ["additionalProperties"]
    assert [v.keyword for v in violations("t", schema, {"1\n": 1})] == ["additionalProperties"]
    free = {"type": "object", "patternProperties": {r"^\w$": {"type": "integer"}}}
    assert [v.keyword for v in violations("t", free, {"é": "x", "e": "x"})] == ["type"]


def test_two_spellings_of_one_pattern_stay_two_keys() -> None:
    schema = {"type": "object", "patternProperties": {r"^\d$": {"minimum": 5}, "^[0-9]$": {"maximum": 7}}}
    assert not violations("t", schema, {"6": 6})
    assert [v.keyword for v in violations("t", schema, {"1": 1, "9": 9})] == ["minimum", "maximum"]


def test_unicode_group_names_and_huge_counts() -> None:
    assert checked({"type": "string", "pattern": r"^(?<ñ>a)\k<ñ>$"}, "aa")
    with pytest.raises(UnsupportedSchema):
        violations("t", one({"type": "string", "pattern": "a{" + "9" * 5000 + "}"}), {"v": "a"})


def test_format_regex_is_ecma() -> None:
    schema = {"type": "string", "format": "regex"}
    assert checked(schema, r"(?<y>a)\k<y>")  # ECMA's named group; Python's re refuses it
    assert checked(schema, r"\p{L}")
    assert not checked(schema, "(?P<y>a)")  # Python's spelling, no ECMA regex
    assert not checked(schema, "[a-")


def test_messages_name_the_pattern_as_written() -> None:
    [v] = violations("t", one({"type": "string", "pattern": r"^\d+$"}), {"v": "x"})
    assert v.keyword == "pattern" and r"^\\d+$" in v.message and "(?:" not in v.message


@pytest.mark.parametrize(("pattern", "why"), [
    (r"(?<=a+)b", "look-behind"),
    (r"\u{zz}", "code point"),
    (r"\p{Script=Greek}", "General_Category"),
    (r"(?:(a)|b)*\1", "repetition"),
    ("(" * 300 + "a" + ")" * 300, "deeper"),
])
def test_what_the_check_cannot_read_is_refused_by_name(pattern: str, why: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        violations("t", one({"type": "string", "pattern": pattern}), {"v": "x"})
    assert caught.value.keyword == "pattern" and caught.value.path == "/properties/v" and why in str(caught.value)
    with pytest.raises(UnsupportedSchema) as caught:
        violations("t", {"type": "object", "patternProperties": {pattern: {}}}, {})
    assert caught.value.keyword == "patternProperties" and caught.value.path == ""


def test_syntax_errors_are_typed() -> None:
    for pattern in ("(a", "a)", "*a", "{2}", "[b-a]", "a{3,2}", "\\", "(?<1>a)", r"(?<a>x)(?<a>y)", "a**", "a{2}{3}",
                    "(?P<y>a)", "^*"):
        with pytest.raises(InvalidPattern):
            python_regex(pattern)
        with pytest.raises(UnsupportedSchema):
            violations("t", one({"type": "string", "pattern": pattern}), {"v": "x"})


def test_translations_are_cached() -> None:
    python_regex.cache_clear()
    python_regex(r"^\d$")
    python_regex(r"^\d$")
    assert python_regex.cache_info().hits == 1


# -- the grammar's translation: never a crash, bounded --------------------------------------------

@pytest.mark.parametrize(("pattern", "enforcement"), [
    (r"^\cC$", Enforcement.GRAMMAR),
    (r"^[^]$", Enforcement.GRAMMAR),
    (r"^\u{1F600}$", Enforcement.GRAMMAR),
    (r"\p{L}", Enforcement.CHECKED),
    (r"(?<y>a)\k<y>", Enforcement.CHECKED),
    (r"^a{0,100000}$", Enforcement.CHECKED),
    (r"(ab){5000}", Enforcement.CHECKED),
    (r"^a[]?$", Enforcement.CHECKED),  # a class that admits nothing: the check's
])
def test_patterns_are_the_grammars_or_the_checks(pattern: str, enforcement: Enforcement) -> None:
    assert report(one({"type": "string", "pattern": pattern}))[("/properties/v", "pattern")] is enforcement


@pytest.mark.parametrize("pattern", [r"\u{zz}", r"(?<=a+)b", r"\p{Script=Greek}", "(" * 300 + "a" + ")" * 300])
def test_patterns_neither_can_read_are_refused_by_the_grammar(pattern: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        schema_report(one({"type": "string", "pattern": pattern}))
    assert caught.value.keyword == "pattern"
    with pytest.raises(UnsupportedSchema):
        admits(one({"type": "string", "pattern": pattern}), '{"v": "a"}')


@pytest.mark.parametrize("pattern", [
    "a{0,100000}", "(ab){5000}", "(a|b|c|d){250}(e{250}){250}",
    "^" + "(x{256})" * 40 + "$", "[a-z]{1,256}[0-9]{1,256}[A-Z]{1,256}" * 6,
])
def test_huge_quantifiers_do_not_blow_up_the_grammar(pattern: str) -> None:
    parameters = one({"type": "string", "pattern": pattern})
    plain = len(_grammar(json.dumps(one({"type": "string"}))).to_gbnf())
    assert len(_grammar(json.dumps(parameters)).to_gbnf()) < plain + 20_000
    assert report(parameters)[("/properties/v", "pattern")] is Enforcement.CHECKED


def test_a_quantifier_at_the_limit_stays_in_the_grammar() -> None:
    regex_expr(f"^a{{{MAX_COUNT}}}$")
    with pytest.raises(Untranslatable):
        regex_expr(f"^a{{{MAX_COUNT + 1}}}$")
    schema = {"type": "string", "pattern": f"^a{{0,{MAX_COUNT + 1}}}$"}
    assert grammar_admits(schema, "a" * (MAX_COUNT + 2)) and not checked(schema, "a" * (MAX_COUNT + 2))
    assert not admits(one(schema), json.dumps({"v": "a" * (MAX_COUNT + 2)}))


# -- one reading of a schema: older drafts converted ------------------------------------------------

DRAFT_07_TOOL: dict[str, Any] = {
    "$schema": DRAFT_07,
    "type": "object",
    "properties": {
        "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
        "rest": {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "boolean"}},
        "pos": {"$ref": "#/definitions/pos", "maximum": 0},  # draft-07: the sibling is ignored
        "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "d": {"type": "integer"},
        "second": {"$ref": "#/properties/pair/items/1"},
        "later": {"type": "object", "dependentRequired": {"x": ["y"]}},  # a 2019-09 keyword: ignored
    },
    "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
    "definitions": {"pos": {"type": "integer", "minimum": 1}},
}


@pytest.mark.parametrize(("arguments", "valid"), [
    ({"pair": [1, "x"]}, True),
    ({"pair": [1, "x", 2]}, False),
    ({"pair": ["x"]}, False),
    ({"rest": [1, True, False]}, True),
    ({"rest": [1, 2]}, False),
    ({"pos": 5}, True),
    ({"pos": 0}, False),
    ({"a": 1, "b": 2}, True),
    ({"a": 1}, False),
    ({"c": 1, "d": 2}, True),
    ({"c": 1}, False),
    ({"second": "s"}, True),
    ({"second": 2}, False),
    ({"later": {"x": 1}}, True),
])
def test_a_draft_07_schema_reads_the_same_in_grammar_and_check(arguments: dict[str, Any], valid: bool) -> None:
    text = json.dumps(arguments)
    assert (not violations("t", DRAFT_07_TOOL, arguments)) is valid
    assert admits(DRAFT_07_TOOL, text) is valid
    if valid:
        assert admits(DRAFT_07_TOOL, text, check=False)


DRAFT_04_TOOL = {
    "$schema": DRAFT_04,
    "type": "object",
    "properties": {
        "open": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": False},
        "n": {"type": "integer", "maximum": 3, "exclusiveMaximum": True},
        "t": {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
        "k": {"const": 1},  # draft-06: ignored under draft-04
    },
    "dependencies": {"open": ["n"]},
}


@pytest.mark.parametrize(("arguments", "valid"), [
    ({"open": 0.5, "n": 0}, True),
    ({"open": 10, "n": 0}, True),
    ({"open": 0, "n": 0}, False),
    ({"open": 1}, False),
    ({"n": 2}, True),
    ({"n": 3}, False),
    ({"t": ["x"]}, True),
    ({"t": ["x", "y"]}, False),
    ({"k": 2}, True),
])
def test_a_draft_04_schema_reads_the_same_in_grammar_and_check(arguments: dict[str, Any], valid: bool) -> None:
    text = json.dumps(arguments)
    assert (not violations("t", DRAFT_04_TOOL, arguments)) is valid
    assert admits(DRAFT_04_TOOL, text) is valid
    if valid:
        assert admits(DRAFT_04_TOOL, text, check=False)


def test_the_conversion() -> None:
    plain = {"type": "object", "dependencies": {"a": ["b"]}}
    assert to_2020_12(plain) is plain  # 2020-12 (or no $schema): as it is
    converted = to_2020_12(DRAFT_07_TOOL)
    assert converted["$schema"] == DRAFT_2020_12 and "dependencies" not in converted
    assert converted["dependentRequired"] == {"a": ["b"]} and converted["dependentSchemas"] == {"c": {"required": ["d"]}}
    assert converted["properties"]["pos"] == {"$ref": "#/definitions/pos"}
    assert converted["properties"]["second"] == {"$ref": "#/properties/pair/prefixItems/1"}
    assert converted["properties"]["rest"] == {"type": "array", "prefixItems": [{"type": "integer"}],
                                               "items": {"type": "boolean"}}
    assert DRAFT_07_TOOL["properties"]["pair"]["items"][0] == {"type": "integer"}  # the original is untouched
    assert to_2020_12({"$schema": DRAFT_04, "id": "#x", "maximum": 1, "exclusiveMaximum": True}) == {
        "$schema": DRAFT_2020_12, "$anchor": "x", "exclusiveMaximum": 1}


def test_2019_09_recursive_ref() -> None:
    tree = {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": True, "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}}}}
    assert to_2020_12(tree)["properties"]["kids"]["items"] == {"$ref": "#"}
    assert admits(tree, '{"kids": [{"kids": []}]}') and not admits(tree, '{"kids": [1]}')
    nested = {**tree, "$defs": {"x": {"$id": "other", "$recursiveAnchor": True}}}
    with pytest.raises(UnsupportedSchema) as caught:
        to_2020_12(nested)
    assert caught.value.keyword == "$recursiveRef"
    with pytest.raises(UnsupportedSchema):
        to_2020_12({"$schema": "http://json-schema.org/draft-03/schema#"})


def test_the_check_never_follows_schema() -> None:
    # A draft-07 subschema would switch jsonschema to draft-07 for it; the grammar reads 2020-12.
    schema = {"type": "object", "properties": {"v": {"$schema": DRAFT_07, "type": "object",
                                                     "dependentRequired": {"a": ["b"]}}}}
    assert [v.keyword for v in violations("t", schema, {"v": {"a": 1}})] == ["dependentRequired"]


def test_what_2020_12_ignores() -> None:
    assert {"additionalItems", "dependencies"} <= IGNORED_IN_2020_12
    schema = {"type": "array", "additionalItems": False, "items": {"type": "integer"}}
    assert checked(schema, [1, 2])  # additionalItems means nothing in 2020-12: nobody enforces it


def test_what_2020_12_ignores_is_reported_unsupported() -> None:
    parameters = {"type": "object", "properties": {"v": {"type": "array", "additionalItems": False}},
                  "dependencies": {"v": ["w"]}}
    found = report(parameters)
    assert found[("/properties/v", "additionalItems")] is Enforcement.UNSUPPORTED
    assert found[("", "dependencies")] is Enforcement.UNSUPPORTED


# -- the check refuses what is not JSON -----------------------------------------------------------

@pytest.mark.parametrize("schema", [{}, {"type": "object"}, one({"type": "number"})])
def test_non_finite_numbers_are_violations(schema: dict[str, Any]) -> None:
    for value in (float("inf"), -math.inf, math.nan, json.loads('{"x": 1e999}')["x"]):
        [v] = violations("t", schema, {"v": value})
        assert (v.pointer, v.keyword) == ("/v", "type") and "finite" in v.message
    [v] = violations("t", {}, {"v": [1, {"w": math.nan}]})
    assert v.pointer == "/v/1/w"


def test_lone_surrogates_are_violations() -> None:
    for value, pointer in [({"v": "a\ud800"}, "/v"), ({"v": ["ok", {"w": "\udfff"}]}, "/v/1/w"),
                           ("\ud800", "")]:
        [v] = violations("t", {}, value)
        assert (v.pointer, v.keyword) == (pointer, "type") and "lone surrogate" in v.message
    [v] = violations("t", {"type": "object"}, {"k\ud800": 1})
    assert v.keyword == "type" and "lone surrogate" in v.message
    str(v).encode("utf-8")  # the pointer and message can be sent on
    assert not violations("t", {}, {"v": "😀", "w": 1.5})


# -- the public entry point a model goes through ----------------------------------------------------

def _tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "f", "parameters": parameters}}


def test_build_grammar_refuses_by_name_and_reads_older_drafts() -> None:
    from localtools import get_family
    from localtools.grammar import build_grammar, matches

    family = get_family("qwen2.5")
    with pytest.raises(UnsupportedSchema) as caught:
        build_grammar(family, [_tool(one({"type": "string", "pattern": r"\u{zz}"}))], "required")
    assert caught.value.keyword == "pattern"
    build_grammar(family, [_tool(one({"type": "string", "pattern": r"\p{L}(?<y>a)\k<y>[^]\cC"}))], "required")
    tuple_tool = _tool({"$schema": DRAFT_07, "type": "object", "required": ["p"],
                        "properties": {"p": {"type": "array", "items": [{"type": "integer"}], "additionalItems": False}}})
    g = build_grammar(family, [tuple_tool], "required")
    call = '<tool_call>\n{"name": "f", "arguments": {"p": [%s]}}\n</tool_call>'
    assert matches(g, call % "1") and not matches(g, call % "1, 2") and not matches(g, call % '"x"')


@pytest.mark.parametrize("pattern", [r"^(\w+\s?)*(?=x)$", r"^(?<a>(a|a)*)\k<a>b$", "((a{0,200}){0,200}){0,200}"])
def test_a_pattern_left_to_a_backtracking_check_that_could_stall_is_refused(pattern: str) -> None:
    # Look-around, a back-reference, or past the linear matcher's states: Python's engine would read it.
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    with pytest.raises(UnsupportedSchema) as caught:
        admits(schema, '{"s": "a"}')
    assert caught.value.keyword == "pattern" and "exponential" in str(caught.value)


@pytest.mark.parametrize("pattern,long", [(r"^((a|a)*|b{300})$", "a" * 5000 + "c"),
                                          (r"^((ab)+){2,}c{0,999}$", "ab" * 3000 + "x")])
def test_a_regular_pattern_left_to_the_check_is_read_by_its_linear_matcher(pattern: str, long: str) -> None:
    # Once refused like the ones above; the check no longer backtracks on a regular pattern.
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    assert admits(schema, '{"s": "aa"}' if "a|a" in pattern else '{"s": "ababcc"}')
    assert not admits(schema, json.dumps({"s": long}))


def test_a_pattern_left_to_the_check_without_nested_repetition_still_builds() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": r"^a{0,300}$"}}}
    assert admits(schema, '{"s": "aaa"}') and not admits(schema, json.dumps({"s": "a" * 301}))
