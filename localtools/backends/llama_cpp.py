"""llama-cpp-python backend: GGUF weights on CPU or GPU (``n_gpu_layers``), GBNF constraints."""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from .._errors import BackendNotInstalled, ModelError
from .._gguf import read_metadata
from .._grammar import Grammar
from .._prompt import Prompt
from ._base import Generation, cut_at_stop

__all__ = ["LlamaCppBackend"]

INSTALL_HINT = "pip install 'localtools[llama-cpp]'  (builds llama-cpp-python; a few minutes on a laptop)"


def _import() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendNotInstalled(f"the llama-cpp backend needs llama-cpp-python: {INSTALL_HINT}") from exc
    return llama_cpp


@lru_cache(maxsize=64)
def _compiled(gbnf: str) -> Any:
    # Grammars are rebuilt per request from the tools; identical tool sets share one parse.
    return _import().LlamaGrammar.from_string(gbnf, verbose=False)


class LlamaCppBackend:
    """Runs a GGUF file through llama.cpp.

    Prompt segments marked as data are tokenized with special-token parsing off, so text such as
    ``<|im_end|>`` inside a tool result stays text.
    """

    name = "llama-cpp"

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int = 4096,
        n_gpu_layers: int = 0,
        n_threads: int | None = None,
        seed: int = 0,
        **llama_kwargs: Any,
    ) -> None:
        llama_cpp = _import()
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"no GGUF file at {path}")
        self.path = path
        self.metadata = read_metadata(path)
        unknown = sorted(set(llama_kwargs) - set(inspect.signature(llama_cpp.Llama).parameters))
        if unknown:
            raise ModelError(f"llama_cpp.Llama takes no option {', '.join(unknown)} (is it meant for another backend?)")
        try:
            self.llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_gpu_layers=n_gpu_layers,
                n_threads=n_threads or os.cpu_count() or 1,
                seed=seed,
                verbose=False,
                **llama_kwargs,
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not load {path}: {exc}") from exc
        self.n_ctx = n_ctx
        self.bos_token = self._token_text(self.metadata.get("tokenizer.ggml.bos_token_id"))
        self.eos_token = self._token_text(self.metadata.get("tokenizer.ggml.eos_token_id"))

    def _token_text(self, token_id: int | None) -> str:
        if token_id is None:
            return ""
        return self.llm.detokenize([token_id], special=True).decode("utf-8", errors="replace")

    def drop_prompt_cache(self) -> None:
        """Forget the evaluated prefix, so the next prompt is processed from its first token.

        Between turns of one conversation the reused prefix is what makes a reply fast; a benchmark
        that compares prompt processing drops it.
        """
        self.llm.reset()

    def tokenize(self, prompt: Prompt) -> list[int]:
        ids: list[int] = []
        for text, is_data in prompt.segments:
            ids += self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=not is_data)
        return ids

    def generate(
        self,
        prompt: Prompt,
        *,
        grammar: Grammar | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
        repeat_penalty: float = 1.0,
    ) -> Generation:
        llama_cpp = _import()
        prompt_ids = self.tokenize(prompt)
        room = self.n_ctx - len(prompt_ids)
        if room <= 0:
            raise ModelError(f"the prompt has {len(prompt_ids)} tokens, more than the context of {self.n_ctx}")
        max_tokens = min(max_tokens, room)
        self.llm.set_seed(seed if seed is not None else 0)
        compiled = _compiled(grammar.to_gbnf()) if grammar is not None else None
        out: list[int] = []
        finish = "length"
        start = time.perf_counter()
        first = start
        text = ""
        vocab = self.llm._model.vocab
        for token in self.llm.generate(
            prompt_ids,
            temp=temperature,
            top_p=top_p,
            top_k=0 if temperature > 0 else 1,
            min_p=0.0,
            repeat_penalty=repeat_penalty,
            grammar=compiled,
        ):
            if not out:
                first = time.perf_counter()
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            out.append(token)
            if stop:
                text = self.llm.detokenize(out, prev_tokens=prompt_ids).decode("utf-8", errors="ignore")
                cut = cut_at_stop(text, stop)
                if cut is not None:
                    text, finish = cut, "stop"
                    break
            if len(out) >= max_tokens:
                break
        end = time.perf_counter()
        if finish != "stop" or not stop:
            text = self.llm.detokenize(out, prev_tokens=prompt_ids).decode("utf-8", errors="replace")
        return Generation(
            text=text,
            tokens=out,
            finish_reason=finish,
            prompt_tokens=len(prompt_ids),
            prompt_seconds=first - start,
            decode_seconds=end - first,
        )
