"""Under a grammar no control token is picked but an end and those the grammar writes itself: the
engine's grammar reads a control token as its text (llama.cpp's GBNF, xgrammar), while the reply
is read without it, so a reply that opened with ``<|im_start|>`` was a call to the one and no call
to the other (seen on Qwen 0.5B in a long agent conversation: the strict parse refused a
constrained reply). Each backend, greedy and drawn, lazy and masking every step."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import BACKENDS, load_once

from localtools import Model
from localtools.examples import ALL
from localtools.grammar import Grammar, Lit, Seq, Text, Until, matches
from localtools.grammar._nodes import Alt, Repeat


def test_literals_are_every_string_the_grammar_writes_whole() -> None:
    grammar = Grammar({"root": Alt((Seq((Lit("[TOOL_CALLS]"), Until("</think>"))), Repeat(Lit("ok"), 0, 1),
                                    Text(markers=("<tool_call>",)))), "unused": Lit("never")})
    assert grammar.literals() == frozenset({"[TOOL_CALLS]", "</think>", "ok"})


def _wanting(backend_name: str, monkeypatch: pytest.MonkeyPatch, text: str, mask: str) -> tuple[Model, int]:
    """Qwen 0.5B on the backend, made to want ``text``'s token above all others at every pick."""
    model = load_once("qwen2.5-coder-0.5b", backend_name)
    backend: Any = model.backend
    monkeypatch.setattr(backend, "mask", mask)
    if backend_name == "llama-cpp":
        ids = backend.llm.tokenize(text.encode(), add_bos=False, special=True)
        assert len(ids) == 1 and backend._is_control(ids[0]), text
        real = backend._logits

        def logits() -> Any:
            row = real().copy()
            row[ids[0]] += 100.0
            return row

        monkeypatch.setattr(backend, "_logits", logits)
    else:
        from localtools.backends import transformers as tf

        ids = backend.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] in backend._special, text
        forward = tf._Steps._forward

        def boosted(self: Any, input_ids: Any) -> None:
            forward(self, input_ids)
            self.logits[0, ids[0]] += 100.0

        monkeypatch.setattr(tf._Steps, "_forward", boosted)
    return model, int(ids[0])


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("mask", ["lazy", "full"])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
@pytest.mark.parametrize("control", ["<|im_start|>", "<|fim_prefix|>", "<|vision_start|>"])
def test_a_control_token_the_model_wants_is_never_in_a_constrained_reply(
        backend_name: str, monkeypatch: pytest.MonkeyPatch, mask: str, temperature: float, control: str) -> None:
    model, token = _wanting(backend_name, monkeypatch, control, mask)
    specs = [t.spec() for t in ALL]
    fmt = model.reply_format(specs, "auto", True, constrained=True, stop=())
    prompt = model.render([{"role": "user", "content": "What is the weather in Paris?"}], specs)
    gen = model.backend.generate(prompt, grammar=fmt.grammar, max_tokens=12, temperature=temperature, seed=3)
    assert token not in gen.tokens and gen.tokens
    assert fmt.grammar is not None and matches(fmt.grammar, gen.text, prefix=True), gen.text


@pytest.mark.parametrize("backend_name", BACKENDS)
@pytest.mark.parametrize("mask", ["lazy", "full"])
def test_a_control_token_the_grammar_writes_is_written(backend_name: str, monkeypatch: pytest.MonkeyPatch,
                                                       mask: str) -> None:
    # A family whose call marker is a control token ([TOOL_CALLS]) needs it: here <|fim_prefix|>.
    model, token = _wanting(backend_name, monkeypatch, "<|fim_prefix|>", mask)
    grammar = Grammar({"root": Alt((Seq((Lit("<|fim_prefix|>"), Lit("ok"))), Lit("no")))})
    prompt = model.render([{"role": "user", "content": "Say ok."}], [])
    gen = model.backend.generate(prompt, grammar=grammar, max_tokens=8)
    assert gen.tokens[0] == token
