"""The grammar admits what the report says it does: undeclared keys are never declared ones, keys
a branch declares are declared, numbers are finite doubles of any length, strings are UTF-8,
keyword pairs the grammar cannot intersect are the check's, building is bounded, and no value
that breaks a keyword labelled ``grammar`` is admitted by the grammar alone."""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from localtools import UnsupportedSchema, get_family
from localtools.grammar import Enforcement, admits, build_grammar, matches, schema_report
from localtools.grammar._admits import _grammar
from localtools.grammar._check import ecma_format_checker
from localtools.grammar._ranges import EXPONENT_BANDS, MAX_DIGITS
from localtools.grammar._schema import MAX_DEPTH, MAX_NODES


def one(schema: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"v": schema}, "required": ["v"]}


def grammar_admits(schema: Any, value_text: str) -> bool:
    return admits(one(schema), '{"v": ' + value_text + "}", check=False)


def labels(schema: dict[str, Any]) -> dict[tuple[str, str], Enforcement]:
    return {(e.path, e.keyword): e.enforcement for e in schema_report(schema)}


# -- 1. an undeclared key is never a declared one ----------------------------------------------

KEY = st.text(alphabet=st.sampled_from(["a", "b", "é", "中", "😀", '"', "\\", "\n", " ", "\x00"]), max_size=3)


@settings(max_examples=120, deadline=None)
@given(keys=st.lists(KEY, min_size=1, max_size=5, unique=True), probe=KEY)
def test_an_undeclared_key_is_none_of_the_declared_ones(keys: list[str], probe: str) -> None:
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in keys}, "additionalProperties": True}
    for key in keys:
        # A declared key with a value its schema refuses: only an undeclared key could carry it.
        assert not admits(schema, json.dumps({key: 7}), check=False), key
        twice = "{" + json.dumps(key) + ': "x", ' + json.dumps(key) + ": 7}"
        assert not admits(schema, twice, check=False), key
    if probe not in keys:
        assert admits(schema, json.dumps({probe: 7}, ensure_ascii=False), check=False), probe


def test_a_declared_key_cannot_come_back_as_an_escape() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}
    g = _grammar(json.dumps(schema))
    assert matches(g, '{"b": 7}') and not matches(g, '{"a": 7}')
    assert not matches(g, '{"\\u0061": 7}')  # keys go in their one canonical spelling
    assert matches(g, '{"": 7}') and matches(g, '{"aa": 7}')
    with_names = {**schema, "propertyNames": {"maxLength": 3}}
    assert not admits(with_names, '{"a": 7}', check=False) and admits(with_names, '{"b": 7}', check=False)
    assert labels(with_names)[("", "propertyNames")] is not Enforcement.GRAMMAR


def test_property_names_hold_declared_keys_too() -> None:
    schema = {"type": "object", "properties": {"abcd": {"type": "integer"}, "ok": {"type": "integer"}},
              "propertyNames": {"maxLength": 3}}
    assert not admits(schema, '{"abcd": 1}', check=False) and admits(schema, '{"ok": 1}', check=False)
    with pytest.raises(UnsupportedSchema) as err:
        schema_report({**schema, "required": ["abcd"]})
    assert err.value.keyword == "propertyNames"


# -- 2. keys declared in if/then/else ----------------------------------------------------------

def test_keys_declared_only_in_a_branch_are_declared() -> None:
    bare = {"if": {"properties": {"a": {"const": "m"}}}, "then": {"properties": {"b": {"type": "integer"}}}}
    assert admits(bare, '{"a": "m", "b": 1}') and not admits(bare, '{"a": "m", "b": "x"}')
    typed = {"type": "object", "properties": {"a": {"type": "string"}}, **bare}
    assert admits(typed, '{"a": "m", "b": 1}') and admits(typed, '{"a": "x"}')
    assert admits(typed, '{"a": "x", "b": "y"}')  # "if" fails: "then" says nothing of b
    assert not admits(typed, '{"a": "m", "b": "x"}')  # the check: down "then", b is an integer
    assert not admits(typed, '{"a": "m", "c": 1}', check=False)  # declared nowhere: the tool-call rule
    both = {**typed, "else": {"properties": {"c": {"type": "boolean"}}, "required": ["c"]}}
    assert admits(both, '{"a": "m", "b": 1}') and admits(both, '{"a": "x", "c": true}')
    assert not admits(both, '{"a": "x"}') and not admits(both, '{"a": "x", "c": 1}', check=False)
    only_else = {"type": "object", "properties": {"a": {"type": "string"}}, "if": bare["if"],
                 "else": {"properties": {"c": {"type": "integer"}}}}
    assert admits(only_else, '{"a": "x", "c": 1}') and admits(only_else, '{"a": "m"}')
    report = labels(both)
    assert report[("/then/properties/b", "type")] is not Enforcement.GRAMMAR
    assert report[("/else", "required")] is not Enforcement.GRAMMAR


