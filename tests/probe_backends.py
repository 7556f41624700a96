"""Backends for the probe and doctor tests, loaded by ``python -m localtools.ops._probe`` in a child process.

``Crashing`` dies of a real SIGSEGV while loading, as a native library does, unless loaded with
``safe=True``; the doctor's retry after a crash then finds the option that works.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, ClassVar

from localtools import get_family
from localtools.backends.scripted import ScriptedBackend

#: Qwen's metadata (its own template), so the qwen2.5 family renders the probe's prompt and grammar.
METADATA = {"general.architecture": "qwen2", "tokenizer.chat_template": get_family("qwen2.5").template_source()}
REPLIES = ["It is sunny in Paris.", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>']


class Healthy(ScriptedBackend):
    name = "healthy"
    packages: ClassVar[tuple[str, ...]] = ("pytest",)
    engine_packages: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = "pip install pytest"
    after_crash: ClassVar[dict[str, Any]] = {}
    crash_fixes: ClassVar[dict[str, str]] = {}

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(list(REPLIES), metadata=dict(METADATA))

    @staticmethod
    def build_info() -> dict[str, str]:
        return {"scripted": "replies from a script"}


class Crashing(Healthy):
    name = "crashing"
    after_crash: ClassVar[dict[str, Any]] = {"safe": True}
    crash_fixes: ClassVar[dict[str, str]] = {"SIGILL": "rebuild it", "*": "load it with safe=True"}

    def __init__(self, path: str | Path, *, safe: bool = False) -> None:
        if not safe:
            os.kill(os.getpid(), signal.SIGSEGV)
        super().__init__(path)


class AlwaysCrashing(Crashing):
    def __init__(self, path: str | Path, *, safe: bool = False) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)


class Failing(Healthy):
    def __init__(self, path: str | Path, **options: Any) -> None:
        raise RuntimeError("no kernels for this CPU")


class Bare(ScriptedBackend):
    """A backend of one's own that declares nothing for the doctor."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(list(REPLIES), metadata=dict(METADATA))
