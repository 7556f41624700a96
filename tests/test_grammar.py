from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localtools import get_family
from localtools.families._families import Family, families
from localtools.grammar import Grammar, Text, build_grammar, call_shape, matches, parse_gbnf

CUSTOMER = {
    "type": "function",
    "function": {
        "name": "get_customer",
        "description": "Look up a customer.",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]},
    },
}


def one_tool(params: dict) -> list[dict]:
    return [{"type": "function", "function": {"name": "f", "description": "", "parameters": params}}]


def call(args: str) -> str:
    return '<tool_call>\n{"name": "f", "arguments": ' + args + "}\n</tool_call>"


CASES = [
    # (schema feature, parameters, accepted argument texts, rejected argument texts)
    ("required", {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
     ['{"a": "x"}'], ["{}", '{"b": "x"}', '{"a":"x"}', '{"a": "x", "a": "y"}']),
    ("optional keys in order", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
     ["{}", '{"a": 1}', '{"b": 2}', '{"a": 1, "b": 2}'], ['{"b": 2, "a": 1}', '{, "b": 2}', '{"a": 1,}']),
    ("types", {"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"},
                                                "b": {"type": "boolean"}, "z": {"type": "null"}},
               "required": ["i", "n", "b", "z"]},
     ['{"i": -3, "n": 2.5e-3, "b": true, "z": null}', '{"i": 0, "n": 7, "b": false, "z": null}'],
     ['{"i": 1.5, "n": 1, "b": true, "z": null}', '{"i": 01, "n": 1, "b": true, "z": null}',
      '{"i": 1, "n": 1, "b": "true", "z": null}']),
    ("enum", {"type": "object", "properties": {"u": {"enum": ["c", "f"]}}, "required": ["u"]},
     ['{"u": "c"}', '{"u": "f"}'], ['{"u": "k"}', '{"u": "C"}']),
    ("nested object", {"type": "object", "properties": {"o": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                              "required": ["x"]}}, "required": ["o"]},
     ['{"o": {"x": 1}}'], ['{"o": {}}', '{"o": {"x": 1, "y": 2}}']),
    ("array", {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
               "required": ["l"]},
     ['{"l": []}', '{"l": [1]}', '{"l": [1, 2]}'], ['{"l": [1, 2, 3]}', '{"l": ["a"]}', '{"l": [1,2]}']),
    ("string escapes", {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
     ['{"s": "a\\"b\\\\c\\n\\u00e9"}', '{"s": ""}'], ['{"s": "a"b"}', '{"s": "tab\tinside"}', '{"s": "\\q"}']),
    ("free-form dict", {"type": "object", "properties": {"d": {"type": "object", "additionalProperties": {"type": "integer"}}},
                        "required": ["d"]},
     ['{"d": {}}', '{"d": {"k": 1, "j": 2}}'], ['{"d": {"k": "v"}}']),
    ("nullable", {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}, "required": ["a"]},
     ['{"a": 1}', '{"a": null}'], ['{"a": "1"}']),
]


@pytest.mark.parametrize(("feature", "params", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_schema_features(feature: str, params: dict, good: list[str], bad: list[str]) -> None:
    g = build_grammar(get_family("qwen2.5"), one_tool(params), "required")
    for args in good:
        assert matches(g, call(args)), f"{feature}: should accept {args}"
    for args in bad:
        assert not matches(g, call(args)), f"{feature}: should reject {args}"


def test_tool_choice_modes() -> None:
    fam = get_family("qwen2.5")
    tools = [CUSTOMER, *one_tool({"type": "object", "properties": {}})]
    a_call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "c1"}}\n</tool_call>'
    f_call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    auto, required = build_grammar(fam, tools, "auto"), build_grammar(fam, tools, "required")
    none, named = build_grammar(fam, tools, "none"), build_grammar(fam, tools, "f")
    assert matches(auto, a_call) and matches(auto, "The plan is pro.")
    assert matches(auto, '{"name": "Ada", "plan": "pro"}')  # an echoed JSON result is text
    assert not matches(auto, '{"name": "get_customer", "arguments": {}}')  # a bare call must be valid
    # A pretty-printed call may not pass as text: it would be a call no grammar checked.
    assert not matches(auto, '{\n  "name": "get_customer", "arguments": {}}') and not matches(auto, "{ }")
    assert not matches(auto, "Let me call <tool_call> now") and not matches(auto, "")
    assert matches(required, a_call) and not matches(required, "The plan is pro.")
    assert matches(none, "The plan is pro.") and not matches(none, a_call)
    assert matches(named, f_call) and not matches(named, a_call)


