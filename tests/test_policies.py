"""Each policy on its own (``localtools.model.policies``): the settling ones on drawn calls, those
that decode a turn again on scripted turns; and their order."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import tc

from localtools import Model, ScriptedBackend, tool
from localtools.families._parse import ToolCall
from localtools.grammar import matches
from localtools.model._decide import DecisionPoint, Decisions, stated_shape
from localtools.model.policies import REDECODING, SETTLING, Context, settle
from localtools.model.policies.distinct import Distinct
from localtools.model.policies.ground import Ground
from localtools.model.policies.percent import Percent
from localtools.model.policies.shape import Shape

SCHEMAS: dict[str, Any] = {
    "book": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "date": {"type": "string", "description": "The date, in the format mm-dd-yyyy."},
        "rate": {"type": "number"}, "note": {"type": "string"}, "fast": {"type": "boolean"}}}}
# The pattern shape gives the date (as ``shaped`` does before the grammar is built).
SCHEMAS["book"]["properties"]["date"]["pattern"] = stated_shape(SCHEMAS["book"]["properties"]["date"])


def ctx(text: str, **on: bool) -> Context:
    return Context(SCHEMAS, [{"role": "user", "content": text}], Decisions(**on))


def call(i: int, **arguments: Any) -> ToolCall:
    return ToolCall(f"call_{i}", "book", arguments)


def test_every_policy_states_its_switch_what_it_reads_and_changes() -> None:
    names = [p.switch for p in SETTLING]
    assert names == ["shape", "percent", "ground", "distinct"]
    assert all(hasattr(Decisions(), n) and p.reads and p.changes for n, p in zip(names, SETTLING, strict=True))


def test_percent_gives_the_fraction_and_records_both() -> None:
    rng = random.Random(1)
    for _ in range(30):
        n = rng.randint(1, 99)
        calls, made = Percent()([call(0, city="Oslo", rate=n)], ctx(f"in Oslo at a rate of {n}%"))
        assert calls[0].arguments["rate"] == n / 100
        assert [(d.point, d.before, d.after) for d in made] == [(DecisionPoint.PERCENT, json.dumps(n),
                                                                 json.dumps(n / 100))]
        # Written whole in the conversation, it stands.
        assert Percent()([call(0, city="Oslo", rate=n)], ctx(f"in Oslo at a rate of {n}"))[1] == []


def test_ground_leaves_out_what_nobody_said_and_records_it() -> None:
    rng = random.Random(2)
    for _ in range(30):
        note = "".join(rng.choice("qxzkvw") for _ in range(5))
        calls, made = Ground()([call(0, city="Oslo", note=note, fast=True)], ctx("Book Oslo."))
        assert calls[0].arguments == {"city": "Oslo", "fast": True}
        assert [(d.argument, d.before, d.after) for d in made] == [("book.note", json.dumps(note), None)]
        calls, _ = Ground()([call(0, city="Oslo", note=note, fast=True)], ctx(f"Book Oslo, note {note}."))
        assert calls[0].arguments["note"] == note


def test_distinct_keeps_each_call_once_and_records_the_repeat() -> None:
    rng = random.Random(3)
    for _ in range(30):
        cities = [rng.choice(["Oslo", "Lima", "Pune"]) for _ in range(rng.randint(1, 5))]
        calls, made = Distinct()([call(i, city=c) for i, c in enumerate(cities)], ctx("x"))
        assert [c.arguments["city"] for c in calls] == list(dict.fromkeys(cities))
        assert len(made) == len(cities) - len(set(cities))
        assert all(d.point is DecisionPoint.DISTINCT and d.after is None for d in made)


def test_shape_records_a_value_written_in_its_stated_form_and_changes_nothing() -> None:
    written = [call(0, city="Oslo", date="05-12-2022")]
    calls, made = Shape()(written, ctx("Book Oslo on May 12, 2022"))
    assert calls == written and [(d.argument, d.after) for d in made] == [("book.date", '"05-12-2022"')]
    own = {**SCHEMAS["book"], "properties": {**SCHEMAS["book"]["properties"], "date": {
        "type": "string", "pattern": "^x$"}}}
    assert Shape()(written, Context({"book": own}, [], Decisions()))[1] == []


def test_distinct_reads_the_calls_as_ground_left_them() -> None:
    """Two calls that differ only in a value ground leaves out are one call: the order matters."""
    calls = [call(0, city="Oslo", note="zzqx"), call(1, city="Oslo")]
    kept, made = settle(calls, SCHEMAS, Decisions(ground=True, distinct=True), [{"role": "user", "content": "Oslo"}])
    assert [c.arguments for c in kept] == [{"city": "Oslo"}]
    assert [d.point for d in made] == [DecisionPoint.GROUND, DecisionPoint.DISTINCT]
    # Switched off, a policy does nothing; without decisions, nothing does.
    assert settle(calls, SCHEMAS, Decisions(distinct=True), [])[0] == calls
    assert settle(calls, SCHEMAS, None, []) == (calls, [])


def test_ground_never_judges_a_number_on_a_request_not_in_english() -> None:
    """"两位" is 2, "dos" is 2: a number a request not in English writes in its words is read by
    no reading here, so ground leaves numbers alone there; in English it still judges them."""
    rng = random.Random(4)
    for text, judged in (("给我订两位的，去 Oslo", False), ("Reserva para dos personas en Oslo", False),
                         ("Book Oslo for the two of us, please", True)):
        n = rng.randint(3, 9)
        calls, made = Ground()([call(0, city="Oslo", rate=n)], ctx(text))
        assert ("rate" not in calls[0].arguments) is judged, text
        assert bool(made) is judged


def test_ground_judges_a_number_where_the_request_writes_numbers_only_in_digits() -> None:
    from localtools.model._decide import readable_numbers

    rng = random.Random(5)
    for _ in range(20):
        n = rng.randint(100, 99999)
        # Chinese or Japanese with no numeral characters: an amount nobody wrote is the model's own.
        for text in ("在 Oslo 订最便宜的", "Oslo で一番安いのを予約して".replace("一番", "最も")):
            assert readable_numbers(text)
            calls, made = Ground()([call(0, city="Oslo", rate=n)], ctx(text))
            assert "rate" not in calls[0].arguments and made
        assert not readable_numbers("在 Oslo 订三晚") and not readable_numbers("Tres noches en Oslo")


@pytest.mark.parametrize("form", [{"format": "time"}, {"pattern": "^\\\\d\\\\d:\\\\d\\\\d$"},
                                  {"description": "Start time in HH:MM"}, {"description": "Date, format YYYY-MM-DD"}])
def test_ground_never_judges_a_string_in_a_form_the_tool_asks_for(form: dict[str, Any]) -> None:
    """"at 10" is 10:00 in the tool's form: the user never writes the value as the tool takes it."""
    schemas = {"book": {**SCHEMAS["book"], "properties": {**SCHEMAS["book"]["properties"],
                                                           "note": {"type": "string", **form}}}}
    calls, made = Ground()([call(0, city="Oslo", note="10:00")],
                           Context(schemas, [{"role": "user", "content": "Book Oslo at 10 tomorrow"}], Decisions()))
    assert calls[0].arguments["note"] == "10:00" and not made


