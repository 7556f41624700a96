"""A string argument may hold any family's markers: call tags, fences, stop strings, reasoning tags,
a list form's brackets, a whole call's JSON. Replies are drawn from each family's grammar with such
pieces inside their strings, and read back exactly as the grammar reads them: as many calls as the
grammar's call rules matched, to the same tools, with the same arguments, whole and streamed, and
never as text (a stop string inside a call does not end it)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sampler import sample

from localtools import Model, ScriptedBackend, ToolCallDone, TurnDone, families
from localtools.families._reply import reply_format
from localtools.grammar import matches

FAMILIES = sorted(families())
_ECHO: dict[str, Any] = {"type": "function", "function": {"name": "echo", "description": "Say it back.", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
    "additionalProperties": False}}}
_PAIR: dict[str, Any] = {"type": "function", "function": {"name": "pair", "description": "Two notes.", "parameters": {
    "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "maxLength": 80}},
    "required": ["a"], "additionalProperties": False}}}
TOOLS: list[dict[str, Any]] = [_ECHO, _PAIR]


def _markers() -> list[str]:
    """Every family's markers, and the other things a reader could mistake for a call's edge."""
    out = {"```", "```json\n", "\n```", "[", "]", "[{", "}]", "{", "}", "\n", '{"name": "echo", "arguments": {}}',
           '<tool_call>\n{"name": "echo", "arguments": {"text": "x"}}\n</tool_call>', '"', "\\"}
    for fam in families().values():
        out |= {m for m in (fam.call_start, fam.call_end, fam.reasoning_start, fam.reasoning_end, fam.reply_opening,
                            *fam.stop, *fam.strip) if m}
    return sorted(out)


MARKERS = _markers()


def _call_rules(grammar: Any) -> dict[str, str]:
    """The rule of each tool's call, by rule name: the tool's name."""
    return {rule: tool for rule in grammar.rules for tool in ("echo", "pair") if rule == f"call-{tool}"}


def _draw(family: str, choice: str, seed: int) -> tuple[str, list[str]] | None:
    """A reply the grammar admits with markers inside its strings, and the tools its calls name in
    order (the first of up to 8 draws that puts a marker inside a call); None when none did."""
    for k in range(8):
        drawn = _draw_once(family, choice, seed * 8 + k)
        if drawn is not None:
            return drawn
    return None


def _draw_once(family: str, choice: str, seed: int) -> tuple[str, list[str]] | None:
    fmt = reply_format(families()[family], TOOLS, choice)
    grammar = fmt.answer_grammar
    assert grammar is not None
    rules = _call_rules(grammar)
    spans: dict[str, list[tuple[int, int]]] = {r: [] for r in rules}
    text = sample(grammar, random.Random(seed), pieces=MARKERS, max_repeat=4, spans=spans)
    assert matches(grammar, text), text
    calls = sorted((start, rules[r]) for r, found in spans.items() for start, _ in found)
    inside = any(m in text[s:e] for found in spans.values() for s, e in found for m in MARKERS if len(m) > 2)
    return (text, [name for _, name in calls]) if inside else None


def _cases(per_family: int = 12) -> list[tuple[str, str, int]]:
    out = []
    for family in FAMILIES:
        for choice in ("required", "auto"):
            out += [(family, choice, seed) for seed in range(per_family)]
    return out


@pytest.mark.parametrize(("family", "choice", "seed"), _cases())
def test_a_reply_with_markers_in_its_strings_reads_as_the_grammar_reads_it(family: str, choice: str, seed: int) -> None:
    drawn = _draw(family, choice, seed)
    if drawn is None:
        pytest.skip("this draw put no marker inside a call")
    text, names = drawn
    fmt = reply_format(families()[family], TOOLS, choice)
    parsed = fmt.parse(text)
    assert [c.name for c in parsed.tool_calls] == names, text
    for call in parsed.tool_calls:
        props = next(t for t in TOOLS if t["function"]["name"] == call.name)["function"]["parameters"]["properties"]
        assert set(call.arguments) <= set(props) and all(isinstance(v, str) for v in call.arguments.values()), text


def _whole_and_streamed(family: str, text: str, choice: str) -> tuple[Any, list[Any]]:
    messages = [{"role": "user", "content": "go"}]
    options: dict[str, Any] = {"tool_choice": choice, "max_tokens": 100_000, "retry_repeat_penalties": (),
                               "thinking": False}
    whole = Model(ScriptedBackend([text]), family=family).chat(messages, TOOLS, **options)
    events = list(Model(ScriptedBackend([text]), family=family).stream(messages, TOOLS, **options))
    return whole, events


@pytest.mark.parametrize(("family", "choice", "seed"), _cases(per_family=4))
def test_through_the_model_whole_and_streamed_the_calls_come_back_whole(family: str, choice: str, seed: int) -> None:
    """The model decodes with the family's stop strings: one inside a call must not end it."""
    drawn = _draw(family, choice, seed)
    if drawn is None:
        pytest.skip("this draw put no marker inside a call")
    text, names = drawn
    whole, events = _whole_and_streamed(family, text, choice)
    assert [c.name for c in whole.tool_calls] == names, text
    done = events[-1]
    assert isinstance(done, TurnDone)
    assert [c.name for c in done.result.tool_calls] == names
    streamed = [e.call.name for e in events if isinstance(e, ToolCallDone)]
    assert streamed == names
    if names:
        # No part of a call went out as text.
        assert not any(json.dumps(c.arguments, ensure_ascii=False)[1:-1] in whole.content for c in whole.tool_calls
                       if c.arguments)


def _with_piece(grammar: Any, seed: int, piece: str) -> str | None:
    """A reply of ``grammar`` with ``piece`` inside a call: where the sampler put it in a string, or
    else the first place inside a drawn call where the grammar admits it (an argument syntax whose
    strings are no repeated character class, Gemma 4's ``<|"|>`` quotes say)."""
    rules = _call_rules(grammar)
    spans: dict[str, list[tuple[int, int]]] = {r: [] for r in rules}
    text = sample(grammar, random.Random(seed), pieces=[piece], max_repeat=1, spans=spans)
    if any(piece in text[s:e] for found in spans.values() for s, e in found):
        return text
    for begin, end in sorted(span for found in spans.values() for span in found):
        for at in range(begin + 1, end):
            candidate = text[:at] + piece + text[at:]
            if matches(grammar, candidate):
                return candidate
    return None


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("stop_index", [0, -1])
def test_each_stop_string_of_the_family_inside_an_argument(family: str, stop_index: int) -> None:
    """The issue's example on every family: ``"a<stop>b"`` inside an argument, in each form the
    grammar writes a call to echo in (drawn), whole and streamed: the call comes back whole."""
    fam = families()[family]
    stop = fam.stop[stop_index]
    fmt = reply_format(fam, [_ECHO], "required")
    grammar = fmt.answer_grammar
    assert grammar is not None
    seen: set[str] = set()
    for seed in range(24):
        text = _with_piece(grammar, seed, f"a{stop}b")
        if text is None:
            continue
        form = text.split("echo")[0][:12]
        if form in seen:
            continue
        seen.add(form)
        whole, events = _whole_and_streamed(family, text, "required")
        assert len(whole.tool_calls) >= 1 and whole.content == "", text
        assert any(stop in c.arguments["text"] for c in whole.tool_calls), text
        done = events[-1]
        assert isinstance(done, TurnDone)
        assert [c.arguments for c in done.result.tool_calls] == [c.arguments for c in whole.tool_calls]
    assert seen, f"no draw of {family} held the stop string"
