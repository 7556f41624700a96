"""The data files inside the package: family templates and grammars (``families/templates``,
``families/grammars``) and the model catalog (``host/models.txt``)."""

from __future__ import annotations

from importlib import resources

__all__ = ["list_files", "read_text"]

_PACKAGES = {"templates": "localtools.families.templates", "grammars": "localtools.families.grammars",
             "catalog": "localtools.host"}


def read_text(folder: str, name: str) -> str:
    try:
        return (resources.files(_PACKAGES[folder]) / name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder}/{name} is not shipped with localtools") from None


def list_files(folder: str) -> list[str]:
    return sorted(p.name for p in resources.files(_PACKAGES[folder]).iterdir() if not p.name.startswith("__"))