# The policies that decode a turn again, each on a scripted turn. Each is run on with its own
# switch alone, and off with ``distinct`` (which decodes nothing again) on instead: the turn then
# reads the distribution and runs the list, so a policy that acted with its switch off would show.

@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def distance(body1: str, body2: str, unit: str = "kilometers") -> str:
    """The distance between two celestial bodies."""
    return "1"


@tool
def get_discoverer(discovery: str, detail: bool = False) -> str:
    """Who made a scientific discovery."""
    return "Chadwick"


ASK = [{"role": "user", "content": "Weather in Paris and in London?"}]
PARIS, LONDON = tc("get_weather", city="Paris"), tc("get_weather", city="London")
OFF = Decisions(distinct=True)


def turn(replies: list[str], decisions: Decisions, *, ask: list[dict[str, Any]] = ASK, tools: Any = (get_weather,),
         choices: Any = None) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(replies, choices={} if choices is None else choices)
    return Model(backend, family="qwen2.5").chat(ask, list(tools), decisions=decisions), backend


def points(result: Any) -> list[DecisionPoint]:
    return [d.point for d in result.decisions]


def test_every_redecoding_policy_states_its_switches_what_it_reads_and_changes() -> None:
    assert [p.switch for p in REDECODING] == [("call",), ("form",), ("guess", "fit"), ("held",), ("echo", "told"), ("more",),
                                              ("option",), ("samples",)]
    assert all(hasattr(Decisions(), n) for p in REDECODING for n in p.switch)
    assert all(p.reads and p.changes for p in REDECODING)
    # Only the echo and the vote act where the backend gives no distribution.
    assert [p.switch for p in REDECODING if not p.distribution] == [("echo", "told"), ("samples",)]


