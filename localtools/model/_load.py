"""``load()``: a catalog name or GGUF path to a ready ``Model``."""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from typing import Any, Literal

from .._errors import ModelError, UsageError
from ..backends import BACKENDS, ENGINES, backend_class
from ..backends._remote import RemoteBackend
from ..host._catalog import cache_dir, catalog, default_model, resolve_model
from ._decide import Decisions
from ._model import Model

__all__ = ["BACKENDS", "ENGINES", "backend_class", "calibrated", "calibration_path", "load"]


def calibration_path(model: str) -> Path:
    """Where ``localtools calibrate`` keeps a model's thresholds: by catalog name or file stem."""
    return cache_dir().parent / "calibration" / f"{Path(model).name.removesuffix('.gguf')}.json"


def calibrated(model: str) -> Decisions | None:
    """The thresholds ``localtools calibrate`` wrote for ``model``; ``None`` when it wrote none (a
    file that cannot be read is said so in a warning, and the model decides greedily)."""
    path = calibration_path(model)
    if not path.is_file():
        return None
    try:
        return Decisions.from_dict(json.loads(path.read_text(encoding="utf-8"))["decisions"])
    except (ValueError, KeyError, TypeError, UsageError) as exc:
        warnings.warn(f"{path}: not a calibration file ({exc}); deciding greedily", stacklevel=2)
        return None

def load(
    model: str | None = None,
    *,
    backend: str = "llama-cpp",
    family: str | None = None,
    template: str | None = None,
    download: bool = True,
    decisions: Decisions | Literal["calibrated"] | None = None,
    **backend_options: Any,
) -> Model:
    """Load a catalog model (``localtools models list``) or a GGUF path.

    ``backend``: a name in ``BACKENDS`` or ``ENGINES``, or ``"module:Class"`` for a backend of your
    own (a class taking the weights' path and keyword options, with the ``Backend`` protocol's
    methods).

    ``backend_options`` go to the backend, e.g. ``n_gpu_layers=-1`` (all layers on the GPU) or
    ``n_ctx=8192`` for llama-cpp; ``device="cuda"``, ``dtype="bfloat16"`` or
    ``engine="xgrammar"`` for transformers; ``url="http://127.0.0.1:8080"`` for an engine.

    An engine holds the weights, so ``model`` may be left out (the family then comes from
    ``family=`` or the engine's chat template); a catalog name or a local copy of the weights
    names the family, and gives vLLM and SGLang the tokenizer.

    ``decisions``: how the model decides where the grammar leaves a choice (``Decisions``;
    ``None``: greedy); ``"calibrated"``: the thresholds ``localtools calibrate`` wrote for this
    model (``UsageError`` when it wrote none). Calibrated thresholds are asked for, never applied
    unasked: how far they carry beyond their calibration split is in BENCHMARKS.md.
    """
    if decisions == "calibrated":
        name = model or default_model()
        decisions = calibrated(name)
        if decisions is None:
            raise UsageError(f"no calibrated thresholds for {name}: run `localtools calibrate {name}` first "
                             f"(they are kept at {calibration_path(name)})")
    elif decisions is not None and not isinstance(decisions, Decisions):
        raise UsageError(f"decisions must be a Decisions, 'calibrated' or None, got {decisions!r}")
    cls = backend_class(backend)
    accepted = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(backend_options) - set(accepted))
        if unknown:
            options = sorted(name for name, p in accepted.items() if p.kind is p.KEYWORD_ONLY)
            raise UsageError(
                f"the {backend} backend takes no option {', '.join(unknown)}; its options: {', '.join(options)}"
            )
    if isinstance(cls, type) and issubclass(cls, RemoteBackend):
        remote = _load_remote(cls, model, family=family, template=template, download=download, options=backend_options)
        remote.decisions = decisions
        return remote
    path, entry = resolve_model(model or default_model(), download=download)
    if entry is not None and backend not in entry.backends:
        raise UsageError(f"{entry.name} runs on {', '.join(entry.backends)}, not {backend} (see models.txt)")
    return Model(cls(path, **backend_options), family=family or (entry.family if entry else None), template=template,
                 decisions=decisions)


def _load_remote(cls: Any, model: str | None, *, family: str | None, template: str | None, download: bool,
                 options: dict[str, Any]) -> Model:
    """An engine backend: the weights stay with the engine; a local copy is read only for its
    tokenizer (when the backend tokenizes locally) and its metadata."""
    path: Path | None = None
    entry = catalog().get(model) if model else None
    if entry is not None:
        if entry.cached:
            path = entry.path
        elif cls.local_tokenizer and not options.get("tokenizer"):
            path, _ = resolve_model(entry.name, download=download)
    elif model:
        path = Path(model).expanduser()
        if not path.exists():
            raise ModelError(f"no file or directory at {path}: with the {cls.name} backend, model is a catalog name, "
                             "a local copy of the weights (read for the tokenizer and family), or left out")
    return Model(cls(path, **options), family=family or (entry.family if entry else None), template=template)
