"""Each JSON Schema keyword the grammar enforces, by ``admits`` with and without the check; the
report of who enforces what; schemas as users write them (pydantic); random instances."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import BaseModel, Field

from localtools import Tool, UnsupportedSchema
from localtools.cli import main as cli_main
from localtools.grammar import Enforcement, admits, schema_report, unsupported
from localtools.grammar._check import violations
from localtools.grammar._expr import Grammar
from localtools.grammar._match import matches
from localtools.grammar._ranges import int_range
from localtools.grammar._regex import Untranslatable, regex_expr


def one(schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": schema}, "required": ["v"]}


def grammar_admits(schema: Any, value: Any) -> bool:
    return admits(one(schema), json.dumps({"v": value}), check=False)


@pytest.mark.parametrize(("lo", "hi"), [(1, 12), (-40, 60), (None, -3), (7, None), (0, 0), (-999, -100), (95, 1234),
                                        (None, None), (-5, 5), (10, 99)])
def test_integer_ranges_are_exact(lo: int | None, hi: int | None) -> None:
    g = Grammar()
    expr = int_range(lo, hi)
    assert expr is not None
    g.add("root", expr)
    for n in range(-1300, 1300):
        inside = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert matches(g, str(n)) == inside, n
    assert not matches(g, "01") and not matches(g, "-0")


@given(st.integers(-10**6, 10**6), st.integers(0, 10**4), st.integers(-10**7, 10**7))
@settings(max_examples=150, deadline=None)
def test_integer_ranges_against_arithmetic(lo: int, width: int, n: int) -> None:
    schema = {"type": "integer", "minimum": lo, "maximum": lo + width}
    assert grammar_admits(schema, n) == (lo <= n <= lo + width)


def test_exclusive_and_fractional_bounds_on_integers() -> None:
    schema = {"type": "integer", "exclusiveMinimum": 0, "maximum": 9.5}
    assert [n for n in range(-3, 13) if grammar_admits(schema, n)] == list(range(1, 10))


def test_number_ranges_are_narrowed_and_the_check_does_the_rest() -> None:
    schema = {"type": "number", "minimum": 0, "maximum": 10}
    assert grammar_admits(schema, 9.5) and not grammar_admits(schema, -0.5) and not grammar_admits(schema, 11.0)
    assert grammar_admits(schema, 10.5) and not admits(one(schema), '{"v": 10.5}')  # integer part 10: the check's
    report = {(e.path, e.keyword): e.enforcement for e in schema_report(one(schema))}
    assert report[("/properties/v", "maximum")] is Enforcement.NARROWED
    exact = {(e.path, e.keyword): e.enforcement for e in schema_report(one({"type": "number", "minimum": 3}))}
    assert exact[("/properties/v", "minimum")] is Enforcement.GRAMMAR


@pytest.mark.parametrize(("pattern", "good", "bad"), [
    (r"^\d{5}$", ["12345"], ["1234", "123456", "1234a"]),
    (r"^[A-Z]{2}-\d+$", ["AB-1", "ZZ-007"], ["ab-1", "AB-", "ABC-1"]),
    (r"a+b", ["ab", "xaab", "abz"], ["b", "a", "ba"]),  # unanchored: contains
    (r"^(cat|dog)s?$", ["cat", "dogs"], ["cats!", "bird"]),
    (r'^[^"\\]*$', ["plain"], ['a"b', "a\\b"]),
    (r"^\s\S$", [" x", "\tx"], ["xx", "  "]),
    (r"^.{2,3}$", ["ab", "abc"], ["a", "abcd", "a\n"]),
    (r"^x{2}$|^y$", ["xx", "y"], ["x", "yy"]),
])
def test_patterns_are_grammar(pattern: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "pattern": pattern}
    for s in good:
        assert grammar_admits(schema, s) and re.search(pattern, s), s
    for s in bad:
        assert not grammar_admits(schema, s), s


def test_a_pattern_character_cannot_be_smuggled_in_as_an_escape() -> None:
    parameters = one({"type": "string", "pattern": "^[a-z]+$"})
    assert admits(parameters, '{"v": "abc"}') and not admits(parameters, '{"v": "\\u0041bc"}', check=False)


@pytest.mark.parametrize("pattern", [r"(?=a)a", r"(a)\1", r"\bword\b", r"\p{L}"])
def test_patterns_the_grammar_cannot_say_are_left_to_the_check(pattern: str) -> None:
    with pytest.raises(Untranslatable):
        regex_expr(pattern)
    schema = one({"type": "string", "pattern": pattern})
    report = {(e.path, e.keyword): e.enforcement for e in schema_report(schema)}
    assert report[("/properties/v", "pattern")] is Enforcement.CHECKED


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("date", ["2024-02-29", "1999-12-31"], ["yesterday", "2024-13-01", "2024-1-01"]),
    ("date-time", ["2024-02-29T12:00:00Z", "2024-02-29t12:00:00.5+01:00"], ["2024-02-29 12:00", "2024-02-29T25:00:00Z"]),
    ("time", ["08:30:06Z", "23:59:60Z"], ["8:30:06Z", "08:30:06"]),
    ("uuid", [str(uuid.UUID(int=7))], ["not-a-uuid", "00000000-0000-0000-0000-00000000000"]),
    ("email", ["ada@example.com", '"a b"@example.com'], ["ada", ".ada@example.com", "a..b@example.com", "a@b=c.com"]),
    ("ipv4", ["192.168.0.1"], ["256.1.1.1", "01.2.3.4", "1.2.3"]),
    ("duration", ["P4DT12H30M5S", "P2W", "PT0S"], ["P", "PT", "P1D2H", "P1Y2W"]),
    ("hostname", ["www.example.com", "h0st"], ["-a", "a_b", "a-"]),
])
def test_formats_are_grammar(fmt: str, good: list[str], bad: list[str]) -> None:
    schema = {"type": "string", "format": fmt}
    for s in good:
        assert admits(one(schema), json.dumps({"v": s})), s
    for s in bad:
        assert not grammar_admits(schema, s), s


def test_tuples_items_false_and_counts() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False}
    assert grammar_admits(schema, [1, "a"]) and grammar_admits(schema, [1]) and grammar_admits(schema, [])
    assert not grammar_admits(schema, [1, "a", 2]) and not grammar_admits(schema, ["a", 1])
    counted = {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}, "minItems": 2,
               "maxItems": 3}
    assert grammar_admits(counted, [1, True]) and grammar_admits(counted, [1, True, False])
    assert not grammar_admits(counted, [1]) and not grammar_admits(counted, [1, True, True, True])
    assert not grammar_admits(counted, [1, 2])


def test_const_and_enum_compare_as_json() -> None:
    assert grammar_admits({"const": {"a": [1, {"b": None}], "c": 2}}, {"c": 2.0, "a": [1.0, {"b": None}]})
    assert not grammar_admits({"const": {"a": 1}}, {"a": True})
    assert grammar_admits({"enum": [[0], "x"]}, [0.0]) and not grammar_admits({"enum": [[0], "x"]}, [False])
    assert not grammar_admits({"type": "string", "enum": ["a", 1]}, 1)


def test_a_schema_without_type_constrains_only_the_types_its_keywords_speak_of() -> None:
    schema = {"minimum": 3, "maxLength": 2}
    assert grammar_admits(schema, 4) and not grammar_admits(schema, 2)
    assert grammar_admits(schema, "ab") and not grammar_admits(schema, "abc")
    assert grammar_admits(schema, None) and grammar_admits(schema, [1, "x"])


def test_references_to_the_root_pointers_and_anchors() -> None:
    tree = {"type": "object", "properties": {"value": {"type": "integer"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["value"]}
    assert admits(tree, '{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}')
    assert not admits(tree, '{"value": 1, "children": [{"value": "x"}]}', check=False)
    pointer = {"type": "object", "properties": {"a": {"type": "integer", "maximum": 3}, "b": {"$ref": "#/properties/a"}}}
    assert admits(pointer, '{"a": 1, "b": 2}') and not admits(pointer, '{"a": 1, "b": 4}', check=False)
    anchored = {"type": "object", "properties": {"n": {"$ref": "#small"}},
                "$defs": {"s": {"$anchor": "small", "type": "integer", "maximum": 9}}}
    assert admits(anchored, '{"n": 9}') and not admits(anchored, '{"n": 10}', check=False)
    with pytest.raises(UnsupportedSchema) as err:
        admits({"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}, "{}")
    assert err.value.keyword == "$ref" and err.value.path == "/properties/x"


def test_undeclared_keys_follow_declared_ones_where_the_schema_allows_them() -> None:
    declared = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert admits(declared, '{"a": 1}') and not admits(declared, '{"a": 1, "b": 2}')  # the tool-call rule
    opened = {**declared, "additionalProperties": {"type": "string"}}
    assert admits(opened, '{"a": 1, "b": "x"}') and not admits(opened, '{"a": 1, "b": 2}', check=False)
    # An undeclared key is never a declared one written again.
    assert not admits(opened, '{"a": 1, "a": "x"}', check=False)
    patterned = {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
    assert admits(patterned, '{"x-a": 1}') and not admits(patterned, '{"y": 1}', check=False)
    named = {"type": "object", "propertyNames": {"maxLength": 3}}
    assert admits(named, '{"abc": 1}') and not admits(named, '{"abcd": 1}', check=False)
    counted = {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}
    assert admits(counted, '{"a": 1}') and not admits(counted, "{}", check=False)
    assert not admits(counted, '{"a": 1, "b": 2, "c": 3}', check=False)


def test_not_of_types_is_grammar_and_other_nots_are_checked() -> None:
    assert not grammar_admits({"not": {"type": "string"}}, "x") and grammar_admits({"not": {"type": "string"}}, 3)
    schema = one({"type": "array", "not": {"contains": {"const": 1}}})
    assert admits(schema, '{"v": [2]}') and admits(schema, '{"v": [1]}', check=False) and not admits(schema, '{"v": [1]}')


def test_contains_gets_its_own_slots_and_if_then_else_its_branches() -> None:
    has_two = {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}, "minContains": 2}
    assert grammar_admits(has_two, [1, 10, 3, 12]) and grammar_admits(has_two, [10, 11])
    assert not grammar_admits(has_two, [1, 10, 3]) and not grammar_admits(has_two, [])
    switch = {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "n": {}}, "required": ["kind", "n"],
              "if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"n": {"type": "integer"}}},
              "else": {"properties": {"n": {"type": "string"}}}}
    assert admits(switch, '{"kind": "a", "n": 1}') and admits(switch, '{"kind": "b", "n": "x"}')
    assert not admits(switch, '{"kind": "a", "n": true}', check=False)  # neither branch admits it
    assert not admits(switch, '{"kind": "b", "n": 1}', check=False)
    # Down "else", the grammar cannot say that "if" failed: the check can.
    assert admits(switch, '{"kind": "a", "n": "x"}', check=False) and not admits(switch, '{"kind": "a", "n": "x"}')


def test_unevaluated_keywords_close_what_the_applicators_declared() -> None:
    closed = {"type": "object", "allOf": [{"properties": {"a": {"type": "integer"}}}],
              "properties": {"b": {"type": "integer"}}, "unevaluatedProperties": False}
    assert admits(closed, '{"b": 1, "a": 2}') and not admits(closed, '{"b": 1, "c": 2}', check=False)
    tuple_ = {"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": False}
    assert grammar_admits(tuple_, ["x"]) and not grammar_admits(tuple_, ["x", 1])


def test_the_report_lists_every_keyword_and_who_enforces_it() -> None:
    schema = one({"type": "array", "items": {"type": "string", "format": "uri", "x-extra": 1},
                  "uniqueItems": True, "maxItems": 3})
    report = {(e.path, e.keyword): e.enforcement for e in schema_report(schema)}
    assert report[("/properties/v", "maxItems")] is Enforcement.GRAMMAR
    assert report[("/properties/v", "uniqueItems")] is Enforcement.CHECKED
    assert report[("/properties/v/items", "format")] is Enforcement.CHECKED
    assert report[("/properties/v/items", "x-extra")] is Enforcement.UNSUPPORTED
    assert [(e.path, e.keyword) for e in unsupported(schema)] == [("/properties/v/items", "x-extra")]
    assert unsupported(one({"type": "string", "format": "no-such-format"}))[0].keyword == "format"


class Address(BaseModel):
    zip: str = Field(pattern=r"^\d{5}$")
    floor: int = Field(ge=0, le=200)


class Booking(BaseModel):
    month: int = Field(ge=1, le=12)
    year: int = Field(ge=1900, le=2100)
    guests: int = Field(gt=0, multiple_of=2)
    price: float = Field(ge=0, lt=10000)
    day: dt.date
    at: dt.datetime
    ref: uuid.UUID
    seat: tuple[int, str]
    tags: set[str]
    amount: Decimal
    address: Address
    stops: list[Address]
    code: Annotated[str, Field(min_length=2, max_length=4)]


GOOD = {"month": 3, "year": 2024, "guests": 2, "price": 9.5, "day": "2024-02-29", "at": "2024-02-29T10:00:00Z",
        "ref": str(uuid.UUID(int=5)), "seat": [3, "A"], "tags": ["x"], "amount": "1.5",
        "address": {"zip": "12345", "floor": 2}, "stops": [{"zip": "54321", "floor": 0}], "code": "AB"}
BROKEN: list[tuple[str, Any]] = [("month", 13), ("month", 0), ("year", 3000), ("guests", 0), ("guests", 3), ("price", -1), ("price", 10000),
          ("day", "yesterday"), ("day", "2024-02-30"), ("at", "soon"), ("ref", "abc"), ("seat", [3]),
          ("seat", ["A", 3]), ("seat", [3, "A", 4]), ("tags", ["x", "x"]),
          ("address", {"zip": "1234", "floor": 2}), ("address", {"zip": "12345", "floor": 201}),
          ("stops", [{"zip": "x", "floor": 0}]), ("code", "A"), ("code", "ABCDE")]
# Valid under the schema pydantic writes (a Decimal is any number or string), refused by the model.
MODEL_ONLY: list[tuple[str, Any]] = [("amount", "lots")]


def test_parameter_models_as_users_write_them_admit_no_invalid_call() -> None:
    schema = Booking.model_json_schema()
    assert admits(schema, json.dumps(GOOD))
    admitted = [(k, v) for k, v in BROKEN if admits(schema, json.dumps({**GOOD, k: v}))]
    assert admitted == []
    by_grammar = [(k, v) for k, v in BROKEN if admits(schema, json.dumps({**GOOD, k: v}), check=False)]
    # What the grammar lets through is what it cannot count: multiples, a month's days, uniqueness.
    assert {k for k, _ in by_grammar} <= {"guests", "day", "tags", "price", "amount"}


def test_a_tool_from_a_pydantic_model_is_checked_by_the_model_too() -> None:
    tool = Tool.from_model(Booking, lambda booking: "ok", name="book")
    assert tool.violations(GOOD) == []
    for key, value in MODEL_ONLY:
        assert admits(tool.parameters, json.dumps({**GOOD, key: value}))
        found = tool.violations({**GOOD, key: value})
        assert found and found[0].pointer == f"/{key}" and found[0].keyword.startswith("pydantic:")
    for key, value in BROKEN:
        assert tool.violations({**GOOD, key: value}), key


SCHEMAS = [
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": -50, "maximum": 50},
                                      "s": {"type": "string", "pattern": "^[a-c]{1,4}$"}}, "required": ["n"]},
    {"type": "object", "properties": {"x": {"type": "number", "minimum": 0, "maximum": 100},
                                      "t": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3}}},
    {"type": "object", "properties": {"d": {"type": "string", "format": "date"},
                                      "u": {"type": "string", "format": "uuid"},
                                      "o": {"type": "object", "additionalProperties": {"type": "boolean"}}},
     "required": ["d"]},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_valid_instances_are_admitted(schema: dict[str, Any], data: st.DataObject) -> None:
    value: Any = data.draw(from_schema(schema))
    # hypothesis-jsonschema knows draft 7's formats; others (uuid) it draws as any string.
    assume(not violations("t", schema, value))
    ordered = {k: value[k] for k in schema["properties"] if k in value}
    assert admits(schema, json.dumps(ordered, ensure_ascii=False)), ordered


@pytest.mark.parametrize(("schema", "key", "breaks"), [
    (SCHEMAS[0], "n", [51, -51, "1", 1.5]),
    (SCHEMAS[0], "s", ["abcd" + "a", "d", ""]),
    (SCHEMAS[1], "x", [-0.5, 101, "1"]),
    (SCHEMAS[2], "d", ["2024-1-1", "", "today"]),
])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_instances_broken_in_one_keyword_are_rejected(schema: dict[str, Any], key: str, breaks: list[Any],
                                                      data: st.DataObject) -> None:
    value: Any = data.draw(from_schema(schema))
    value[key] = data.draw(st.sampled_from(breaks))
    ordered = {k: value[k] for k in schema["properties"] if k in value}
    assert not admits(schema, json.dumps(ordered)), ordered


def test_schema_check_prints_who_enforces_each_keyword(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"type": "function", "function": {"name": "book", "parameters": {
        "type": "object", "properties": {"month": {"type": "integer", "minimum": 1, "maximum": 12},
                                         "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                                         "shade": {"type": "string", "format": "shade"}}}}}
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([spec]))
    assert cli_main(["schema", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"/properties/month maximum\s+grammar\n", out)
    assert re.search(r"/properties/tags uniqueItems\s+checked after decoding\n", out)
    assert re.search(r"/properties/shade format\s+unsupported\n", out)
    assert cli_main(["schema", "check", str(path), "--strict"]) == 1
    assert cli_main(["schema", "check", "localtools.examples:ALL", "--strict"]) == 0
    remote = tmp_path / "remote.json"
    remote.write_text(json.dumps({"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}))
    assert cli_main(["schema", "check", str(remote)]) == 1
    assert "refused" in capsys.readouterr().out


def test_strict_schema_refuses_the_tool_up_front() -> None:
    from localtools import Model
    from localtools.backends.scripted import ScriptedBackend

    shade = {"type": "function", "function": {"name": "paint", "parameters": {
        "type": "object", "properties": {"color": {"type": "string", "format": "shade"}}}}}
    model = Model(ScriptedBackend(["fine"]), family="qwen2.5", strict_schema=True)
    with pytest.raises(UnsupportedSchema) as err:
        model.chat([{"role": "user", "content": "paint"}], tools=[shade])
    assert (err.value.keyword, err.value.path) == ("format", "/properties/color")