def test_the_docs_state_both_orders_as_the_code_does() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "decisions.md").read_text(encoding="utf-8")
    for name, policies in (("REDECODING", [n for p in REDECODING for n in p.switch]),
                           ("SETTLING", [p.switch for p in SETTLING])):
        stated = re.search(rf"`{name}`[^:]*: ([^.]*)\.", text)
        assert stated is not None, name
        assert re.findall(r"`(\w+)`", stated.group(1)) == policies, name


def test_call_writes_the_reply_under_the_branch_its_share_chose() -> None:
    choices = {"": {"<tool_call>": 0.2, "The": 0.8}}
    result, backend = turn(["The weather is fine."], Decisions(call=0.5), choices=choices)
    assert points(result) == [DecisionPoint.CALL] and not result.decisions[0].taken
    grammar = backend.grammars[0]
    assert grammar is not None and not matches(grammar, PARIS)  # the text branch alone
    result, backend = turn(["The weather is fine."], OFF, choices=choices)
    assert points(result) == [] and backend.grammars[0] is not None and matches(backend.grammars[0], PARIS)


FENCE_PARIS = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
LISTED = '```json\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```'


def test_form_writes_the_calls_as_one_list_on_its_share() -> None:
    choices = {"```json\n": {'{"': 0.9, "[": 0.1}}
    result, backend = turn([FENCE_PARIS, LISTED], Decisions(form=0.05), choices=choices)
    assert points(result) == [DecisionPoint.FORM] and result.decisions[0].taken
    assert result.raw == LISTED and [c.arguments for c in result.tool_calls] == [{"city": "Paris"}]
    # The first reply stopped where it began the single call; the list went on from the fence.
    assert backend.continued == [0, len("```json\n")]
    result, backend = turn([FENCE_PARIS], OFF, choices=choices)
    assert points(result) == [] and result.raw == FENCE_PARIS and len(backend.grammars) == 1


def test_guess_answers_a_guessed_call_in_text() -> None:
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    choices = {"": {"<tool_call>": 0.3, "The": 0.7}}
    made_up = tc("get_weather", city="Atlantis")
    result, _ = turn([made_up, "Paris is the capital."], Decisions(guess=0.75), ask=ask, choices=choices)
    assert points(result) == [DecisionPoint.GUESS] and result.content == "Paris is the capital."
    assert not result.tool_calls
    # fit turns it on too: a call to a tool nothing in the conversation speaks of.
    result, _ = turn([made_up, "Paris is the capital."], Decisions(fit=0.75), ask=ask, choices=choices)
    assert points(result) == [DecisionPoint.FIT] and not result.tool_calls
    result, backend = turn([made_up], OFF, ask=ask, choices=choices)
    assert points(result) == [] and result.tool_calls and len(backend.grammars) == 1


def test_held_makes_a_text_answer_the_call_asked_for() -> None:
    ask = [{"role": "user", "content": "Who discovered the neutron?"}]
    answer, call = "I think it was someone famous.", tc("get_discoverer", discovery="neutron")
    result, _ = turn([answer, call], Decisions(held=True), ask=ask, tools=(get_discoverer,))
    assert points(result) == [DecisionPoint.HELD] and result.tool_calls[0].arguments == {"discovery": "neutron"}
    result, backend = turn([answer], OFF, ask=ask, tools=(get_discoverer,))
    assert points(result) == [] and result.content == answer and len(backend.grammars) == 1


# A request in three scripts, and answers that write one of them back (whole, cut short, with
# their case or spacing changed) or not.
REQUESTS = ["Go into the document folder and create a file called TeamNotes.txt please",
            "请进入文档文件夹，在里面创建一个名为团队笔记的新文件，用来记录大家的想法。",
            "Por favor crea en la carpeta de documentos un archivo llamado notas.txt"]