def test_parallel_calls() -> None:
    fam = get_family("qwen2.5")
    two = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    assert matches(build_grammar(fam, one_tool({"type": "object", "properties": {}}), "required", True), two)
    assert not matches(build_grammar(fam, one_tool({"type": "object", "properties": {}}), "required", False), two)


@pytest.mark.parametrize("family", ["qwen2.5", "chatml", "llama3", "mistral", "gemma"])
def test_each_family_grammar_accepts_its_own_call(family: str) -> None:
    fam = get_family(family)
    key = fam.args_key
    body = '{"name": "get_customer", "' + key + '": {"customer_id": "c1"}' + (', "id": "abcDEF123"}' if fam.id == "alnum9" else "}")
    text = {"<tool_call>": f"<tool_call>\n{body}\n</tool_call>", "[TOOL_CALLS]": f"[TOOL_CALLS] [{body}]"}.get(
        fam.call_start, body
    )
    assert matches(build_grammar(fam, [CUSTOMER], "required"), text)


def natural(family: str) -> Family:
    """The family with the natural JSON layout, which the layout tests exercise whatever its default."""
    import dataclasses

    return dataclasses.replace(get_family(family), layout="natural")


def test_gbnf_snapshot() -> None:
    g = build_grammar(forms("call-tagged", "call-fenced", "call-bare", "list-fenced", "list-bare", layout="natural"),
                      [CUSTOMER], "required")
    assert g.to_gbnf() == (
        "root ::= calls\n"
        "calls ::= call (call-sep call){0,4} calls-close | list-fenced calls-close | list-bare calls-close\n"
        'call ::= "<tool_call>\\n" tool-call "\\n</tool_call>" | "```json\\n" tool-call "\\n```" | tool-call\n'
        'call-sep ::= "\\n"\n'
        'calls-close ::= "\\n"?\n'
        'list-fenced ::= "```json\\n[" ws-in tool-call (list-sep tool-call){0,4} ws-in "]\\n```"\n'
        'list-bare ::= "[" ws-in tool-call (list-sep tool-call){0,4} ws-in "]"\n'
        "tool-call ::= call-get-customer\n"
        'ws-in ::= ("\\n" [ \\t]{0,20})?\n'
        'list-sep ::= "," ws-sep\n'
        'call-get-customer ::= "{" ws-in "\\"name\\": \\"get_customer\\"," ws-sep "\\"arguments\\": " get-customer-args ws-in "}"\n'
        'ws-sep ::= " " | "\\n" [ \\t]{0,20}\n'
        'get-customer-args ::= "{" ws-in "\\"customer_id\\": " get-customer-args-customer-id ws-in "}"\n'
        "get-customer-args-customer-id ::= json-string\n"
        'json-string ::= "\\"" json-char* "\\""\n'
        # A \\u escape is a code point outside the surrogates, or a high surrogate and a low one.
        'json-char ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3,3} | '
        '[dD] [0-7] [0-9a-fA-F]{2,2} | [dD] [89abAB] [0-9a-fA-F]{2,2} "\\\\u" [dD] [c-fC-F] [0-9a-fA-F]{2,2}))\n'
    )


def test_compact_layout_is_json_dumps_style_only() -> None:
    import dataclasses

    compact = dataclasses.replace(get_family("qwen2.5"), layout="compact")
    g = build_grammar(compact, [CUSTOMER], "required")
    assert 'call-get-customer ::= "{\\"name\\": \\"get_customer\\", \\"arguments\\": " get-customer-args "}"' in g.to_gbnf()
    assert matches(g, '{"name": "get_customer", "arguments": {"customer_id": "c1"}}')
    assert not matches(g, '{\n  "name": "get_customer",\n  "arguments": {"customer_id": "c1"}\n}')


