"""Decisions on the model's own probabilities where the grammar allows a choice: call or text,
another call or the end, a repeated call left out (``Decisions``)."""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import tc

from localtools import Model, ScriptedBackend, tool
from localtools._errors import UsageError
from localtools.backends._base import NextTokens
from localtools.examples import get_customer
from localtools.grammar import build_grammar, matches
from localtools.model._decide import DecisionPoint, Decisions, branch_shares, conversation_text, grammar_branch


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


ASK = [{"role": "user", "content": "Weather in Paris and in London?"}]
PARIS, LONDON = tc("get_weather", city="Paris"), tc("get_weather", city="London")


def test_the_call_decision_follows_the_share_against_the_threshold() -> None:
    rng = random.Random(7)
    for _ in range(12):
        share, threshold = round(rng.uniform(0.02, 0.98), 3), round(rng.uniform(0.05, 0.95), 2)
        # The call's mass is split over two openings (the tag and a fence), the text's over words.
        choices = {"": {"<tool_call>": share * 0.7, "```json\n": share * 0.3, "The": (1 - share) * 0.6,
                        "It": (1 - share) * 0.4}}
        calls = share >= threshold
        backend = ScriptedBackend([PARIS if calls else "The weather is fine."], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(call=threshold))
        (decision,) = result.decisions
        assert decision.point is DecisionPoint.CALL and decision.share == pytest.approx(share)
        assert decision.taken is calls and bool(result.tool_calls) is calls
        # The turn was decoded under the chosen branch alone.
        grammar = backend.grammars[-1]
        assert grammar is not None
        assert matches(grammar, PARIS) is calls and matches(grammar, "The weather is fine.") is not calls


def test_mass_the_grammar_refuses_counts_for_neither_branch() -> None:
    # A reply opens with no space, as a call or as text: that mass is left out of the shares.
    choices = {"": {"<tool_call>": 0.2, "Sure": 0.2, " ": 0.6}}
    result = Model(ScriptedBackend([PARIS], choices=choices), family="qwen2.5").chat(
        ASK, [get_weather], decisions=Decisions(call=0.5))
    assert result.decisions[0].share == pytest.approx(0.5) and result.tool_calls


def test_no_readable_mass_is_no_call_and_says_so() -> None:
    result = Model(ScriptedBackend(["Hello."], choices={}), family="qwen2.5").chat(
        ASK, [get_weather], decisions=Decisions(call=0.1))
    assert result.decisions[0].share is None and not result.decisions[0].taken and result.content == "Hello."


def test_another_call_follows_a_token_that_fits_both_branches() -> None:
    # After the first call a newline may close the calls or separate another: it is followed one
    # token further (another tag, or the end).
    choices = {PARIS: {"\n": 0.6, "": 0.4}, PARIS + "\n": {"<tool_call>": 0.5, "": 0.5},
               PARIS + "\n" + LONDON: {"": 1.0}}
    backend = ScriptedBackend([PARIS, PARIS + "\n" + LONDON], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(more=0.25))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    first, second = result.decisions
    assert first.point is DecisionPoint.MORE and first.calls == 1 and first.share == pytest.approx(0.3) and first.taken
    assert second.calls == 2 and second.share == 0 and not second.taken
    # The second generation had to write two calls.
    grammar = backend.grammars[1]
    assert grammar is not None and not matches(grammar, PARIS) and matches(grammar, PARIS + "\n" + LONDON)
    assert result.attempts == 2
    # It went on from the first reply where the decision stood, not from its start.
    assert backend.continued == [0, len(PARIS)]


def test_below_the_threshold_the_turn_ends_after_its_call() -> None:
    choices = {PARIS: {"": 0.9, "\n": 0.1}, PARIS + "\n": {"<tool_call>": 1.0}}
    backend = ScriptedBackend([PARIS], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(more=0.25))
    assert len(result.tool_calls) == 1 and result.decisions[0].share == pytest.approx(0.1)
    assert result.attempts == 1


def test_a_continuation_that_repeats_a_call_is_not_taken() -> None:
    choices = {PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 1.0}}
    backend = ScriptedBackend([PARIS, *[PARIS + "\n" + PARIS] * 3], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(more=0.5))
    assert [c.arguments for c in result.tool_calls] == [{"city": "Paris"}] and result.decisions[0].taken
    # Tried again with each repeat penalty before it gives up.
    assert backend.repeat_penalties == [1.0, 1.0, 1.1, 1.3]


def test_a_repeat_penalty_can_find_the_new_call() -> None:
    choices = {PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 1.0}, PARIS + "\n" + LONDON: {"": 1.0}}
    backend = ScriptedBackend([PARIS, PARIS + "\n" + PARIS, PARIS + "\n" + LONDON], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(more=0.5))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    assert backend.repeat_penalties == [1.0, 1.0, 1.1]


@tool
def get_time(zone: str) -> str:
    """The time in a time zone."""
    return f"noon in {zone}"


@pytest.mark.parametrize("city", ["Berlin", "Oslo", "Lima", "Cairo"])
def test_a_further_call_that_is_a_guess_is_refused_as_a_first_one_would_be(city: str) -> None:
    # "Weather in Paris and in London?": a further call for a city nobody named is a guess, on a
    # share for another call under the guess threshold; the reply it had stands.
    other = tc("get_weather", city=city)
    choices = {PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 0.4, "": 0.6}}
    for threshold, refused in ((0.75, True), (0.3, False)):
        backend = ScriptedBackend([PARIS, PARIS + "\n" + other], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ASK, [get_weather],
                                                        decisions=Decisions(more=0.25, guess=threshold))
        cities = [c.arguments["city"] for c in result.tool_calls]
        assert cities == (["Paris"] if refused else ["Paris", city])
        points = [(d.point, d.taken) for d in result.decisions]
        assert points[0] == (DecisionPoint.MORE, True)
        if refused:
            assert points[1] == (DecisionPoint.GUESS, True) and result.decisions[1].calls == 1
            assert result.decisions[1].share == pytest.approx(0.4)


def test_a_further_call_the_question_holds_stands_under_guess_and_fit() -> None:
    choices = {PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 0.4, "": 0.6}, PARIS + "\n" + LONDON: {"": 1.0}}
    backend = ScriptedBackend([PARIS, PARIS + "\n" + LONDON], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather, get_time],
                                                    decisions=Decisions(more=0.25, guess=0.75, fit=0.9))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    assert DecisionPoint.GUESS not in {d.point for d in result.decisions}


def test_a_further_call_to_a_tool_nobody_spoke_of_is_refused_under_fit() -> None:
    # Its value is the question's (Paris), but nothing asked for a time.
    other = tc("get_time", zone="Paris")
    choices = {PARIS: {"\n": 1.0}, PARIS + "\n": {"<tool_call>": 0.4, "": 0.6}}
    for fit, names in ((0.9, ["get_weather"]), (None, ["get_weather", "get_time"])):
        backend = ScriptedBackend([PARIS, PARIS + "\n" + other], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ASK, [get_weather, get_time],
                                                        decisions=Decisions(more=0.25, fit=fit))
        assert [c.name for c in result.tool_calls] == names
        if fit is not None:
            refused = result.decisions[-1]
            assert refused.point is DecisionPoint.FIT and refused.taken and refused.argument == "get_time"


@tool
def player_status(team: str, season: int) -> str:
    """A team's player status in a season."""
    return team


def test_uncovered_names_what_the_user_listed_beside_a_used_value() -> None:
    """Generated lists of numbers and of names, joined by commas and "and"/"or": each value the
    calls left out of such a list is uncovered; a value's unlike neighbour ("Miami, Florida",
    "Berlin and I", "10 and Paris"), or one every call used, is not."""
    from localtools.model._decide import covers, uncovered

    rng = random.Random(3)
    names = ["Paris", "Berlin", "New York", "Tokyo", "Lima", "San Diego", "Cairo"]
    for _ in range(50):
        if rng.random() < 0.5:
            items = [str(v) for v in rng.sample(range(1990, 2030), rng.randint(2, 4))]
            key = "season"
        else:
            items = rng.sample(names, rng.randint(2, 4))
            key = "city"
        joined = ", ".join(items[:-1]) + rng.choice([" and ", ", and ", " or "]) + items[-1]
        said = f"Check the scores for {joined}{rng.choice([', please.', '.', '?', ''])}"
        done = rng.randint(1, len(items) - 1)
        value = (lambda v: int(v)) if key == "season" else (lambda v: v)
        calls = [("lookup", {key: value(v)}) for v in items[:done]]
        left = uncovered(calls, said)
        # Every listed value not called is named; the ones called never are.
        assert left == items[done:], (said, done, left)
        assert not set(left) & set(items[:done])
        assert covers([("lookup", {key: value(items[done])})], left)
        assert not covers(calls, left)
        assert uncovered([("lookup", {key: value(v)}) for v in items], said) == []
    unlike: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
        ("Humidity in Miami, Florida?", [("w", {"city": "Miami"})]),
        ("Concerts in Berlin and I want parking", [("c", {"city": "Berlin"})]),
        ("Seats for 10 and Paris", [("s", {"n": 10})]),
        ("between 2012 and 2015", [("r", {"start": 2012, "end": 2015})]),
        ("filed after January 1, 2021", [("l", {"year": 2021})]),
        ("teams Lakers and Clippers", [("g", {"teams": ["Lakers", "Clippers"]})])]
    for said, other in unlike:
        assert uncovered(other, said) == [], said


def test_cover_writes_another_call_for_a_listed_value_and_keeps_it_only_if_it_uses_one() -> None:
    ask = [{"role": "user", "content": "Did team Rocket top the scores in seasons 2017, 2018 and 2019?"}]
    first, second, third = (tc("player_status", team="Rocket", season=y) for y in (2017, 2018, 2019))
    stray = tc("player_status", team="Rocket", season=2023)
    # The model would end the turn after each call (another call: 0.1 % of its mass).
    low = {"<tool_call>": 0.001, "": 0.999}
    choices = {first: {"\n": 1.0}, first + "\n": low, first + "\n" + second: {"\n": 1.0},
               first + "\n" + second + "\n": low, "\n".join([first, second, third]): {"": 1.0}}
    for decisions, replies, seasons in (
            (Decisions(more=0.25, cover=True), [first, first + "\n" + second, "\n".join([first, second, third])],
             [2017, 2018, 2019]),
            (Decisions(more=0.25), [first], [2017]),
            (Decisions(more=0.25, cover=True), [first, first + "\n" + stray], [2017])):
        backend = ScriptedBackend(replies, choices=choices)
        result = Model(backend, family="qwen2.5").chat(ask, [player_status], decisions=decisions)
        assert [c.arguments["season"] for c in result.tool_calls] == seasons, decisions
        covered = [d for d in result.decisions if d.point is DecisionPoint.COVER]
        if decisions.cover:
            assert covered[0].argument == "2018, 2019" and covered[0].calls == 1
            assert covered[0].taken is (seasons != [2017])
        else:
            assert covered == []
    # Names are read as the user wrote them, capitals and all ("Berlin and Paris").
    berlin, paris = tc("get_weather", city="Berlin"), tc("get_weather", city="Paris")
    backend = ScriptedBackend([berlin, berlin + "\n" + paris],
                              choices={berlin: {"\n": 1.0}, berlin + "\n": low, berlin + "\n" + paris: {"": 1.0}})
    result = Model(backend, family="qwen2.5").chat([{"role": "user", "content": "Weather in Berlin and Paris?"}],
                                                    [get_weather], decisions=Decisions(more=0.25, cover=True))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Berlin", "Paris"]
    assert [(d.point, d.argument, d.taken) for d in result.decisions if d.point is DecisionPoint.COVER] == [
        (DecisionPoint.COVER, "Paris", True)]
    with pytest.raises(UsageError, match="true or false"):
        Decisions.from_dict({"cover": 1})
    assert Decisions.from_dict({"cover": True}).cover


def test_distinct_leaves_out_a_repeated_call_and_says_which() -> None:
    reply = "\n".join([PARIS, LONDON, PARIS])
    result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(ASK, [get_weather],
                                                                   decisions=Decisions(distinct=True))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    assert [(d.point, d.calls) for d in result.decisions] == [(DecisionPoint.DISTINCT, 2)]
    # Without the option the reply is read as written.
    again = Model(ScriptedBackend([reply]), family="qwen2.5").chat(ASK, [get_weather])
    assert len(again.tool_calls) == 3 and again.decisions == ()


def test_a_backend_without_its_distribution_decides_greedily() -> None:
    backend = ScriptedBackend([PARIS])
    assert not backend.capabilities.next_tokens
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(call=0.9, more=0.1))
    assert result.tool_calls and result.decisions == ()


def test_the_model_default_applies_and_a_request_overrides_it() -> None:
    choices = {"": {"<tool_call>": 0.4, "The": 0.6}}
    model = Model(ScriptedBackend([PARIS, "Fine."], choices=choices), family="qwen2.5",
                  decisions=Decisions(call=0.3))
    assert model.chat(ASK, [get_weather]).tool_calls
    assert not model.chat(ASK, [get_weather], decisions=Decisions(call=0.5)).tool_calls


@pytest.mark.parametrize("bad", [dict(call=1.5), dict(more=-0.1), dict(max_calls=0), dict(k=0)])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        Decisions(**bad)


def test_settings_from_a_file_refuse_unknown_keys() -> None:
    assert Decisions.from_dict({"call": 0.4, "more": 0.2}) == Decisions(call=0.4, more=0.2)
    with pytest.raises(UsageError, match="thresh"):
        Decisions.from_dict({"thresh": 0.4})


def test_min_calls_makes_the_grammar_require_that_many() -> None:
    from localtools.families._families import get_family

    family = get_family("qwen2.5")
    spec = [get_weather.spec(), get_customer.spec()]
    two = build_grammar(family, spec, "required", min_calls=2)
    assert not matches(two, PARIS) and matches(two, PARIS + "\n" + LONDON)
    with pytest.raises(UsageError, match="parallel"):
        build_grammar(family, spec, "required", parallel_tool_calls=False, min_calls=2)
    with pytest.raises(UsageError, match="min_calls"):
        build_grammar(family, spec, "required", max_parallel_calls=3, min_calls=4)


def test_branch_shares_normalise_over_the_fitting_mass() -> None:
    class Table:
        def next_tokens(self, prompt: Any, reply: Any = (), *, k: int = 20) -> list[Any]:
            from localtools.backends._base import TokenChoice
            return [TokenChoice(1, "a", math.log(0.3)), TokenChoice(2, "b", math.log(0.1)),
                    TokenChoice(3, "z", math.log(0.6))]

        def reply_text(self, reply: Any) -> str:
            return ""

    assert isinstance(Table(), NextTokens)
    from localtools.grammar import Grammar, Lit, alt
    branches = {"a": grammar_branch(Grammar({"root": alt(Lit("a1"), Lit("a2"))})),
                "b": grammar_branch(Grammar({"root": Lit("b")}))}
    shares = branch_shares(Table(), None, [], "", branches, k=3, depth=1)  # type: ignore[arg-type]
    assert shares == pytest.approx({"a": 0.75, "b": 0.25})


def test_real_distribution_agrees_with_greedy_decoding(qwen: Model) -> None:
    """On real weights: the top choice is the token greedy decoding writes first, the shares are
    probabilities, and a threshold of 0 calls while 1 answers in text (unless every bit of mass
    is a call's)."""
    backend = qwen.backend
    assert backend.capabilities.next_tokens and isinstance(backend, NextTokens)
    prompt = qwen.render(ASK, [get_weather])
    top = backend.next_tokens(prompt, k=5)
    assert [t.logprob for t in top] == sorted((t.logprob for t in top), reverse=True)
    assert 0 < sum(math.exp(t.logprob) for t in top) <= 1 + 1e-6
    free = backend.generate(prompt, max_tokens=1)
    assert free.tokens[:1] == [top[0].token] or free.tokens == []
    hello = [{"role": "user", "content": "Hi! How are you today?"}]
    calls = qwen.chat(hello, [get_weather], decisions=Decisions(call=0.0), max_tokens=64)
    assert calls.tool_calls and calls.decisions[0].taken
    share = calls.decisions[0].share
    assert share is not None and 0 <= share < 0.5  # a greeting is no call
    words = qwen.chat(hello, [get_weather], decisions=Decisions(call=0.5), max_tokens=16)
    # A reused prompt cache moves the logits a little.
    assert not words.tool_calls and words.content and words.decisions[0].share == pytest.approx(share, rel=0.2)