def echoes_of(request: str) -> list[str]:
    cut = request[: max(len(request) * 2 // 3, 20)]
    return [request, cut, cut.upper(), " ".join(request.split()) + " " + request[:10], request.replace(" ", "  ")]


@pytest.mark.parametrize("request_", REQUESTS)
def test_echo_makes_a_written_back_request_a_call(request_: str) -> None:
    ask = [{"role": "user", "content": request_}]
    call = tc("get_weather", city="Paris")
    for echo in echoes_of(request_):
        result, _ = turn([echo, call], Decisions(echo=True), ask=ask)
        assert points(result) == [DecisionPoint.ECHO], echo
        made = result.decisions[0]
        assert made.taken and json.loads(made.before or "") == echo and result.tool_calls[0].name == "get_weather"
        assert made.argument == request_
        result, backend = turn([echo], OFF, ask=ask)
        assert points(result) == [] and result.content == echo.strip() and len(backend.grammars) == 1


def test_echo_reads_every_user_message_and_leaves_answers_alone() -> None:
    earlier = [{"role": "user", "content": REQUESTS[0]}, {"role": "assistant", "content": "Done."},
               {"role": "user", "content": "And what about the weather in Paris?"}]
    call = tc("get_weather", city="Paris")
    # The first request written back while the second is asked is an echo too.
    result, _ = turn([REQUESTS[0], call], Decisions(echo=True), ask=earlier)
    assert points(result) == [DecisionPoint.ECHO] and result.tool_calls
    # Answers that use the request's words without opening with them stand, with no decode more.
    for answer in ["I created the file called TeamNotes.txt in the document folder.",
                   "已经在文档文件夹里创建了名为团队笔记的文件。", "Paris", "Done: the document folder now holds TeamNotes.txt."]:
        result, backend = turn([answer], Decisions(echo=True), ask=earlier)
        assert points(result) == [] and result.content == answer and len(backend.grammars) == 1, answer
    # An answer that restates a short request's subject, as answers in Japanese and Chinese do.
    for question, answer in [("富士山の高さはどれくらいですか？", "富士山の高さは約3,776メートルです。"),
                             ("明天上海的天气怎么样？", "明天上海的天气是晴朗的，温度约为22°C。"),
                             ("What is the weather in Paris right now?", "The weather in Paris right now is sunny.")]:
        result, backend = turn([answer], Decisions(echo=True), ask=[{"role": "user", "content": question}])
        assert points(result) == [] and result.content == answer and len(backend.grammars) == 1, answer


def test_echo_reads_the_models_own_earlier_answer_written_again() -> None:
    answer = "You cannot create a ticket because you are not authenticated."
    asked = [{"role": "user", "content": "create a ticket"}, {"role": "assistant", "content": answer},
             {"role": "user", "content": "What is the weather in Paris?"}]
    result, _ = turn([answer, tc("get_weather", city="Paris")], Decisions(echo=True), ask=asked)
    assert points(result) == [DecisionPoint.ECHO] and result.tool_calls[0].arguments == {"city": "Paris"}


@pytest.mark.parametrize("told", [
    "To see it, you can use the `get_weather` function with the city.",
    "Use `get_weather` with the city set to Paris, then read its result.",
    "Puedes usar la herramienta `get_weather` para eso.",
    "你可以用 `get_weather` 函数查询巴黎的天气。",
    "Llama a get_weather(city) con la ciudad.",
])
def test_told_makes_a_tool_written_as_code_a_call_to_it(told: str) -> None:
    ask = [{"role": "user", "content": "Paris weather?"}]
    tools = (get_weather, distance)
    result, backend = turn([told, tc("get_weather", city="Paris")], Decisions(told=True), ask=ask, tools=tools)
    assert points(result) == [DecisionPoint.TOLD] and result.decisions[0].argument == "get_weather"
    assert result.tool_calls[0].name == "get_weather"
    # The call is written to the tools the text named, and to no other.
    assert backend.grammars[1] is not None and not matches(backend.grammars[1], tc("distance", body1="a", body2="b"))
    result, backend = turn([told], OFF, ask=ask, tools=tools)
    assert points(result) == [] and len(backend.grammars) == 1


@pytest.mark.parametrize("answer", ["The weather in Paris is sunny.", "I can't get the weather (no city given).",
                                    "Use `ls` to see the files.", "get weather for Paris"])
def test_told_leaves_an_answer_that_writes_no_offered_tool_as_code(answer: str) -> None:
    result, backend = turn([answer], Decisions(told=True, echo=True), tools=(get_weather, distance))
    assert points(result) == [] and result.content == answer and len(backend.grammars) == 1


def test_echo_keeps_the_text_where_the_call_was_already_made() -> None:
    call = tc("get_weather", city="Paris")
    arguments: Any
    for arguments in ('{"city": "Paris"}', {"city": "Paris"}):
        made: list[dict[str, Any]] = [{"role": "user", "content": REQUESTS[0]},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "rain"}]
        result, _ = turn([REQUESTS[0], call], Decisions(echo=True), ask=made)
        assert points(result) == [DecisionPoint.ECHO] and not result.decisions[0].taken
        assert result.content == REQUESTS[0] and not result.tool_calls
    # A call with other values is taken.
    result, _ = turn([REQUESTS[0], tc("get_weather", city="Lyon")], Decisions(echo=True), ask=made)
    assert result.decisions[0].taken and result.tool_calls[0].arguments == {"city": "Lyon"}


def test_echo_keeps_the_text_where_guess_refuses_the_call() -> None:
    ask = [{"role": "user", "content": REQUESTS[0]}]
    guess = tc("get_weather", city="Tokyo")  # nobody said Tokyo
    choices = {"": {"<tool_call>": 0.01, "Go": 0.99}}
    result, _ = turn([REQUESTS[0], guess], Decisions(echo=True, guess=0.5), ask=ask, choices=choices)
    assert [d.point for d in result.decisions][-2:] == [DecisionPoint.ECHO, DecisionPoint.GUESS]
    assert not result.decisions[-2].taken and result.content == REQUESTS[0] and not result.tool_calls


def test_more_writes_another_call_on_its_share() -> None:
    choices = {PARIS: {"\n": 0.6, "": 0.4}, PARIS + "\n": {"<tool_call>": 0.5, "": 0.5},
               PARIS + "\n" + LONDON: {"": 1.0}}
    result, _ = turn([PARIS, PARIS + "\n" + LONDON], Decisions(more=0.25), choices=choices)
    assert points(result) == [DecisionPoint.MORE, DecisionPoint.MORE]
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    result, backend = turn([PARIS], OFF, choices=choices)
    assert points(result) == [] and len(result.tool_calls) == 1 and len(backend.grammars) == 1


def test_option_asks_for_an_argument_the_user_names() -> None:
    ask = [{"role": "user", "content": "How far is Mars from Venus? Give the unit as miles."}]
    before = tc("distance", body1="Mars", body2="Venus")
    after = tc("distance", body1="Mars", body2="Venus", unit="miles")
    result, _ = turn([before, after], Decisions(option=True), ask=ask, tools=(distance,))
    assert points(result) == [DecisionPoint.OPTION] and result.tool_calls[0].arguments["unit"] == "miles"
    result, backend = turn([before], OFF, ask=ask, tools=(distance,))
    assert points(result) == [] and "unit" not in result.tool_calls[0].arguments and len(backend.grammars) == 1


@pytest.mark.parametrize("distribution", [True, False])
def test_vote_draws_and_takes_the_calls_most_replies_agree_on(distribution: bool) -> None:
    """The vote needs no distribution: it acts on every backend."""
    choices: dict[str, Any] | None = {} if distribution else None
    backend = ScriptedBackend([PARIS, LONDON, LONDON], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(samples=3))
    assert points(result) == [DecisionPoint.VOTE] and result.tool_calls[0].arguments == {"city": "London"}
    result, backend = turn([PARIS], OFF)
    assert points(result) == [] and result.tool_calls[0].arguments == {"city": "Paris"} and result.attempts == 1


def test_guess_judges_the_calls_before_more_adds_any() -> None:
    """The order matters: ``guess`` judges the reply's own calls, before ``more`` adds one (which
    ``more`` judges on its own share)."""
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    choices = {"": {"<tool_call>": 0.9, "The": 0.1}, PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 1.0},
               PARIS + "\n" + LONDON: {"": 1.0}}
    result, _ = turn([PARIS, PARIS + "\n" + LONDON], Decisions(guess=0.5, more=0.5), ask=ask, choices=choices)
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    # Judged after more, Paris and London (half of the values said) would be a guess.
    assert points(result) == [DecisionPoint.MORE, DecisionPoint.MORE]


def test_echo_takes_a_call_an_earlier_request_made() -> None:
    # A new request may need the call an earlier one made: what the tool reads may have changed.
    made: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
        {"role": "assistant", "content": "It rains in Paris."},
        {"role": "user", "content": REQUESTS[0]}]
    result, _ = turn([REQUESTS[0], tc("get_weather", city="Paris")], Decisions(echo=True), ask=made)
    assert points(result) == [DecisionPoint.ECHO] and result.decisions[0].taken
    assert result.tool_calls[0].arguments == {"city": "Paris"}
