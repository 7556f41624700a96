"""``load()``: a catalog name or GGUF path to a ready ``Model``."""

from __future__ import annotations

import inspect
import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from .._errors import ModelError, UsageError
from ..backends import BACKENDS, ENGINES, backend_class
from ..backends._remote import RemoteBackend
from ..host._catalog import cache_dir, catalog, default_model, resolve_model
from ._decide import CALIBRATED, Decisions
from ._model import Model

__all__ = ["BACKENDS", "ENGINES", "ENGLISH_LEVERS", "PROFILES", "backend_class", "calibrated", "calibration_path",
           "catalog_decisions", "decisions_from_text", "load", "resolve_decisions", "with_calibration"]


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


def catalog_decisions(model: str, family: str | None = None) -> Decisions | None:
    """The thresholds the catalog gives ``model`` (``None``: greedy, as for a model it does not
    list, or one asked to run as another family than the one they were measured with)."""
    entry = catalog().get(model)
    if entry is None or not entry.decisions or family not in (None, entry.family):
        return None
    try:
        return Decisions.from_dict(dict(entry.decisions))
    except UsageError as exc:
        raise ModelError(f"models.txt: {entry.name}'s decisions: {exc}") from None


def with_calibration(model: str, *, family: str | None = None, template: str | None = None) -> Decisions | None:
    """``model``'s decisions with the thresholds ``localtools calibrate`` wrote for it (``calibrated``,
    read once) in place of the catalog's; ``None`` when it wrote none."""
    found = calibrated(model)
    if found is None:
        return None
    # calibrate chooses only the thresholds its probes can replay; the catalog's other settings
    # (ground, word, number, cover...) stand, or calibrating would switch them off.
    base = catalog_decisions(model, family) if template is None else None
    return found if base is None else replace(base, **{key: getattr(found, key) for key in CALIBRATED})


#: The named profiles a setting of decisions may take besides ``Decisions`` itself.
#: ``bfcl``: the model's default and the levers that read English words (stems, English number
#: words, "and"/"or" lists, capitalised names, a boolean's key), with the list form at the share
#: BFCL's parallel categories were tuned on: opt-in, for English requests like BFCL's.
PROFILES = ("default", "greedy", "calibrated", "bfcl")
ENGLISH_LEVERS = "form=0.0001,guess=0.75,fit=0.9,word=6,number=4,cover,percent,option,shape,ground,closed"


def decisions_from_text(text: str) -> Decisions:
    """Levers as models.txt writes them (``form=0.0001,more=0.002,ground``: shares and bonuses by
    name, a bare name a switch turned on), as ``Decisions``; ``UsageError`` naming what is wrong."""
    pairs: dict[str, float | bool] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        try:
            pairs[key] = float(value) if sep else True
        except ValueError:
            key = ""
        if not key:
            raise UsageError(f"decisions {text!r}: expected a profile ({', '.join(PROFILES)}) or NAME=VALUE pairs "
                             "and switch names joined by commas, e.g. form=0.0001,more=0.002,distinct")
    try:
        return Decisions.from_dict({k: int(v) if k in _COUNTS and isinstance(v, float) else v
                                    for k, v in pairs.items()})
    except UsageError as exc:
        raise UsageError(f"decisions {text!r}: {exc}; or a profile: {', '.join(PROFILES)}") from None


_COUNTS = ("samples", "max_calls", "k", "depth")


def resolve_decisions(decisions: Decisions | str | None, model: str | None, *, family: str | None = None,
                      template: str | None = None) -> Decisions | None:
    """What ``load``'s ``decisions`` stands for on ``model`` (``None``: greedy): a ``Decisions``, a
    profile (``PROFILES``; ``None`` is ``"default"``) or levers as text (``decisions_from_text``)."""
    if decisions == "bfcl":
        base = resolve_decisions(None, model, family=family, template=template) or Decisions()
        return replace(base, **{k: v for k, v in vars(decisions_from_text(ENGLISH_LEVERS)).items()
                                if v != getattr(Decisions(), k)})
    if decisions == "default":
        decisions = None
    if decisions == "calibrated":
        name = model or default_model()
        found = with_calibration(name, family=family, template=template)
        if found is None:
            raise UsageError(f"no calibrated thresholds for {name}: run `localtools calibrate {name}` first "
                             f"(they are kept at {calibration_path(name)})")
        return found
    if decisions == "greedy":
        return None
    if decisions is None:
        return catalog_decisions(model, family) if model and template is None else None
    if isinstance(decisions, str):
        return decisions_from_text(decisions)
    if not isinstance(decisions, Decisions):
        raise UsageError(f"decisions must be a Decisions, a profile ({', '.join(PROFILES)}), levers as text or None, "
                         f"got {decisions!r}")
    return decisions


def load(
    model: str | None = None,
    *,
    backend: str = "llama-cpp",
    family: str | None = None,
    template: str | None = None,
    download: bool = True,
    decisions: Decisions | Literal["default", "calibrated", "greedy", "bfcl"] | str | None = None,
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

    ``decisions``: how the model decides where the grammar leaves a choice (``Decisions``);
    ``None``: the catalog's thresholds for the model (its ``decisions`` in ``models.txt``, measured
    on the bench's report split; with its own family and template only), greedy for any other;
    ``"default"``: as ``None``; ``"greedy"``: the greedy token at every choice; ``"bfcl"``: the
    default and the levers that read English words (``ENGLISH_LEVERS``; opt-in, for English
    requests); levers as text (``"form=0.0001,more=0.002,distinct"``); ``"calibrated"``: the thresholds
    ``localtools calibrate`` wrote for this model (``UsageError`` when it wrote none). Calibrated
    thresholds are asked for, never applied unasked: how far they carry beyond their calibration
    split is in BENCHMARKS.md.
    """
    cls = backend_class(backend)
    remote = isinstance(cls, type) and issubclass(cls, RemoteBackend)
    # An engine loaded without a model serves weights the catalog cannot name.
    decisions = resolve_decisions(decisions, model or (None if remote else default_model()), family=family,
                                  template=template)
    accepted = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
        unknown = sorted(set(backend_options) - set(accepted))
        if unknown:
            options = sorted(name for name, p in accepted.items() if p.kind is p.KEYWORD_ONLY)
            raise UsageError(
                f"the {backend} backend takes no option {', '.join(unknown)}; its options: {', '.join(options)}"
            )
    if remote:
        engine = _load_remote(cls, model, family=family, template=template, download=download, options=backend_options)
        engine.decisions = decisions
        return engine
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
