"""The mask engines driven directly (``localtools.backends._masks``), on SmolLM2's tokenizer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import load_once

import localtools
import localtools.examples
from localtools._errors import BackendNotInstalled, GrammarError, ModelError, UsageError
from localtools.backends._masks import ENGINES, Matcher, compile_grammar, new_matcher
from localtools.grammar import matches

#: A reply the chatml family's grammar takes (hermes-style, one call).
REPLY = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>'
#: Where REPLY's tokens reach the tool name; "weather" names no tool.
NAME_AT = REPLY.index('"calculator"') + 1
PADDING = 64  # extra logits rows, as a padded embedding has


@dataclass
class Setup:
    tokenizer: Any
    ids: list[int]
    eos: int
    width: int  # the model's logits
    known: int  # the tokenizer's vocabulary
    device: Any
    compiled: dict[str, Any]
    backends: dict[str, Any]

    def matcher(self, engine: str, width: int | None = None) -> Matcher:
        return new_matcher(engine, self.compiled[engine], self.backends[engine], width or self.width)

    def first_token(self, text: str) -> int:
        return int(self.tokenizer(text, add_special_tokens=False)["input_ids"][0])


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    torch = pytest.importorskip("torch")
    try:
        model = load_once("smollm2-135m", "transformers")
    except (ModelError, BackendNotInstalled) as exc:
        pytest.skip(f"smollm2-135m on transformers is not available here: {exc}")
    backend: Any = model.backend  # the transformers backend: its tokenizer, model and engines
    grammar = model.grammar(list(localtools.examples.ALL), "required")
    assert matches(grammar, REPLY)
    sources = {"xgrammar": grammar.to_gbnf(), "llguidance": grammar.to_lark(), "outlines_core": grammar.to_regex()}
    compiled: dict[str, Any] = {}
    backends: dict[str, Any] = {}
    chosen = backend.engine_name
    try:
        for engine in ENGINES:
            backend.engine_name = engine
            try:
                backends[engine] = backend.engine.backend
            except BackendNotInstalled:
                continue
            compiled[engine] = compile_grammar(backends[engine], engine, sources[engine])
    finally:
        backend.engine_name = chosen
    ids = backend.tokenizer(REPLY, add_special_tokens=False)["input_ids"]
    eos = backend.tokenizer.eos_token_id
    known = len(backend.tokenizer.get_vocab())
    with torch.inference_mode():
        yield Setup(backend.tokenizer, ids, eos, int(backend.model.config.vocab_size), known,
                    torch.device(backend.device), compiled, backends)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, setup: Setup) -> str:
    if request.param not in setup.compiled:
        pytest.skip(f"the {request.param} engine is not installed")
    return str(request.param)


def masked(setup: Setup, matcher: Matcher, width: int | None = None) -> Any:
    """The tokens ``mask`` rejects, as a boolean row on the CPU."""
    import torch

    logits = torch.zeros(width or setup.width, device=setup.device)
    matcher.mask(logits)
    return torch.isinf(logits).cpu()


def prefix_len(setup: Setup) -> int:
    """How many of REPLY's tokens come before the tool name."""
    text = ""
    for n, token in enumerate(setup.ids):
        if len(text) >= NAME_AT:
            return n
        text += setup.tokenizer.decode([token])
    raise AssertionError("REPLY has no tool name")


@pytest.mark.model
def test_the_reply_is_allowed_token_by_token(setup: Setup, engine: str) -> None:
    matcher = setup.matcher(engine)
    for token in setup.ids:
        assert matcher.allows(token)
        rejected = masked(setup, matcher)
        assert not rejected[token]
        assert rejected[setup.known:].all()
        matcher.consume([token])
    # The grammar is complete: end-of-sequence is allowed, as the engine says.
    assert matcher.allows(setup.eos)
    assert not masked(setup, matcher)[setup.eos]
    matcher.consume([setup.eos])
    matcher.check()


@pytest.mark.model
def test_where_the_grammar_can_take_nothing_more_the_end_token_is_allowed_and_taken(setup: Setup, engine: str) -> None:
    # A one-call reply with nothing allowed after it: llguidance stops its matcher there, and the
    # end token it then masks in must still be taken, as the other engines take it.
    from localtools.grammar import Grammar, Lit

    grammar = Grammar({"root": Lit(REPLY)}, "root")
    source = {"xgrammar": grammar.to_gbnf(), "llguidance": grammar.to_lark(), "outlines_core": grammar.to_regex()}
    compiled = compile_grammar(setup.backends[engine], engine, source[engine])
    matcher = new_matcher(engine, compiled, setup.backends[engine], setup.width)
    matcher.consume(setup.ids)
    assert matcher.allows(setup.eos) and not matcher.allows(setup.ids[0])
    rejected = masked(setup, matcher)
    assert not rejected[setup.eos] and rejected[setup.ids[0]]
    matcher.consume([setup.eos])
    matcher.check()


