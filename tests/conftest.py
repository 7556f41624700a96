from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

import localtools

BACKENDS = ["llama-cpp", "transformers"]
_loaded: dict[tuple[str, str], localtools.Model] = {}
# scripts/gpu_check.sh sets LOCALTOOLS_TEST_GPU=1: every model then loads onto the GPU.
GPU_OPTIONS: dict[str, dict[str, Any]] = {"llama-cpp": {"n_gpu_layers": -1}, "transformers": {"device": "cuda"}}


def load_once(name: str, backend: str = "llama-cpp") -> localtools.Model:
    """Each (model, backend) pair is loaded once per test session (pulled into the cache if missing)."""
    if (name, backend) not in _loaded:
        options = GPU_OPTIONS[backend] if os.environ.get("LOCALTOOLS_TEST_GPU") == "1" else {}
        _loaded[name, backend] = localtools.load(name, backend=backend, **options)
    return _loaded[name, backend]


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
