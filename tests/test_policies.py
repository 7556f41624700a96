"""Each settling policy on its own (``localtools.model.policies``), on drawn calls, and their order."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from localtools.families._parse import ToolCall
from localtools.model._decide import DecisionPoint, Decisions, stated_shape
from localtools.model.policies import SETTLING, Context, settle
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