@pytest.mark.model
def test_a_wrong_token_is_rejected_and_masked(setup: Setup, engine: str) -> None:
    matcher = setup.matcher(engine)
    hello = setup.first_token("Hello")
    assert not matcher.allows(hello)
    assert not matcher.allows(setup.eos)
    assert masked(setup, matcher)[hello]
    assert masked(setup, matcher)[setup.eos]
    matcher.consume(setup.ids[:prefix_len(setup)])
    weather = setup.first_token("weather")
    assert not matcher.allows(weather)
    assert masked(setup, matcher)[weather]
    assert not matcher.allows(-1)
    assert not matcher.allows(setup.width + PADDING - 1)


@pytest.mark.model
def test_asking_does_not_move_the_matcher(setup: Setup, engine: str) -> None:
    asked, plain = setup.matcher(engine), setup.matcher(engine)
    hello = setup.first_token("Hello")
    for token in setup.ids:
        assert asked.allows(token) and asked.allows(token)
        asked.allows(hello)
        asked.allows(setup.eos)
        assert (masked(setup, asked) == masked(setup, plain)).all()
        asked.consume([token])
        plain.consume([token])
    assert asked.allows(setup.eos)
    assert (masked(setup, asked) == masked(setup, plain)).all()


@pytest.mark.model
def test_consuming_a_batch_equals_one_at_a_time(setup: Setup, engine: str) -> None:
    for cut in (1, prefix_len(setup), len(setup.ids) - 1, len(setup.ids)):
        batch, single = setup.matcher(engine), setup.matcher(engine)
        batch.consume(setup.ids[:cut])
        for token in setup.ids[:cut]:
            single.consume([token])
        assert (masked(setup, batch) == masked(setup, single)).all()
        if cut < len(setup.ids):
            assert batch.allows(setup.ids[cut])


@pytest.mark.model
def test_a_rejected_batch_consumes_nothing(setup: Setup, engine: str) -> None:
    matcher, fresh = setup.matcher(engine), setup.matcher(engine)
    weather = setup.first_token("weather")
    start = prefix_len(setup)
    matcher.consume(setup.ids[:2])
    fresh.consume(setup.ids[:2])
    with pytest.raises(GrammarError, match=str(weather)):
        matcher.consume([*setup.ids[2:start], weather, *setup.ids[start:]])
    matcher.check()
    assert (masked(setup, matcher) == masked(setup, fresh)).all()
    matcher.consume(setup.ids[2:])
    assert matcher.allows(setup.eos)


@pytest.mark.model
def test_padded_and_batched_logits(setup: Setup, engine: str) -> None:
    import torch

    width = setup.width + PADDING
    matcher = setup.matcher(engine, width)
    matcher.consume(setup.ids[:3])
    row = masked(setup, matcher, width)
    assert row[setup.known:].all()
    assert not row[setup.ids[3]]
    logits = torch.randn(1, width, device=setup.device, dtype=torch.bfloat16)
    matcher.mask(logits)
    assert (torch.isinf(logits[0]).cpu() == row).all()


@pytest.mark.model
@pytest.mark.parametrize(("engine_name", "source"), [
    ("xgrammar", 'root ::= "a" undefined-rule'),
    ("llguidance", "start: foo\nfoo: bar"),
    ("outlines_core", "(unclosed"),
])
def test_a_grammar_the_engine_refuses(setup: Setup, engine_name: str, source: str) -> None:
    if engine_name not in setup.backends:
        pytest.skip(f"the {engine_name} engine is not installed")
    with pytest.raises(GrammarError, match=engine_name):
        compile_grammar(setup.backends[engine_name], engine_name, source)


def test_an_unknown_engine() -> None:
    with pytest.raises(UsageError, match="unknown mask engine"):
        compile_grammar(object(), "nonesuch", "root ::= \"a\"")
    with pytest.raises(UsageError, match="unknown mask engine"):
        new_matcher("nonesuch", object(), object(), 32)
