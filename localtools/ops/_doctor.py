"""``localtools doctor``: what this machine is, what is installed, and whether each backend can generate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ..backends import BACKENDS, backend_class
from ..host._catalog import cache_dir, catalog, verify
from ..host._machine import Machine, gpus, machine
from ._probe import ProbeResult, ProbeStatus, build_info, probe

__all__ = ["BackendReport", "Report", "diagnose", "fix_for"]


@dataclass
class BackendReport:
    name: str
    #: Distribution name -> version, or None where it is missing.
    packages: dict[str, str | None]
    engines: dict[str, str | None]
    install_hint: str
    #: How it constrains decoding when it has no engine packages of its own ("" if it does not say).
    grammar_engine: str = ""
    build: dict[str, str] = field(default_factory=dict)
    #: The generation under the backend's defaults, then (after a crash) under ``after_crash``.
    probes: list[ProbeResult] = field(default_factory=list)
    fix: str = ""

    @property
    def installed(self) -> bool:
        return all(v is not None for v in self.packages.values())

    @property
    def ok(self) -> bool | None:
        """True when it generated with its defaults, False when it did not (or crashed reading its
        build), None when not checked."""
        if "error" in self.build:
            return False
        return self.probes[0].ok if self.probes else None


@dataclass
class Report:
    machine: Machine
    #: One line per GPU that nvidia-smi lists.
    gpus: list[str]
    backends: list[BackendReport]
    #: Catalog name -> (size in bytes, "ok", "mismatch", "not checked") for each cached model.
    models: dict[str, tuple[int, str]]
    #: Catalog name -> its family checked against the model's own chat template (``FamilyCheck``'s text).
    families: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """No checked backend is installed, or an installed one cannot generate."""
        installed = [b for b in self.backends if b.installed]
        return not installed or any(b.ok is False for b in installed)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def fix_for(cls: Any, first: ProbeResult, retried: ProbeResult | None) -> str:
    """The advice for a backend whose probe under its defaults did not succeed."""
    if first.status is ProbeStatus.CRASHED:
        if retried is not None and retried.ok:
            flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in retried.options.items())
            args = ", ".join(f"{k}={v!r}" for k, v in retried.options.items())
            return (f"it generates with {args}: pass {flags} to localtools run, render or serve, or "
                    f"localtools.load(..., {args}) in Python; please report this CPU and build (the output above) "
                    "so the default can learn it")
        fixes = getattr(cls, "crash_fixes", {})
        return str(fixes.get(first.signal or "", fixes.get("*", "report it with this output")))
    if first.status is ProbeStatus.TIMEOUT:
        return "it did not finish a 24-token generation in time: check that no other process holds the CPU or GPU"
    return "the error above says what failed; where it names no fix, please report it with this output"


def _probe_model(backend: str, requested: str | None) -> str | None:
    if requested:
        return requested
    cached = [e for e in catalog().values() if e.cached and backend in e.backends]
    return min(cached, key=lambda e: e.size).name if cached else None


def diagnose(
    *,
    backends: list[str] | None = None,
    model: str | None = None,
    checksums: bool = True,
    generate: bool = True,
    timeout: float = 600,
    progress: Callable[[str], None] = lambda _: None,
) -> Report:
    """Look at the machine, the installed backends and the cached models; probe each backend."""
    reports: list[BackendReport] = []
    models: dict[str, tuple[int, str]] = {}
    for entry in catalog().values():
        if entry.cached:
            if checksums:
                progress(f"checking {entry.name}'s sha256")
            state = ("ok" if verify(entry.name) else "mismatch") if checksums else "not checked"
            models[entry.name] = (entry.size, state)
    for name in backends or list(BACKENDS):
        cls = backend_class(name)
        # A backend of your own ("module:Class") may declare none of these.
        report = BackendReport(
            name=name,
            packages={d: _version(d) for d in getattr(cls, "packages", ())},
            engines={d: _version(d) for d in getattr(cls, "engine_packages", ())},
            install_hint=getattr(cls, "install_hint", ""),
            grammar_engine=getattr(cls, "grammar_engine", ""),
        )
        reports.append(report)
        if not report.installed:
            continue
        progress(f"reading {name}'s build")
        report.build = build_info(name)
        target = _probe_model(name, model)
        if not generate or target is None:
            continue
        progress(f"generating with {name} on {target} in a child process")
        first = probe(name, target, timeout=timeout)
        report.probes.append(first)
        retried = None
        safe = getattr(cls, "after_crash", {})
        if first.status is ProbeStatus.CRASHED and safe:
            progress(f"{name} crashed; trying again with {safe}")
            retried = probe(name, target, safe, timeout=timeout)
            report.probes.append(retried)
        if not first.ok:
            report.fix = fix_for(cls, first, retried)
    progress("looking for GPUs")
    return Report(machine(), gpus(), reports, models, {name: _family_check(name) for name in models})


def _family_check(name: str) -> str:
    """How the catalog model's family fares against the GGUF's own chat template."""
    import warnings

    from .._errors import LocalToolsError
    from ..families._choose import choose_family
    from ..host._gguf import read_metadata

    entry = catalog()[name]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a family that differs is reported here, not warned
            _, check = choose_family(read_metadata(entry.path), entry.family)
    except (LocalToolsError, OSError) as exc:
        return f"cannot check: {exc}"
    return str(check)


#: The features a user asks about, as /proc/cpuinfo spells them.
_HEADLINE = {"AVX2": {"avx2"}, "AVX-512": {"avx512f"}, "AMX": {"amx_tile", "amx_int8"}}


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**30:.1f} GiB"


def render(report: Report, *, generate: bool = True) -> str:
    """The report as the text ``localtools doctor`` prints."""
    m = report.machine
    features = m.features()
    lacking = [label for label, flags in _HEADLINE.items() if not flags & m.cpu_flags]
    lines = [
        "machine",
        f"  CPU        {m.cpu_model} ({m.cores} cores)",
        f"  features   {' '.join(features) or 'unknown'}" + (f"  (no {', no '.join(lacking)})" if lacking and m.cpu_flags
                                                              else ""),
        f"  memory     {_gib(m.memory_bytes)}",
        f"  GPU        {'; '.join(report.gpus) if report.gpus else 'none found (nvidia-smi lists none)'}",
        "",
        "backends",
    ]
    for b in report.backends:
        packages = ", ".join(f"{d} {v or 'missing'}" for d, v in b.packages.items())
        lines.append(f"  {b.name:<13} {'installed' if b.installed else 'not installed'}: {packages}")
        if b.engines:
            lines.append(f"  {'':<13} grammar engines: " + ", ".join(f"{d} {v or 'missing'}" for d, v in b.engines.items()))
        elif b.grammar_engine:
            lines.append(f"  {'':<13} grammar engine: {b.grammar_engine}")
        if not b.installed:
            lines.append(f"  {'':<13} install: {b.install_hint}")
        for key, value in b.build.items():
            lines.append(f"  {'':<13} {key}: {value}")
    lines += ["", f"models (in {cache_dir()})"]
    for entry in catalog().values():
        if entry.name in report.models:
            size, state = report.models[entry.name]
            note = {"ok": "sha256 ok", "mismatch": f"sha256 MISMATCH: localtools models pull {entry.name} --force",
                    "not checked": "sha256 not checked"}[state]
            lines.append(f"  {entry.name:<20} {size / 1e6:>6.0f} MB  {note}")
            if entry.name in report.families:
                lines.append(f"  {'':<20} family {report.families[entry.name]}")
        else:
            lines.append(f"  {entry.name:<20} not downloaded (localtools models pull {entry.name})")
    unchecked = [b for b in report.backends if b.installed and not b.probes and "error" not in b.build]
    if generate:
        lines += ["", "generation (a short one per backend, each in a child process)"]
        for b in report.backends:
            if not b.installed:
                lines.append(f"  {b.name:<13} not installed")
            elif "error" in b.build:
                lines.append(f"  {b.name:<13} not run: {b.build['error']}")
            elif not b.probes:
                lines.append(f"  {b.name:<13} not checked: no cached model runs on it (localtools models pull smollm2-135m)")
            for i, p in enumerate(b.probes):
                label = b.name if i == 0 else f"  with {', '.join(f'{k}={v}' for k, v in p.options.items())}"
                lines.append(f"  {label:<13} {p.describe()} [{p.model}]")
            if b.fix:
                lines.append(f"  {'':<13} fix: {b.fix}")
    lines.append("")
    if not any(b.installed for b in report.backends):
        hints = "; ".join(b.install_hint for b in report.backends if b.install_hint)
        lines.append(f"none of the checked backends is installed: {hints or 'see localtools --help'}")
    elif report.failed:
        lines.append("a backend cannot generate on this machine: see the fix above")
    elif not generate or unchecked:
        lines.append("no problem found, but generation was not checked" + (
            f" on {', '.join(b.name for b in unchecked)}" if generate else " (--no-generate)"))
    else:
        lines.append("every installed backend generates")
    return "\n".join(lines)
