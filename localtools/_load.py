"""``load()``: a catalog name or GGUF path to a ready ``Model``."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from ._catalog import default_model, resolve_model
from ._errors import UsageError
from ._model import Model

__all__ = ["BACKENDS", "backend_class", "load"]

#: Backend name -> "module:class". A new backend is one line here.
BACKENDS = {
    "llama-cpp": "localtools.backends.llama_cpp:LlamaCppBackend",
    "transformers": "localtools.backends.transformers:TransformersBackend",
}


def backend_class(backend: str) -> Any:
    """The class behind a backend name, or behind ``"module:Class"`` for a backend of your own.

    Importing a backend's module imports no heavy library; that waits for the first load.
    """
    spec = BACKENDS.get(backend) or (backend if ":" in backend else None)
    if spec is None:
        raise UsageError(f"unknown backend {backend!r}; available: {', '.join(BACKENDS)} (or MODULE:CLASS)")
    module_name, _, cls_name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"backend {backend!r}: cannot import {spec}: {exc}") from None


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

    ``backend``: a name in ``BACKENDS`` or ``"module:Class"`` for a backend of your own (a class
    taking the weights' path and keyword options, with the ``Backend`` protocol's methods).

    ``backend_options`` go to the backend, e.g. ``n_gpu_layers=-1`` (all layers on the GPU) or
    ``n_ctx=8192`` for llama-cpp; ``device="cuda"``, ``dtype="bfloat16"`` or
    ``engine="xgrammar"`` for transformers.
    """
    cls = backend_class(backend)
    accepted = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(backend_options) - set(accepted))
        if unknown:
            options = sorted(name for name, p in accepted.items() if p.kind is p.KEYWORD_ONLY)
            raise UsageError(
                f"the {backend} backend takes no option {', '.join(unknown)}; its options: {', '.join(options)}"
            )
    path, entry = resolve_model(model or default_model(), download=download)
    if entry is not None and backend not in entry.backends:
        raise UsageError(f"{entry.name} runs on {', '.join(entry.backends)}, not {backend} (see models.txt)")
    return Model(cls(path, **backend_options), family=family or (entry.family if entry else None), template=template)