# -- 3. numbers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["12345678901234567", "-0.00043980704500964934", json.dumps(0.1 + 0.2),
                                  json.dumps(1e300), json.dumps(-1.5e-300), json.dumps(2.0 ** 70), "1E+2", "0.5e307",
                                  "9" * MAX_DIGITS, "1" + "0" * 200 + ".5e-3", "3.14159265358979323846264338327950288"])
def test_long_numbers_are_admitted(text: str) -> None:
    assert grammar_admits({"type": "number"}, text) and admits(one({"type": "number"}), '{"v": ' + text + "}")
    assert grammar_admits({}, text)


@pytest.mark.parametrize("text", ["1e999", "-1e400", "9" * 400, "1" + "0" * MAX_DIGITS, "1e308", "12e307",
                                  "0.1e309", "1" * 300 + "e9"])
def test_numbers_past_a_double_are_outside_the_grammar(text: str) -> None:
    for schema in ({"type": "number"}, {}, {"type": "number", "minimum": 0}, {"type": "number", "maximum": 0},
                   {"type": "integer"}):
        assert not grammar_admits(schema, text), (schema, text)
        assert not grammar_admits(schema, "-" + text), (schema, text)


def test_integers_have_no_digit_cap_below_a_double() -> None:
    assert grammar_admits({"type": "integer"}, "12345678901234567") and grammar_admits({"type": "integer"}, "9" * 308)
    assert grammar_admits({"type": "integer", "minimum": 5}, "123456789012345678901")
    assert not grammar_admits({"type": "integer", "maximum": 10 ** 20}, str(10 ** 20 + 1))
    assert grammar_admits({"type": "number", "minimum": -1, "maximum": 1}, "-0.00043980704500964934")
    assert grammar_admits({"type": "number", "minimum": 3}, "1e+16") and not grammar_admits(
        {"type": "number", "minimum": 3}, "0.1e1")


NUMBER = st.from_regex(r"\A-?(0|[1-9][0-9]{0,320})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,4})?\Z")


@settings(max_examples=300, deadline=None)
@given(text=NUMBER)
def test_every_admitted_number_is_a_finite_double(text: str) -> None:
    if grammar_admits({"type": "number"}, text):
        assert math.isfinite(float(text)), text
    if grammar_admits({"type": "number", "minimum": 0}, text):
        assert math.isfinite(float(text)) and float(text) >= 0, text


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: abs(x) < 1e308))
def test_what_json_dumps_writes_for_a_float_is_admitted(x: float) -> None:
    assert grammar_admits({"type": "number"}, json.dumps(x)), json.dumps(x)
    low = {"type": "number", "minimum": -1e300}
    assert x < -1e300 or grammar_admits(low, json.dumps(x)), json.dumps(x)


def test_the_exponent_bands_keep_numbers_below_1e308() -> None:
    for low, high, digits in EXPONENT_BANDS:
        assert digits + high <= 308 and low <= high
        assert grammar_admits({"type": "number"}, "9" * digits + "e" + str(high))


# -- 4. strings are UTF-8 -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ['"\\ud800"', '"\\udc00"', '"\\ud800x"', '"\\ud800\\u0041"', '"\\uDBFF"',
                                  '"a\\udfff"', '"\\ud83d\\ud83d"'])
