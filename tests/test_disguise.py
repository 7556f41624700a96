"""A reply's text is never a call: a text answer is read by the tolerant reader (any key order,
quoting, escapes, fences, lists, a preamble), and one that reads as a call is decoded again, never
handed out as an answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_serve import post, sse

from localtools import (
    DisguiseCaught,
    DisguisedCall,
    Model,
    ScriptedBackend,
    TextDelta,
    ToolCallDone,
    TurnDone,
    UsageError,
    families,
)
from localtools.families._parse import ARGUMENT_KEYS, NAME_KEYS, disguised_calls, first_disguise
from localtools.families._reply import DisguiseRetry
from localtools.grammar import Grammar, matches
from localtools.serve._app import ServerConfig, create_app

FAMILIES = sorted(families())
ASK = [{"role": "user", "content": "What plan is customer cust-1001 on?"}]
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "get_customer", "description": "Look up a customer.",
    "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}, "required": ["customer_id"]}}}]
ANSWER = "The customer is on the pro plan."

_NAME_KEYS = ["name", "function", "tool", "tool_name", "function_name", "action"]
_ARG_KEYS = ["arguments", "parameters", "args", "input", "action_input"]


def _escape_some(key: str, which: list[bool]) -> str:
    """The key as JSON text with some characters written as \\u escapes."""
    return "".join(f"\\u{ord(c):04x}" if escape else c for c, escape in zip(key, which + [False] * len(key), strict=False))


@st.composite
def disguises(draw: st.DrawFn) -> str:
    """A call object in one of the many spellings a model writes one in, as text."""
    name_key, arg_key = draw(st.sampled_from(_NAME_KEYS)), draw(st.sampled_from(_ARG_KEYS))
    # A call object's own keys whatever the name; looser formats' keys to the offered tool.
    loose = name_key not in NAME_KEYS or arg_key not in ARGUMENT_KEYS
    name = "get_customer" if loose else draw(st.sampled_from(["get_customer", "lookup_customer", "customer.get", "search"]))
    args: dict[str, Any] = {"customer_id": "cust-1001"}
    as_string = draw(st.booleans())
    call: dict[str, Any] = {name_key: name, arg_key: json.dumps(args) if as_string else args}
    items = list(call.items())
    if draw(st.booleans()):
        items.reverse()
    obj: dict[str, Any] = dict(items)
    if name_key == "name" and draw(st.booleans()):
        obj = {"type": "function", "function": obj}
    quoting = draw(st.sampled_from(["json", "json-indent", "python"]))
    if quoting == "python":
        body = repr(obj)
    else:
        body = json.dumps(obj, indent=2 if quoting == "json-indent" else None)
        if draw(st.booleans()):  # an escaped key: "\u006eame" reads as "name"
            key = next(iter(obj))
            body = body.replace(f'"{key}"', '"' + _escape_some(key, draw(st.lists(st.booleans(), min_size=1))) + '"', 1)
    if draw(st.booleans()):
        body = f"[{body}]"
    wrap = draw(st.sampled_from(["bare", "fence", "preamble", "preamble-fence", "after"]))
    if wrap == "fence":
        return f"```json\n{body}\n```"
    if wrap == "preamble":
        return f"I will look that up for you. {body}"
    if wrap == "preamble-fence":
        return f"Sure! Here is the call:\n```json\n{body}\n```"
    if wrap == "after":
        return f"{body}\nThat call gets the plan."
    return body


@given(text=disguises())
@settings(max_examples=200, deadline=None)
def test_every_generated_disguise_reads_as_a_call(text: str) -> None:
    found = first_disguise(text, ["get_customer"])
    assert found is not None, text
    assert text[found[0]] in "{[" and disguised_calls(text, ["get_customer", found[1]])


@pytest.mark.parametrize("text", [
    '{"name": "Ada Lovelace", "plan": "pro"}',  # a record with a name is no call
    '{"name": "get_customer", "description": "Look up.", "parameters": {"type": "object", "properties": {}}}',
    "The plan is pro [see the account page] {as of today}.",
    '{"function": "", "arguments": {}}',
    "[1, 2, 3] and {'a': 1}",
])
def test_text_that_is_no_call_stays_text(text: str) -> None:
    assert first_disguise(text) is None and disguised_calls(text) == []


def _model(family: str, first: str, seen: list[Grammar | None]) -> tuple[Model, list[bool]]:
    """A model whose first reply is ``first`` (when its grammar lets it be written) and whose next
    reply is a plain answer; ``admitted`` says whether the grammar let the first one through."""
    admitted: list[bool] = []

    def write_first(_prompt: Any, grammar: Grammar | None) -> str:
        seen.append(grammar)
        ok = grammar is not None and matches(grammar, first)
        admitted.append(ok)
        return first if ok else opening + ANSWER

    def write_answer(_prompt: Any, grammar: Grammar | None) -> str:
        seen.append(grammar)
        return opening + ANSWER

    probe = Model(ScriptedBackend([]), family=family)
    opening = probe.reply_format(TOOLS, "auto").text_open
    first = opening + first
    return Model(ScriptedBackend([write_first, write_answer, write_answer]), family=family), admitted


@pytest.mark.parametrize("family", FAMILIES)
@given(text=disguises())
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_disguise_leaves_as_text_on_any_family(family: str, text: str) -> None:
    seen: list[Grammar | None] = []
    model, admitted = _model(family, text, seen)
    result = model.chat(ASK, TOOLS, tool_choice="auto", thinking=False)
    assert first_disguise(result.content) is None
    if admitted[0] and result.tool_calls:
        # The family's own grammar took it as a call (a bare call to an offered tool): checked, not text.
        assert result.disguise_retries == 0 and [c.name for c in result.tool_calls] == ["get_customer"]
    elif admitted[0]:
        # It got past the grammar's bar: read as a call, decoded again under a grammar that bars it.
        assert result.disguise_retries == 1 and result.content == ANSWER
        barred = seen[1]
        assert barred is not None and not matches(barred, model.reply_format(TOOLS, "auto").text_open + text)
    else:
        assert result.disguise_retries == 0


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("text", [
    'Let me check. {"name": "lookup", "arguments": {"customer_id": "cust-1001"}}',
    '{"function": "get_customer", "parameters": {"customer_id": "cust-1001"}}',
    "{'name': 'get_customer', 'arguments': {'customer_id': 'cust-1001'}}",
    '[{"arguments": {"customer_id": "cust-1001"}, "name": "get_customer"}]',
    'Calling:\n```json\n{"tool": "get_customer", "input": "{\\"customer_id\\": \\"cust-1001\\"}"}\n```',
])
def test_disguises_past_the_grammar_are_decoded_again_under_a_bar(family: str, text: str) -> None:
    seen: list[Grammar | None] = []
    model, admitted = _model(family, text, seen)
    result = model.chat(ASK, TOOLS, tool_choice="auto", thinking=False)
    if not admitted[0]:
        pytest.skip(f"{family}'s grammar bars this spelling outright")
    assert (result.content, result.disguise_retries, result.tool_calls) == (ANSWER, 1, [])
    barred = seen[1]
    assert barred is not None and not matches(barred, model.reply_format(TOOLS, "auto").text_open + text)


def test_a_disguise_still_there_after_the_retries_is_a_typed_error() -> None:
    replies = ['{"function": "get_customer", "parameters": {"customer_id": "cust-1001"}}',
               'Calling: {"function": "get_customer", "parameters": {"customer_id": "cust-1001"}}',
               'Calling it: {"function": "get_customer", "parameters": {"customer_id": "cust-1001"}}']
    model = Model(ScriptedBackend(replies), family="qwen2.5")
    with pytest.raises(DisguisedCall) as caught:
        model.chat(ASK, TOOLS)
    assert caught.value.retries == 2 and caught.value.name == "get_customer"
    assert "cust-1001" not in str(caught.value)
    with pytest.raises(UsageError, match="disguise_retries"):
        model.chat(ASK, TOOLS, disguise_retries=-1)


def test_required_retry_turns_the_disguise_into_a_checked_call() -> None:
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    backend = ScriptedBackend(['Let me see: {"tool": "get_customer", "input": {"customer_id": "cust-1001"}}', call])
    result = Model(backend, family="qwen2.5").chat(ASK, TOOLS, disguise_retry=DisguiseRetry.REQUIRED)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_customer", {"customer_id": "cust-1001"})]
    assert result.disguise_retries == 1 and len(backend.grammars) == 2
    second = backend.grammars[1]
    assert second is not None and "text" not in second.rules  # no text branch: a call, checked


def test_a_streamed_disguise_is_never_sent_as_text() -> None:
    disguise = 'Sure. {"name": "lookup", "arguments": {"customer_id": "cust-1001"}}'
    events = list(Model(ScriptedBackend([disguise, ANSWER]), family="qwen2.5").stream(ASK, TOOLS))
    sent = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "{" not in sent and "lookup" not in sent
    # "lookup" is no offered tool: the event does not repeat the name the model made up.
    assert [e.name for e in events if isinstance(e, DisguiseCaught)] == [""]
    last = events[-1]
    assert isinstance(last, TurnDone) and last.result.content == ANSWER and last.result.disguise_retries == 1
    assert not [e for e in events if isinstance(e, ToolCallDone)]


def test_serve_never_streams_a_disguise_and_answers_the_retry() -> None:
    disguise = '[{"type": "function", "function": {"name": "lookup", "arguments": "{\\"id\\": 1}"}}]'
    app = create_app(Model(ScriptedBackend([disguise, ANSWER]), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": ASK, "tools": TOOLS, "stream": True})
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in sse(res) if c.get("choices"))
    assert content == ANSWER
    stuck = create_app(Model(ScriptedBackend([disguise, "Ok: " + disguise, "Ok, " + disguise]), family="qwen2.5"),
                       ServerConfig(model_name="m"))
    res = post(stuck, {"model": "m", "messages": ASK, "tools": TOOLS})
    assert res.status_code == 422 and res.json()["error"]["code"] == "disguised_call"
    assert "not offered" in res.json()["error"]["message"] and "lookup" not in res.text and '"id"' not in res.text


def test_the_bench_counts_disguises_caught() -> None:
    from localtools.bench import Case, Mode, run_bench, summarize

    case = Case("irrelevance-0", "irrelevance", ASK, TOOLS, [])
    mode = Mode(model="scripted", backend="scripted", constrained=True, tool_choice="auto")
    disguise = '{"tool": "lookup", "arguments": {"id": 1}}'
    results = run_bench({("scripted", "scripted"): Model(ScriptedBackend([disguise, ANSWER]), family="qwen2.5")},
                        [mode], [case])
    assert results[0].disguises_caught == 1 and results[0].correct
    row = next(r for r in summarize(results, [mode]) if r["category"] == "irrelevance")
    assert row["disguises_caught"] == 1 and row["disguised_calls"] == 0


@pytest.mark.parametrize(("reply", "what", "key"), [
    ('<tool_call>\n{"name": "f", "arguments": {"xkey": 1e999}}\n</tool_call>', "a number out of a double", "xkey"),
    ('<tool_call>\n{"name": "f", "arguments": {"kkey": "\\ud800"}}\n</tool_call>', "a lone surrogate", "kkey"),
    ('<tool_call>\n{"name": "f", "arguments": {"akey": [{"\\udc00": 1}]}}\n</tool_call>', "a lone surrogate", "akey"),
])
def test_free_output_that_is_no_json_is_a_typed_error_naming_what(reply: str, what: str, key: str) -> None:
    from localtools import ToolCallParseError

    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(ToolCallParseError, match="not JSON a client can read") as caught:
        Model(ScriptedBackend([reply]), family="qwen2.5").chat(ASK, [tool], constrained=False)
    # What, never where: the keys are the model's own words.
    assert what in str(caught.value) and key not in str(caught.value)
    str(caught.value).encode("utf-8")  # the message itself is sendable


def test_serve_streams_the_retried_answer_after_a_preamble_it_already_sent() -> None:
    disguise = 'Let me check. {"name": "lookup", "arguments": {"customer_id": "cust-1001"}}'
    app = create_app(Model(ScriptedBackend([disguise, ANSWER]), family="qwen2.5"), ServerConfig(model_name="m"))
    chunks = sse(post(app, {"model": "m", "messages": ASK, "tools": TOOLS, "stream": True}))
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert content == "Let me check.\n\n" + ANSWER and "lookup" not in content


@pytest.mark.parametrize("text", [
    "Nested: " + "[" * 1100,
    "The number is [" + "1" * 5000 + "].",
    "{" * 3000 + "[" * 3000,
    "[" * 50 + "{'a': " * 40,
])
def test_text_the_reader_cannot_decode_is_text_never_an_error(text: str) -> None:
    assert first_disguise(text) is None
    app = create_app(Model(ScriptedBackend([text]), family="qwen2.5"), ServerConfig(model_name="m"))
    res = post(app, {"model": "m", "messages": ASK, "tools": TOOLS, "max_tokens": 20000})
    assert res.status_code == 200 and res.json()["choices"][0]["message"]["content"] == text.strip()


def test_loose_call_formats_count_only_for_an_offered_tool() -> None:
    react = 'The agent emits {"action": "Search", "action_input": {"q": "x"}} and waits.'
    assert first_disguise(react) is None and first_disguise(react, ["get_customer"]) is None
    assert first_disguise(react, ["Search"]) == (react.index("{"), "Search")
    assert first_disguise('config = {"name": "web", "args": {"port": 80}}') is None
    assert first_disguise('{"api": "v2", "params": {"page": 2}}') is None
    # A call object's own keys are a call whatever the name.
    assert first_disguise('{"tool_name": "anything", "arguments": {}}') == (0, "anything")


def test_a_refused_disguise_names_no_string_the_model_invented() -> None:
    card = "Jane Doe, card 4111-1111-1111-1111"
    replies = [f'Sure: {{"name": "{card}", "arguments": {{"a": 1}}}}', f'Ok: {{"name": "{card}", "arguments": {{"a": 1}}}}',
               f'Ok, {{"name": "{card}", "arguments": {{"a": 1}}}}']
    with pytest.raises(DisguisedCall) as caught:
        Model(ScriptedBackend(replies), family="qwen2.5").chat(ASK, TOOLS)
    assert "4111" not in str(caught.value) and caught.value.name == ""


def test_a_disguise_in_the_text_before_real_calls_is_decoded_again() -> None:
    call = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "cust-1001"}}\n</tool_call>'
    first = 'I will run {"name": "delete_everything", "arguments": {}} then: ' + call
    backend = ScriptedBackend([first, call])
    result = Model(backend, family="qwen2.5").chat(ASK, TOOLS)
    assert result.disguise_retries == 1 and result.content == "" and [c.name for c in result.tool_calls] == ["get_customer"]


def test_a_free_stream_never_sends_arguments_that_are_no_json() -> None:
    from localtools import ToolCallDelta, ToolCallParseError, ToolCallStarted

    reply = '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": 1e999}}\n</tool_call>'
    events: list[Any] = []
    with pytest.raises(ToolCallParseError):
        for event in Model(ScriptedBackend([reply]), family="qwen2.5").stream(ASK, TOOLS, constrained=False):
            events.append(event)
    assert not [e for e in events if isinstance(e, ToolCallStarted | ToolCallDelta)]


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize(("parameters", "keyword"), [
    (_deep(200), ""),
    # A pattern no ECMA-262 reader takes: named, path and all (patterns the linear matcher reads
    # safely, which a backtracking engine would not, are taken: tests/test_hostile.py).
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "\\u{zz}"}}}, "names no code point"),
])
def test_serve_answers_an_adversarial_schema_with_a_400_naming_it(parameters: dict[str, Any], keyword: str) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    app = create_app(Model(ScriptedBackend(["unused"]), family="qwen2.5"), ServerConfig(model_name="m"))
    for stream in (False, True):
        res = post(app, {"model": "m", "messages": ASK, "tools": [tool], "stream": stream})
        assert res.status_code == 400, res.text
        # Too deep or no valid schema is refused as the request is read; the rest when its grammar is built.
        assert res.json()["error"]["type"] == "invalid_request_error" and keyword in res.json()["error"]["message"]
