"""The llama-cpp backend sizes its context: it starts small and grows, doubling, when a prompt and
its reply need more, up to the length the model was trained for and within free memory, and says
so; a context given as a number stays as given; a prompt that cannot fit says why."""

from __future__ import annotations

import pytest

from localtools import Agent, ContextLengthExceeded, tool
from localtools.backends.llama_cpp import START_CONTEXT, grown_context, kv_bytes_per_token, trained_context

QWEN = {"general.architecture": "qwen2", "qwen2.context_length": 32768, "qwen2.block_count": 24,
        "qwen2.attention.head_count": 14, "qwen2.attention.head_count_kv": 2, "qwen2.embedding_length": 896}


def test_the_trained_length_and_a_tokens_cost_come_from_the_gguf() -> None:
    assert trained_context(QWEN) == 32768
    # 24 layers, 2 KV heads, keys and values of 64 (896 / 14), f16: 12 KiB a token.
    assert kv_bytes_per_token(QWEN) == 24 * 2 * (64 + 64) * 2
    assert kv_bytes_per_token({**QWEN, "qwen2.attention.key_length": 128, "qwen2.attention.value_length": 128}) == \
        24 * 2 * 256 * 2
    assert trained_context({"general.architecture": "x"}) is None and kv_bytes_per_token({}) is None


@pytest.mark.parametrize("need", [4097, 5920, 8192, 8193, 20000, 32768])
def test_a_context_doubles_to_what_is_needed_and_no_further_than_trained(need: int) -> None:
    size, why = grown_context(need, 4096, 32768, 12288, 8 * 2**30)
    assert size is not None and why == ""
    assert need <= size <= 32768 and (size // 2 < need or size == 4096)


def test_past_the_trained_length_or_free_memory_it_does_not_grow_and_says_why() -> None:
    assert grown_context(40000, 4096, 32768, 12288, 8 * 2**30) == (None, "the model was trained for 32768 tokens")
    size, why = grown_context(9000, 4096, 32768, 12288, 2**20)
    assert size is None and "MiB more" in why and "1 MiB are free" in why
    # Memory unknown: grows on the trained length alone.
    assert grown_context(9000, 4096, 32768, None, None) == (16384, "")


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _long(words: int) -> str:
    return " apple" * words  # a token a word


@pytest.mark.model
def test_a_prompt_longer_than_the_first_context_grows_it_and_is_answered(caplog: pytest.LogCaptureFixture) -> None:
    from localtools import load

    caplog.set_level("INFO", logger="localtools.backends")
    from localtools.backends.llama_cpp import LlamaCppBackend

    model = load("smollm2-135m")  # a model of its own: its context changes
    backend = model.backend
    assert isinstance(backend, LlamaCppBackend)
    assert backend.capabilities.n_ctx == min(START_CONTEXT, 8192) and backend.capabilities.max_ctx == 8192
    question = "Summarize:" + _long(4400)
    result = model.chat([{"role": "user", "content": question}], max_tokens=5)
    assert result.completion_tokens > 0
    assert backend.capabilities.n_ctx == 8192
    assert backend.context_changes[-1].startswith(f"context grown from {START_CONTEXT} to 8192 tokens")
    assert backend.context_changes[-1] in caplog.messages  # said where a user sees it (the CLI prints this log)
    # The agent budgets on the most it grows to: the same question runs through it.
    assert Agent(model, [], max_steps=1, max_tokens=5).run(question + " apple").trace
    # Past what the model was trained for: refused, saying why.
    with pytest.raises(ContextLengthExceeded, match="trained for 8192"):
        model.chat([{"role": "user", "content": _long(9000)}], [echo], max_tokens=30)


def test_the_cli_prints_what_a_backend_decides_on_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from localtools.cli._main import _say_backend_notes

    log = logging.getLogger("localtools.backends")
    handlers, level = list(log.handlers), log.level
    try:
        _say_backend_notes()
        _say_backend_notes()  # once, however often a command starts
        log.info("context grown from 4096 to 8192 tokens for a prompt of 5920")
        assert capsys.readouterr().err.count("localtools: context grown from 4096 to 8192") == 1
    finally:
        log.handlers, log.level = handlers, level


@pytest.mark.model
def test_a_context_given_as_a_number_stays_as_given() -> None:
    from conftest import load_once

    model = load_once("smollm2-135m", n_ctx=1024)
    assert model.backend.capabilities.max_ctx is None
    with pytest.raises(ContextLengthExceeded, match="n_ctx=1024 was given; the model was trained for 8192"):
        model.chat([{"role": "user", "content": _long(1500)}], [echo], max_tokens=10)
    assert model.backend.capabilities.n_ctx == 1024
