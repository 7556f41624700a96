"""Model backends: each turns a prompt plus a constraint into text."""

from __future__ import annotations

import importlib
from typing import Any

from .._errors import UsageError

__all__ = ["BACKENDS", "ENGINES", "backend_class"]

#: Backend name -> "module:class" for the backends that run the weights in this process. A new
#: backend is one line here.
BACKENDS = {
    "llama-cpp": "localtools.backends.llama_cpp:LlamaCppBackend",
    "transformers": "localtools.backends.transformers:TransformersBackend",
}
#: The serving engines localtools drives over HTTP (``url=``): they hold the weights and batch
#: requests; localtools keeps the template, the grammar, the parser and the loop.
ENGINES = {
    "llama-server": "localtools.backends.llama_server:LlamaServerBackend",
    "vllm": "localtools.backends.vllm:VLLMBackend",
    "sglang": "localtools.backends.sglang:SGLangBackend",
}

#: Engines that cannot hold a reply to localtools' grammar, and why.
_CANNOT_HOST = {
    "ollama": "it takes no grammar (its 'format' is JSON or a JSON schema, not a grammar), so it cannot constrain a "
              "reply to the family's call syntax or to tool_choice. Run the same GGUF with --backend llama-server "
              "(localtools engines start llama-server --model FILE.gguf) or in process (--backend llama-cpp); "
              "Ollama's own tool calling can still be compared with: localtools bench --peer openai:http://127.0.0.1:11434/v1",
}


def backend_class(backend: str) -> Any:
    """The class behind a backend or engine name, or behind ``"module:Class"`` for a backend of your own.

    Importing a backend's module imports no heavy library; that waits for the first load.
    """
    spec = BACKENDS.get(backend) or ENGINES.get(backend) or (backend if ":" in backend else None)
    if spec is None and backend in _CANNOT_HOST:
        raise UsageError(f"{backend} cannot be a localtools backend: {_CANNOT_HOST[backend]}")
    if spec is None:
        raise UsageError(f"unknown backend {backend!r}; available: {', '.join([*BACKENDS, *ENGINES])} (or MODULE:CLASS)")
    module_name, _, cls_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"backend {backend!r}: cannot import {spec}: {exc}") from None