def test_natural_layout_admits_the_models_own_pretty_printing() -> None:
    import json

    g = build_grammar(natural("qwen2.5"), [CUSTOMER], "required")
    call = {"name": "get_customer", "arguments": {"customer_id": "c1"}}
    for indent in (None, 2, 4, "\t"):
        assert matches(g, json.dumps(call, indent=indent)), indent
        assert matches(g, "```json\n" + json.dumps(call, indent=indent) + "\n```"), indent
        assert matches(g, "<tool_call>\n" + json.dumps(call, indent=indent) + "\n</tool_call>"), indent
    # Bounded: two newlines in a row, or more than 20 spaces of indentation, are not a layout.
    assert not matches(g, '{\n\n  "name": "get_customer", "arguments": {"customer_id": "c1"}}')
    assert not matches(g, '{\n' + " " * 21 + '"name": "get_customer", "arguments": {"customer_id": "c1"}}')


def test_an_unknown_layout_is_a_template_error() -> None:
    import dataclasses

    from localtools._errors import TemplateError

    with pytest.raises(TemplateError, match="unknown JSON layout 'pretty'"):
        build_grammar(dataclasses.replace(get_family("qwen2.5"), layout="pretty"), [CUSTOMER], "required")


def test_gbnf_round_trip() -> None:
    g = build_grammar(get_family("mistral"), [CUSTOMER], "auto")
    again = parse_gbnf(g.to_gbnf())
    assert again.to_gbnf() == g.to_gbnf()


@pytest.mark.parametrize("family", ["qwen2.5", "chatml", "llama3", "mistral", "gemma"])
@pytest.mark.parametrize("choice", ["auto", "required", "none", "get_customer"])
def test_llama_cpp_accepts_every_grammar(family: str, choice: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    gbnf = build_grammar(get_family(family), [CUSTOMER, *one_tool({"type": "object", "properties": {}})], choice).to_gbnf()
    llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)


def forms(*names: str, layout: str = "compact", family: str = "qwen2.5") -> Family:
    import dataclasses

    return dataclasses.replace(get_family(family), call_forms=names, layout=layout)


NO_ARGS = one_tool({"type": "object", "properties": {}})
ONE = '{"name": "f", "arguments": {}}'


def test_call_forms_admit_only_the_listed_forms() -> None:
    tagged = forms("call-tagged")
    assert matches(build_grammar(tagged, NO_ARGS, "required"), f"<tool_call>\n{ONE}\n</tool_call>")
    for other in (ONE, f"```json\n{ONE}\n```", f"[{ONE}]"):
        assert not matches(build_grammar(tagged, NO_ARGS, "required"), other)
    fenced = forms("call-fenced")
    assert matches(build_grammar(fenced, NO_ARGS, "required"), f"```json\n{ONE}\n```")
    assert not matches(build_grammar(fenced, NO_ARGS, "required"), f"<tool_call>\n{ONE}\n</tool_call>")


def test_list_forms_hold_several_calls_up_to_the_bound() -> None:
    fam = forms("call-tagged", "list-fenced", "list-bare")
    g = build_grammar(fam, NO_ARGS, "required", max_parallel_calls=3)
    assert matches(g, f"[{ONE}, {ONE}]")
    assert matches(g, f"```json\n[{ONE}, {ONE}, {ONE}]\n```\n")
    assert not matches(g, f"[{ONE}, {ONE}, {ONE}, {ONE}]")
    assert not matches(g, "[]")
    # With one call allowed, a list holds one call.
    single = build_grammar(fam, NO_ARGS, "required", parallel_tool_calls=False)
    assert matches(single, f"[{ONE}]")
    assert not matches(single, f"[{ONE}, {ONE}]")


def test_list_forms_follow_the_layout() -> None:
    fam = forms("list-fenced", layout="natural")
    pretty = '```json\n[\n  {\n    "name": "f",\n    "arguments": {}\n  },\n  {"name": "f", "arguments": {}}\n]\n```'
    assert matches(build_grammar(fam, NO_ARGS, "required"), pretty)
    assert not matches(build_grammar(forms("list-fenced"), NO_ARGS, "required"), pretty)