@pytest.mark.model
def test_both_in_process_backends_read_the_same_distribution() -> None:
    """SmolLM2 on llama.cpp and on transformers (same weights): the same best tokens, close
    probabilities, and each one's top choice is what its own greedy decoding writes."""
    from conftest import load_once

    prompt: Any = None
    tops = []
    for backend_name in ("llama-cpp", "transformers"):
        model = load_once("smollm2-135m", backend_name)
        prompt = model.render(ASK, [get_weather])
        backend: Any = model.backend
        top = backend.next_tokens(prompt, k=3)
        first = backend.generate(prompt, max_tokens=1).tokens
        assert first == [top[0].token]
        # After a reply's tokens too (the cache holds the prompt and what was generated).
        after = backend.next_tokens(prompt, first, k=1)
        assert after[0].token == backend.generate(prompt, max_tokens=2).tokens[1]
        tops.append(top)
    (cpp, hf) = tops
    # The GGUF's quantized weights against their dequantized conversion: near, not equal.
    assert cpp[0].text == hf[0].text and {t.text for t in cpp} & {t.text for t in hf[1:]}
    assert math.exp(cpp[0].logprob) == pytest.approx(math.exp(hf[0].logprob), abs=0.1)


def test_heard_answers_for_the_positions_a_generation_picked_at_and_no_others() -> None:
    from localtools.backends._decode import Heard

    rng = random.Random(3)
    for _ in range(20):
        prompt = [rng.randrange(100) for _ in range(rng.randint(1, 6))]
        reply = [rng.randrange(100) for _ in range(rng.randint(1, 8))]
        rows = {}
        heard = Heard(prompt)
        picked = sorted(rng.sample(range(len(reply) + 1), rng.randint(1, len(reply) + 1)))
        for at in picked:
            rows[at] = [rng.gauss(0, 3) for _ in range(50)]
            heard.hear(reply[:at], rows[at])
        heard.end(reply)
        for at in range(len(reply) + 1):
            got = heard.choices(prompt + reply[:at], 5, str, lambda t: t == 0)
            if at not in rows:
                assert got is None  # a forced batch's inside: never read alone
                continue
            row = rows[at]
            norm = math.log(sum(math.exp(v) for v in row))
            best = sorted(range(50), key=lambda t: -row[t])[:5]
            assert got is not None and [c.token for c in got] == best
            assert [c.logprob for c in got] == pytest.approx([row[t] - norm for t in best])
            assert [c.text for c in got] == [str(t) for t in best] and [c.end for c in got] == [t == 0 for t in best]
            # Another prefix of the same length, or more tokens than were kept, is not heard.
            other = prompt + reply[:at]
            other[rng.randrange(len(other))] += 100
            assert heard.choices(other, 5, str, lambda t: False) is None
            assert heard.choices(prompt + reply[:at], Heard.K + 1, str, lambda t: False) is None


