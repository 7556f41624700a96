"""Settings of the decisions by name (profiles) or as levers in text, and a request that decides
the same way streamed or not."""

from __future__ import annotations

import random

import pytest
from conftest import tc

from localtools import Model, ScriptedBackend, TurnDone, tool
from localtools._errors import UsageError
from localtools.model._decide import Decisions
from localtools.model._load import ENGLISH_LEVERS, PROFILES, decisions_from_text, resolve_decisions


def test_levers_as_text_are_the_decisions_they_name() -> None:
    assert decisions_from_text("form=0.0001,more=0.002,distinct") == Decisions(form=0.0001, more=0.002, distinct=True)
    assert decisions_from_text("samples=3, ground") == Decisions(samples=3, ground=True)
    for bad, named in (("sampled", "sampled"), ("more=high", "more=high"), ("ground=0.5", "ground"), ("", "")):
        with pytest.raises(UsageError, match="profile") as caught:
            decisions_from_text(bad)
        assert named in str(caught.value)


def test_each_profile_resolves_on_a_catalog_model_and_on_any_other() -> None:
    from localtools.host._catalog import default_model

    model = default_model()
    default = resolve_decisions(None, model)
    assert resolve_decisions("default", model) == default
    assert resolve_decisions("greedy", model) is None
    english = resolve_decisions("bfcl", model)
    assert english is not None
    # bfcl is the default with the English levers on top: every lever of each stays on.
    for key, value in vars(decisions_from_text(ENGLISH_LEVERS)).items():
        if value != getattr(Decisions(), key):
            assert getattr(english, key) == value, key
    for key, value in vars(default or Decisions()).items():
        if value != getattr(Decisions(), key) and key not in vars(decisions_from_text(ENGLISH_LEVERS)):
            assert getattr(english, key) == value, key
    # A model the catalog does not list decides greedily by default, and bfcl is the English levers alone.
    assert resolve_decisions("default", "/some/model.gguf") is None
    assert resolve_decisions("bfcl", "/some/model.gguf") == decisions_from_text(ENGLISH_LEVERS)
    assert set(PROFILES) >= {"default", "greedy", "bfcl", "calibrated"}


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city."""
    return city


CITIES = ["Paris", "London", "Oslo", "北京", "東京", "Málaga"]


@pytest.mark.parametrize("seed", range(6))
def test_a_request_decides_the_same_way_streamed_or_not(seed: int) -> None:
    """Drawn replies (one or two calls, a repeat, an argument nobody said, text) under drawn
    settings: the streamed turn's calls, text and decisions are the whole turn's."""
    rng = random.Random(seed)
    skipped: list[int] = []
    for _ in range(8):
        a, b = rng.sample(CITIES, 2)
        ask = [{"role": "user", "content": f"Weather in {a} and {b}?" if rng.random() < 0.5 else f"{a}的天气？"}]
        calls = [tc("get_weather", city=a, **({"unit": "kelvin"} if rng.random() < 0.3 else {}))]
        if rng.random() < 0.5:
            calls.append(tc("get_weather", city=rng.choice([a, b])))
        first = rng.choice(["\n".join(calls), "It is sunny."])
        more = "\n".join([*calls, tc("get_weather", city=b)])
        share = rng.choice([0.3, 0.8])
        choices = {"": {"<tool_call>": share, "It": 1 - share}, "\n".join(calls): {"\n<tool_call>": 0.4, "": 0.6}}
        settings = rng.choice([Decisions(more=0.3), Decisions(guess=0.75, ground=True), Decisions(distinct=True),
                               Decisions(more=0.5, distinct=True, ground=True), Decisions(samples=2)])

        def model(replies: list[str], settings: Decisions = settings, choices: dict = choices) -> Model:
            return Model(ScriptedBackend(replies, choices=choices), family="qwen2.5")

        script = [first, more, first, "It is sunny.", first]
        try:
            whole = model(list(script)).chat(ask, [get_weather], decisions=settings)
        except UsageError:
            skipped.append(1)
            continue  # the script ran out where a lever decoded more than it holds: no turn to compare
        events = list(model(list(script)).stream(ask, [get_weather], decisions=settings))
        done = events[-1]
        assert isinstance(done, TurnDone)
        assert [(c.name, c.arguments) for c in done.result.tool_calls] == \
            [(c.name, c.arguments) for c in whole.tool_calls]
        assert done.result.content == whole.content and done.result.decisions == whole.decisions
    assert len(skipped) < 4, "most drawn turns are compared"