def test_text_under_auto_may_not_open_like_any_admitted_form() -> None:
    g = build_grammar(forms("call-tagged", "call-fenced", "call-bare", "list-fenced", "list-bare"), NO_ARGS, "auto")
    for text in ("Sure.", "[1] is the first source", "{\"name\": \"Ada\", \"plan\": \"pro\"}", "a `code` span"):
        assert matches(g, text), text
    # Openings of a call or a list of calls in any layout are not text; nor is a fenced block
    # opening the reply (fenced calls are constrained, so text never starts with a backtick).
    for text in ('```json\n{\n  "name": "f"', "[{\"name\": \"f\"", "[\n  {", '{\n  "name": "f"', "```python\nx = 1"):
        assert not matches(g, text), text


def test_text_may_not_open_like_a_call_whose_name_runs_on() -> None:
    """'{"name": "get_customer_plan", ...' is a call to get_customer gone astray: under auto the
    grammar makes it the call; a record that names someone stays text."""
    g = build_grammar(get_family("qwen2.5"), [CUSTOMER], "auto")
    assert not matches(g, '{"name": "get_customer_plan", "arguments": {}}')
    assert matches(g, '{"name": "Ada Lovelace", "plan": "pro"}')
    assert matches(g, '{"name": "get_customer", "arguments": {"customer_id": "cust-1"}}')


def test_unknown_call_forms_are_a_template_error() -> None:
    from localtools._errors import TemplateError

    with pytest.raises(TemplateError, match=r"call_forms \['call-smoke'\] are not call-\* or list-\* rules"):
        build_grammar(forms("call-tagged", "call-smoke"), [CUSTOMER], "auto")


@pytest.mark.parametrize("family", ["qwen2.5", "chatml", "llama3", "mistral", "gemma"])
def test_every_family_call_form_reaches_llama_cpp(family: str) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    fam = get_family(family)
    gbnf = build_grammar(forms(*fam.call_forms, layout="natural", family=family), [CUSTOMER], "auto").to_gbnf()
    llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)


@settings(max_examples=300, deadline=None)
@given(markers=st.lists(st.text(alphabet="ab<`", min_size=1, max_size=4), min_size=1, max_size=3),
       text=st.text(alphabet="ab<`x \n", min_size=1, max_size=12))
def test_text_never_holds_a_marker(markers: list[str], text: str) -> None:
    """The Text automaton over several markers agrees with a direct reading of its definition."""
    g = Grammar({"root": Text(tuple(markers))})
    expected = not any(m in text for m in markers) and text[0] > " " and text[0] != "`"
    assert matches(g, text) == expected
    # Rendered as GBNF for llama.cpp and read back, it is the same language.
    assert matches(parse_gbnf(g.to_gbnf()), text) == expected


def test_matcher_keeps_its_own_stack() -> None:
    """A text rule recurses once per character; the matcher must not need (or touch) the recursion limit."""
    import sys
    import threading

    grammar = build_grammar(get_family("qwen2.5"), [CUSTOMER], "auto")
    limit = sys.getrecursionlimit()
    seen: list[bool] = []
    text = "The plan is pro. " * 600  # 10,200 characters, ten times the default limit
    worker = threading.Thread(target=lambda: seen.extend([matches(grammar, text), matches(grammar, text + "<tool_call>")]))
    worker.start()
    worker.join()
    assert seen == [True, False] and sys.getrecursionlimit() == limit


