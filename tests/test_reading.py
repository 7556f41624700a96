"""The decisions read text in any script: a value written without spaces (Chinese, Japanese,
Thai), accents, full-width digits; and what they change is recorded, before and after.

Every test draws its text: values and the sentences around them are generated, so a reading that
only works on the words written here fails on the next draw."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from conftest import tc

from localtools import Model, ScriptedBackend, tool
from localtools.model._decide import (
    DecisionPoint,
    Decisions,
    as_fraction,
    conversation_text,
    cut_word,
    grounded,
    guessed,
    made_of,
    numbers_in,
    unfit,
)
from localtools.model._reading import plain, runs, unspaced, words

#: Characters of scripts written without spaces, by script.
SCRIPTS = {
    "han": "北京上海天气今明温度城市查询订单客户计划价格股票东南西中国人大小新旧年月日时分",
    "hiragana": "あいうえおかきくけこさしすせそたちつてとなにぬねの",
    "katakana": "アイウエオカキクケコサシスセソタチツテトナニヌネノ",
    "thai": "กขคฆงจฉชซญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮ",
}
SPACED = ["Oslo", "Málaga", "Zürich", "São Paulo", "Kraków", "Ñandú"]


def _draw(rng: random.Random, script: str, n: int) -> str:
    return "".join(rng.choice(SCRIPTS[script]) for _ in range(n))


WEATHER = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
DESCRIBED = {"get_weather": "Current weather for a city."}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_value_in_a_script_without_spaces_is_said_where_the_conversation_writes_it(script: str) -> None:
    rng = random.Random(script)
    for _ in range(40):
        value = _draw(rng, script, rng.randint(2, 4))
        before, after = _draw(rng, script, rng.randint(0, 6)), _draw(rng, script, rng.randint(0, 6))
        said = conversation_text([{"role": "user", "content": before + value + after + rng.choice(["？", "?", "。", ""])}])
        calls = [("get_weather", {"city": value})]
        # Said as written: no guess, made of what was said, and so no tool nobody spoke of.
        assert not guessed(calls, WEATHER, said), (value, said)
        assert made_of(calls, WEATHER, said)
        assert unfit(calls, DESCRIBED, said, WEATHER) == []
        assert grounded(value, said, {})
        # Its characters apart, or a value the conversation never writes, are not said.
        other = value[::-1]
        if other not in said:
            assert guessed([("get_weather", {"city": other})], WEATHER, said), (other, said)
            assert unfit([("get_weather", {"city": other})], DESCRIBED, said, WEATHER) == ["get_weather"]


def test_a_value_with_accents_or_in_full_width_letters_is_said_in_either_form() -> None:
    rng = random.Random(3)
    for city in SPACED:
        wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in city)
        for written in (city, city.upper(), wide):
            said = conversation_text([{"role": "user", "content": f"¿{rng.choice(['Qué', 'Cómo'])} tiempo hace en "
                                                                  f"{written} hoy?"}])
            assert not guessed([("get_weather", {"city": city})], WEATHER, said), (city, written)
            assert made_of([("get_weather", {"city": city})], WEATHER, said)


def test_numbers_are_read_in_full_width_digits_and_against_characters_of_any_script() -> None:
    rng = random.Random(5)
    for _ in range(40):
        n = rng.randint(1, 9999)
        wide = "".join(chr(ord(d) + 0xFEE0) for d in str(n))
        around = _draw(rng, rng.choice(sorted(SCRIPTS)), 3)
        for text in (f"{around}{n}{around}", f"{around}{wide}{around}", f"{around}{wide}％"):
            found = numbers_in(text)
            assert str(n) in found, (text, found)
            assert grounded(n, conversation_text([{"role": "user", "content": text}]), {})
        assert str(n / 100).rstrip("0").rstrip(".") in numbers_in(f"{around}{wide}％") or n % 100 == 0
    # A digit against a letter of a spaced script is part of a code, not a number.
    assert numbers_in("model A5 and B12") == frozenset()


def test_a_value_in_a_script_without_spaces_is_never_cut_as_a_word() -> None:
    rng = random.Random(9)
    for script in sorted(SCRIPTS):
        text = _draw(rng, script, 12)
        for i in range(1, len(text) - 1):
            assert cut_word(text[:i], text) == []
    # Spaced scripts still are: "Christian" goes on to "Christianity".
    assert cut_word("Christian", "the history of christianity".replace("c", "C", 1)) == ["ity"]


def test_words_split_a_script_without_spaces_into_characters_and_keep_spaced_words_whole() -> None:
    assert words("北京今天 weather in Málaga, ５０") == ["北", "京", "今", "天", "weather", "in", "málaga", "50"]
    assert runs("北京 and 東京タワー") == ["北京", "東京タワー"] and unspaced("東") and not unspaced("Tokyo")
    assert plain("ＡＢＣ  Ｄ") == "abc d"


@pytest.mark.parametrize("top", [100, 100.0, 5])
def test_percent_leaves_alone_a_number_whose_schema_takes_percentages(top: float) -> None:
    said = "a discount rate of 50%"
    assert as_fraction("discount_rate", 50, {"type": "number"}, said) == 0.5
    assert as_fraction("discount_rate", 50, {"type": "number", "maximum": top}, said) is None
    assert as_fraction("discount_rate", 50, {"type": "number", "exclusiveMaximum": top}, said) is None


def test_percent_never_writes_a_fraction_its_schema_refuses() -> None:
    said = "a discount rate of 5%"
    assert as_fraction("discount_rate", 5, {"type": "number", "maximum": 1}, said) == 0.05
    assert as_fraction("discount_rate", 5, {"type": "number", "minimum": 1}, said) is None
    assert as_fraction("discount_rate", 5, {"type": "number", "multipleOf": 0.1}, said) is None
    assert as_fraction("discount_rate", 5, {"type": "number", "multipleOf": 0.01}, said) == 0.05


@tool
def get_price(symbol: str, currency: str = "USD", rate: float = 0.0) -> str:
    """The price of a stock."""
    return symbol


def test_every_value_a_lever_changes_is_recorded_before_and_after() -> None:
    ask = [{"role": "user", "content": "Price of AAPL with a rate of 5%?"}]
    reply = (tc("get_price", symbol="AAPL", currency="EUR", rate=5) + "\n" +
             tc("get_price", symbol="AAPL", currency="EUR", rate=5))
    result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(
        ask, [get_price], decisions=Decisions(distinct=True, percent=True, ground=True))
    assert [c.arguments for c in result.tool_calls] == [{"symbol": "AAPL", "rate": 0.05}]
    records = {(d.point, d.argument): (d.before, d.after) for d in result.decisions}
    # distinct reads the calls as percent and ground left them.
    assert records[DecisionPoint.DISTINCT, "get_price"] == (json.dumps({"symbol": "AAPL", "rate": 0.05}), None)
    assert records[DecisionPoint.PERCENT, "get_price.rate"] == ("5", "0.05")
    assert records[DecisionPoint.GROUND, "get_price.currency"] == ('"EUR"', None)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return city


@pytest.mark.parametrize("still_a_call", [False, True])
def test_a_refused_guess_is_answered_in_the_models_own_words(still_a_call: bool) -> None:
    """After a refused guess whose text branch was the call again, the model is told why and
    writes its answer again (in the user's language: no fixed sentence replaces it); a model that
    still writes the call keeps it, as greedy wrote it."""
    ask = [{"role": "user", "content": "今天天气怎么样？"}]
    made_up = tc("get_weather", city="Atlantis")
    again = 'Sure! {"name": "get_weather", "arguments": {"city": "Atlantis"}}'
    own = "请问您想查询哪个城市的天气？"
    third = again if still_a_call else own
    backend = ScriptedBackend([made_up, again, third], choices={"": {"<tool_call>": 0.2, "The": 0.8}})
    result = Model(backend, family="qwen2.5").chat(ask, [get_weather], decisions=Decisions(guess=0.75))
    (decision,) = [d for d in result.decisions if d.point is DecisionPoint.ASK]
    # The third decode read a note on why the call may not be made, naming the value it lacks.
    assert "`city`" in backend.prompts[2].text and "`city`" not in backend.prompts[0].text
    if still_a_call:
        assert not decision.taken and [c.arguments for c in result.tool_calls] == [{"city": "Atlantis"}]
    else:
        assert decision.taken and result.content == own and not result.tool_calls
        assert decision.before is not None and json.loads(decision.after or "") == own


ORDERS = {"list_orders": {"type": "object", "required": ["customer"], "properties": {
    "customer": {"type": "string"}, "order": {"type": "string", "enum": ["asc", "desc"]},
    "include_archived": {"type": "boolean", "default": False}, "note": {"type": "string"}}}}


@pytest.mark.parametrize("request_text", ["List the orders of Ada, newest first, archived ones too.",
                                          "列出 Ada 的订单，最新的在前，包括已归档的。",
                                          "Ada の注文を新しい順に、アーカイブ済みも含めて一覧にして。",
                                          "Lista los pedidos de Ada, los más recientes primero, incluidos los archivados."])
def test_ground_leaves_a_closed_value_alone_unless_asked_to_read_it(request_text: str) -> None:
    """A user says an enum value or a boolean in words of their own ("newest first" for
    ``desc``, in any language): the default ground never judges them; ``closed`` (an English
    reading, in the bfcl profile) does."""
    from localtools.model._decide import ungrounded

    said = conversation_text([{"role": "user", "content": request_text}])
    rng = random.Random(request_text)
    for _ in range(10):
        invented = "".join(rng.choice("qxzvwk") for _ in range(6))
        args = {"customer": "Ada", "order": rng.choice(["asc", "desc"]), "include_archived": True, "note": invented}
        # A free value nobody said is still left out; the closed ones stand.
        assert ungrounded("list_orders", args, ORDERS["list_orders"], said, closed=False) == ["note"]
        assert "order" in ungrounded("list_orders", args, ORDERS["list_orders"], said, closed=True)


@tool
def list_orders(customer: str, order: str = "asc", include_archived: bool = False, note: str = "") -> str:
    """List a customer's orders."""
    return customer


def test_two_calls_that_differ_only_in_what_ground_left_out_are_one_call() -> None:
    ask = [{"role": "user", "content": "List the orders of Ada."}]
    reply = tc("list_orders", customer="Ada", note="zzqx") + "\n" + tc("list_orders", customer="Ada")
    result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(
        ask, [list_orders], decisions=Decisions(distinct=True, ground=True))
    assert [c.arguments for c in result.tool_calls] == [{"customer": "Ada"}]
    assert [d.point for d in result.decisions] == [DecisionPoint.GROUND, DecisionPoint.DISTINCT]


@tool
def player_status(team: str, season: int) -> str:
    """A team's standing in a season."""
    return team


def test_cover_reads_the_request_being_answered_not_an_earlier_one() -> None:
    """A list an earlier request named ("2017, 2018 and 2019") is no list in "and 2020?": after
    the earlier turn's calls and results, one call for 2020 ends the turn."""
    first = [{"role": "user", "content": "Did team Rocket top the scores in seasons 2017, 2018 and 2019?"}]
    made = [{"id": f"c{y}", "type": "function", "function": {"name": "player_status", "arguments": json.dumps(
        {"team": "Rocket", "season": y})}} for y in (2017, 2018, 2019)]
    history: list[dict[str, Any]] = [*first, {"role": "assistant", "content": "", "tool_calls": made},
               *({"role": "tool", "tool_call_id": f"c{y}", "content": "top"} for y in (2017, 2018, 2019)),
               {"role": "assistant", "content": "Yes, each season."},
               {"role": "user", "content": "And in 2020?"}]
    call = tc("player_status", team="Rocket", season=2020)
    low = {"<tool_call>": 0.001, "": 0.999}
    backend = ScriptedBackend([call], choices={call: {"\n": 1.0}, call + "\n": low})
    result = Model(backend, family="qwen2.5").chat(history, [player_status], decisions=Decisions(more=0.25, cover=True))
    assert [c.arguments["season"] for c in result.tool_calls] == [2020]
    assert not [d for d in result.decisions if d.point is DecisionPoint.COVER]


@tool
def discount(price: float, rate: float) -> float:
    """Apply a discount to a price."""
    return price * (1 - rate)


def test_the_agent_trace_and_its_run_file_hold_each_change_before_and_after(tmp_path: Any) -> None:
    from localtools import Agent
    from localtools.agent._runfile import replay

    backend = ScriptedBackend([tc("discount", price=80, rate=5), "It costs 76."])
    model = Model(backend, family="qwen2.5", decisions=Decisions(percent=True))
    path = tmp_path / "run.jsonl"
    result = Agent(model, [discount]).run("What does an 80 euro coat cost with a 5% discount rate?", run_file=path)
    (change,) = [d for d in result.trace[0].decisions if d.point is DecisionPoint.PERCENT]
    assert (change.argument, change.before, change.after) == ("discount.rate", "5", "0.05")
    read = replay(path)
    assert [d for d in read.trace[0].decisions if d.point is DecisionPoint.PERCENT] == [change]


REQUESTS = {
    "en": ["What is the weather in {x}?", "Can you book a table at {x}?", "Show me the orders of {x}, please.",
           "And in {x}?", "How far is {x} from here?"],
    "zh": ["{x}今天天气怎么样？", "帮我订一张去{x}的票", "{x}的订单发货了吗？"],
    "ja": ["{x}の天気は？", "{x}行きの切符を予約して", "{x}の注文は発送されましたか？"],
    "es": ["¿Qué tiempo hace en {x}?", "Reserva una mesa en {x}", "¿Ya se envió el pedido de {x}?",
           "Convierte 100 dólares a euros en {x}", "¿Y en {x}?"],
    "de": ["Wie ist das Wetter in {x}?", "Buche einen Tisch in {x}"],
    "fr": ["Quel temps fait-il à {x} ?", "Réserve une table à {x}"],
}


def test_a_request_is_read_as_english_only_when_it_is() -> None:
    from localtools.model._decide import english

    rng = random.Random(12)
    for language, patterns in REQUESTS.items():
        for pattern in patterns:
            for _ in range(5):
                x = rng.choice(["Oslo", "Lima", "Ada", "北京", "Málaga"])
                assert english(pattern.format(x=x)) is (language == "en" and not unspaced(x)), (language, pattern, x)


@tool
def get_forecast(city: str, unit: str = "celsius") -> str:
    """Current weather for a city."""
    return city


@pytest.mark.parametrize("language", ["zh", "ja", "es"])
def test_guess_and_fit_leave_a_request_they_cannot_read_to_the_model_s_lean(language: str) -> None:
    """On a request not in English no word of it is a tool's word: fit and guess refuse only where
    the model's own share for a call is under ``other`` (it leans to text), whatever their threshold."""
    ask = [{"role": "user", "content": REQUESTS[language][0].format(x="Oslo" if language == "es" else "奥斯陆")}]
    # A value the model translated ("Oslo" for 奥斯陆; "London" for Oslo): no word of the request holds it.
    call = tc("get_forecast", city="London")
    for share, refused in ((0.85, False), (0.45, False), (0.25, True), (0.1, True)):
        backend = ScriptedBackend([call, "没有。", "no"], choices={"": {"<tool_call>": share, "No": 1 - share}})
        result = Model(backend, family="qwen2.5").chat(ask, [get_forecast], decisions=Decisions(guess=0.75, fit=0.9))
        assert bool(result.tool_calls) is not refused, (share, result.decisions)
        judged = [d for d in result.decisions if d.point in (DecisionPoint.GUESS, DecisionPoint.FIT)]
        assert judged and all(d.threshold == 0.3 for d in judged)


def test_an_enum_value_is_no_word_a_call_must_be_made_of_unless_closed() -> None:
    said = conversation_text([{"role": "user", "content": "深圳现在多少度？用华氏度"}])
    schema = {"get_forecast": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}
    calls = [("get_forecast", {"city": "深圳", "unit": "fahrenheit"})]
    assert made_of(calls, schema, said, closed=False) and not made_of(calls, schema, said, closed=True)


@pytest.mark.parametrize("closer", ["»", "」", "”", "。", "！", "’", ")", "."])
def test_a_word_s_closing_mark_in_any_script_is_no_part_of_the_word(closer: str) -> None:
    said = f"pon como asunto «buenos días{closer} y envíalo"
    assert cut_word("buenos días", said) == [] and cut_word("buen", said) == ["os"]
    assert cut_word("buenos d", said) == ["ías"]


def test_number_never_pushes_one_digit_on_into_a_longer_number() -> None:
    """"dos personas a las 20:30": the 2 the model writes for "dos" is not pushed on to 20; a
    number of two digits or more still goes on to the one the conversation writes."""
    from localtools.model._decide import number_ahead

    rng = random.Random(8)
    for _ in range(40):
        n = rng.randint(10, 99999)
        said = f"para dos personas a las {n}"
        head = '{"name": "book", "arguments": {"party_size": '
        assert number_ahead(head + str(n)[0], said) == {}
        assert number_ahead(head + str(n)[:2], said) == ({str(n)[2]: 1.0} if n >= 100 else {})
