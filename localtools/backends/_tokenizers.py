"""A model's tokenizer on this machine, for engines whose own tokenizer cannot be told to leave
special-token text in message text alone (vLLM's and SGLang's ``/tokenize`` always parse it).

From a GGUF file through llama-cpp-python (vocabulary only: milliseconds, no weights), or from a
Hugging Face model directory through transformers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from .._errors import BackendNotInstalled, ModelError

__all__ = ["LocalTokenizer", "Tokenizer"]


class Tokenizer(Protocol):
    """What an engine backend needs of a tokenizer (``tokenizer=`` may be any such object)."""

    bos_token: str
    eos_token: str
    #: GGUF-style metadata a family is detected from (``tokenizer.chat_template``, ``general.name``).
    metadata: dict[str, Any]

    def encode(self, text: str, special: bool) -> list[int]:
        """Token ids of ``text``; ``special``: whether special-token text becomes those tokens."""
        ...

    def decode(self, tokens: list[int]) -> str:
        """The text of ``tokens``, special tokens written out (as the engine's reply text keeps them)."""
        ...


class LocalTokenizer:
    """Encodes prompt segments as the model's own tokenizer does."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path).expanduser()
        if not path.exists():
            raise ModelError(f"no tokenizer at {path} (a .gguf file or a Hugging Face model directory)")
        self.path = path
        self.metadata: dict[str, Any]
        self._llama: Any = None
        self._hf_tokenizer: Any = None
        if path.suffix == ".gguf":
            self._gguf(path)
        else:
            self._hf(path)

    def _gguf(self, path: Path) -> None:
        from ..host._gguf import read_metadata

        try:
            import llama_cpp
        except ImportError as exc:
            raise BackendNotInstalled("reading a GGUF file's tokenizer needs llama-cpp-python: "
                                      "pip install 'localtools[llama-cpp]' (or give a Hugging Face directory)") from exc
        try:
            self._llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not read the tokenizer in {path}: {exc}") from exc
        self.metadata = read_metadata(path)

        def text(key: str) -> str:
            token_id = self.metadata.get(key)
            return "" if token_id is None else self._llama.detokenize([token_id], special=True).decode("utf-8", "replace")

        self.bos_token, self.eos_token = text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id")

    def _hf(self, path: Path) -> None:
        try:
            import transformers
        except ImportError as exc:
            raise BackendNotInstalled("reading a Hugging Face tokenizer needs transformers: "
                                      "pip install 'localtools[transformers]' (or give a .gguf file)") from exc
        try:
            self._hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelError(f"transformers could not read a tokenizer in {path}: {exc}") from exc
        tok = self._hf_tokenizer
        self.metadata = {"general.name": path.name, "tokenizer.chat_template": tok.chat_template or ""}
        self.bos_token, self.eos_token = tok.bos_token or "", tok.eos_token or ""

    def encode(self, text: str, special: bool) -> list[int]:
        if self._llama is not None:
            return [int(t) for t in self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=special)]
        ids = self._hf_tokenizer(text, add_special_tokens=False, split_special_tokens=not special)["input_ids"]
        return [int(t) for t in ids]

    def decode(self, tokens: list[int]) -> str:
        if self._llama is not None:
            return bytes(self._llama.detokenize(tokens, special=True)).decode("utf-8", "replace")
        return str(self._hf_tokenizer.decode(tokens, skip_special_tokens=False))