@pytest.mark.parametrize("name", ["sep", "-", ".", "call", "text", "calls-open", "root"])
def test_a_tool_name_never_takes_a_fixed_rule_name(name: str) -> None:
    tools = [{"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
    for choice in ("auto", "required"):
        grammar = build_grammar(get_family("qwen2.5"), tools, choice)
        call = '<tool_call>\n{"name": ' + json.dumps(name) + ', "arguments": {"a": 1}}\n</tool_call>'
        assert matches(grammar, call)
        assert not matches(grammar, "<tool_call>\n\n\n</tool_call>")


def test_text_never_opens_with_whitespace_a_marker_starts_with() -> None:
    grammar = Grammar({"root": Text((" <call>",))})
    for g in (grammar, grammar.lowered()):
        assert not matches(g, " hi") and matches(g, "hi there") and not matches(g, "hi <call>")


def test_text_never_holds_a_stop_string() -> None:
    # Generation ends at a stop string; a text answer holding one, or made of the end-of-turn
    # token's text (what xgrammar reads it as), would be an answer cut before it starts.
    g = build_grammar(get_family("qwen2.5"), [CUSTOMER], "auto")
    assert matches(g, "The plan is pro.")
    assert not matches(g, "<|im_end|>") and not matches(g, "Pro.<|endoftext|>")


def test_repeats_count_items_of_every_length_and_empty_ones() -> None:
    from localtools.grammar import Chars, Expr, Lit, Repeat, alt, seq

    def accepts(e: Expr, text: str, prefix: bool = False) -> bool:
        return matches(Grammar({"root": e}), text, prefix=prefix)

    two = Repeat(alt(Lit("a"), Lit("aa")), 2, 2)
    # "aa" is two items of one character, though one item of two reaches the same place sooner.
    assert [accepts(two, t) for t in ("a", "aa", "aaa", "aaaa", "aaaaa")] == [False, True, True, True, False]
    maybe = seq(Repeat(Repeat(Lit("a"), 0, 1), 2, 2), Lit("b"))
    assert [accepts(maybe, t) for t in ("b", "ab", "aab", "aaab")] == [True, True, True, False]
    # A cut text needs no more items: the rest of a {4} hex escape may still come.
    hex4 = seq(Lit("\\u"), Repeat(Chars("0-9a-f"), 4, 4))
    assert accepts(hex4, "\\u1", prefix=True) and accepts(hex4, "\\u18", prefix=True)
    assert not accepts(hex4, "\\u18", prefix=False) and not accepts(hex4, "\\u1x", prefix=True)


DISGUISED = ['{"name": "customer cust-1001", "arguments": {"customer_id": "cust-1001"}}',
             '{"name":"lookup","parameters":{}}', '{\n"name" : "x",\n "arguments": 1}', '{"name": "a\\"b", "arguments": {}}']


@pytest.mark.parametrize("family", sorted(families()))
def test_no_text_opens_like_a_call_object_whatever_its_name(family: str) -> None:
    fam = get_family(family)
    tool = {"type": "function", "function": {"name": "get_customer", "parameters": {
        "type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}}
    g = build_grammar(fam, [tool], "auto")
    lowered = g.lowered()
    lead = call_shape(fam).text_open if fam.call_style == "pattern" else ""  # functionary's "all\n"
    for text in (lead + t for t in DISGUISED):
        # Rules, the matcher's one-pass reading: neither takes it as a text answer.
        assert not matches(g, text) and not matches(lowered, text), (family, text)
    plain = lead + "The plan is pro."
    assert matches(g, plain) and matches(lowered, plain)
    record = lead + '{"name": "Ada", "plan": "pro"}'
    assert matches(g, record) == matches(lowered, record)


class _TooDeep(Exception):
    pass


def _random_text(grammar: Grammar, rng: random.Random) -> str:
    """A random string of ``grammar``'s language (its rules spelled out), short repeats."""
    from localtools.grammar import Alt, Any_, Chars, Lit, Ref, Repeat, Seq
    from localtools.grammar._chars import _class_items, _class_match

    lowered = grammar.lowered()

    def gen(e: Any, depth: int) -> str:
        if depth > 120:
            raise _TooDeep
        if isinstance(e, Lit):
            return e.text
        if isinstance(e, Ref):
            return gen(lowered.rules[e.name], depth + 1)
        if isinstance(e, Seq):
            return "".join(gen(item, depth + 1) for item in e.items)
        if isinstance(e, Alt):
            return gen(rng.choice(e.options), depth + 1)
        if isinstance(e, Repeat):
            n = e.min + (rng.randint(0, 2) if depth < 40 else 0)
            n = n if e.max is None else min(n, e.max)
            return "".join(gen(e.item, depth + 1) for _ in range(n))
        if isinstance(e, Chars):
            negate, ranges = _class_items(e.body)
            if not negate:
                low, high = rng.choice(ranges)
                return chr(rng.randint(ord(low), min(ord(high), ord(low) + 200)))
            return rng.choice([c for c in 'aZ0 _-é{}":,\\n' if _class_match(e.body, c)])
        assert isinstance(e, Any_)
        return rng.choice("ab é")

    return gen(lowered.rules[lowered.root], 0)


_PIECES = ["", " ", "\n", '"', "{", "}", "]", ",", ", ", '{"', '"name', "<tool_call>", "```", "a", "Paris", "é", "[", "(",
           '"}', "}}", "\n```", "<", "[TOOL_CALLS]"]


#: Tools for the generated-string tests: nested, optional, enum and array arguments.
_WEATHER_AND_TIME = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["C", "F"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}, "tags": {
            "type": "array", "items": {"type": "string"}}}, "required": ["lat"]}},
    "required": ["city"]}}}, {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}}}}]