@pytest.mark.model
@pytest.mark.parametrize("backend_name", ["llama-cpp", "transformers"])
def test_a_decision_after_a_greedy_reply_reads_what_the_generation_saw(backend_name: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a greedy generation under a grammar, the distribution at each position it picked a
    token at comes from that generation (no model evaluation), and matches a fresh evaluation."""
    from conftest import load_once

    model = load_once("smollm2-135m", backend_name)
    backend: Any = model.backend
    prompt = model.render(ASK, [get_weather])
    gen = backend.generate(prompt, grammar=model.grammar([get_weather], "required"), max_tokens=40)
    heard = backend._heard
    assert heard is not None and heard.ids[heard.prompt:] == gen.tokens
    positions = sorted(at - heard.prompt for at in heard.at)
    assert positions and positions[0] == 0 and len(positions) < len(gen.tokens) + 1  # forced tokens were never read
    recorded = {at: backend.next_tokens(prompt, gen.tokens[:at], k=8) for at in positions}
    # Read again with the record gone, each evaluated by the model.
    monkeypatch.setattr(backend, "_heard", None)
    for at, choices in recorded.items():
        fresh = backend.next_tokens(prompt, gen.tokens[:at], k=8)
        assert choices[0].token == fresh[0].token
        # A batch of forced tokens and one token alone sum in another order: near, not equal
        # (more so in transformers' bfloat16).
        assert [math.exp(c.logprob) for c in choices[:3]] == pytest.approx([math.exp(c.logprob) for c in fresh[:3]],
                                                                            abs=0.05)
    # With the record, no evaluation at all: the model is not asked.
    monkeypatch.setattr(backend, "_heard", heard)
    asked = "_feed" if backend_name == "llama-cpp" else "_take_prefix"
    monkeypatch.setattr(backend, asked, lambda *a: pytest.fail("the model was evaluated again"))
    for at in positions:
        assert backend.next_tokens(prompt, gen.tokens[:at], k=8) == recorded[at]


def test_a_guess_is_a_call_whose_required_values_the_conversation_does_not_hold() -> None:
    from localtools.model._decide import guessed

    schema = {"area": {"type": "object", "required": ["shape", "width", "height", "unit"],
                       "properties": {"shape": {"type": "string"}, "width": {"type": "number"},
                                      "height": {"type": "number"}, "unit": {"enum": ["cm", "m"]},
                                      "exact": {"type": "boolean"}}}}
    said = conversation_text([{"role": "user", "content": "Area of a Rectangular field, 20 by 35.5 please"}])
    rng = random.Random(5)
    for _ in range(40):
        # Each required value either from the question (as written, re-cased, or a paraphrase
        # with the same stems) or made up; the enum and an optional value count neither way.
        held = [rng.random() < 0.5 for _ in range(3)]
        shape = rng.choice(["rectangular field", "RECTANGULAR", "rectangles_fields"]) if held[0] else \
            rng.choice(["circle", "square lot"])
        width = 20 if held[1] else rng.choice([7, 12.5])
        height = 35.5 if held[2] else rng.choice([3, 40])
        args = {"shape": shape, "width": width, "height": height, "unit": rng.choice(["cm", "m"]), "exact": True}
        assert guessed([("area", args)], schema, said) is (2 * sum(held) <= 3), args
    # Over several calls the values are pooled; calls with nothing to count are no guess.
    two = [("area", {"shape": "rectangular", "width": 20, "height": 35.5, "unit": "m"}),
           ("area", {"shape": "circle", "width": 20, "height": 2, "unit": "m"})]
    assert not guessed(two, schema, said) and guessed(two[1:], schema, said)
    assert not guessed([("area", {"unit": "m"})], schema, said) and not guessed([("other", {"x": 1})], schema, said)


@pytest.mark.parametrize("share", [0.3, 0.6, 0.9])
def test_a_guessed_call_under_the_threshold_is_answered_in_text(share: float) -> None:
    made_up = tc("get_weather", city="Atlantis")
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    choices = {"": {"<tool_call>": share, "The": 1 - share}}
    for reply, guess in ((made_up, True), (tc("get_weather", city="France"), False)):
        backend = ScriptedBackend([reply, "Paris is the capital."], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ask, [get_weather], decisions=Decisions(guess=0.75))
        refused = guess and share < 0.75
        assert bool(result.tool_calls) is not refused
        assert (result.content == "Paris is the capital.") is refused
        decisions = [d for d in result.decisions if d.point is DecisionPoint.GUESS]
        if not guess:
            assert decisions == []  # a grounded call is never in doubt
            continue
        (decision,) = decisions
        assert decision.share == pytest.approx(share) and decision.taken is refused and decision.reply == reply
        if refused:  # the text was decoded under the text branch alone
            grammar = backend.grammars[-1]
            assert grammar is not None and not matches(grammar, made_up)
    # A streamed turn is decided whole before any of it is sent: the same answer, the same decisions.
    from localtools.model._stream import TextDelta, TurnDone

    backend = ScriptedBackend([made_up, "Paris is the capital."], choices=choices)
    events = list(Model(backend, family="qwen2.5").stream(ask, [get_weather], decisions=Decisions(guess=0.75)))
    done = events[-1]
    assert isinstance(done, TurnDone) and bool(done.result.tool_calls) is not (share < 0.75)
    assert [d.taken for d in done.result.decisions if d.point is DecisionPoint.GUESS] == [share < 0.75]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == done.result.content
    # Only under tool_choice "auto": a call the request demands stands.
    backend = ScriptedBackend([made_up], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ask, [get_weather], tool_choice="required",
                                                   decisions=Decisions(guess=0.75))
    assert result.tool_calls and not result.decisions


def test_a_code_the_conversation_spells_out_is_no_guess() -> None:
    """A required value written as a code ("JPY") whose letters run through words of the
    conversation, each word giving its initial ("Japanese Yen"), is held; a code whose letters do
    not, is not."""
    from localtools.model._decide import guessed, unheld

    schema = {"convert": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}}}
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(60):
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(rng.randint(4, 9))]
        start = rng.randrange(len(words) - 2)
        code = ""
        for word in words[start:start + rng.randint(1, 3)]:
            rest = sorted(rng.sample(range(1, len(word)), k=min(len(word) - 1, rng.randint(0, 2))))
            code += word[0] + "".join(word[i] for i in rest)
        code = code[:5]
        if len(code) < 2:
            continue
        said = conversation_text([{"role": "user", "content": "Please convert " + " ".join(words)}])
        assert not guessed([("convert", {"code": code.upper()})], schema, said), (code, words)
        # A code no word of the conversation begins: a guess.
        other = next(c for c in letters if not any(w.startswith(c) for w in [*words, "please", "convert"]))
        assert guessed([("convert", {"code": (other + code[1:]).upper()})], schema, said), (code, words)
        assert unheld([("convert", {"code": (other + code[1:]).upper()})], schema, said) == [("convert", "code")]
    said = conversation_text([{"role": "user", "content": "How many US dollars is 500 Japanese Yen?"}])
    assert not guessed([("convert", {"code": "JPY"}), ("convert", {"code": "USD"})], schema, said)


def test_a_refused_guess_that_writes_its_call_again_asks_for_the_values_instead() -> None:
    """After a refused guess the text branch may not open as JSON; where its text holds the call
    anyway, the model is told which values the call would have guessed and asks for them."""
    made_up = tc("get_weather", city="Atlantis")
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    choices = {"": {"<tool_call>": 0.3, "The": 0.7}}
    again = 'Sure! {"name": "get_weather", "arguments": {"city": "Atlantis"}}'
    loose = 'Let me check: {"function": "get_weather", "args": {"city": "Atlantis"}}'
    own = "Which city do you mean?"
    for text, asked in ((again, True), (loose, True), ("Paris is the capital.", False)):
        backend = ScriptedBackend([made_up, text, own], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ask, [get_weather], decisions=Decisions(guess=0.75))
        assert not result.tool_calls
        grammar = backend.grammars[-1]
        assert grammar is not None
        for opening in ('{"answer": "Paris"}', '["Paris"]', "{", "[1, 2]"):
            assert not matches(grammar, opening), opening
        points = [d.point for d in result.decisions]
        if not asked:
            assert result.content == text and DecisionPoint.ASK not in points
            continue
        # The model, told which values it lacks, asks for them in its own words.
        assert result.content == own and "`city`" in backend.prompts[-1].text and "`get_weather`" in \
            backend.prompts[-1].text
        (decision,) = [d for d in result.decisions if d.point is DecisionPoint.ASK]
        assert decision.argument == "get_weather.city" and decision.taken
        # Stopped where the call object's keys began, or read whole.
        assert decision.reply == (text if text == loose else "Sure! {")
        assert json.loads(decision.before or "") == decision.reply and json.loads(decision.after or "") == own


def _weather_call(backend_name: str) -> tuple[Any, Any, Any, Any]:
    """SmolLM2 on ``backend_name``: the model, its backend, ASK's prompt and the grammar of a required call."""
    from conftest import load_once

    model = load_once("smollm2-135m", backend_name)
    return model, model.backend, model.render(ASK, [get_weather]), model.grammar([get_weather], "required")


@pytest.mark.model
@pytest.mark.parametrize("backend_name", ["llama-cpp", "transformers"])
def test_a_reply_goes_on_from_an_earlier_one_as_if_decoded_from_its_start(backend_name: str) -> None:
    """Going on from part of a greedy reply gives the reply decoding from the start gives, with
    only the rest generated; a reply the grammar refuses is refused."""
    from localtools._errors import GrammarError

    model, backend, prompt, grammar = _weather_call(backend_name)
    assert backend.capabilities.continues
    whole = backend.generate(prompt, grammar=grammar, max_tokens=60)
    for cut in sorted({1, len(whole.tokens) // 3, len(whole.tokens) // 2, len(whole.tokens) - 1}):
        went_on = backend.generate(prompt, grammar=grammar, max_tokens=60, reply=whole.tokens[:cut])
        assert went_on.tokens == whole.tokens and went_on.text == whole.text
        assert went_on.generated == len(whole.tokens) - cut
    with pytest.raises(GrammarError, match="not in the grammar"):
        backend.generate(prompt, grammar=grammar, max_tokens=8, reply=backend.tokenize(model.render([], []))[:3] or [0])


@pytest.mark.model
@pytest.mark.parametrize("backend_name", ["llama-cpp", "transformers"])
def test_a_reply_stops_where_it_parts_and_goes_on_as_if_decoded_whole(backend_name: str) -> None:
    """A reply watched for a parting (a single call begun where a list could have opened) stops at
    the first token past it, and going on from there gives the reply decoding it whole gives."""
    from localtools.backends._base import Parting

    model, backend, prompt, grammar = _weather_call(backend_name)
    assert backend.capabilities.parts
    lists = model.reply_format([get_weather], "required", forms=model.family.parallel_forms).grammar
    assert lists is not None
    parting = Parting(into=grammar, away=(lists,))
    whole = backend.generate(prompt, grammar=grammar, max_tokens=60)
    parted = backend.generate(prompt, grammar=grammar, max_tokens=60, parting=parting)
    assert parted.parted and not whole.parted and len(parted.tokens) < len(whole.tokens)
    assert parted.tokens == whole.tokens[:len(parted.tokens)] and parted.text == backend.reply_text(parted.tokens)
    assert parting.parted(parted.text) and parting.parted(backend.reply_text(parted.tokens[:-1])) is False
    went_on = backend.generate(prompt, grammar=grammar, max_tokens=60, reply=parted.tokens)
    assert went_on.tokens == whole.tokens and went_on.text == whole.text


@pytest.mark.model
@pytest.mark.parametrize("backend_name", ["llama-cpp", "transformers"])
def test_a_bias_moves_greedy_picks_to_the_text_it_favours(backend_name: str) -> None:
    """A reply under the grammar, greedy or drawn, goes where a bias's bonus points (a name the model would
    not write), token by token, and the grammar still holds: the bonus only reorders what it allows."""
    from localtools.model._decide import open_string

    _, backend, prompt, grammar = _weather_call(backend_name)
    assert backend.capabilities.biases
    plain = backend.generate(prompt, grammar=grammar, max_tokens=40)
    wanted = "Zanzibar"

    def bias(text: str) -> dict[str, float]:
        value = open_string(text)
        return {wanted[len(value):]: 50.0} if value is not None and wanted.startswith(value) and value != wanted else {}

    biased = backend.generate(prompt, grammar=grammar, max_tokens=40, bias=bias)
    assert wanted not in plain.text and f'"city": "{wanted}' in biased.text
    assert matches(grammar, biased.text, prefix=biased.finish_reason == "length")
    # A drawn reply (what samples votes with) takes the same bonus: at 50 nats no draw escapes it.
    for seed in (1, 2):
        drawn = backend.generate(prompt, grammar=grammar, max_tokens=40, bias=bias, temperature=0.7, top_p=0.95,
                                 seed=seed)
        assert f'"city": "{wanted}' in drawn.text, drawn.text
        assert matches(grammar, drawn.text, prefix=drawn.finish_reason == "length")


@tool
def pay(payee: str, amount: int) -> str:
    """Pay an amount to a payee."""
    return payee


@tool
def key_signature(key: str) -> str:
    """The key signature of a musical key."""
    return key


@pytest.mark.model
@pytest.mark.parametrize("backend_name", ["llama-cpp", "transformers"])
def test_number_and_word_decisions_hold_on_real_weights(backend_name: str) -> None:
    """On real weights, under the grammar: with the number decision every number a call writes
    that starts one of the conversation's is one of them (its digits held back where it is
    whole); with the word decision no string stops inside a word the user wrote. Each change
    either made is recorded, before and after (``check_records``)."""
    from conftest import load_once
    from test_bias_records import check_records

    from localtools.model._decide import cut_word, numbers_in

    model = load_once("smollm2-135m", backend_name)
    for n, scale in ((50, "million"), (3, "thousand"), (120, "billion")):
        said = f"Pay {n} {scale} dollars to Ada."
        result = model.chat([{"role": "user", "content": said}], [pay], tool_choice="required",
                            decisions=Decisions(number=100.0), max_tokens=60)
        check_records(result)
        (call,) = result.tool_calls
        written = str(call.arguments["amount"])
        if any(h.startswith(written[:1]) for h in numbers_in(said)):
            assert written in numbers_in(said), (said, written)
    for key in ("C#", "F#", "Bb"):
        said = f"What key signature does {key} major have?"
        result = model.chat([{"role": "user", "content": said}], [key_signature], tool_choice="required",
                            decisions=Decisions(word=100.0), max_tokens=40)
        check_records(result)
        (call,) = result.tool_calls
        assert cut_word(call.arguments["key"], said) == [], (said, call.arguments)


@tool
def find_books(genre: str, author: str | None = None, max_results: int = 10, in_stock: bool = False) -> str:
    """Books of a genre."""
    return genre


def test_ground_leaves_out_optional_arguments_the_conversation_never_mentions() -> None:
    reply = tc("find_books", genre="Fantasy", author="Tolkien", max_results=5, in_stock=True)
    ask = [{"role": "user", "content": "Any FANTASY books by   tolkien?"}]
    result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(
        ask, [find_books], decisions=Decisions(ground=True, closed=True))
    # The required genre stays whatever it is; the author is in the question (case and spacing
    # aside); 5 and the boolean are not, and neither is their default.
    assert result.tool_calls[0].arguments == {"genre": "Fantasy", "author": "Tolkien"}
    assert [(d.point, d.argument) for d in result.decisions] == [
        (DecisionPoint.GROUND, "find_books.max_results"), (DecisionPoint.GROUND, "find_books.in_stock")]
    # Without ``closed`` a boolean has no words of its own to judge: it stands.
    result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(ask, [find_books], decisions=Decisions(ground=True))
    assert result.tool_calls[0].arguments == {"genre": "Fantasy", "author": "Tolkien", "in_stock": True}


def test_open_string_reads_the_string_a_reply_ends_inside() -> None:
    from localtools.model._decide import open_string

    rng = random.Random(7)
    for _ in range(50):
        value = "".join(rng.choice('ab "\\') for _ in range(rng.randint(0, 8)))
        written = json.dumps(value)  # the value as JSON writes it, escapes and all
        head = '```json\n{"name": "f", "arguments": {"k": '
        for cut in range(len(written) + 1):
            # Outside before its opening quote and after its closing one; inside, the value so far
            # as written (a cut escape included).
            expected = None if cut in (0, len(written)) else written[1:cut]
            assert open_string(head + written[:cut]) == expected, (written, cut)


def test_copy_bias_goes_on_with_the_span_a_string_matches() -> None:
    """Inside a string whose text so far is written in the conversation, the text that follows it
    there (when a word follows) gets the bonus; outside a string, or a string too short or written
    nowhere, nothing does."""
    from localtools.model._decide import CopyBias

    rng = random.Random(9)
    words = ["Louvre", "Museum", "Paris", "Grand", "Central", "Station", "New", "York", "Ada", "Lovelace"]
    for _ in range(40):
        span = rng.sample(words, rng.randint(2, 4))
        said = "Tell me about " + " ".join(span) + ", please."
        bias = CopyBias(said, 3.0)
        cut = rng.randint(2, len(" ".join(span)) - 1)
        so_far = " ".join(span)[:cut]
        got = bias('{"name": "lookup", "arguments": {"place": "' + so_far)
        rest = said[said.index(so_far) + len(so_far):]
        if rest[:1].isalnum() or (rest[:1] == " " and rest[1:2].isalnum()):
            assert got == {rest[:32]: 3.0}, (so_far, got)
        else:
            assert got == {}, (so_far, got)
        assert bias('{"name": "lookup", "arguments": {"place": "' + so_far + '"') == {}  # closed
        assert bias('{"name": "lookup", "arguments": {"place": "Zz') == {}  # nowhere in it
        assert bias('{"name": "lookup", "arguments": {"place": "' + so_far[:1]) == {}  # too short to tell


def test_word_bias_finishes_a_word_the_string_stops_inside() -> None:
    """A string that stops inside a word of the conversation, wherever it starts one there, gets
    the rest of that word (letters, digits, or closing marks alone); one that ends a word at any
    such place, goes on with other marks, ends in a space or starts no word gets nothing."""
    from localtools.model._decide import CopyBias, cut_word

    rng = random.Random(11)
    stems = ["Christian", "Schism", "Tokyo", "Ferment", "Kinas", "Lovel"]
    for _ in range(60):
        word = rng.choice(stems) + rng.choice(["ity", "ation", "ace", "s2", "#", "++"])
        filler = " ".join(rng.sample(["tell", "me", "about", "the", "history", "of", "please"], 4))
        said = f"{filler} {word}{rng.choice(['', '.', '?', ','])} {filler}"
        cut = rng.randint(1, len(word) - 1)
        rest = word[cut:]
        marks = not any(ch.isalnum() for ch in rest)
        alike = (rest[0].isalpha() and word[cut - 1].isalpha()) or (rest[0].isdigit() and word[cut - 1].isdigit())
        expected = [rest] if alike or marks else []
        assert cut_word(word[:cut], said) == expected, (word, cut)
        assert cut_word(word, said) == []  # the whole word: nothing to finish
        bias = CopyBias(said, None, 5.0)
        assert bias('{"topic": "' + word[:cut]) == dict.fromkeys(expected, 5.0)
        assert bias('{"topic": "' + word[:cut] + '"') == {}  # closed: not inside a string
        # Written elsewhere as a whole word too: the model may mean that one.
        assert cut_word(word[:cut], said + " and " + word[:cut] + " alone") == []
    for value, said in (("x", "the roots of x^2 + 1"), ("2023", "on 2023-06-01"), ("10", "the 10th of May"),
                        ("Christian", "Christian's view"), ("New ", "New York"), ("ork", "New York"), ("", "anything")):
        assert cut_word(value, said) == [], value
    assert cut_word("C", "What key signature does C# major have?") == ["#"]
    assert cut_word("C", "Is C++ or C# faster?") == ["++", "#"]
    # A plural's ending is no cut; nor a value the tools' own text writes whole.
    assert cut_word("bug", "report the bugs") == [] and cut_word("bu", "report the bugs") == ["gs"]
    assert cut_word("asc", "sort it ascending") == ["ending"]
    assert cut_word("asc", "sort it ascending", tools="'asc' for ascending order") == []
    # The tool writing the value whole makes it an abbreviation only of a word that goes on with
    # letters or digits: one that goes on with marks alone is another token the user chose.
    examples = "The root of the scale, e.g., 'C', 'F#', 'Ab'."
    for note in "CDEFGAB":
        for sharp in ("#", "##", "+", "++"):
            assert cut_word(note, f"What key signature does {note}{sharp} major have?", tools=examples) == [sharp]
        assert cut_word(note, f"What key signature does {note}b major have?", tools=examples) == \
            ([] if note in "CF" else ["b"])  # C and F (of "F#") the examples write whole


def test_number_bias_goes_on_to_a_number_the_conversation_writes() -> None:
    """A number the reply writes inside a call that so far starts one the conversation writes (as
    written, without thousands' commas, times its scale word, a percentage as its fraction) gets
    that number's next character; where it is whole and no such number goes on, the digits and
    the point are held back (however the grammar ends it); a number no conversation number
    starts, one in a string, or one in a text answer gets nothing."""
    from localtools.model._decide import CopyBias, number_ahead, numbers_in

    rng = random.Random(5)
    scales = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
    held_back = dict.fromkeys("0123456789.", -1.0)
    for _ in range(60):
        n = rng.randint(2, 999)
        scale = rng.choice(list(scales))
        said = f"Pay {n} {scale} over {rng.randint(1, 9)}% a year."
        held = numbers_in(said)
        whole = str(n * scales[scale])
        assert {str(n), whole} <= held
        for cut in range(1, len(whole)):
            got = number_ahead('{"name": "pay", "arguments": {"amount": ' + whole[:cut], said)
            # Where what is written so far is a number of its own too ("6" of "6%"), the model
            # chooses; so it does after one digit, which starts too many numbers to go on with.
            assert got == {} if whole[:cut] in held or cut == 1 else got.get(whole[cut]) == 1.0, (said, cut, got)
        assert number_ahead('{"name": "pay", "arguments": {"amount": ' + whole, said) == held_back
        assert CopyBias(said, None, None, 4.0)('{"amount": ' + whole) == dict.fromkeys("0123456789.", -4.0)
        assert number_ahead('{"amount": "' + whole[:2], said) == {}  # in a string
        assert CopyBias(said, None, None, 4.0)('{"amount": "' + whole[:2]) == {}
    assert numbers_in("a loan of $400,000 at 4.5% for 1,250 days") >= {"400000", "4.5", "0.045", "1250"}
    said = "between 2017, 2018 and 2019, or 5 and 50"
    assert number_ahead('{"season": 20', said) == {"1": 1.0}
    assert number_ahead('{"season": 2018', said) == held_back
    assert number_ahead('{"n": 5', said) == {}  # 5 and 50: the model chooses
    assert number_ahead('{"season": 7', said) == {}  # no conversation number starts with it
    assert number_ahead("The season was 20", said) == {}  # a text answer's number is the model's own
    assert number_ahead("get(season=201", said) == {"7": 1.0, "8": 1.0, "9": 1.0}  # a call's keywords, too


class _Biased(ScriptedBackend):
    """A scripted backend that takes a bias and keeps each one it was given (its script is the
    reply whatever the bias)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.biases: list[Any] = []

    @property
    def capabilities(self) -> Any:
        from dataclasses import replace

        return replace(super().capabilities, biases=True)

    def generate(self, prompt: Any, **options: Any) -> Any:
        self.biases.append(options.pop("bias", None))
        return super().generate(prompt, **options)


def test_the_copy_decision_biases_answers_under_the_grammar_only() -> None:
    """Greedy picks and drawn ones (``samples``) alike: a draw that votes against a greedy reply
    reads the same values the same way."""
    from localtools.model._decide import CopyBias

    ask = [{"role": "user", "content": "Hours of the Louvre Museum?"},
           {"role": "tool", "tool_call_id": "1", "content": "Louvre Museum: 9-18"}]
    reply = tc("get_weather", city="Louvre Museum")
    for decisions, temperature, biased in ((Decisions(copy=2.5), 0.0, True), (Decisions(copy=2.5), 0.7, True),
                                           (Decisions(), 0.0, False)):
        backend = _Biased([reply])
        Model(backend, family="qwen2.5").chat(ask, [get_weather], decisions=decisions, temperature=temperature)
        (given,) = backend.biases
        # With the offered tools' own text, whose whole values are never cut words.
        assert given == (CopyBias("Hours of the Louvre Museum?\nLouvre Museum: 9-18", 2.5, tools=json.dumps(
            [get_weather.spec()], ensure_ascii=False)) if biased else None)
    # A backend that does not take one is never given one.
    assert Model(ScriptedBackend([reply]), family="qwen2.5").chat(ask, [get_weather],
                                                                  decisions=Decisions(copy=2.5)).tool_calls
    with pytest.raises(UsageError, match="copy"):
        Decisions(copy=-1.0)
    with pytest.raises(UsageError, match="word"):
        Decisions(word=101.0)
    # The word decision alone gives the bias too, with no span bonus.
    backend = _Biased([reply])
    Model(backend, family="qwen2.5").chat(ask, [get_weather], decisions=Decisions(word=4.0))
    (given,) = backend.biases
    assert (given.bonus, given.word, given.number) == (None, 4.0, None) and '"get_weather"' in given.tools


@tool
def find_plants(location: str, plant_types: list[str]) -> str:
    """Plants a nursery sells."""
    return location


def test_ground_leaves_out_the_items_of_a_list_the_conversation_never_asked_for() -> None:
    """A list of strings the model ran on past the question keeps the items the conversation
    holds (a required list too); one with none held, or that would fall under its minItems,
    stays as written."""
    from localtools.model._decide import ungrounded_items

    pool = ["Annual", "Perennial", "Shrub", "Tree", "Herb", "Fruit", "Cactus", "Fern"]
    rng = random.Random(3)
    for _ in range(30):
        items = rng.sample(pool, rng.randint(2, 6))
        asked = [i for i in items if rng.random() < 0.4]
        said = "Nurseries in Toronto with " + " and ".join(f"{a.lower()}s" for a in asked) + " plants"
        reply = tc("find_plants", location="Toronto", plant_types=items)
        result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(
            [{"role": "user", "content": said}], [find_plants], decisions=Decisions(ground=True))
        kept = result.tool_calls[0].arguments["plant_types"]
        assert kept == (asked or items), (items, said)
        dropped = [d.argument for d in result.decisions if d.point is DecisionPoint.GROUND]
        assert dropped == ([f"find_plants.plant_types/{i}" for i, v in enumerate(items) if v not in asked]
                           if asked else [])
    schema = {"properties": {"kinds": {"type": "array", "minItems": 2, "items": {"type": "string"}}}}
    assert ungrounded_items({"kinds": ["fern", "moss"]}, schema, "a fern please") == {}
    assert ungrounded_items({"kinds": ["fern", "moss", "tree"]}, schema, "a fern or a tree") == {"kinds": [1]}


def test_ground_keeps_what_tells_a_replys_calls_apart() -> None:
    """An optional argument the conversation never mentions stays where it is all that tells two
    calls of the reply apart (true in one, false in the other); written in one call only, it goes."""
    ask = [{"role": "user", "content": "Fantasy books by Tolkien, both ways"}]
    rng = random.Random(4)
    for _ in range(20):
        first, second = rng.sample([True, False, None], 2)
        calls = [{"genre": "Fantasy", "author": "Tolkien"} | ({} if v is None else {"in_stock": v})
                 for v in (first, second)]
        reply = "\n".join(tc("find_books", **args) for args in calls)
        result = Model(ScriptedBackend([reply]), family="qwen2.5").chat(
            ask, [find_books], decisions=Decisions(ground=True, closed=True))
        both = first is not None and second is not None
        got = [c.arguments.get("in_stock") for c in result.tool_calls]
        # Left out only where it is no default: False is find_books' default, so it stays.
        assert got == [first, second] if both else got == [None if v is not False else False for v in (first, second)]


def test_ground_reads_an_optional_argument_as_the_conversation_speaks_of_it() -> None:
    """A boolean stays when the conversation uses the words of its name (a plural, a clipped word,
    camelCase or snake_case); a number when written as a word; a list when each item is said,
    plurals aside. Otherwise it goes."""
    from localtools.model._decide import conversation_text, ungrounded

    rng = random.Random(12)
    topics = ["history", "statistics", "description", "garden", "human impact", "litigant"]
    numbers = ["one", "two", "three", "five", "eight", "twelve"]
    for _ in range(40):
        topic, spoken = rng.choice(topics), rng.random() < 0.5
        words = topic.split()
        clipped = [w[:4] if w == "statistics" else w for w in words]
        key = rng.choice(["include_" + "_".join(clipped), "include" + "".join(w.title() for w in clipped)])
        n = rng.randrange(len(numbers))
        value = [1, 2, 3, 5, 8, 12][n]
        plural = rng.random() < 0.5
        said = conversation_text([{"role": "user", "content": (
            f"Tell me about it{' with its ' + topic + ('s' if plural and ' ' not in topic else '') if spoken else ''}, "
            f"{numbers[n]} results, avoiding tolls and highway")}])
        schema = {"properties": {key: {"type": "boolean", "default": False}, "count": {"type": "integer"},
                                 "avoid": {"type": "array", "items": {"type": "string"}}}}
        args = {key: True, "count": value, "avoid": ["toll", "highways"], "other": "unsaid"}
        assert ungrounded("f", args, schema, said) == ([] if spoken else [key]) + ["other"], (key, said)
        assert ungrounded("f", {key: False}, schema, said) == []  # its default
        assert ungrounded("f", {"count": value + 1 if value < 12 else 7}, schema, said) == ["count"]


@pytest.mark.parametrize(("value", "said", "kept"), [
    (5, "show me 5 of them", True), (5.0, "show me 5 of them", True), (2.5, "about 2.5 km", True),
    (7, "show me 5 of them", False), (10, "", True),  # 10 is the default
    ("New York", "weather in new  york?", True), ("Boston", "weather in new york?", False),
    (["a", "b"], "a and b", True), (["a", "c"], "a and b", False), (False, "", True), (True, "in stock", False),
    # Numbers as the conversation writes them: thousands' commas, a scale word, a percentage's fraction.
    (400000, "a loan of $400,000", True), (50000000, "a payout of 50 million USD", True), (0.04, "at 4% a year", True),
    (500000000, "a payout of 50 million USD", False), (0.4, "at 4% a year", False),
])
def test_what_grounds_a_value(value: Any, said: str, kept: bool) -> None:
    from localtools.model._decide import conversation_text, grounded

    schema = {"default": 10} if isinstance(value, int) and not isinstance(value, bool) else \
        {"default": False} if isinstance(value, bool) else {}
    assert grounded(value, conversation_text([{"role": "user", "content": said}]), schema) is kept


def test_a_default_grounds_its_own_value_only() -> None:
    """The schema's default and the stated one are compared alike: a boolean only as a boolean, a
    string case- and spacing-blind."""
    from localtools.model._decide import grounded

    assert not grounded(True, "", {"default": 1}) and not grounded(1, "", {"default": True})
    assert grounded(True, "", {"default": True}) and grounded(0, "", {"default": 0.0})
    assert grounded("Celsius", "", {"default": "celsius"}) and grounded("fasta", "", {"description": "Default is 'FASTA'."})
    assert not grounded("Kelvin", "", {"default": "celsius"}) and not grounded("", "", {"default": ""})


def test_the_models_own_words_ground_nothing() -> None:
    from localtools.model._decide import conversation_text

    said = conversation_text([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Tolkien"},
                              {"role": "tool", "tool_call_id": "1", "content": "Tolkien wrote it"}])
    assert said == "hi\ntolkien wrote it".replace("\n", " ")


def test_calibration_replays_thresholds_and_picks_the_best_pair() -> None:
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import Probe, choose, replay

    weather = {"type": "function", "function": {"name": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    one, two = [("w", {"city": "Paris"})], [("w", {"city": "Paris"}), ("w", {"city": "London"})]
    cases = [Case("p1", "parallel", [], [weather], [{"w": {"city": ["Paris"]}}, {"w": {"city": ["London"]}}]),
             Case("s1", "simple_python", [], [weather], [{"w": {"city": ["Paris"]}}]),
             Case("i1", "irrelevance", [], [weather], [])]
    probes = [Probe("p1", "parallel", 0.9, more=[(0.3, one), (0.01, two)], final=two),
              Probe("s1", "simple_python", 0.7, more=[(0.1, one)], final=two),
              Probe("i1", "irrelevance", 0.4, more=[(0.5, one)], final=two)]
    assert replay(probes[0], 0.5, 0.2) == two and replay(probes[0], 0.5, 0.4) == one
    assert replay(probes[2], 0.5, 0.2) == [] and replay(probes[2], 0.3, 0.6) == one and replay(probes[2], 0.3, 0.2) == two
    decisions, rows = choose(probes, cases)
    # Calls from 0.4 up to 0.7 keep the simple case and drop the irrelevant one; another call
    # between 0.1 and 0.3 gives the parallel case its second call without giving the simple one one.
    assert decisions.call is not None and 0.4 < decisions.call <= 0.7
    assert decisions.more is not None and 0.1 < decisions.more <= 0.3
    assert max(r["mean"] for r in rows) == 1.0 and decisions.form is None  # no form was probed
    # A form decision: below its threshold the reply in single calls stands.
    listed = Probe("p1", "parallel", 0.9, form=(0.02, one), more=[(0.6, one)], final=two)
    assert replay(listed, 0.5, 0.5, 0.01) == two and replay(listed, 0.5, 0.5, 0.05) == one
    decisions, _ = choose([listed, probes[1], probes[2]], cases)
    assert decisions.form is not None and decisions.form <= 0.02


def test_calibration_finds_the_guess_threshold_that_keeps_grounded_calls() -> None:
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import Probe, choose

    weather = {"type": "function", "function": {"name": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

    def ask(text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    cases = [Case("s1", "simple_python", ask("Weather in Paris?"), [weather], [{"w": {"city": ["Paris"]}}]),
             Case("s2", "simple_python", ask("Weather in Oslo?"), [weather], [{"w": {"city": ["Oslo"]}}]),
             Case("i1", "irrelevance", ask("Who wrote Hamlet?"), [weather], []),
             Case("i2", "irrelevance", ask("Sum 2 and 2"), [weather], [])]
    # Every call share is over any call threshold that keeps both simple cases: only the guess
    # tells the irrelevant ones, whose cities nobody said, from the relevant ones at 0.55.
    probes = [Probe("s1", "simple_python", 0.55, final=[("w", {"city": "Paris"})]),
              Probe("s2", "simple_python", 0.9, final=[("w", {"city": "Oslo"})]),
              Probe("i1", "irrelevance", 0.6, final=[("w", {"city": "London"})]),
              Probe("i2", "irrelevance", 0.7, final=[("w", {"city": "Berlin"})])]
    decisions, rows = choose(probes, cases)
    assert decisions.guess is not None and 0.7 < decisions.guess <= 0.9 and decisions.call is not None
    assert decisions.call <= 0.55 and max(r["mean"] for r in rows) == 1.0
    assert max(r["mean"] for r in rows if r["guess"] == 0) == 0.75  # a call threshold loses a simple case


def test_calibration_replays_a_further_call_that_is_a_guess_as_refused() -> None:
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import Probe, replay
    from localtools.model._decide import Grounds

    weather = {"type": "function", "function": {"name": "w", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    case = Case("s1", "simple_python", [{"role": "user", "content": "Weather in Paris and Rome?"}], [weather],
                [{"w": {"city": ["Paris"]}}])
    paris, rome, oslo = ("w", {"city": "Paris"}), ("w", {"city": "Rome"}), ("w", {"city": "Oslo"})
    # Paris, then Rome (the question's) on 0.3, then Oslo (nobody's) on 0.2.
    probe = Probe("s1", "simple_python", 0.95, more=[(0.3, [paris]), (0.2, [paris, rome]), (0.001, [paris, rome, oslo])],
                  final=[paris, rome, oslo])
    assert replay(probe, 0.0, 0.1) == [paris, rome, oslo]
    assert replay(probe, 0.0, 0.1, guess=0.75, is_guess=Grounds.of(case.messages, case.tools).guessed) == [paris, rome]
    assert replay(probe, 0.0, 0.1, guess=0.15, is_guess=Grounds.of(case.messages, case.tools).guessed) == [paris, rome, oslo]


def test_the_call_curve_counts_calls_where_one_is_expected_and_where_none_is(tmp_path: Path) -> None:
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import Probe, call_curve

    cases = [Case(f"c{i}", "multiple", [], [], [{"w": {}}]) for i in range(3)] + \
        [Case(f"i{i}", "irrelevance", [], [], []) for i in range(2)]
    shares = {"c0": 0.95, "c1": 0.6, "c2": None, "i0": 0.55, "i1": 0.1}  # c2: the probe failed
    curve = call_curve([Probe(k, "x", v) for k, v in shares.items()], cases, thresholds=(0.05, 0.5, 0.58, 0.9))
    assert [(r["needed_called"], r["unneeded_called"]) for r in curve] == [(2, 2), (2, 1), (2, 0), (1, 0)]
    assert {(r["needed"], r["unneeded"]) for r in curve} == {(3, 2)}
    pytest.importorskip("matplotlib")
    from localtools.bench._plot import plot_call_curve

    png = plot_call_curve(curve, tmp_path / "curve.png", chosen=0.58, title="t")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_bench_levers_run_each_lever_on_the_same_constrained_modes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    from dataclasses import replace

    from localtools.bench import Mode
    from localtools.cli._bench import _lever_modes

    class Loaded:
        decisions: Decisions | None = None

    modes = [Mode("m", "llama-cpp", False), Mode("m", "llama-cpp", True)]
    args = argparse.Namespace(call_threshold=None, more_threshold=None, form_threshold=None, guess_threshold=None,
                              copy_bonus=None, fit_threshold=None, word_bonus=None, number_bonus=None, lever=None,
                              samples=None)
    with pytest.raises(UsageError, match="calibrate"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    loaded = Loaded()
    loaded.decisions = Decisions(call=0.3, more=0.2)
    args.more_threshold = 0.4
    out = _lever_modes(args, modes, {("m", "llama-cpp"): loaded})
    assert out[0] is modes[0] and [m.lever for m in out[1:]] == [
        "greedy", "call>=0.3", "more>=0.4", "cover", "percent", "option", "shape", "held", "echo", "told", "distinct", "ground",
        "samples=3", "all"]
    assert out[-1].decisions == Decisions(call=0.3, more=0.4, distinct=True, ground=True)
    assert len({m.label for m in out}) == len(out)
    args.lever = ["greedy", "all"]
    assert [m.lever for m in _lever_modes(args, modes, {("m", "llama-cpp"): loaded})[1:]] == ["greedy", "all"]
    args.lever, args.samples = ["samples"], [3, 5, 3]
    assert [(m.lever, m.decisions.samples) for m in _lever_modes(args, modes, {("m", "llama-cpp"): loaded})[1:]] == [
        ("samples=3", 3), ("samples=5", 5)]
    args.lever, args.samples = ["all", "all+samples"], [5]
    out = _lever_modes(args, modes, {("m", "llama-cpp"): loaded})
    assert [m.lever for m in out[1:]] == ["all", "all+samples=5"]
    assert out[-1].decisions == replace(out[-2].decisions, samples=5)
    from localtools.cli import main

    assert main(["bench", "--levers", "--samples", "1"]) == 2
    assert "2 or more replies" in capsys.readouterr().err
    assert main(["bench", "--samples", "3"]) == 2
    assert "apply to --levers" in capsys.readouterr().err
    args.lever = ["fast"]
    with pytest.raises(UsageError, match="not a lever"):
        _lever_modes(args, modes, {("m", "llama-cpp"): loaded})
    # A model loaded greedily (as the bench loads it) is measured on the thresholds calibrate wrote.
    monkeypatch.setenv("LOCALTOOLS_CACHE", str(tmp_path))
    from localtools.model._load import calibration_path

    calibration_path("m").parent.mkdir(parents=True)
    calibration_path("m").write_text(json.dumps({"decisions": {"call": 0.6, "more": 0.1, "form": 0.001}}))
    args.lever, args.more_threshold = ["form", "all"], None
    out = _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    assert [m.lever for m in out[1:]] == ["form>=0.001", "all"]
    assert out[-1].decisions == Decisions(call=0.6, more=0.1, form=0.001, distinct=True, ground=True)
    # A calibration that found another call best never made (more unset) still measures the rest.
    calibration_path("m").write_text(json.dumps({"decisions": {"call": 0.6, "form": 0.001}}))
    args.lever, args.samples = None, None
    assert [m.lever for m in _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})[1:]] == [
        "greedy", "call>=0.6", "form>=0.001", "cover", "percent", "option", "shape", "held", "echo", "told", "distinct", "ground",
        "samples=3", "all"]
    args.lever = ["more"]
    with pytest.raises(UsageError, match="--more-threshold"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    # The guess lever stands on the form and "more" decisions, with its own threshold.
    args.lever, args.guess_threshold = ["guess", "all"], 0.75
    out = _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    assert [(m.lever, m.decisions) for m in out[1:]] == [
        ("guess<0.75", Decisions(form=0.001, guess=0.75)),
        ("all", Decisions(call=0.6, form=0.001, guess=0.75, distinct=True, ground=True))]
    assert main(["bench", "--guess-threshold", "0.8"]) == 2
    assert "apply to --levers" in capsys.readouterr().err
    # So does the copy lever, with its bonus; without one it names the flag to pass.
    args.lever, args.guess_threshold = ["copy"], None
    with pytest.raises(UsageError, match="--copy-bonus"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    args.lever, args.copy_bonus = ["copy", "all"], 2.0
    assert [(m.lever, m.decisions) for m in _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})[1:]] == [
        ("copy+2", Decisions(form=0.001, copy=2.0)),
        ("all", Decisions(call=0.6, form=0.001, copy=2.0, distinct=True, ground=True))]
    assert main(["bench", "--copy-bonus", "2"]) == 2
    assert "apply to --levers" in capsys.readouterr().err
    # The fit lever stands on form, "more" and guess, with its own threshold.
    args.lever, args.copy_bonus, args.guess_threshold, args.fit_threshold = ["fit", "all"], None, 0.75, 0.9
    assert [(m.lever, m.decisions) for m in _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})[1:]] == [
        ("fit<0.9", Decisions(form=0.001, guess=0.75, fit=0.9)),
        ("all", Decisions(call=0.6, form=0.001, guess=0.75, fit=0.9, distinct=True, ground=True))]
    args.fit_threshold = None
    with pytest.raises(UsageError, match="--fit-threshold"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    assert main(["bench", "--fit-threshold", "0.9"]) == 2
    assert "apply to --levers" in capsys.readouterr().err
    # The word and number levers stand on form, "more", guess and fit, each with its bonus.
    args.lever, args.fit_threshold = ["word", "number", "all"], 0.9
    with pytest.raises(UsageError, match="--number-bonus and --word-bonus"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    args.word_bonus = 6.0
    with pytest.raises(UsageError, match=r"pass --number-bonus$"):
        _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})
    args.number_bonus = 3.0
    assert [(m.lever, m.decisions) for m in _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})[1:]] == [
        ("word+6", Decisions(form=0.001, guess=0.75, fit=0.9, word=6.0)),
        ("number+3", Decisions(form=0.001, guess=0.75, fit=0.9, number=3.0)),
        ("all", Decisions(call=0.6, form=0.001, guess=0.75, fit=0.9, word=6.0, number=3.0, distinct=True,
                          ground=True))]
    for flag in ("--word-bonus", "--number-bonus"):
        assert main(["bench", flag, "2"]) == 2
        assert "apply to --levers" in capsys.readouterr().err
    # The cover lever stands on form, "more", guess and fit; "all" covers where the model's defaults do.
    args.lever, args.word_bonus, args.number_bonus = ["cover", "all"], None, None
    assert [(m.lever, m.decisions) for m in _lever_modes(args, modes, {("m", "llama-cpp"): Loaded()})[1:]] == [
        ("cover", Decisions(form=0.001, guess=0.75, fit=0.9, cover=True)),
        ("all", Decisions(call=0.6, form=0.001, guess=0.75, fit=0.9, distinct=True, ground=True))]
    covering = Loaded()
    covering.decisions = Decisions(more=0.1, cover=True)
    calibration_path("m").unlink()
    assert _lever_modes(args, modes, {("m", "llama-cpp"): covering})[-1].decisions == Decisions(
        more=0.1, guess=0.75, fit=0.9, cover=True, distinct=True, ground=True)
    calibration_path("m").write_text(json.dumps({"decisions": {"call": 0.6, "form": 0.001}}))
    args.word_bonus = args.number_bonus = args.fit_threshold = None
    args.copy_bonus = args.guess_threshold = None
    # The cases the calibration was made on are never among those the levers are reported on.
    from localtools.bench._bfcl import Case
    from localtools.cli._bench import _apart_from_calibration

    calibration_path("m").write_text(json.dumps({"decisions": {"call": 0.6}, "probes": [{"case_id": "s2"}]}))
    cases = [Case(f"s{i}", "simple_python", [], [], []) for i in range(4)]
    assert [c.id for c in _apart_from_calibration(cases, ["m", "other"])] == ["s0", "s1", "s3"]
    assert "1 of the 4 cases were in a calibration split" in capsys.readouterr().err


def test_in_a_list_of_calls_another_call_is_decided_before_the_closing_bracket() -> None:
    """A family whose calls may be one fenced list: the reply forks where the list could take
    another item (after the first object), not at its end, and is decoded again from there."""
    from dataclasses import replace

    from localtools.families._families import get_family

    family = replace(get_family("qwen2.5"), call_forms=("call-tagged", "list-fenced"))
    one = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    two = one + ', {"name": "get_weather", "arguments": {"city": "London"}}'
    fork_at = "```json\n[" + one
    choices = {fork_at: {"]": 0.55, ",": 0.45}, "```json\n[" + two: {"]": 1.0}}
    backend = ScriptedBackend(["```json\n[" + one + "]\n```", "```json\n[" + two + "]\n```"], choices=choices)
    result = Model(backend, family=family).chat(ASK, [get_weather], decisions=Decisions(more=0.4))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    assert backend.asked[0] == fork_at and result.decisions[0].share == pytest.approx(0.45)
    # The second decision forks inside the longer list, and stops there.
    assert backend.asked[-1] == "```json\n[" + two and not result.decisions[-1].taken
    assert backend.continued == [0, len(fork_at)]  # decoded again from the fork only


FENCE_PARIS = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
ITEM = '{{"name": "get_weather", "arguments": {{"city": "{}"}}}}'


@pytest.mark.parametrize(("share", "threshold"), [(0.1, 0.05), (0.1, 0.2), (0.02, 0.01)])
def test_the_form_decision_writes_the_calls_as_one_list_on_its_share(share: float, threshold: float) -> None:
    """Where the family has a parallel form, the calls' opening decides list or single calls; in
    the list, another item is decided before the closing bracket."""
    listed = "```json\n[" + ITEM.format("Paris")
    both = listed + ", " + ITEM.format("London")
    choices = {"```json\n": {'{"': 1 - share, "[": share}, listed: {"]": 0.4, ",": 0.6}, both: {"]": 1.0}}
    takes = share >= threshold
    replies = [FENCE_PARIS, *([listed + "]\n```", both + "]\n```"] if takes else [])]
    backend = ScriptedBackend(replies, choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather],
                                                   decisions=Decisions(form=threshold, more=0.5))
    form = result.decisions[0]
    assert form.point is DecisionPoint.FORM and form.share == pytest.approx(share) and form.taken is takes
    cities = [c.arguments["city"] for c in result.tool_calls]
    assert cities == (["Paris", "London"] if takes else ["Paris"])
    if takes:
        grammar = backend.grammars[1]  # the list form alone
        assert grammar is not None and not matches(grammar, FENCE_PARIS) and matches(grammar, listed + "]\n```")
        # The list went on from the fence the single call had opened with; its next item from the first.
        assert backend.continued == [0, len("```json\n"), len(listed)]
        # The first reply stopped where it began the single call: nothing past its "{" was decoded.
        assert result.completion_tokens == len("```json\n{") + len(listed + "]\n```") - len("```json\n") + \
            len(both + "]\n```") - len(listed)
    else:  # the single call went on from where it stopped, the same reply
        assert backend.continued == [0, len("```json\n{")] and result.completion_tokens == len(FENCE_PARIS)
    # Without the form decision the grammar offers no list.
    plain = Model(ScriptedBackend([FENCE_PARIS]), family="qwen2.5").reply_format([get_weather]).grammar
    assert plain is not None and not matches(plain, listed + "]\n```")


def test_a_probe_reads_the_replies_of_every_form() -> None:
    """Calibration probes a case once: the call share, the list's share (with the reply in single
    calls it replaced), each further item's share with the calls the reply held then."""
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import FLOOR, probe, replay

    listed = "```json\n[" + ITEM.format("Paris")
    both = listed + ", " + ITEM.format("London")
    # Under the probe's floor the third item is never written.
    choices = {"": {"```": 0.8, "Hi": 0.2}, "```json\n": {'{"': 0.999, "[": 0.001},
               listed: {"]": 0.7, ",": 0.3}, both: {"]": 1 - FLOOR / 2, ",": FLOOR / 2}}
    # The probe's reply stops where it begins a single call (the list is taken there): the single
    # call it would have written is the greedy reply's, asked for once more.
    backend = ScriptedBackend([FENCE_PARIS, listed + "]\n```", both + "]\n```", FENCE_PARIS], choices=choices)
    case = Case("parallel_0", "parallel", ASK, [get_weather.spec()],
                [{"get_weather": {"city": ["Paris"]}}, {"get_weather": {"city": ["London"]}}])
    p = probe(Model(backend, family="qwen2.5"), case)
    assert p.call_share == pytest.approx(0.8) and p.form is not None and p.form[0] == pytest.approx(0.001)
    assert p.form[1] == [("get_weather", {"city": "Paris"})]
    assert [(pytest.approx(s), len(calls)) for s, calls in p.more] == [(0.3, 1), (FLOOR / 2, 2)]
    assert replay(p, 0.5, 0.2, 0.0) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})]
    assert replay(p, 0.5, 0.5, 0.0) == [("get_weather", {"city": "Paris"})] == replay(p, 0.5, 0.2, 0.01)


