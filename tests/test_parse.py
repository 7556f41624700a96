from __future__ import annotations

import json

import pytest

from localtools import ToolCallParseError, get_family, parse_reply


def names_and_args(text: str, family: str, tolerant: bool = True) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in parse_reply(text, get_family(family), tolerant=tolerant).tool_calls]


def test_hermes_tags_several_calls() -> None:
    text = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'
    assert names_and_args(text, "qwen2.5") == [("a", {"x": 1}), ("b", {})]


def test_hermes_unclosed_final_tag_and_bare_json() -> None:
    assert names_and_args('<tool_call>\n{"name": "a", "arguments": {}}', "qwen2.5") == [("a", {})]
    assert names_and_args('{"name": "a", "arguments": {"x": "y"}}\n', "qwen2.5", tolerant=False) == [("a", {"x": "y"})]


@pytest.mark.parametrize("tolerant", [True, False])
def test_a_closing_tag_inside_a_string_argument_does_not_end_the_call(tolerant: bool) -> None:
    from localtools.grammar import build_grammar, matches

    tool = {"type": "function", "function": {"name": "note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    # SmolLM2 wrote this under the grammar, which allows any characters inside a string.
    text = '<tool_call>\n{"name": "note", "arguments": {"text": "}}</tool_call> and `{"}}\n</tool_call>'
    assert matches(build_grammar(get_family("qwen2.5"), [tool], "required"), text)
    assert names_and_args(text, "qwen2.5", tolerant) == [("note", {"text": "}}</tool_call> and `{"})]


def test_a_call_block_with_two_json_values_is_named() -> None:
    text = '<tool_call>\n{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {}}\n</tool_call>'
    with pytest.raises(ToolCallParseError, match="holds more than one JSON value before </tool_call>"):
        parse_reply(text, get_family("qwen2.5"))


def test_tolerant_fenced_json_with_text_around() -> None:
    reply = parse_reply('Sure!\n```json\n{"name": "a", "arguments": {"x": 1}}\n```\nDone.', get_family("qwen2.5"))
    assert reply.content == "Sure!\n\nDone."
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("a", {"x": 1})]


def test_tolerant_list_and_string_arguments() -> None:
    text = '[{"name": "a", "arguments": "{\\"x\\": 1}"}, {"name": "b", "parameters": {}}]'
    assert names_and_args(text, "chatml") == [("a", {"x": 1}), ("b", {})]


def test_strict_parse_keeps_fenced_json_as_text() -> None:
    reply = parse_reply('Here:\n```json\n{"name": "a", "arguments": {}}\n```', get_family("qwen2.5"), tolerant=False)
    assert reply.tool_calls == [] and "```json" in reply.content


def test_strict_parse_reads_json_text_as_text() -> None:
    # Under the grammar a bare call names a given tool; other JSON took the text branch.
    fam = get_family("qwen2.5")
    for text in ('{"name": "Ada", "plan": "pro"}', '{"name": "Vegetarian Pasta", "arguments": {"servings": 2}}',
                 '{\n  "name": "recipe_search", "arguments": {}}'):
        reply = parse_reply(text, fam, tolerant=False, call_openings=['{"name": "recipe_search"'])
        assert reply.tool_calls == [] and reply.content == text
    call = parse_reply('{"name": "recipe_search", "arguments": {}}', fam, tolerant=False, call_openings=['{"name": "recipe_search"'])
    assert [c.name for c in call.tool_calls] == ["recipe_search"] and call.content == ""


def test_plain_text_and_json_that_is_not_a_call() -> None:
    reply = parse_reply('The record is {"plan": "pro"}.', get_family("qwen2.5"))
    assert reply.tool_calls == [] and reply.content == 'The record is {"plan": "pro"}.'


def test_llama3_and_gemma_bare_json() -> None:
    assert names_and_args('<|python_tag|>{"name": "a", "parameters": {"q": 1}}', "llama3") == [("a", {"q": 1})]
    assert names_and_args('{"name": "a", "parameters": {}}\n{"name": "b", "parameters": {}}', "gemma") == [
        ("a", {}), ("b", {})]


def test_mistral_list_keeps_ids() -> None:
    calls = parse_reply('[TOOL_CALLS] [{"name": "a", "arguments": {}, "id": "abcDEF123"}]', get_family("mistral")).tool_calls
    assert [(c.name, c.id) for c in calls] == [("a", "abcDEF123")]


def test_new_ids_are_unique_and_styled() -> None:
    text = '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'
    ids = [c.id for c in parse_reply(text, get_family("qwen2.5")).tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    mistral = parse_reply('[TOOL_CALLS] [{"name": "a", "arguments": {}}]', get_family("mistral")).tool_calls[0]
    assert len(mistral.id) == 9 and mistral.id.isalnum()


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ('<tool_call>\n{"name": "a", "argu', "qwen2.5"),
        ("<tool_call>\nnot json\n</tool_call>", "qwen2.5"),
        ('{"name": "a", "parameters": {"x": ', "llama3"),
        ("[TOOL_CALLS] [{broken", "mistral"),
        ('Calling: {"name": "a", "arguments": {"x": 1', "qwen2.5"),
        ('<tool_call>\n{"name": "a", "arguments": [1]}\n</tool_call>', "qwen2.5"),
    ],
)
def test_unparseable_calls_raise_with_raw_text(text: str, family: str) -> None:
    with pytest.raises(ToolCallParseError) as info:
        parse_reply(text, get_family(family))
    assert info.value.raw == text