#: Families whose grammars differ in how a reply writes its calls.
_FORMS = ["qwen2.5", "llama3", "mistral", "hermes", "functionary", "granite", "lfm2"]


@pytest.mark.parametrize("family", _FORMS)
def test_a_branch_read_ahead_agrees_with_the_matcher(family: str) -> None:
    """``grammar_branch`` reads a text once (``lookahead``) and refuses a token whose first
    characters nothing there can take without walking again: on random prefixes of random strings
    of each family's grammar and random tokens after them, it answers what ``matches`` answers."""
    from localtools.model._decide import grammar_branch

    rng = random.Random(family)
    checked = refused = 0
    for choice in ("auto", "required"):
        grammar = build_grammar(get_family(family), _WEATHER_AND_TIME, choice)
        fits = grammar_branch(grammar)
        for _ in range(25):
            try:
                text = _random_text(grammar, rng)
            except _TooDeep:
                continue
            for _ in range(6):
                cut = rng.randint(0, len(text))
                base = text[:cut]
                tokens = [text[cut:cut + rng.randint(1, 4)], text[cut:cut + 2] + rng.choice(_PIECES),
                          rng.choice(_PIECES), rng.choice(_PIECES) + rng.choice(_PIECES)]
                for added in tokens:
                    assert fits(base, added, False) == matches(grammar, base + added, prefix=True), (base, added)
                    checked += 1
                    refused += not matches(grammar, base + added, prefix=True)
                assert fits(base, "", True) == matches(grammar, base)
    assert checked > 500 and 0.1 < refused / checked < 0.9


@pytest.mark.parametrize("family", _FORMS)
def test_a_resumed_walk_forces_what_a_fresh_one_does(family: str) -> None:
    """``continuation`` asked token by token along a growing reply with one ``Resume`` (as a
    decoder asks) answers what a fresh walk answers at every step: on random strings of each
    family's grammar with nested, optional and enum arguments, read in random pieces, with a
    reply that starts over (another text) in between."""
    from localtools.grammar import Resume, continuation

    rng = random.Random(family)
    asked = forced = 0
    for choice in ("auto", "required"):
        grammar = build_grammar(get_family(family), _WEATHER_AND_TIME, choice)
        resume = Resume()
        for _ in range(12):
            try:
                text = _random_text(grammar, rng)
            except _TooDeep:
                continue
            at = 0
            while at <= len(text):
                got = continuation(grammar, text[:at], resume)
                assert got == continuation(grammar, text[:at]), (text[:at], got)
                asked += 1
                forced += bool(got[0])
                at += rng.randint(1, 5)
    assert asked > 100 and forced > 10


def test_a_resumed_walk_redoes_what_read_a_shared_rule_that_read_the_end() -> None:
    """A rule reached twice at one position (here ``w`` after ``x``, by each option) is walked
    once; the second reader read the end of the text through it and must be walked again when
    the text goes on, though none of its own characters reached the end."""
    from localtools.grammar import Chars, Lit, Ref, Repeat, Resume, alt, continuation, seq

    grammar = Grammar({"root": alt(seq(Lit("x"), Ref("w"), Lit("!")), seq(Ref("v"), Lit("?"))),
                       "w": Repeat(Chars("a-z"), 1), "v": seq(Lit("x"), Ref("w"))})
    resume = Resume()
    for text in ("x", "xa", "xab", "xabc", "xabc?"):
        assert continuation(grammar, text, resume) == continuation(grammar, text)
    assert continuation(grammar, "xabc?", resume) == ("", True)


