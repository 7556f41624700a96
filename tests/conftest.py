from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import localtools
from localtools.host._catalog import catalog, pull
from localtools.host._engines import build_llama_server, built_llama_server
from localtools.model._load import resolve_decisions
from localtools.ops._probe import ProbeResult, probe

BACKENDS = ["llama-cpp", "transformers"]
_loaded: dict[tuple[str, str, str], localtools.Model] = {}
_probes: dict[str, ProbeResult] = {}
# scripts/gpu_check.sh sets LOCALTOOLS_TEST_GPU=1: every model then loads onto the GPU.
GPU_OPTIONS: dict[str, dict[str, Any]] = {"llama-cpp": {"n_gpu_layers": -1}, "transformers": {"device": "cuda"}}
#: The model each backend's crash check generates with: the smallest.
PROBE_MODEL = "smollm2-135m"


_llama_server: Future[Path] | None = None
# The real load: shared_loads puts a wrapper around localtools.load that calls load_once.
_LOAD = localtools.load


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The engine tests run last: on a machine without a built llama-server, its compile then has
    the whole run to finish on the core the other tests leave free."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_llama_server.py"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """On a machine without a built llama-server, start building it (one compile job) as soon as
    the tests are collected: minutes of compiling then overlap the tests that run before the
    engine's, on the core those leave free, instead of stopping the run at the first engine test."""
    global _llama_server
    if built_llama_server() is None and any(i.nodeid.startswith("tests/test_llama_server.py") for i in session.items):
        _llama_server = ThreadPoolExecutor(1, thread_name_prefix="llama-server-build").submit(build_llama_server, jobs=1)


def llama_server_binary() -> Path:
    """The llama-server binary: the build started at collection, or a build now (a failed build
    fails the engine tests with the compiler's last lines)."""
    if _llama_server is not None:
        return _llama_server.result()
    return build_llama_server(progress=lambda line: print(line, flush=True) if not line.startswith("[") else None)


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


def load_once(name: str, backend: str = "llama-cpp", **options: Any) -> localtools.Model:
    """Each (model, backend, options) is loaded once per test session (pulled into the cache if missing).

    Loading is most of a real-model test's cost (Qwen 0.5B on transformers: about 40 s on 2 cores),
    so every test module shares these, the CLI's and ``localtools.load``'s included (``shared_loads``).
    Skips when the backend crashed or failed in its child-process check, which
    ``test_each_backend_generates_in_a_child_process`` reports as a failure.
    """
    require_backend(backend)
    options = {**_options(backend), **options}
    key = (name, backend, json.dumps(options, sort_keys=True, default=str))
    if key not in _loaded:
        _loaded[key] = _LOAD(name, backend=backend, **options)
    return _loaded[key]


def require_backend(backend: str) -> None:
    result = backend_probe(backend)
    if not result.ok:
        pytest.skip(f"{backend} cannot generate on this machine ({result.describe()}); "
                    "test_each_backend_generates_in_a_child_process fails with the details")


@pytest.fixture
def shared_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``localtools.load``, the CLI's way in too, answers catalog names from ``load_once``."""
    import localtools.model._load

    real = localtools.model._load.load

    def load(model: str | None = None, *, backend: str = "llama-cpp", family: str | None = None,
             template: str | None = None, download: bool = True, **options: Any) -> localtools.Model:
        if model is None or model not in catalog():
            return real(model, backend=backend, family=family, template=template, download=download, **options)
        decisions = options.pop("decisions", None)
        shared = load_once(model, backend, **options)
        if family is None and template is None and decisions is None:
            return shared
        return localtools.Model(shared.backend, family=family, template=template,
                                decisions=resolve_decisions(decisions, model, family=family, template=template))

    monkeypatch.setattr(localtools.model._load, "load", load)
    monkeypatch.setattr(localtools, "load", load)


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