def test_a_lone_surrogate_is_no_string(text: str) -> None:
    for schema in ({"type": "string"}, {}, {"type": "string", "maxLength": 5}):
        assert not grammar_admits(schema, text), (schema, text)
    free = {"type": "object", "additionalProperties": True}
    assert not admits(free, "{" + text + ": 1}", check=False)
    g = build_grammar(get_family("qwen2.5"), [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}}}], "required")
    assert not matches(g, '<tool_call>\n{"name": "f", "arguments": {"s": ' + text + "}}\n</tool_call>")
    raw = json.loads(text)  # the lone surrogate as a Python character
    assert not matches(g, '<tool_call>\n{"name": "f", "arguments": {"s": "' + raw + '"}}\n</tool_call>')


def test_a_surrogate_pair_is_one_character() -> None:
    for text in ('"\\ud83d\\ude00"', '"x\\uD83D\\uDE00y"', '"\\u00e9\\uffff"'):
        assert grammar_admits({"type": "string"}, text), text
    assert grammar_admits({"type": "string", "maxLength": 1}, '"\\ud83d\\ude00"')
    g = build_grammar(get_family("qwen2.5"), [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]}}}], "required")
    assert matches(g, '<tool_call>\n{"name": "f", "arguments": {"s": "\\ud83d\\ude00"}}\n</tool_call>')


# -- 5. keywords the grammar cannot intersect ---------------------------------------------------

@pytest.mark.parametrize(("schema", "kept", "left"), [
    ({"type": "string", "pattern": "^a", "format": "uuid"}, "pattern", ["format"]),
    ({"type": "string", "pattern": "^a", "maxLength": 2}, "pattern", ["maxLength"]),
    ({"type": "string", "format": "ipv4", "minLength": 9}, "format", ["minLength"]),
    ({"type": "string", "pattern": "^a", "format": "date", "minLength": 3}, "pattern", ["format", "minLength"]),
])
def test_one_string_keyword_in_the_grammar_the_others_checked(schema: dict[str, Any], kept: str,
                                                              left: list[str]) -> None:
    report = labels(one(schema))
    assert report[("/properties/v", kept)] is Enforcement.GRAMMAR
    for keyword in left:
        assert report[("/properties/v", keyword)] is Enforcement.CHECKED
    assert grammar_admits(schema, '"abc"') == (kept == "pattern")
    assert not admits(one(schema), '{"v": "abc"}')


# -- 6. bounded cost ----------------------------------------------------------------------------