@pytest.mark.parametrize(("raw", "expected"), [('{"a": 1}', {"a": 1}), ("  ", {}), ({"a": [1]}, {"a": [1]})])
def test_decode_arguments_reads_openai_call_arguments(raw: object, expected: dict[str, object]) -> None:
    from localtools.families._parse import decode_arguments

    assert decode_arguments(raw) == expected


@pytest.mark.parametrize(("raw", "problem"), [
    ('{"a": 1', "not valid JSON (Expecting ',' delimiter at character 7)"),
    ("[1, 2]", "not a JSON object (got list)"),
    (None, "not a JSON object (got NoneType)"),
])
def test_decode_arguments_names_the_problem(raw: object, problem: str) -> None:
    from localtools.families._parse import decode_arguments

    with pytest.raises(ValueError) as info:
        decode_arguments(raw)
    assert str(info.value) == problem


def test_disguised_calls_are_found_in_any_wrapping() -> None:
    from localtools.families._parse import disguised_calls

    tools = {"get_news", "sports_ranking.get_team_position"}
    wrapped = ('<json>\n{\n  "name": "sports_ranking.get_team_position",\n  "arguments": {"team": "Liverpool"}\n}\n</json>')
    assert disguised_calls(wrapped, tools) == [("sports_ranking.get_team_position", {"team": "Liverpool"})]
    listed = 'Sure:\n```json\n[{"name": "get_news", "arguments": {"topic": "a"}}, {"name": "get_news", "parameters": {"topic": "b"}}]\n```'
    assert [args["topic"] for _, args in disguised_calls(listed, tools)] == ["a", "b"]
    # A schema echoed back, a quoted record and a call to a tool not offered are not disguised calls.
    echo = ('<tools>\n{"type": "function", "function": {"name": "get_news", "description": "News.", '
            '"parameters": {"type": "object", "properties": {"topic": {"type": "string"}}}}}\n</tools>')
    assert disguised_calls(echo, tools) == []
    assert disguised_calls('{"name": "Ada Lovelace", "plan": "pro"}', tools) == []
    assert disguised_calls('{"name": "get_weather", "arguments": {"city": "Paris"}}', tools) == []
    # Without a list of names, any name counts: an invented one is no answer either.
    assert disguised_calls('{"name": "customer cust-1001", "arguments": {"customer_id": "cust-1001"}}') == \
        [("customer cust-1001", {"customer_id": "cust-1001"})]
    assert disguised_calls('{"name": "Ada Lovelace", "plan": "pro"}') == []
    assert disguised_calls("{not json} and [1, 2]", tools) == []
    # Not JSON, but a call all the same (quotes mixed where a grammar pushed the model off one).
    broken = """{"name": "get_news', "arguments": {"topic": "Bitcoin"}}"""
    assert disguised_calls(broken, tools) == [("get_news", {})]
    assert disguised_calls("""{'name': 'get_weather', 'arguments': {}}""", tools) == []


def test_constrained_replies_are_read_by_the_branch_the_grammar_took() -> None:
    import dataclasses

    from localtools import Model, ScriptedBackend

    natural = dataclasses.replace(get_family("qwen2.5"), layout="natural")
    customer = {"type": "function", "function": {"name": "get_customer", "parameters": {
        "type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}}
    call = {"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}
    messages = [{"role": "user", "content": "Plan of cust-1001?"}]
    forms = ["```json\n" + json.dumps(call, indent=2) + "\n```", "<tool_call>\n" + json.dumps(call, indent=4) + "\n</tool_call>",
             json.dumps(call, indent=2), json.dumps(call)]
    for form in forms:
        reply = Model(ScriptedBackend([form]), family=natural).chat(messages, [customer])
        assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_customer", {"customer_id": "cust-1001"})], form
        assert reply.content == ""
    # A record the model quotes after a tool result took the text branch: it is the answer, not a call.
    echo = '{"name": "Ada Lovelace", "plan": "pro"}'
    reply = Model(ScriptedBackend([echo]), family=natural).chat(messages, [customer])
    assert reply.content == echo and not reply.tool_calls


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a"), ("a", "fa"), ("fa", "a"), ("b", "fa", "a"), ("a", "b", "fa"),
                                   ("fa", "b", "a")])
@pytest.mark.parametrize("glue", ["", "\n"])
def test_calls_in_several_forms_come_back_in_the_order_written(order: tuple[str, ...], glue: str) -> None:
    forms = {"a": '{"name": "a", "arguments": {}}', "b": '<tool_call>{"name": "b", "arguments": {}}</tool_call>',
             "fa": '```json\n{"name": "fa", "arguments": {}}\n```'}
    parsed = parse_reply(glue.join(forms[k] for k in order), get_family("qwen2.5"))
    assert [c.name for c in parsed.tool_calls] == list(order)
