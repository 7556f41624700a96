"""``load()``: a catalog name or GGUF path to a ready ``Model``."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ._catalog import default_model, resolve_model
from ._errors import LocalToolsError
from ._model import Model

__all__ = ["BACKENDS", "load"]

#: Backend name -> "module:class". A new backend is one line here.
BACKENDS = {
    "llama-cpp": "localtools.backends.llama_cpp:LlamaCppBackend",
    "transformers": "localtools.backends.transformers:TransformersBackend",
}


def load(
    model: str | None = None,
    *,
    backend: str = "llama-cpp",
    family: str | None = None,
    template: str | None = None,
    download: bool = True,
    **backend_options: Any,
) -> Model:
    """Load a catalog model (``localtools models list``) or a GGUF path.

    ``backend_options`` go to the backend, e.g. ``n_gpu_layers=-1`` (all layers on the GPU) or
    ``n_ctx=8192`` for llama-cpp; ``device="cuda"``, ``dtype="bfloat16"`` or
    ``engine="xgrammar"`` for transformers.
    """
    if backend not in BACKENDS:
        raise LocalToolsError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    module_name, _, cls_name = BACKENDS[backend].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    accepted = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(backend_options) - set(accepted))
        if unknown:
            options = sorted(name for name, p in accepted.items() if p.kind is p.KEYWORD_ONLY)
            raise LocalToolsError(
                f"the {backend} backend takes no option {', '.join(unknown)}; its options: {', '.join(options)}"
            )
    path, entry = resolve_model(model or default_model(), download=download)
    if entry is not None and backend not in entry.backends:
        raise LocalToolsError(f"{entry.name} runs on {', '.join(entry.backends)}, not {backend} (see models.txt)")
    return Model(cls(path, **backend_options), family=family or (entry.family if entry else None), template=template)
