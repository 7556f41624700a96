"""The word, number and copy bonuses change what the model writes while it writes it: where one
changed a greedy pick, the reply is decoded again without them, and each argument that differs is
recorded with its value before and after (``DecisionPoint.WORD`` / ``NUMBER`` / ``COPY``)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from conftest import tc
from test_decisions import key_signature, pay  # the tools the real-weights test asks with

from localtools import DecisionPoint, Decisions, Model, ScriptedBackend
from localtools.backends._base import Capabilities, Generation


class Biased(ScriptedBackend):
    """A scripted backend that takes bonuses: the reply asked with them says that a pick changed
    after its first ``flip_at`` characters (``None``: none changed)."""

    def __init__(self, replies: list[str], flip_at: int | None) -> None:
        super().__init__(replies)
        self.flip_at, self.biases_seen = flip_at, 0

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, biases=True)

    def generate(self, prompt: Any, **kw: Any) -> Generation:
        bias = kw.pop("bias", None)
        gen = super().generate(prompt, **kw)
        if bias is not None:
            self.biases_seen += 1
            if self.flip_at is not None:
                gen.biased = (gen.text[: self.flip_at],)
        return gen


def _chat(replies: list[str], flip: str | None, said: str, tools: list[Any], decisions: Decisions) -> tuple[Any, Biased]:
    first = replies[0]
    backend = Biased(replies, None if flip is None else first.index(flip))
    result = Model(backend, family="qwen2.5").chat([{"role": "user", "content": said}], tools,
                                                   tool_choice="required", decisions=decisions)
    return result, backend


def check_records(result: Any) -> None:
    """What holds of any reply: a record's before and after differ, its after is the value the
    call leaves with, and a reply with a record cost one decode more (the real weights' test in
    test_decisions.py runs this on its replies)."""
    records = [d for d in result.decisions if d.point in (DecisionPoint.WORD, DecisionPoint.NUMBER, DecisionPoint.COPY)]
    for d in records:
        assert d.before != d.after and d.after is not None, d
        if d.argument:
            name, key = d.argument.split(".")
            (call,) = [c for c in result.tool_calls if c.name == name]
            assert json.loads(d.after) == call.arguments[key], (d, call)
    assert not records or result.attempts >= 2


@pytest.mark.parametrize("seed", range(12))
def test_a_number_the_bonus_changed_is_recorded_before_and_after(seed: int) -> None:
    rng = random.Random(seed)
    n, scale, zeros = rng.choice([(50, "million", 6), (3, "thousand", 3), (12, "billion", 9)])
    said = rng.choice(["Pay {n} {s} dollars to Ada.", "请给 Ada 付 {n} {s} 美元。", "Paga {n} {s} a Ada."]).format(n=n, s=scale)
    wanted, plain = n * 10**zeros, n * 10 ** (zeros + 1)
    after = tc("pay", payee="Ada", amount=wanted)
    result, backend = _chat([after, tc("pay", payee="Ada", amount=plain)], str(wanted)[-1] + "}", said, [pay],
                            Decisions(number=4.0))
    assert result.tool_calls[0].arguments == {"payee": "Ada", "amount": wanted}
    check_records(result)
    (record,) = [d for d in result.decisions if d.point is DecisionPoint.NUMBER]
    assert (record.argument, json.loads(record.before or ""), json.loads(record.after or "")) == \
        ("pay.amount", plain, wanted)
    assert result.attempts == 2 and backend.biases_seen == 1  # the second decode took no bonus


@pytest.mark.parametrize("key", ["C#", "F#", "Bb"])
def test_a_word_the_bonus_finished_is_recorded(key: str) -> None:
    said = f"What key signature does {key} major have?"
    result, _ = _chat([tc("key_signature", key=key), tc("key_signature", key=key[0])], key[1:] + '"', said,
                      [key_signature], Decisions(word=6.0))
    (record,) = [d for d in result.decisions if d.point is DecisionPoint.WORD]
    assert (record.argument, record.before, record.after) == ("key_signature.key", json.dumps(key[0]), json.dumps(key))


def test_no_pick_changed_means_no_second_decode_and_no_record() -> None:
    result, _ = _chat([tc("pay", payee="Ada", amount=50)], None, "Pay 50 to Ada.", [pay],
                            Decisions(number=4.0, word=6.0))
    assert result.attempts == 1 and not [d for d in result.decisions if d.point in
                                         (DecisionPoint.WORD, DecisionPoint.NUMBER, DecisionPoint.COPY)]


def test_a_changed_pick_that_changed_no_value_records_nothing() -> None:
    same = tc("pay", payee="Ada", amount=50)
    result, _ = _chat([same, same], "50", "Pay 50 to Ada.", [pay], Decisions(number=4.0))
    assert result.attempts == 2 and not [d for d in result.decisions if d.point is DecisionPoint.NUMBER]


def test_calls_that_differ_whole_are_recorded_as_the_reply_before_and_after() -> None:
    after, before = tc("pay", payee="Ada", amount=50), tc("key_signature", key="C")
    result, _ = _chat([after, before], "50", "Pay 50 to Ada.", [pay, key_signature], Decisions(number=4.0))
    (record,) = [d for d in result.decisions if d.point is DecisionPoint.NUMBER]
    assert (record.argument, json.loads(record.before or ""), json.loads(record.after or "")) == ("", before, after)
