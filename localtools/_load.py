"""``load()``: a catalog name or GGUF path to a ready ``Model``."""

from __future__ import annotations

import importlib
from typing import Any

from ._catalog import default_model, resolve_model
from ._errors import LocalToolsError
from ._model import Model

__all__ = ["BACKENDS", "load"]

#: Backend name -> "module:class". A new backend is one line here.
BACKENDS = {
    "llama-cpp": "localtools.backends.llama_cpp:LlamaCppBackend",
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
    ``n_ctx=8192`` for llama-cpp.
    """
    if backend not in BACKENDS:
        raise LocalToolsError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)}")
    path, catalog_family = resolve_model(model or default_model(), download=download)
    module_name, _, cls_name = BACKENDS[backend].partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return Model(cls(path, **backend_options), family=family or catalog_family, template=template)