def test_gbnf_is_rendered_again_when_a_rule_changes() -> None:
    """``to_gbnf`` is kept while the rules are the same objects, and made anew when one is
    replaced or added."""
    from localtools.grammar import Lit, Ref, seq

    grammar = Grammar({"root": seq(Lit("a"), Ref("b")), "b": Lit("b")})
    first = grammar.to_gbnf()
    assert grammar.to_gbnf() is first and '"b"' in first
    grammar.rules["b"] = Lit("c")
    assert '"c"' in grammar.to_gbnf() and '"b"' not in grammar.to_gbnf()
    grammar.add("other", Lit("d"))
    grammar.rules["root"] = seq(Lit("a"), Ref("b"), Ref("other"))
    assert '"d"' in grammar.to_gbnf()
    grammar.rules["other"] = Lit("e")
    assert '"e"' in grammar.to_gbnf() and '"d"' not in grammar.to_gbnf()


def _random_rules(rng: random.Random) -> Grammar:
    """Three rules of every node kind, each referring only to the ones after it (no recursion)."""
    from localtools.grammar import Alt, Any_, Chars, Lit, Ref, Repeat, Seq, Text, Until

    names = ["root", "r1", "r2"]

    def expr(later: list[str], depth: int) -> Any:
        k = rng.random()
        if depth > 3 or k < 0.3:
            c = rng.random()
            if c < 0.45:
                return Lit(rng.choice(["a", "b", "ab", "ba", "", "aa", "abb"]))
            if c < 0.65:
                return Chars(rng.choice(["a", "ab", "^a", "a-b"]))
            if c < 0.72:
                return Any_()
            if c < 0.78:
                return Text(markers=(rng.choice(["ab", "b", "ba"]),))
            if c < 0.84:
                return Until(rng.choice(["ab", "b", "bb"]))
            return Ref(rng.choice(later)) if later else Lit("b")
        if k < 0.55:
            return Seq(tuple(expr(later, depth + 1) for _ in range(rng.randint(2, 3))))
        if k < 0.8:
            return Alt(tuple(expr(later, depth + 1) for _ in range(rng.randint(2, 3))))
        low = rng.randint(0, 2)
        return Repeat(expr(later, depth + 1), low, rng.choice([None, low, low + 1, low + 2]))

    return Grammar({name: expr(names[i + 1:], 0) for i, name in enumerate(names)})


def test_resumed_walks_and_branch_checks_agree_with_fresh_ones_on_random_grammars() -> None:
    """On random grammars of every node kind (literals, classes, any character, free text, text up
    to a marker, sequences, options, bounded and unbounded repeats), texts grown in random pieces
    and one that starts over: a walk with a ``Resume`` finds the ends and the frontier a fresh walk
    finds, and ``grammar_branch`` answers what ``matches`` answers."""
    from localtools.grammar import Resume
    from localtools.grammar._match import _walk
    from localtools.model._decide import grammar_branch

    checked = whole = 0
    for seed in range(400):
        rng = random.Random(seed)
        grammar = _random_rules(rng)
        resume, fits = Resume(), grammar_branch(grammar)
        base = "".join(rng.choice("ab") for _ in range(rng.randint(0, 30)))
        texts = [base[:i] for i in sorted(rng.sample(range(len(base) + 1), min(len(base) + 1, 10)))]
        texts += [base[:3] + "ba"[: rng.randint(0, 2)]]  # a text that does not go on from the last
        for text in texts:
            resumed, fresh = set[str](), set[str]()
            assert _walk(grammar, text, frontier=resumed, resume=resume) == _walk(grammar, text, frontier=fresh)
            assert resumed == fresh, (seed, text)
            for added in ("", "a", "b", "ab", "ba", "bb"):
                assert fits(text, added, False) == matches(grammar, text + added, prefix=True), (seed, text, added)
            assert fits(text, "", True) == matches(grammar, text)
            checked += 1
            whole += matches(grammar, text)
    assert checked > 2000 and whole > 100