def size_of(schema: dict[str, Any]) -> int:
    """The rendered GBNF's length, or -1 where the schema is refused by name."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    try:
        return len(build_grammar(get_family("qwen2.5"), tools, "required").to_gbnf())
    except UnsupportedSchema as exc:
        assert exc.keyword and exc.path is not None
        return -1


def nested_const(depth: int) -> Any:
    value: Any = {"k1": "x" * 40, "k2": [1, 2.5, None], "k3": True, "k4": "y" * 40}
    for i in range(depth):
        value = {"a": value, "b": {"c": i, "d": "z" * 30}, "e": [value], "f": "w" * 20}
    return value


def test_nested_consts_build_linearly() -> None:
    for depth in (1, 2, 3, 4):
        value = nested_const(depth)
        schema = one({"const": value})
        n = size_of(schema)
        # Every key order of every object, each as its own rules: linear in the value's size.
        assert 0 < n <= 400 * len(json.dumps(value)), (depth, n)
        ordered = json.dumps({"v": value})
        assert admits(schema, ordered)
        shuffled = {"v": dict(reversed(list(value.items())))}
        assert admits(schema, json.dumps(shuffled), check=False)
    wide = {f"k{i}": i for i in range(30)}
    schema = one({"const": wide})
    assert 0 < size_of(schema) < 20_000
    backwards = json.dumps({"v": dict(reversed(list(wide.items())))})
    assert admits(schema, backwards)  # any key order, and the check holds each key once
    assert not admits(schema, json.dumps({"v": {**wide, "k0": 1}}))
    assert labels(schema)[("/properties/v", "const")] is Enforcement.NARROWED


def test_a_wide_enum_builds_in_bounded_size() -> None:
    values = [f"value-{i:05d}" for i in range(5000)]
    schema = one({"enum": values})
    n = size_of(schema)
    assert 0 < n <= 2 * len(json.dumps(values)) + 5_000
    assert admits(schema, '{"v": "value-04999"}') and not admits(schema, '{"v": "value-5000"}', check=False)
    objects = one({"enum": [{"a": i, "b": str(i), "c": [i], "d": None, "e": i} for i in range(3000)]})
    assert 0 < size_of(objects) <= 4_000_000
    assert admits(objects, '{"v": {"e": 7, "a": 7, "b": "7", "c": [7], "d": null}}')


@pytest.mark.parametrize("kind", ["object", "array", "anyOf"])
def test_deep_nesting_builds_or_is_refused_by_name(kind: str) -> None:
    leaf: Any = {"type": "integer"}
    for _ in range(200):
        leaf = {"object": {"type": "object", "properties": {"n": leaf}},
                "array": {"type": "array", "items": leaf},
                "anyOf": {"anyOf": [leaf, {"type": "null"}]}}[kind]
    schema = one(leaf)
    with pytest.raises(UnsupportedSchema) as err:
        schema_report(schema)
    assert err.value.keyword in ("properties", "items", "anyOf") and str(MAX_DEPTH) in str(err.value)
    shallow: Any = {"type": "integer"}
    for _ in range(MAX_DEPTH - 4):
        shallow = {"type": "array", "items": shallow}
    assert 0 < size_of(one(shallow)) < 20_000


def test_five_hundred_branches_and_the_node_cap() -> None:
    branches = [{"type": "object", "properties": {f"k{i}": {"const": i}}, "required": [f"k{i}"]} for i in range(500)]
    schema = one({"anyOf": branches})
    assert 0 < size_of(schema) <= 200_000
    assert admits(schema, '{"v": {"k499": 499}}') and not admits(schema, '{"v": {"k499": 1}}', check=False)
    # Past MAX_NODES expression nodes (540,000 enum values here) the schema is refused, by name.
    huge = one({"anyOf": [{"enum": [f"{i}-{j}" for j in range(9000)]} for i in range(60)]})
    with pytest.raises(UnsupportedSchema) as err:
        schema_report(huge)
    assert (err.value.keyword, err.value.path.rsplit("/", 1)[0]) == ("anyOf", "/properties/v/anyOf")
    assert str(MAX_NODES) in str(err.value)


# -- 7. the report is true: no value breaking a keyword labelled grammar is admitted -------------

def _ids(node: Any, path: str, out: dict[int, str]) -> None:
    if isinstance(node, dict):
        out[id(node)] = path
        for k, v in node.items():
            _ids(v, path + "/" + str(k).replace("~", "~0").replace("/", "~1"), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _ids(v, f"{path}/{i}", out)


def broken_grammar_keywords(schema: dict[str, Any], instance: Any) -> list[tuple[str, str]]:
    """The keywords labelled grammar that ``instance`` breaks (as jsonschema reports them)."""
    try:
        report = labels(schema)
    except UnsupportedSchema:
        return []
    ids: dict[int, str] = {}
    _ids(schema, "", ids)
    cls = jsonschema.Draft202012Validator
    validator = cls(schema, format_checker=ecma_format_checker(cls.FORMAT_CHECKER))
    out = []
    for error in validator.iter_errors(instance):
        where = ids.get(id(error.schema))
        if where is not None and report.get((where, str(error.validator))) is Enforcement.GRAMMAR:
            out.append((where, str(error.validator)))
    return out


def _declared(schema: Any) -> dict[str, Any]:
    """The properties ``schema`` declares, with those of its allOf/anyOf/then/else parts after."""
    if not isinstance(schema, dict):
        return {}
    out = dict(schema.get("properties") or {})
    for key in ("allOf", "anyOf"):
        for part in schema.get(key) or []:
            out.update({k: v for k, v in _declared(part).items() if k not in out})
    for key in ("if", "then", "else"):
        out.update({k: v for k, v in _declared(schema.get(key)).items() if k not in out})
    return out


def ordered(value: Any, schema: Any) -> Any:
    """``value`` with its keys in schema order, as a model under the grammar writes them: a value
    the grammar rejects then breaks more than key order."""
    if isinstance(value, dict):
        props = _declared(schema)
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: ordered(value[k], props.get(k)) for k in keys}
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [ordered(v, items) for v in value]
    return value


def assert_true_report(schema: dict[str, Any], instance: Any) -> None:
    broken = broken_grammar_keywords(schema, instance)
    if broken:
        text = json.dumps(ordered(instance, schema), ensure_ascii=False)
        assert not admits(schema, text, check=False), (schema, text, broken)


# One schema per keyword the grammar takes on, and values that break it alone.
BROKEN: list[tuple[dict[str, Any], list[Any]]] = [
    (one({"type": "integer"}), [{"v": 1.5}, {"v": "1"}, {"v": True}]),
    (one({"type": ["string", "null"]}), [{"v": 1}, {"v": []}]),
    (one({"enum": ["a", 1, [1], {"x": 1, "y": 2}]}), [{"v": "b"}, {"v": [2]}, {"v": {"x": 1}}, {"v": True}]),
    (one({"const": {"a": [1, {"b": None}], "c": 2}}), [{"v": {"a": [1, {"b": 0}], "c": 2}}, {"v": {"a": [1]}}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}, [{}, {"a": "x"}]),
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": False}, [{"a": 1, "b": 2}]),
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}}, [{"a": 1, "b": "x"}]),
    (one({"type": "integer", "minimum": 3, "exclusiveMaximum": 9}), [{"v": 2}, {"v": 9}, {"v": -3}]),
    (one({"type": "number", "minimum": 2}), [{"v": 1.99}, {"v": -5}, {"v": 1e-5}]),
    (one({"type": "string", "minLength": 2, "maxLength": 3}), [{"v": "a"}, {"v": "abcd"}, {"v": "😀"}]),
    (one({"type": "string", "pattern": "^[a-c]+$", "maxLength": 2}), [{"v": "abd"}, {"v": "A"}]),
    (one({"type": "string", "format": "uuid", "maxLength": 3}), [{"v": "abc"}]),
    (one({"type": "string", "format": "ipv4"}), [{"v": "256.0.0.1"}]),
    (one({"type": "array", "prefixItems": [{"type": "integer"}], "items": False}), [{"v": [1, 2]}, {"v": ["x"]}]),
    (one({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}),
     [{"v": []}, {"v": [1, 2, 3]}, {"v": ["x"]}]),
    (one({"type": "array", "contains": {"type": "integer", "multipleOf": 2}}), [{"v": [1]}, {"v": []}]),
    (one({"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 2}),
     [{"v": [1]}, {"v": [1, 2, 3]}]),
    (one({"anyOf": [{"type": "integer", "multipleOf": 2}, {"type": "string"}]}), [{"v": 3}, {"v": None}]),
    (one({"anyOf": [{"type": "integer", "maximum": 2}, {"type": "string", "maxLength": 1}]}), [{"v": 3}, {"v": "ab"}]),
    (one({"not": {"type": "string"}}), [{"v": "x"}]),
    ({"type": "object", "properties": {"a": {"type": "string"}},
      "if": {"properties": {"a": {"const": "m"}}}, "then": {"properties": {"b": {"type": "integer"}}},
      "else": {"properties": {"b": {"type": "string"}}}}, [{"a": "m", "b": "x"}, {"a": "n", "b": 1}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^a": {"type": "string"}}},
     [{"a": "x"}, {"a": 1}]),
    ({"type": "object", "properties": {"abcd": {"type": "integer"}}, "propertyNames": {"maxLength": 3},
      "additionalProperties": True}, [{"abcd": 1}, {"abcde": 1}]),
    (one({"type": "integer", "allOf": [{"maximum": 3}, {"minimum": 1}]}), [{"v": 4}, {"v": 0}]),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/small"}}, "$defs": {"small": {"type": "integer",
                                                                                          "maximum": 9}}},
     [{"a": 10}]),
    (one({"type": ["integer", "number"], "maximum": 5.5}), [{"v": 5.7}, {"v": 6}]),
]


@pytest.mark.parametrize(("schema", "instances"), BROKEN)
def test_values_breaking_a_grammar_keyword_are_not_admitted(schema: dict[str, Any], instances: list[Any]) -> None:
    for instance in instances:
        cls = jsonschema.Draft202012Validator
        assert not cls(schema, format_checker=ecma_format_checker(cls.FORMAT_CHECKER)).is_valid(instance), instance
        assert_true_report(schema, instance)


def test_old_draft_keywords_are_unsupported() -> None:
    report = labels(one({"type": "array", "items": [{"type": "integer"}], "additionalItems": False}))
    assert report[("/properties/v", "additionalItems")] is Enforcement.UNSUPPORTED
    report = labels({"type": "object", "properties": {"a": {}}, "dependencies": {"a": ["b"]}})
    assert report[("", "dependencies")] is Enforcement.UNSUPPORTED


def test_an_any_of_is_grammar_only_where_its_branches_are() -> None:
    exact = labels(one({"anyOf": [{"type": "integer", "maximum": 3}, {"type": "null"}]}))
    assert exact[("/properties/v", "anyOf")] is Enforcement.GRAMMAR
    loose = labels(one({"anyOf": [{"type": "integer", "multipleOf": 3}, {"type": "null"}]}))
    assert loose[("/properties/v", "anyOf")] is Enforcement.NARROWED


JSON = st.recursive(st.none() | st.booleans() | st.integers(-20, 20) | st.floats(-30, 30, allow_nan=False)
                    | st.sampled_from(["", "a", "ab", "abc", "abcd", "2024-01-31", "1.2.3.4", "x y", "😀"]),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "c", "ab"]),
                                                                               kids, max_size=3),
                    max_leaves=6)

LEAF_SCHEMAS = st.sampled_from([
    {"type": "integer"}, {"type": "string"}, {"type": "number", "minimum": 0}, {"type": "integer", "maximum": 3},
    {"type": "string", "maxLength": 2}, {"type": "string", "pattern": "^a"}, {"type": "string", "format": "date"},
    {"enum": ["a", 1, None]}, {"const": {"a": 1}}, {"type": "boolean"}, {"type": ["string", "null"]},
    {"not": {"type": "integer"}}, {"type": "string", "pattern": "b", "minLength": 3}, {"minimum": 2, "maxLength": 1},
    {"type": "number", "multipleOf": 2}, {},
])


def _object_schema(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(["a", "b", "c", "ab"])
    return st.builds(
        lambda props, req, extra, names, cond: {
            "type": "object", "properties": props, "required": [k for k in req if k in props],
            **({"additionalProperties": extra} if extra is not None else {}),
            **({"propertyNames": {"maxLength": 1}} if names else {}),
            **({"if": {"properties": {"a": {"type": "integer"}}}, "then": cond} if cond is not None else {})},
        st.dictionaries(keys, kids, max_size=3), st.lists(keys, max_size=2),
        st.one_of(st.none(), st.booleans(), kids), st.booleans(),
        st.one_of(st.none(), st.builds(lambda k, s: {"properties": {k: s}}, keys, kids)))


SCHEMAS = st.recursive(LEAF_SCHEMAS, lambda kids: st.one_of(
    _object_schema(kids),
    st.builds(lambda items, lo, hi: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + hi},
              kids, st.integers(0, 2), st.integers(0, 2)),
    st.builds(lambda a, b: {"anyOf": [a, b]}, kids, kids),
    st.builds(lambda a, b: {"allOf": [a, b]}, kids, kids),
    st.builds(lambda c, m: {"type": "array", "contains": c, "minContains": m}, kids, st.integers(1, 2)),
), max_leaves=5)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(schema=SCHEMAS, instance=JSON)
# A declared key propertyNames bars ("ab", two characters) came back as an undeclared one.
@example(schema={"type": "object", "properties": {"ab": {"type": "integer"}, "a": {"type": "integer"}}, "required": [],
                 "additionalProperties": True, "propertyNames": {"maxLength": 1}}, instance={"ab": None})
def test_random_schemas_and_values_the_report_is_true(schema: Any, instance: Any) -> None:
    params = one(schema)
    assume(not jsonschema.Draft202012Validator(params).is_valid({"v": instance}))
    assert_true_report(params, {"v": instance})
