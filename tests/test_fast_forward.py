"""Fast-forward: the tokens the grammar forces join the picked token and are evaluated in one
batch; the reply is the one token-by-token decoding writes."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from conftest import BACKENDS, load_once, tc

from localtools import Model, ScriptedBackend
from localtools.backends._decode import FastForward
from localtools.examples import ALL
from localtools.grammar import build_grammar, continuation

TOOL = {"type": "function", "function": {"name": "get_customer", "description": "Look up a customer.",
                                         "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}},
                                                        "required": ["customer_id"]}}}
CALL = tc("get_customer", customer_id="c-7")


def _chat(reply: str, *, fast_forward: bool, **options: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend([reply], fast_forward=fast_forward)
    model = Model(backend, family="qwen2.5")
    result = model.chat([{"role": "user", "content": "go"}], [TOOL], retry_repeat_penalties=(), **options)
    return result, backend


def test_forced_characters_join_the_picked_one_and_the_reply_is_the_same() -> None:
    slow, one_by_one = _chat(CALL, fast_forward=False, tool_choice="required", parallel_tool_calls=False)
    fast, batched = _chat(CALL, fast_forward=True, tool_choice="required", parallel_tool_calls=False)
    assert fast.raw == slow.raw == CALL and fast.tool_calls[0].arguments == {"customer_id": "c-7"}
    assert set(one_by_one.batches) == {1}
    # The one tool's name, the keys and the brackets come in a few batches, not one per character.
    assert len(batched.batches) < len(CALL) / 3 and max(batched.batches) >= len('{"name": "get_customer')


def test_a_stop_string_inside_forced_text_still_cuts_there() -> None:
    grammar = build_grammar(Model(ScriptedBackend([]), family="qwen2.5").family, [TOOL], "required", False)
    backend = ScriptedBackend([CALL], fast_forward=True)
    model = Model(backend, family="qwen2.5")
    gen = backend.generate(model.render([{"role": "user", "content": "go"}], [TOOL]), grammar=grammar,
                           stop=['"name"'])
    assert gen.text == "<tool_call>\n{" and gen.finish_reason == "stop"


def test_max_tokens_inside_forced_text_ends_with_length_at_exactly_max_tokens() -> None:
    grammar = build_grammar(Model(ScriptedBackend([]), family="qwen2.5").family, [TOOL], "required", False)
    backend = ScriptedBackend([CALL], fast_forward=True)
    gen = backend.generate(Model(backend, family="qwen2.5").render([{"role": "user", "content": "go"}], [TOOL]),
                           grammar=grammar, max_tokens=20)
    assert gen.finish_reason == "length" and len(gen.tokens) == 20 and gen.text == CALL[:20]
    # "<" was picked; the other 19 characters were forced (only those kept are counted).
    assert gen.forced_tokens == 19


def test_an_end_the_grammar_forces_ends_without_another_step() -> None:
    # A grammar whose language is one string: everything after the first pick is forced, the end too.
    from localtools.grammar import Grammar, Lit

    grammar = Grammar({"root": Lit("done!")}, "root")
    backend = ScriptedBackend(["done!"], fast_forward=True)
    gen = backend.generate(Model(backend, family="qwen2.5").render([{"role": "user", "content": "go"}]),
                           grammar=grammar)
    assert gen.text == "done!" and gen.finish_reason == "stop"
    # "d" is picked; "one!" and the end are forced: nothing follows the last token, so it is kept,
    # and no batch is evaluated, as nothing would read its logits.
    assert backend.batches == [] and gen.forced_tokens == 4


def test_the_last_forced_token_and_special_tokens_are_left_to_the_model() -> None:
    grammar = build_grammar(Model(ScriptedBackend([]), family="qwen2.5").family, [TOOL], "required", False)
    specials = {ord("{")}
    ahead = FastForward(grammar, lambda t: [ord(c) for c in t], lambda i: i in specials)
    ids, ends = ahead.after(lambda: "<tool_call>\n")
    assert not ends and ids == []  # "{" opens the forced text and is special here
    ids, ends = FastForward(grammar, lambda t: [ord(c) for c in t], lambda _: False).after(lambda: "<tool_call>\n")
    assert "".join(map(chr, ids)) == '{"name": "get_customer", "arguments": {"customer_id": "'[:-1]


QUESTIONS = ["Convert 12.5 km to miles.", "What time is it in Europe/Paris?", "What is 17 * 23 + 4?",
             "Read the file notes/todo.txt", "Look up customer 4521.",
             "Convert 3 kg to lb and tell me the time in Asia/Tokyo."]


@pytest.mark.model
@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_forward_writes_what_token_by_token_greedy_decoding_writes(backend: str) -> None:
    # Forced tokens go in as one batch, and a batch rounds differently from the same tokens one by
    # one: where two tokens nearly tie, that alone can flip the pick. Qwen 0.5B has no near tie on
    # these questions (SmolLM2-135M does, in the numbers it makes up).
    model = load_once("qwen2.5-coder-0.5b", backend)
    real: Any = model.backend
    forced = 0
    try:
        for question in QUESTIONS[:2]:  # each is two greedy replies from cold, on both backends
            prompt = model.render([{"role": "user", "content": question}], ALL)
            fmt = model.reply_format(ALL, "auto")
            replies = []
            for fast in (False, True):
                real.fast_forward = fast
                # Cold both times: a prompt evaluated in other batches may differ in the last bits.
                real.drop_prompt_cache()
                replies.append(real.generate(prompt, grammar=fmt.grammar, max_tokens=128, stop=list(fmt.stop)))
            assert replies[1].text == replies[0].text, question
            assert replies[0].forced_tokens == 0
            forced += replies[1].forced_tokens
            assert fmt.parse(replies[1].text).tool_calls, replies[1].text
    finally:
        real.fast_forward = True
    assert forced > 10 * 2  # names, keys and brackets: most of a call's JSON


def test_the_cli_passes_mask_and_fast_forward_to_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools import cli
    from localtools.cli import _common
    from localtools.model import _load

    seen: list[dict[str, Any]] = []

    def load(model: str, **options: Any) -> Model:
        seen.append(options)
        return Model(ScriptedBackend([]), family="qwen2.5")

    monkeypatch.setattr(_load, "load", load)
    parser = cli.build_parser()
    _common.load_model(parser.parse_args(["run", "q", "--mask", "full", "--no-fast-forward"]))
    _common.load_model(parser.parse_args(["run", "q"]))
    assert seen[0]["mask"] == "full" and seen[0]["fast_forward"] is False
    assert "mask" not in seen[1] and "fast_forward" not in seen[1]  # the backend's defaults: lazy, on


def test_in_long_free_text_the_grammar_is_asked_only_now_and_then(monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools.backends import _decode

    asked: list[str] = []

    def counted(grammar: Any, text: str, resume: Any = None) -> tuple[str, bool]:
        asked.append(text)
        return continuation(grammar, text, resume)

    monkeypatch.setattr(_decode, "continuation", counted)
    grammar = build_grammar(Model(ScriptedBackend([]), family="qwen2.5").family, [TOOL], "auto")
    ahead = FastForward(grammar, lambda t: [ord(c) for c in t], lambda _: False)
    text = "Plain words, " * 20
    for n in range(1, len(text) + 1):
        assert ahead.after(functools.partial(str.__getitem__, text, slice(0, n))) == ([], False)
    patience = ahead.PATIENCE
    assert len(asked) == patience + (len(text) - 1) // patience  # 32 in a row, then every 32nd
    # A forced stretch is still found once the grammar is asked again, and ends the pause.
    while True:
        ids, _ = ahead.after(lambda: text + "<tool_call>")
        if ids:
            break
    assert "".join(map(chr, ids)).startswith('\n{"name": "get_customer"') and ahead.misses == 0