@pytest.mark.parametrize(("samples", "drawn", "winner", "replies"), [
    (3, [LONDON, LONDON], "London", 3),      # two of three agree on another call
    (3, [LONDON, "It is sunny."], "Paris", 3),  # no majority: the first reply stands
    (3, [PARIS, LONDON], "Paris", 2),  # two agree: the third could not change the vote, it is not drawn
    (5, [PARIS, PARIS, LONDON, LONDON], "Paris", 3),
    (5, [LONDON, PARIS, LONDON, LONDON], "London", 5),
    (5, [LONDON, LONDON, LONDON, PARIS], "London", 4),
])
def test_samples_vote_on_their_calls(samples: int, drawn: list[str], winner: str, replies: int) -> None:
    backend = ScriptedBackend([PARIS, *drawn])
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather],
                                                   decisions=Decisions(samples=samples, temperature=0.8))
    assert [c.arguments["city"] for c in result.tool_calls] == [winner]
    (vote,) = result.decisions
    assert vote.point is DecisionPoint.VOTE and vote.calls == replies and vote.taken is (winner != "Paris")
    assert result.attempts == replies and backend.grammars[1] is backend.grammars[0]
    # Stopping early never changes the winner: every draw the vote left out, counted for the loser,
    # still leaves it behind.
    everyone = [PARIS, *drawn]
    tally = Counter(everyone)
    assert tally[PARIS if winner == "Paris" else LONDON] == max(tally.values())


