"""What this machine is: CPU model and features, cores, memory, GPUs. Read from the OS, no imports of backends."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Machine", "cpu_flags", "gpus", "machine"]

#: The CPU features that decide which llama.cpp kernels run, as /proc/cpuinfo spells them.
FEATURES = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


@dataclass(frozen=True)
class Machine:
    cpu_model: str
    #: Lower-case CPU flags as /proc/cpuinfo spells them (empty where the OS does not say).
    cpu_flags: frozenset[str]
    #: CPUs this process may run on (its affinity), which can be fewer than the machine has.
    cores: int
    memory_bytes: int | None

    @property
    def has_amx(self) -> bool:
        return bool({"amx_tile", "amx_int8"} & self.cpu_flags)

    def features(self) -> list[str]:
        """The llama.cpp-relevant features this CPU has, in a fixed order."""
        return [f for f in FEATURES if f in self.cpu_flags]


def _cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:  # x86, Arm
            flags = frozenset(value.split())
    return model, flags


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@cache
def gpus() -> list[str]:
    """One line per GPU that ``nvidia-smi -L`` lists (none without NVIDIA's driver). Takes a moment."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


@cache
def _read_cpuinfo() -> tuple[str, frozenset[str]]:
    cpuinfo = Path("/proc/cpuinfo")
    return _cpuinfo(cpuinfo.read_text(errors="replace")) if cpuinfo.is_file() else ("", frozenset())


def cpu_flags() -> frozenset[str]:
    """This CPU's flags as /proc/cpuinfo spells them (empty where the OS does not say); read once."""
    return _read_cpuinfo()[1]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@cache
def machine() -> Machine:
    """This machine, read once per process."""
    model, flags = _read_cpuinfo()
    return Machine(
        cpu_model=model or platform.processor() or platform.machine(),
        cpu_flags=flags,
        cores=_cores(),
        memory_bytes=_memory(),
    )
