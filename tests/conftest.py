from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest

import localtools
from localtools._catalog import pull
from localtools._probe import ProbeResult, probe

BACKENDS = ["llama-cpp", "transformers"]
_loaded: dict[tuple[str, str], localtools.Model] = {}
_probes: dict[str, ProbeResult] = {}
# scripts/gpu_check.sh sets LOCALTOOLS_TEST_GPU=1: every model then loads onto the GPU.
GPU_OPTIONS: dict[str, dict[str, Any]] = {"llama-cpp": {"n_gpu_layers": -1}, "transformers": {"device": "cuda"}}
#: The model each backend's crash check generates with: the smallest.
PROBE_MODEL = "smollm2-135m"


def _options(backend: str) -> dict[str, Any]:
    return GPU_OPTIONS[backend] if os.environ.get("LOCALTOOLS_TEST_GPU") == "1" else {}


def backend_probe(backend: str) -> ProbeResult:
    """A multi-token generation on ``backend`` in a child process, once per session.

    Native code can kill the process it runs in; asked first in a child, a crash fails the one
    test that reports it, and the tests that would load weights in this process skip.
    """
    if backend not in _probes:
        pull(PROBE_MODEL)
        _probes[backend] = probe(backend, PROBE_MODEL, _options(backend))
    return _probes[backend]


def load_once(name: str, backend: str = "llama-cpp") -> localtools.Model:
    """Each (model, backend) pair is loaded once per test session (pulled into the cache if missing).

    Skips when the backend crashed or failed in its child-process check, which
    ``test_each_backend_generates_in_a_child_process`` reports as a failure.
    """
    require_backend(backend)
    if (name, backend) not in _loaded:
        _loaded[name, backend] = localtools.load(name, backend=backend, **_options(backend))
    return _loaded[name, backend]


def require_backend(backend: str) -> None:
    result = backend_probe(backend)
    if not result.ok:
        pytest.skip(f"{backend} cannot generate on this machine ({result.describe()}); "
                    "test_each_backend_generates_in_a_child_process fails with the details")


@pytest.fixture(scope="session")
def models() -> Callable[[str, str], localtools.Model]:
    return load_once


@pytest.fixture(scope="session")
def qwen() -> localtools.Model:
    """Qwen2.5-Coder-0.5B on llama-cpp."""
    return load_once("qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def smollm() -> localtools.Model:
    return load_once("smollm2-135m")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # llama-cpp-python frees a model in __del__, which fails once the interpreter is tearing down.
    for model in _loaded.values():
        close = getattr(getattr(model.backend, "llm", None), "close", None)
        if close is not None:
            close()
    _loaded.clear()


def tc(name: str, **args: object) -> str:
    """A tool call as the qwen2.5 (Hermes) family writes it, for scripted replies."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"