@tool
def forecast(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("ground", [True, False])
def test_samples_vote_on_the_calls_and_their_required_values(ground: bool) -> None:
    """Two draws for Paris, one with a unit nobody asked for: one answer either way (the vote is
    on the calls and their required values), and it outvotes greedy's London; the reply that
    wins is the first of its answer's (the unit was in the second)."""
    paris, paris_unit = tc("forecast", city="Paris"), tc("forecast", city="Paris", unit="kelvin")
    for first, second in ((paris, paris_unit), (paris_unit, paris)):
        backend = ScriptedBackend([tc("forecast", city="London"), first, second])
        result = Model(backend, family="qwen2.5").chat(ASK, [forecast], decisions=Decisions(samples=3, ground=ground))
        kept = {"city": "Paris", **({"unit": "kelvin"} if first is paris_unit and not ground else {})}
        assert [c.arguments for c in result.tool_calls] == [kept]


def test_an_optional_argument_the_reply_was_given_is_not_outvoted() -> None:
    """The greedy reply holds an optional argument the draws leave out (as ``option`` adds one the
    user named): the same answer, so the greedy reply stands whole and nothing more is drawn."""
    asked = [{"role": "user", "content": "Weather in Paris, the unit in kelvin?"}]
    backend = ScriptedBackend([tc("forecast", city="Paris", unit="kelvin"), tc("forecast", city="Paris"),
                               tc("forecast", city="Paris"), tc("forecast", city="Paris")])
    result = Model(backend, family="qwen2.5").chat(asked, [forecast], decisions=Decisions(samples=5, ground=True))
    assert [c.arguments for c in result.tool_calls] == [{"city": "Paris", "unit": "kelvin"}]
    (vote,) = [d for d in result.decisions if d.point is DecisionPoint.VOTE]
    assert not vote.taken and vote.calls == 3  # greedy and two draws agree: settled


def test_a_streamed_turn_is_voted_on_as_a_whole_one_is() -> None:
    from localtools import TurnDone

    replies = [PARIS, LONDON, LONDON]
    whole = Model(ScriptedBackend(list(replies)), family="qwen2.5").chat(ASK, [get_weather],
                                                                          decisions=Decisions(samples=3))
    last = list(Model(ScriptedBackend(list(replies)), family="qwen2.5").stream(
        ASK, [get_weather], decisions=Decisions(samples=3)))[-1]
    assert isinstance(last, TurnDone)
    assert [c.arguments for c in last.result.tool_calls] == [c.arguments for c in whole.tool_calls] == [{"city": "London"}]
    assert last.result.decisions == whole.decisions


def test_real_weights_write_a_parallel_question_as_a_list_of_calls(qwen: Model) -> None:
    """Qwen 0.5B writes one call for two cities when greedy; with the calls opened as a list
    (form) and each further item decided (more), it writes both."""
    greedy = qwen.chat(ASK, [get_weather], max_tokens=128)
    assert len(greedy.tool_calls) == 1
    result = qwen.chat(ASK, [get_weather], decisions=Decisions(form=0.0, more=0.02, distinct=True), max_tokens=128)
    assert result.decisions[0].point is DecisionPoint.FORM and result.decisions[0].taken
    assert result.raw.lstrip("`json\n").startswith("[")
    assert sorted(c.arguments["city"] for c in result.tool_calls) == ["London", "Paris"]


def test_load_reads_the_thresholds_calibrate_wrote(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json as json_

    import localtools.model._load as load_module

    monkeypatch.setattr(load_module, "calibration_path", lambda model: tmp_path / f"{model}.json")
    assert load_module.calibrated("m") is None
    (tmp_path / "m.json").write_text(json_.dumps({"decisions": {"call": 0.7, "more": 0.02, "form": 0.0001}}))
    assert load_module.calibrated("m") == Decisions(call=0.7, more=0.02, form=0.0001)
    (tmp_path / "m.json").write_text(json_.dumps({"decisions": {"call": 7}}))
    with pytest.warns(UserWarning, match="not a calibration file"):
        assert load_module.calibrated("m") is None


def test_a_call_written_as_text_after_deciding_against_one_is_made_as_a_call() -> None:
    """Decided against a call on its share, a text answer that reads as a call to an offered
    tool is decoded again as a call; one to a tool nobody offered is barred as before."""
    disguised = 'Sure: {"name": "get_weather", "arguments": {"city": "Paris"}}'
    choices = {"": {"<tool_call>": 0.3, "Sure": 0.7}}
    backend = ScriptedBackend([disguised, PARIS], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(call=0.5))
    assert result.tool_calls and result.disguise_retries == 1
    second = backend.grammars[1]
    assert second is not None and not matches(second, "It is sunny.")
    other = 'Sure: {"name": "get_time", "arguments": {}}'
    backend = ScriptedBackend([other, "It is sunny."], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(call=0.5))
    assert not result.tool_calls and result.content == "It is sunny."


@pytest.mark.parametrize(("flags", "asked"), [([], None), (["--calibrated"], "calibrated"), (["--greedy"], "greedy")])
def test_the_cli_asks_for_the_calibration_or_greedy_only_with_its_flag(flags: list[str], asked: str | None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import localtools.model._load as load_module
    from localtools.cli._common import load_model
    from localtools.cli._main import build_parser

    seen: dict[str, Any] = {}

    def fake(model: Any = None, **options: Any) -> Model:
        seen.update(options)
        return Model(ScriptedBackend([]), family="qwen2.5")

    monkeypatch.setattr(load_module, "load", fake)
    load_model(build_parser().parse_args(["run", "hi", *flags]))
    assert seen.get("decisions") == asked


def test_the_cli_refuses_greedy_with_calibrated(capsys: pytest.CaptureFixture[str]) -> None:
    from localtools.cli._main import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--greedy", "--calibrated"])
    assert "not allowed with" in capsys.readouterr().err


def test_load_applies_a_calibration_only_when_asked(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json as json_

    import localtools.model._load as load_module
    from localtools.host._catalog import default_model

    monkeypatch.setattr(load_module, "calibration_path", lambda model: tmp_path / f"{model}.json")
    with pytest.raises(UsageError, match="localtools calibrate"):
        load_module.load(decisions="calibrated", download=False)
    (tmp_path / f"{default_model()}.json").write_text(json_.dumps({"decisions": {"call": 0.6}}))
    monkeypatch.setattr(load_module, "resolve_model", lambda name, download=True: (tmp_path / "m.gguf", None))
    monkeypatch.setattr(load_module, "backend_class", lambda name: lambda path, **kw: ScriptedBackend([]))
    mine = load_module.load(decisions="calibrated", family="qwen2.5").decisions
    catalog = load_module.catalog_decisions(default_model())
    assert mine is not None and catalog is not None and catalog.word is not None and catalog.ground
    # The calibrated thresholds replace the catalog's, every one the file holds; the settings
    # calibrate does not choose (ground, word, number, cover, percent) stay the catalog's.
    assert (mine.call, mine.more, mine.form, mine.guess, mine.fit) == (0.6, None, None, None, None)
    assert (mine.word, mine.number, mine.cover, mine.percent, mine.ground) == \
        (catalog.word, catalog.number, catalog.cover, catalog.percent, True)
    # A model the catalog does not list: the file alone.
    (tmp_path / "mine.json").write_text(json_.dumps({"decisions": {"call": 0.6, "distinct": True}}))
    assert load_module.resolve_decisions("calibrated", "mine") == Decisions(call=0.6, distinct=True)
    # What the bench's levers start from: the same merge, None without a file, each read once.
    reads: list[str] = []
    read = load_module.calibrated

    def counted(model: str) -> Decisions | None:
        reads.append(model)
        return read(model)

    monkeypatch.setattr(load_module, "calibrated", counted)
    assert load_module.with_calibration(default_model()) == mine
    assert load_module.with_calibration("mine") == Decisions(call=0.6, distinct=True)
    assert load_module.with_calibration("other") is None
    assert reads == [default_model(), "mine", "other"]
    monkeypatch.setattr(load_module, "calibrated", read)
    # Unasked, the catalog's thresholds; never the calibration's call threshold.
    assert load_module.load(family="qwen2.5").decisions == load_module.catalog_decisions(default_model())
    assert load_module.load(decisions="greedy", family="qwen2.5").decisions is None
    with pytest.raises(UsageError, match=r"unknown decision setting sampled.*profile: default, greedy"):
        load_module.load(decisions="sampled")


_LINE = "m{n}  qwen2.5  llama-cpp  pypi:p==1!m.gguf  {sha}  10"


@pytest.mark.parametrize("field", ["form=0.0001,more=0.02", "form=0.0001", "call=0.5,form=0.001,more=0.3",
                                   "form=0.0001,guess=0.75,distinct,ground"])
def test_the_catalog_gives_a_model_its_thresholds_and_greedy_elsewhere(field: str, monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Any) -> None:
    """A models.txt line's seventh field is the model's default ``Decisions``; a model without one,
    a path, or a catalog model asked to run as another family or on another template decides greedily."""
    import localtools.host._catalog as catalog_module
    import localtools.model._load as load_module

    text = "\n".join([_LINE.format(n=1, sha="a" * 64) + "  " + field, _LINE.format(n=2, sha="b" * 64)])
    monkeypatch.setattr(catalog_module, "_models_file", lambda: text)
    monkeypatch.setattr(load_module, "catalog", catalog_module.catalog)
    catalog_module.catalog.cache_clear()
    try:
        expected = Decisions.from_dict({k: float(v) if v else True
                                        for k, _, v in (p.partition("=") for p in field.split(","))})
        assert load_module.catalog_decisions("m1") == expected
        assert load_module.resolve_decisions(None, "m1") == expected
        assert load_module.resolve_decisions(None, "m1", family="qwen2.5") == expected
        assert load_module.resolve_decisions(None, "m1", family="chatml") is None
        assert load_module.resolve_decisions(None, "m1", template=str(tmp_path / "t.jinja")) is None
        assert load_module.resolve_decisions("greedy", "m1") is None
        assert load_module.resolve_decisions(Decisions(call=0.3), "m1") == Decisions(call=0.3)
        assert load_module.catalog_decisions("m2") is None
        assert load_module.resolve_decisions(None, str(tmp_path / "m1.gguf")) is None
    finally:
        catalog_module.catalog.cache_clear()


@pytest.mark.parametrize(("field", "error"), [("form", "form takes a number"), ("form=x", "NAME=SHARE"),
                                              ("=0.1", "NAME=SHARE"), ("ground=1", "ground takes true or false"),
                                              ("colour=0.1", "unknown decision setting colour"),
                                              ("form=2", "share from 0 to 1")])
def test_a_catalog_line_with_bad_thresholds_is_refused_naming_the_model(field: str, error: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import localtools.host._catalog as catalog_module
    import localtools.model._load as load_module
    from localtools import ModelError

    monkeypatch.setattr(catalog_module, "_models_file", lambda: _LINE.format(n=1, sha="a" * 64) + "  " + field)
    monkeypatch.setattr(load_module, "catalog", catalog_module.catalog)
    catalog_module.catalog.cache_clear()
    try:
        with pytest.raises(ModelError, match=error):
            load_module.catalog_decisions("m1")
    finally:
        catalog_module.catalog.cache_clear()


def test_models_list_says_what_each_model_decides_on(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import localtools.host._catalog as catalog_module
    from localtools.cli._main import main

    text = "\n".join([_LINE.format(n=1, sha="a" * 64) + "  form=0.0001,more=0.02", _LINE.format(n=2, sha="b" * 64)])
    monkeypatch.setattr(catalog_module, "_models_file", lambda: text)
    catalog_module.catalog.cache_clear()
    try:
        assert main(["models", "list"]) == 0
    finally:
        catalog_module.catalog.cache_clear()
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(r[0], r[-1]) for r in rows] == [("m1", "form=0.0001,more=0.02"), ("m2", "greedy")]


def test_a_calibration_stopped_part_way_goes_on_where_it_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Each probe is logged as it is made; the same run again reads them back and probes only the
    rest; a run asked differently (here another --max-tokens) starts again; the log goes once the
    calibration is written."""
    from test_bench import _folder, scripted_model

    import localtools.bench as bench_module
    import localtools.bench._calibrate as calibrate_module
    import localtools.model._load as load_module
    from localtools.cli._main import main

    data = tmp_path / "data"
    data.mkdir()
    _folder(data)
    monkeypatch.setattr(bench_module, "bfcl_data_dir", lambda: data)
    monkeypatch.setattr(calibrate_module, "calibration_cases", lambda cases, n: list(cases)[:n])
    monkeypatch.setattr(load_module, "calibration_path", lambda model: tmp_path / f"{model}.json")
    monkeypatch.setattr(load_module, "load", lambda name, backend, decisions: scripted_model())
    real, stop_at = calibrate_module.probe, [3]
    asked: list[str] = []

    def probe(model: Any, case: Any, **kw: Any) -> Any:
        if len(asked) + 1 == stop_at[0]:
            raise KeyboardInterrupt
        asked.append(case.id)
        return real(model, case, **kw)

    monkeypatch.setattr(calibrate_module, "probe", probe)
    argv = ["calibrate", "m", "--category", "simple_python", "--sample", "4"]
    assert main(argv) == 130  # stopped by ^C
    log = tmp_path / "m.probes.jsonl"
    assert len(log.read_text().splitlines()) == 1 + 2 and not (tmp_path / "m.json").exists()
    stop_at[0] = 0
    assert main(argv) == 0
    assert asked == [f"simple_python_{i}" for i in (0, 1, 2, 3)]  # the first two were not asked again
    assert "2 of the 4 cases were probed" in capsys.readouterr().err
    written = json.loads((tmp_path / "m.json").read_text())
    assert [p["case_id"] for p in written["probes"]] == asked and not log.exists()
    asked.clear()
    stop_at[0] = 2
    assert main(argv) == 130
    stop_at[0] = 0
    assert main([*argv, "--max-tokens", "128"]) == 0
    assert asked == ["simple_python_0", *(f"simple_python_{i}" for i in range(4))]  # asked differently: again
    # --replay chooses again from the probes written, asking nothing; asked otherwise, it refuses.
    asked.clear()
    (tmp_path / "m.json").write_text(json.dumps({**json.loads((tmp_path / "m.json").read_text()), "grid": []}))
    assert main([*argv, "--max-tokens", "128", "--replay"]) == 0
    assert asked == [] and json.loads((tmp_path / "m.json").read_text())["grid"]
    assert main([*argv, "--replay"]) == 2 and asked == []
    assert "--replay: no calibration of m" in capsys.readouterr().err


def test_a_tool_is_unfit_when_no_word_of_its_name_or_description_is_said() -> None:
    """A tool fits when a word of its name or description begins (five letters) as a word the
    conversation uses; generic words ("get", "calculate", "the") say nothing either way."""
    from localtools.model._decide import unfit

    rng = random.Random(23)
    letters = "bcdfghjklmnpqrstvwxz"
    for _ in range(60):
        topic = ["".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(rng.randint(3, 5)))
                 for _ in range(3)]
        other = ["".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(rng.randint(3, 5)))
                 for _ in range(3)]
        name = rng.choice(["get_", "calculate_", "find", ""]) + rng.choice(["_".join(topic[:2]), topic[0] + topic[1].title()])
        described = {name: f"Retrieve the {topic[2]} details for a given {topic[0]}."}
        generic = rng.choice(["Please get me the", "Calculate the", "What is the", "Find the details of the"])
        # Said as written, re-cased, or plural: it fits; a question about other things does not.
        said = rng.choice([topic[0], topic[1].upper(), topic[2] + "s"])
        fits = conversation_text([{"role": "user", "content": f"{generic} {said} of {other[0]}, {other[1]}?"}])
        strange = conversation_text([{"role": "user", "content": f"{generic} {other[0]} of {other[1]} {other[2]}?"}])
        if any(o[:5] in {t[:5] for t in topic} for o in other):
            continue
        assert unfit([(name, {})], described, fits) == [], (name, fits)
        assert unfit([(name, {}), (name, {"x": 1})], described, strange) == [name], (name, strange)
    # The issue's cases: sunset is not sunrise, a rectangle's perimeter is no quadratic equation.
    sunrise = {"calculate_sunrise": "Calculate the time of sunrise for a specific date and location."}
    assert unfit([("calculate_sunrise", {})], sunrise, conversation_text(
        [{"role": "user", "content": "When will be sunset in Beijing today?"}])) == ["calculate_sunrise"]
    assert unfit([("calculate_sunrise", {})], sunrise, conversation_text(
        [{"role": "user", "content": "When is the sunrise in Beijing?"}])) == []


def test_a_call_made_of_what_was_said_fits_whatever_words_name_its_tool() -> None:
    """A call to a tool nothing in the conversation names is no stranger when every value it
    writes is said in the conversation's own words (``made_of``): "raining" never says
    ``get_weather``, but a call of the question's own city is the model reading it. One value of
    the model's own (a guessed option, a boolean nobody named, a default it wrote out, a piece of a
    word), a call of booleans alone, or a further call that only uses again what the earlier calls
    used stays unfit."""
    from localtools.model._decide import made_of, unfit

    rng = random.Random(31)
    letters = "bcdfghjklmnpqrstvwxz"

    def word() -> str:
        return "".join(rng.choice(letters) + rng.choice("aeiou") for _ in range(rng.randint(3, 5)))

    for _ in range(60):
        tool_words, said = [word() for _ in range(2)], [word().title() for _ in range(3)]
        if {w[:5] for w in tool_words} & {w.lower()[:5] for w in said}:
            continue
        name = "_".join(tool_words)
        described = {name: f"The {tool_words[0]} of a {tool_words[1]}."}
        schemas = {name: {"type": "object", "properties": {"place": {"type": "string"}, "count": {"type": "integer"},
                                                           "flag": {"type": "boolean", "default": False}},
                          "required": ["place"]}}
        number = rng.randint(2, 900)
        spelled = rng.choice([said[0], said[0].upper(), said[0].lower()])
        question = f"Is it {said[1].lower()} in {spelled} with {number} {said[2]}s?"
        conversation = conversation_text([{"role": "user", "content": question}])
        own: dict[str, Any] = {"place": said[0], "count": number}
        arguments: dict[str, Any]
        # Every value the question's own words (a string re-cased, a number as written).
        for arguments in ({"place": said[0]}, own):
            assert made_of([(name, arguments)], schemas, conversation), (question, arguments)
            assert unfit([(name, arguments)], described, conversation, schemas) == []
            # Without the schemas, the word check alone: a stranger.
            assert unfit([(name, arguments)], described, conversation) == [name]
        # A value of the model's own in any argument, a boolean nobody named (at its default too), a
        # piece of a longer word ("5m" is no "m"): unfit.
        for arguments in ({**own, "count": number + 1}, {"place": said[0] + " " + word()}, {**own, "flag": True},
                          {**own, "flag": False}, {"place": said[0][:2]}, {"flag": False}, {}):
            assert not made_of([(name, arguments)], schemas, conversation), (question, arguments)
            assert unfit([(name, arguments)], described, conversation, schemas) == [name]
        # After a call, a further one with a value of its own from the question fits; one that only
        # uses again what the earlier call used (in any spelling, a number as a float) does not,
        # whether the earlier call came in an earlier step or earlier in the same list.
        first = [(name, {"place": said[0]})]
        assert unfit([(name, {"place": said[0], "count": number})], described, conversation, schemas, first) == []
        assert unfit([(name, {"place": spelled})], described, conversation, schemas, first) == [name]
        assert unfit([(name, {"place": said[0], "count": float(number)})], described, conversation, schemas,
                     [(name, {"place": said[0], "count": number})]) == [name]
        assert unfit([*first, (name, {"place": spelled})], described, conversation, schemas) == [name]
        assert unfit([*first, (name, {"place": spelled, "count": number})], described, conversation, schemas) == []
        # A tool nobody offered, or a call without its required argument, is made of nothing.
        assert unfit([("nowhere", {"place": said[0]})], {}, conversation, schemas) == ["nowhere"]
        assert unfit([(name, {"count": number})], described, conversation, schemas) == [name]
    # A boolean whose key the question says counts as said, but never stands for a call alone.
    flagged = {"lookup": {"type": "object", "properties": {"city": {"type": "string"}, "detailed": {
        "type": "boolean"}}, "required": []}}
    detailed = conversation_text([{"role": "user", "content": "Detailed rain figures for Oslo?"}])
    for arguments, made in (({"detailed": True}, False), ({"city": "Oslo", "detailed": True}, True),
                            ({"city": "Oslo", "detailed": False}, True)):
        assert made_of([("lookup", arguments)], flagged, detailed) is made, arguments
    # The seeds' question and the cases it stands for.
    weather = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    oslo = conversation_text([{"role": "user", "content": "Is it raining in Oslo right now?"}])
    assert unfit([("get_weather", {"city": "Oslo"})], {"get_weather": "Current weather for a city."}, oslo,
                 weather) == []
    assert unfit([("get_weather", {"city": "Bergen"})], {"get_weather": "Current weather for a city."}, oslo,
                 weather) == ["get_weather"]
    circle = {"draw_circle": {"type": "object", "properties": {"radius": {"type": "number"}, "unit": {
        "type": "string"}}, "required": ["radius", "unit"]}}
    rectangle = conversation_text([{"role": "user", "content": "What's the area of a rectangle 5m wide and 7m long?"}])
    assert unfit([("draw_circle", {"radius": 5, "unit": "m"})], {"draw_circle": "Draw a circle of a radius."},
                 rectangle, circle) == ["draw_circle"]
    dated = {"get_date": {"type": "object", "properties": {"event": {"type": "string"}, "format": {
        "type": "string", "description": "The date format. Default is YYYY-MM-DD."}}, "required": ["event"]}}
    waterloo = conversation_text([{"role": "user", "content": "How many died at the Battle of Waterloo?"}])
    described = {"get_date": "The date of a historical event."}
    assert unfit([("get_date", {"event": "Battle of Waterloo"})], described, waterloo, dated) == []
    assert unfit([("get_date", {"event": "Battle of Waterloo", "format": "YYYY-MM-DD"})], described, waterloo,
                 dated) == ["get_date"]


@tool
def get_forecast(city: str, days: int = 1) -> str:
    """The weather forecast for a city."""
    return f"sunny in {city} for {days} days"


@pytest.mark.parametrize("city", ["Paris", "Atlantis"])
@pytest.mark.parametrize("share", [0.5, 0.97])
def test_a_call_to_a_tool_nothing_speaks_of_under_the_threshold_is_answered_in_text(share: float, city: str) -> None:
    ask = [{"role": "user", "content": "Who wrote Hamlet? Paris"}]
    choices = {"": {"<tool_call>": share, "The": 1 - share}}
    # The city is said (no guess), the forecast never is, and the days are the model's own: the
    # call fits nothing asked. A made-up city (a guess too, on a share over its threshold) is
    # refused for its tool all the same.
    call = tc("get_forecast", city=city, days=5)
    for text, answer in (("Shakespeare wrote it.", "Shakespeare wrote it."),
                         ('Sure! {"name": "get_forecast", "arguments": {"city": "' + city + '"}}', None)):
        own = "I can only tell forecasts."
        backend = ScriptedBackend([call, text, own], choices=choices)
        result = Model(backend, family="qwen2.5").chat(ask, [get_forecast], decisions=Decisions(guess=0.2, fit=0.9))
        refused = share < 0.9
        (decision,) = [d for d in result.decisions if d.point is DecisionPoint.FIT]
        assert decision.share == pytest.approx(share) and decision.taken is refused
        assert decision.argument == "get_forecast"
        assert bool(result.tool_calls) is not refused
        if not refused:
            continue
        if answer is not None:
            assert result.content == answer
        else:  # the text held the call again: the model is told the tool does something else, and answers
            assert result.content == own
            note = backend.prompts[2].text
            assert "`get_forecast`" in note and "something else" in note and "`city`" not in note
            (ask_decision,) = [d for d in result.decisions if d.point is DecisionPoint.ASK]
            assert ask_decision.argument == "get_forecast" and ask_decision.taken
        assert [d.point for d in result.decisions].count(DecisionPoint.GUESS) == (city == "Atlantis")
    # A reply with a call to a tool the conversation speaks of stands whole.
    @tool
    def who_wrote(title: str) -> str:
        """Who wrote a play or a book."""
        return title

    both = call + "\n" + tc("who_wrote", title="Hamlet")
    result = Model(ScriptedBackend([both], choices=choices), family="qwen2.5").chat(
        ask, [get_forecast, who_wrote], decisions=Decisions(fit=0.9))
    assert [c.name for c in result.tool_calls] == ["get_forecast", "who_wrote"]
    assert DecisionPoint.FIT not in [d.point for d in result.decisions]
    # A tool the conversation speaks of is never in doubt, nor is a call the request demands.
    backend = ScriptedBackend([call], choices=choices)
    result = Model(backend, family="qwen2.5").chat([{"role": "user", "content": "The weather in Paris?"}],
                                                   [get_forecast], decisions=Decisions(fit=0.9))
    assert result.tool_calls and not result.decisions
    backend = ScriptedBackend([call], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ask, [get_forecast], tool_choice="required",
                                                   decisions=Decisions(fit=0.9))
    assert result.tool_calls and not result.decisions


@pytest.mark.parametrize("share", [0.3, 0.6])
def test_calls_made_of_the_question_stand_under_fit_though_no_word_names_their_tool(share: float) -> None:
    """"Is it raining in Oslo or in Bergen?" never says "weather": the first call and a further
    one, each of a city the question names, stand on any share; a further call that only uses the
    first one's city again, to a tool nobody named, is still left out."""
    ask = [{"role": "user", "content": "Is it raining in Oslo or in Bergen?"}]
    oslo, bergen = tc("get_weather", city="Oslo"), tc("get_weather", city="Bergen")
    choices = {"": {"<tool_call>": share, "It": 1 - share}, oslo: {"\n": 1.0},
               oslo + "\n": {"<tool_call>": 0.4, "": 0.6}, oslo + "\n" + bergen: {"": 1.0}}
    backend = ScriptedBackend([oslo, oslo + "\n" + bergen], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ask, [get_weather, get_time],
                                                    decisions=Decisions(more=0.25, guess=0.75, fit=0.9))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Oslo", "Bergen"]
    assert not {DecisionPoint.FIT, DecisionPoint.GUESS} & {d.point for d in result.decisions}
    again = oslo + "\n" + tc("get_time", zone="Oslo")
    backend = ScriptedBackend([oslo, again], choices={**choices, again: {"": 1.0}})
    result = Model(backend, family="qwen2.5").chat(ask, [get_weather, get_time],
                                                    decisions=Decisions(more=0.25, guess=0.75, fit=0.9))
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    refused = result.decisions[-1]
    assert refused.point is DecisionPoint.FIT and refused.taken and refused.argument == "get_time"
    assert refused.calls == 1


def test_calibration_finds_the_fit_threshold_that_keeps_calls_to_tools_the_user_named() -> None:
    from localtools.bench._bfcl import Case
    from localtools.bench._calibrate import Probe, choose, replay

    weather = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                 "parameters": {"type": "object", "properties": {
                                                     "city": {"type": "string"}, "days": {"type": "integer"}},
                                                     "required": ["city"]}}}

    def ask(text: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": text}]

    cases = [Case("s1", "simple_python", ask("Weather in Paris?"), [weather], [{"get_weather": {"city": ["Paris"]}}]),
             Case("s2", "simple_python", ask("Is it raining in Oslo?"), [weather],
                  [{"get_weather": {"city": ["Oslo"], "days": [3]}}]),
             Case("s3", "simple_python", ask("Will it rain in Lima?"), [weather], [{"get_weather": {"city": ["Lima"]}}]),
             Case("i1", "irrelevance", ask("Who was born in London?"), [weather], []),
             Case("i2", "irrelevance", ask("Flights from Berlin?"), [weather], [])]
    # Every call's required values are said (no guess); the shares of the irrelevant calls sit
    # between the relevant ones, so no call threshold tells them apart; the fit threshold does,
    # where the relevant call the user never names the tool of (s2, "raining") is surer than both.
    # The irrelevant calls hold a value of the model's own (days); s3's is made of the question
    # alone ("rain" never names the weather either), so no fit threshold refuses it, low as its share is.
    probes = [Probe("s1", "simple_python", 0.5, final=[("get_weather", {"city": "Paris"})]),
              Probe("s2", "simple_python", 0.97, final=[("get_weather", {"city": "Oslo", "days": 3})]),
              Probe("s3", "simple_python", 0.3, final=[("get_weather", {"city": "Lima"})]),
              Probe("i1", "irrelevance", 0.6, final=[("get_weather", {"city": "London", "days": 7})]),
              Probe("i2", "irrelevance", 0.8, final=[("get_weather", {"city": "Berlin", "days": 2})])]
    unfit_i2 = replay(probes[4], 0.0, 1.01, fit=0.9, is_unfit=lambda calls, earlier: True)
    assert unfit_i2 == [] and replay(probes[4], 0.0, 1.01, fit=0.7, is_unfit=lambda calls, earlier: True)
    decisions, rows = choose(probes, cases)
    assert decisions.fit is not None and 0.8 < decisions.fit <= 0.97 and max(r["mean"] for r in rows) == 1.0
    assert max(r["mean"] for r in rows if r["fit"] == 0) < 1.0


@pytest.mark.parametrize("parts", [True, False])
def test_the_form_decision_is_the_same_whether_the_reply_parts_or_is_decoded_whole(parts: bool) -> None:
    """A backend without ``Capabilities.parts`` (an engine) writes the single call whole and the
    form is decided after it, as before; one with it stops where the call began. Same calls."""
    listed = "```json\n[" + ITEM.format("Paris")
    both = listed + ", " + ITEM.format("London")
    choices = {"```json\n": {'{"': 0.9, "[": 0.1}, listed: {"]": 0.4, ",": 0.6}, both: {"]": 1.0}}
    backend = ScriptedBackend([FENCE_PARIS, listed + "]\n```", both + "]\n```"], choices=choices)
    backend.parts = parts
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(form=0.05, more=0.5))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Paris", "London"]
    first = len("```json\n{") if parts else len(FENCE_PARIS)
    assert result.completion_tokens == first + len(listed + "]\n```") - len("```json\n") + \
        len(both + "]\n```") - len(listed)


def test_a_text_answer_never_parts_into_calls() -> None:
    """Text that opens like a call's tag ("<b>") is watched until it is no call, and stays text;
    a reply the call decision made text is not watched at all."""
    from localtools.backends._base import Parting

    text = "<b>Paris</b> is sunny."
    # Were it read as parting at its start, the list (share 0.5 there) would replace it.
    choices = {"": {"<": 0.5, "[": 0.5}}
    backend = ScriptedBackend([text], choices=choices)
    result = Model(backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(form=0.0001))
    assert result.content == text and not result.tool_calls and backend.continued == [0]
    model = Model(ScriptedBackend([]), family="qwen2.5")
    forms = (*model.family.call_forms, *model.family.parallel_forms)
    single = model.reply_format([get_weather], "required", forms=model.family.call_forms).grammar
    lists = model.reply_format([get_weather], "required", forms=model.family.parallel_forms).grammar
    words = model.reply_format([get_weather], "none", forms=forms).grammar
    assert single is not None and lists is not None and words is not None
    parting = Parting(into=single, away=(lists, words))
    assert [parting.parted(t) for t in ("", "<", "<tool_call>", "```json\n", "```json\n{", "```json\n[", "<b")] == [
        False, False, True, False, True, None, None]


def test_the_turns_prompt_time_is_its_first_generations() -> None:
    """A turn decoded in several generations (a form decision, another call) read its prompt in
    the first: the later ones went on from a cached prompt."""
    from localtools.backends._base import Generation
    from localtools.model._model import _answer_prompt_seconds, _Decoding

    run = _Decoding(ScriptedBackend([]), None, None, temperature=0.0, top_p=1.0, seed=None)
    gens = [Generation("a", prompt_seconds=s) for s in (0.8, 0.01, 0.02)]
    run.prompt_seconds = [g.prompt_seconds for g in gens]
    assert _answer_prompt_seconds(run, gens[-1], None) == 0.8
    thought = Generation("<think>", prompt_seconds=0.5)
    assert _answer_prompt_seconds(run, gens[-1], thought) == 0.5 + 0.01
    run.prompt_seconds = []
    assert _answer_prompt_seconds(run, gens[-1], None) == 0.02


def test_calibration_judges_a_guess_or_a_stranger_on_the_calls_before_another() -> None:
    """Replay refuses as the model does: on the calls the form decision left, before a further
    call joined them; the further call is judged on its own, on the share that added it."""
    from localtools.bench._calibrate import Probe, replay

    first: list[tuple[str, dict[str, Any]]] = [("get_weather", {"city": "Paris"})]
    second: list[tuple[str, dict[str, Any]]] = [*first, ("who", {"x": 1})]
    p = Probe("c", "parallel", 0.5, form=(0.5, first), more=[(0.6, first), (0.0, second)], final=second)
    judged: list[Any] = []

    def unfit_(calls: Any, earlier: Any) -> bool:
        judged.append((list(calls), list(earlier)))
        return len(calls) == 1

    # The further call is judged after the calls it joined; the first ones after none.
    assert replay(p, 0.0, 0.5, 0.1, fit=0.9, is_unfit=unfit_) == [] and judged == [(second[1:], first), (first, [])]
    assert replay(p, 0.0, 0.5, 0.1, fit=0.4, is_unfit=unfit_) == second


def test_a_streamed_turn_parts_and_decides_as_a_whole_one_does() -> None:
    """With a lever that decodes the turn again, a streamed turn is decided whole before any of it
    is sent: it parts where the whole turn parts, and sends the same calls."""
    from localtools.model._stream import ToolCallDone, TurnDone

    listed = "```json\n[" + ITEM.format("Paris")
    choices = {"```json\n": {'{"': 0.5, "[": 0.5}, listed: {"]": 1.0}}

    def backend() -> ScriptedBackend:
        return ScriptedBackend([FENCE_PARIS, listed + "]\n```"], choices=choices)

    whole_backend, streamed_backend = backend(), backend()
    whole = Model(whole_backend, family="qwen2.5").chat(ASK, [get_weather], decisions=Decisions(form=0.0001))
    events = list(Model(streamed_backend, family="qwen2.5").stream(ASK, [get_weather],
                                                                    decisions=Decisions(form=0.0001)))
    done = events[-1]
    def calls(found: list) -> list:
        return [(c.name, c.arguments) for c in found]

    assert isinstance(done, TurnDone) and calls(done.result.tool_calls) == calls(whole.tool_calls)
    assert done.result.decisions == whole.decisions and streamed_backend.continued == whole_backend.continued
    assert [e.call for e in events if isinstance(e, ToolCallDone)] == done.result.tool_calls


@pytest.mark.parametrize("stated", ["Default is {}.", "Defaults to {}.", "default value is {}", "Default {}",
                                    "(default to {})", "Default: {}", "The default is {} if not given."])
@pytest.mark.parametrize(("value", "written", "other"), [
    (52, "52", 53), (3.5, "3.5", 3.0), (False, "false", True), (True, "True", False), ("high", "'high'", "low"),
    ("fasta", '"fasta"', "genbank"), ("English", "English", "French"), (0, "0", False),
])
def test_a_default_the_description_states_grounds_its_value(stated: str, value: Any, written: str, other: Any) -> None:
    """Tools written for prompts state a default in words ("Default is 52"), not as ``default``:
    that value is grounded though the user never says it, any other value is not, and a boolean is
    never taken for a number (False is not 0)."""
    from localtools.model._decide import conversation_text, grounded, guessed

    prop = {"description": "How many. " + stated.format(written)}
    schema = {"type": "object", "properties": {"n": prop}, "required": ["n"]}
    said = conversation_text([{"role": "user", "content": "What are the odds of a full house?"}])
    assert grounded(value, said, prop)
    assert not grounded(other, said, prop), other
    assert not grounded(value, said, {"description": "How many."})
    # A call whose only required value is the stated default is no guess; any other value is one.
    assert not guessed([("f", {"n": value})], {"f": schema}, said)
    assert guessed([("f", {"n": other})], {"f": schema}, said) is not isinstance(other, bool)


def test_a_percentage_the_user_wrote_is_a_fraction_unless_the_tool_takes_percentages() -> None:
    """Generated: a rate the user writes as "N%" (or "N percent"), written N by the reply, is N/100
    for a number argument whose name and description never speak of a percentage; it stands for
    an integer, for a tool that takes percentages, where no place the user writes N near the
    key's words is a percentage, and where N is also written plainly with no key word near."""
    from localtools.model._decide import as_fraction

    rng = random.Random(11)
    for _ in range(80):
        rate = rng.choice([rng.randint(1, 30), round(rng.uniform(0.5, 9.5), 1)])
        years = rng.randint(2, 40)
        if years == rate:
            continue
        key, words = rng.choice([("interest_rate", "an interest rate"), ("discountRate", "a discount rate"),
                                 ("growth", "a growth"), ("annual_yield", "an annual yield")])
        sign = rng.choice(["%", " percent", "%"])
        said = f"Over {years} years at {words} of {rate}{sign}, what do I get?"
        number = {"type": "number", "description": "The rate applied each period."}
        assert as_fraction(key, rate, number, said) == pytest.approx(rate / 100), (key, rate, said)
        assert as_fraction(key, rate, {}, said) == pytest.approx(rate / 100)  # no type: it may be a number
        for takes in ("The rate in percentage.", "Percent per year.", "e.g. 5 for 5%."):
            assert as_fraction(key, rate, {**number, "description": takes}, said) is None, takes
        assert as_fraction("rate_percent", rate, number, said) is None
        if isinstance(rate, int):
            assert as_fraction(key, rate, {"type": "integer"}, said) is None
        assert as_fraction("years", years, number, said) is None  # written plainly
        assert as_fraction(key, rate / 100, number, said) is None  # already a fraction: nothing to do
        # The same number as a percentage and plainly, no key word near either: left as written.
        assert as_fraction("amount", rate, number, f"Pay {rate} now and {rate}% later.") is None
        # Near the key's words the percentage wins over the plain one elsewhere; a key word belongs
        # to the first number after it.
        assert as_fraction(key, rate, number, f"For {rate} years at {words} of {rate}%.") == \
            pytest.approx(rate / 100)
        assert as_fraction(key, rate, number, f"At {words} of {rate}% over {rate} years.") == \
            pytest.approx(rate / 100)
        assert as_fraction("term", rate, number, f"At {words} of {rate}% over a term of {rate}.") is None


@pytest.mark.parametrize("percent", [True, False])
def test_percent_gives_the_turn_a_fraction_and_says_so(percent: bool) -> None:
    @tool
    def present_value(interest_rate: float, years: int) -> str:
        """Present value of a stream of payments."""
        return "1.0"

    ask = [{"role": "user", "content": "The present value at an interest rate of 5% over 5 years?"}]
    backend = ScriptedBackend([tc("present_value", interest_rate=5, years=5)])
    result = Model(backend, family="qwen2.5").chat(ask, [present_value], decisions=Decisions(percent=percent))
    assert result.tool_calls[0].arguments == {"interest_rate": 0.05 if percent else 5, "years": 5}
    assert [(d.point, d.argument) for d in result.decisions] == \
        ([(DecisionPoint.PERCENT, "present_value.interest_rate")] if percent else [])


@tool
def distance(body1: str, body2: str, unit: str = "kilometers") -> str:
    """The distance between two celestial bodies."""
    return "1"


@pytest.mark.parametrize(("written", "kept"), [
    ({"unit": "miles"}, True),                       # said by the user: taken
    ({"unit": "kilometers"}, False),                 # its default: adds nothing
    ({"unit": "parsecs"}, False),                    # nobody said it
])
def test_option_asks_the_model_for_an_argument_the_user_names(written: dict[str, str], kept: bool) -> None:
    ask = [{"role": "user", "content": "How far is Mars from Venus? Give the unit as miles."}]
    before = tc("distance", body1="Mars", body2="Venus")
    after = tc("distance", **{"body1": "Mars", "body2": "Venus", **written})
    backend = ScriptedBackend([before, after], choices={})  # a backend that gives its distribution
    result = Model(backend, family="qwen2.5").chat(ask, [distance], decisions=Decisions(option=True))
    assert result.tool_calls[0].arguments == ({"body1": "Mars", "body2": "Venus", "unit": "miles"} if kept
                                              else {"body1": "Mars", "body2": "Venus"})
    assert [(d.point, d.argument, d.taken) for d in result.decisions] == [
        (DecisionPoint.OPTION, "distance.unit", kept)]
    # The second reply was decoded under a grammar that requires the unit, going on from the first's tokens.
    assert len(backend.grammars) == 2 and backend.grammars[1] is not backend.grammars[0]


def test_option_is_asked_only_where_the_conversation_names_the_argument() -> None:
    from localtools.model._decide import spoken_options

    before = tc("distance", body1="Mars", body2="Venus")
    for said, options in (("How far is Mars from Venus, in miles?", []),
                          ("How far is Mars from Venus? The unit: miles.", [("distance", "unit")])):
        backend = ScriptedBackend([before, tc("distance", body1="Mars", body2="Venus", unit="miles")], choices={})
        result = Model(backend, family="qwen2.5").chat([{"role": "user", "content": said}], [distance],
                                                        decisions=Decisions(option=True))
        assert [d.argument for d in result.decisions if d.point is DecisionPoint.OPTION] == \
            [f"{n}.{k}" for n, k in options]
        assert len(backend.grammars) == 1 + len(options)
    schemas = {"f": {"properties": {"details": {"type": "boolean"}, "show_wind": {"type": "boolean"},
                                    "city": {"type": "string"}}, "required": ["city"]}}
    assert spoken_options([("f", {"city": "Oslo"})], schemas, "look up details for oslo, with the wind shown") == \
        [("f", "details"), ("f", "show_wind")]
    assert spoken_options([("f", {"city": "Oslo", "details": True})], schemas, "details for oslo") == []
    assert Decisions.from_dict({"option": True}).option
    # Taken only when the reply is the same but for the argument, in every call to that tool.
    from localtools.model._decide import adds_option

    schema = distance.spec()["function"]["parameters"]
    two = [("distance", {"body1": "Mars", "body2": "Venus"}), ("distance", {"body1": "Mars", "body2": "Jupiter"})]
    said = "mars to venus and to jupiter, the unit in miles"
    both = [(n, {**a, "unit": "miles"}) for n, a in two]
    assert adds_option(two, both, "distance", "unit", schema, said)
    assert not adds_option(two, [both[0], two[1]], "distance", "unit", schema, said)  # the second has none
    assert not adds_option(two, [both[0], ("distance", {"body1": "Mars", "body2": "Saturn", "unit": "miles"})],
                           "distance", "unit", schema, said)  # another body
    assert not adds_option(two, both[:1], "distance", "unit", schema, said)  # a call fewer


def test_a_date_format_the_description_states_becomes_the_arguments_pattern() -> None:
    """Generated: every order of yyyy, mm and dd, three separators, quoted or not, with a time or
    without; the pattern takes a date in that format and refuses the others, and takes the
    literals the description quotes besides. A description naming no format, or several, or one
    that is its default, gives none."""
    import itertools

    from localtools.model._decide import shaped, stated_shape

    rng = random.Random(3)
    for order in itertools.permutations(["yyyy", "mm", "dd"]):
        for sep in "-/.":
            for time in ("", " HH:MM", " HH:MM:SS"):
                token = sep.join(order) + time
                word = rng.choice([token, token.upper(), f"'{token.upper()}'"])
                schema = {"type": "string", "description": f"The day of the trip, in the format {word}."}
                pattern = stated_shape(schema)
                assert pattern is not None, word
                y, m, d = str(rng.randint(1900, 2099)), f"{rng.randint(1, 12):02d}", f"{rng.randint(1, 28):02d}"
                value = sep.join({"yyyy": y, "mm": m, "dd": d}[p] for p in order)
                clock = {"": "", " HH:MM": " 07:30", " HH:MM:SS": " 07:30:00"}[time]
                assert re.fullmatch(pattern, value + clock), (word, value)
                others = [sep.join({"yyyy": y, "mm": m, "dd": d}[p] for p in other)
                          for other in itertools.permutations(["yyyy", "mm", "dd"])
                          if other.index("yyyy") != order.index("yyyy")]  # the year elsewhere
                assert not any(re.fullmatch(pattern, o + clock) for o in others if o != value), word
                assert not re.fullmatch(pattern, value + clock + "x")
                said = {**schema, "description": schema["description"] + " Or 'dontcare' for any day."}
                assert stated_shape(said) is None  # "or": more than one form
                quoted = {**schema, "description": schema["description"] + " If not given, 'dontcare'."}
                assert re.fullmatch(stated_shape(quoted) or "", "dontcare")
    for description in ("The date.", "Accepts a standard date format e.g., 2022-04-28.",
                        "The date, in a format such as YYYY-MM-DD or MM/DD/YYYY.",
                        "Optional format of the returned date. Default is 'MM-DD-YYYY'."):
        assert stated_shape({"type": "string", "description": description}) is None, description
    fixed = {"type": "string", "pattern": "^x$", "description": "in the format yyyy-mm-dd"}
    assert stated_shape(fixed) is None and stated_shape({"type": "integer", "description": "format yyyy-mm-dd"}) is None
    date = {"type": "string", "description": "The date, in the format mm-dd-yyyy."}
    spec: dict[str, Any] = {"type": "function", "function": {"name": "uv", "parameters": {
        "type": "object", "properties": {"date": date, "city": {"type": "string"}}, "required": ["date", "city"]}}}
    (out,) = shaped([spec])
    assert out["function"]["parameters"]["properties"]["date"]["pattern"] == stated_shape(date)
    assert out["function"]["parameters"]["properties"]["city"] == {"type": "string"}
    assert "pattern" not in date  # the caller's spec is untouched


@pytest.mark.parametrize("shape", [True, False])
def test_shape_puts_the_stated_format_in_the_grammar_not_the_prompt(shape: bool) -> None:
    uv = {"type": "function", "function": {"name": "uv", "description": "The UV index.", "parameters": {
        "type": "object", "properties": {"date": {"type": "string", "description": "The date, in the format mm-dd-yyyy."}},
        "required": ["date"]}}}
    backend = ScriptedBackend([tc("uv", date="06-01-2023")])
    model = Model(backend, family="qwen2.5")
    ask = [{"role": "user", "content": "The UV index for June 1st 2023?"}]
    result = model.chat(ask, [uv], decisions=Decisions(shape=shape))
    assert result.tool_calls[0].arguments == {"date": "06-01-2023"}
    (grammar,) = backend.grammars
    assert grammar is not None
    other = tc("uv", date="2023-06-01")
    assert matches(grammar, other) is not shape
    assert "pattern" not in model.render(ask, [uv]).text


def test_a_place_the_description_names_in_two_parts_is_written_in_two_parts() -> None:
    """"The city and state, e.g. Denver, CO": the value is words, a comma and words; a city alone
    is refused. Descriptions that name one part, or show no example, give no pattern."""
    from localtools.model._decide import stated_shape

    rng = random.Random(8)
    places = [("Denver", "CO"), ("San Francisco", "CA"), ("London", "UK"), ("Paris", "France")]
    for _ in range(30):
        city, region = rng.choice(places)
        part = rng.choice(["state", "country", "the state"])
        example = rng.choice([f"e.g. {city}, {region}", f"e.g., '{city}, {region}'", f"E.g. {city},{region}"])
        schema = {"type": "string", "description": f"The city and {part}, {example}."}
        pattern = stated_shape(schema)
        assert pattern is not None, schema
        other, state = rng.choice(places)
        assert re.fullmatch(pattern, f"{other}, {state}") and re.fullmatch(pattern, f"{other},{state}")
        assert not re.fullmatch(pattern, other) and not re.fullmatch(pattern, f"{other}, {state}, USA")
    for description in ("The city, e.g. Denver.", "The city and state.", "The location, e.g. Denver, CO.",
                        "The name of the city and state agency."):
        assert stated_shape({"type": "string", "description": description}) is None, description


@tool
def get_discoverer(discovery: str, detail: bool = False) -> str:
    """Who made a scientific discovery."""
    return "Chadwick"


@tool
def currency_rate(base: str, target: str) -> str:
    """The exchange rate between two currencies."""
    return "1.3"


# Generated: requests answered in text; the call the model writes when asked for one is the
# request in its own words, or holds a value of its own, or leaves part of the request out.
_HELD_CASES = [
    (said, call, taken)
    for subject in ("neutron", "electron", "radium")
    for said, call, taken in (
        (f"Who discovered the {subject}?", tc("get_discoverer", discovery=subject), True),
        (f"Who discovered the {subject}? Give details.", tc("get_discoverer", discovery=subject.title(), detail=True),
         True),
        (f"Who discovered the {subject}?", tc("get_discoverer", discovery="penicillin"), False),  # a value of its own
        (f"What is the {subject}'s mass?", tc("get_discoverer", discovery=subject), False),  # the mass is not asked
    )
] + [(f"What is the rate from {a} to {b}?", tc("currency_rate", base=a, target=b), True)
     for a, b in (("USD", "CAD"), ("EUR", "JPY"))] + \
    [("What is the exchange rate today?", tc("currency_rate", base="USD", target="EUR"), False),
     ("How many yen is 100 EUR?", tc("currency_rate", base="EUR", target="JPY"), False)]  # "yen" is not written


@pytest.mark.parametrize(("said", "call", "taken"), _HELD_CASES)
def test_held_makes_a_text_answer_the_call_the_user_asked_for(said: str, call: str, taken: bool) -> None:
    answer = "I think it was someone famous."
    backend = ScriptedBackend([answer, call], choices={})
    ask = [{"role": "user", "content": said}]
    result = Model(backend, family="qwen2.5").chat(ask, [get_discoverer, currency_rate], decisions=Decisions(held=True))
    assert bool(result.tool_calls) == taken
    assert (result.content or "") == ("" if taken else answer)
    assert len(backend.grammars) == 2 and backend.grammars[1] is not backend.grammars[0]  # asked as a call
    assert [(d.point, d.taken, d.argument) for d in result.decisions] == [
        (DecisionPoint.HELD, taken, json.loads(call.split("\n")[1])["name"])]
    # Off, the text answer stands, and nothing more is decoded.
    off = ScriptedBackend([answer], choices={})
    assert Model(off, family="qwen2.5").chat(ask, [get_discoverer, currency_rate],
                                             decisions=Decisions(held=False, distinct=True)).content == answer
    assert len(off.grammars) == 1


def test_held_leaves_a_final_answer_and_a_refused_guess_as_text() -> None:
    """Once a tool has answered, a text answer is the turn's end; after a refused guess, the text
    is what the refusal chose."""
    ask: list[dict[str, Any]] = [{"role": "user", "content": "Who discovered the neutron?"}]
    done: list[dict[str, Any]] = [*ask, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "get_discoverer", "arguments": json.dumps({"discovery": "neutron"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Chadwick"}]
    backend = ScriptedBackend(["James Chadwick, in 1932."], choices={})
    result = Model(backend, family="qwen2.5").chat(done, [get_discoverer], decisions=Decisions(held=True))
    assert result.content == "James Chadwick, in 1932." and len(backend.grammars) == 1 and not result.decisions
    # A guess refused on a low share (the model wanted text) is not turned back into a call.
    share = {"": {"```": 0.01, "I": 0.99}}
    guessing = ScriptedBackend([tc("get_discoverer", discovery="gravity"), "I do not know which discovery you mean."],
                               choices=share)
    vague = [{"role": "user", "content": "Who discovered it?"}]
    result = Model(guessing, family="qwen2.5").chat(vague, [get_discoverer],
                                                    decisions=Decisions(guess=0.5, held=True))
    assert not result.tool_calls and [d.point for d in result.decisions] == [DecisionPoint.GUESS]


def test_holds_reads_the_whole_request_and_every_required_value() -> None:
    from localtools.model._decide import Grounds

    specs = [get_discoverer.spec(), currency_rate.spec()]
    grounds = Grounds.of([{"role": "user", "content": "What is the function of ATP synthase in mitochondria?"}],
                         [{"type": "function", "function": {
                             "name": "function_lookup", "description": "The function of a molecule in an organelle.",
                             "parameters": {"type": "object", "required": ["molecule", "organelle"], "properties": {
                                 "molecule": {"type": "string"}, "organelle": {"type": "string"}}}}}])
    # Nothing of the tool's name is said but its values are the whole request.
    assert grounds.holds([("function_lookup", {"molecule": "ATP synthase", "organelle": "mitochondria"})])
    assert not grounds.holds([("function_lookup", {"molecule": "ATP synthase", "organelle": "nucleus"})])
    assert not grounds.holds([("function_lookup", {"molecule": "ATP", "organelle": "mitochondria"})])  # "synthase"?
    grounds = Grounds.of([{"role": "user", "content": "The rate from USD to CAD, and who discovered the neutron?"}],
                         specs)
    both = [("currency_rate", {"base": "USD", "target": "CAD"}), ("get_discoverer", {"discovery": "Neutron"})]
    assert grounds.holds(both)
    assert not grounds.holds(both[:1]) and not grounds.holds(both[1:])  # each leaves half the request out
    assert not grounds.holds([("currency_rate", {"base": "USD", "target": "EUR"}), both[1]])  # one value made up
    assert not grounds.holds([])
    # No request to answer: the last message is a tool's result.
    assert Grounds.of([{"role": "user", "content": "the neutron"}, {"role": "tool", "content": "x"}], specs).asked == \
        frozenset()
    assert Decisions.from_dict({"held": True}).held


@pytest.mark.parametrize("drawn", [
    [tc("get_discoverer", discovery="gravity"), tc("get_discoverer", discovery="gravity")],  # the same guess
    [tc("get_discoverer", discovery="radium"), tc("get_discoverer", discovery="radium")],  # another guess
])
def test_samples_never_bring_back_a_call_the_turn_refused(drawn: list[str]) -> None:
    """A guess refused on a low call share stays refused: draws that guess again do not vote, so
    the text answer stands however many of them agree."""
    share = {"": {"```": 0.01, "I": 0.99}}
    text = "I do not know which discovery you mean."
    backend = ScriptedBackend([tc("get_discoverer", discovery="gravity"), text, *drawn], choices=share)
    vague = [{"role": "user", "content": "Who discovered it?"}]
    result = Model(backend, family="qwen2.5").chat(vague, [get_discoverer],
                                                   decisions=Decisions(guess=0.5, samples=3, temperature=0.8))
    assert not result.tool_calls and result.content == text
    (vote,) = [d for d in result.decisions if d.point is DecisionPoint.VOTE]
    assert not vote.taken and vote.calls == 1  # neither draw voted
    # A draw the turn would not refuse (the user's own value) still votes.
    named = [{"role": "user", "content": "Who discovered radium?"}]
    backend = ScriptedBackend([tc("get_discoverer", discovery="radium")] * 3, choices=share)
    result = Model(backend, family="qwen2.5").chat(named, [get_discoverer],
                                                   decisions=Decisions(guess=0.5, samples=3, temperature=0.8))
    assert [c.arguments for c in result.tool_calls] == [{"discovery": "radium"}]
    (vote,) = [d for d in result.decisions if d.point is DecisionPoint.VOTE]
    assert vote.calls == 2  # greedy and one draw agree: the vote is settled
