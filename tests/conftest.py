from __future__ import annotations

import pytest

import localtools


@pytest.fixture(scope="session")
def qwen() -> localtools.Model:
    """Qwen2.5-Coder-0.5B, loaded once per test session (pulled into the cache if missing)."""
    return localtools.load("qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def smollm() -> localtools.Model:
    return localtools.load("smollm2-135m")
