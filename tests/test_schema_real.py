"""Real weights under a tool whose schema the grammar must enforce beyond its shape: a range, a
pattern, a date format and a tuple. Every call returned validates, on each engine."""

from __future__ import annotations

import datetime as dt

import pytest
from conftest import load_once
from pydantic import BaseModel, Field

from localtools import GenerationTruncated, Tool
from localtools.grammar import matches

pytestmark = pytest.mark.model


class Booking(BaseModel):
    month: int = Field(ge=1, le=12, description="month number")
    zip: str = Field(pattern=r"^\d{5}$", description="five-digit postal code")
    day: dt.date
    seat: tuple[int, str]


TOOL = Tool.from_model(Booking, lambda booking: "booked", name="book", description="Book a table.")
ASK = [{"role": "user", "content": "Book a table in month 14 at zip 1234 for tomorrow, seat 3 A."}]

CASES: list[tuple[str, str, dict[str, str]]] = [
    ("qwen2.5-coder-0.5b", "llama-cpp", {}),
    ("smollm2-135m", "llama-cpp", {}),
    ("smollm2-135m", "transformers", {"engine": "xgrammar"}),
    ("smollm2-135m", "transformers", {"engine": "llguidance"}),
]


@pytest.mark.parametrize(("name", "backend", "options"), CASES, ids=[f"{n}-{b}-{o.get('engine', '')}" for n, b, o in CASES])
def test_every_call_validates_on_real_weights(name: str, backend: str, options: dict[str, str]) -> None:
    model = load_once(name, backend, **options)
    # The user asks for values the schema forbids; the grammar leaves the model no way to write them.
    # What holds for any reply the grammar admits, whatever text this machine's arithmetic picks:
    # calls that parse and validate, or (a string that runs on past max_tokens) a cut call that is
    # a prefix of the grammar's language, raised as such and never returned.
    try:
        result = model.chat(ASK, tools=[TOOL], tool_choice="required", max_tokens=384, schema_retries=0)
    except GenerationTruncated as cut:
        grammar = model.reply_format([TOOL], "required").answer_grammar
        assert grammar is not None and matches(grammar, cut.raw, prefix=True) and not matches(grammar, cut.raw)
        return
    assert result.tool_calls
    for call in result.tool_calls:
        assert TOOL.violations(call.arguments) == [], call.arguments
        assert 1 <= call.arguments["month"] <= 12 and len(call.arguments["zip"]) == 5
        dt.date.fromisoformat(call.arguments["day"])

