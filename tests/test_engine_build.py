"""Building llama-server: one build at a time on a machine, and a waiting one takes its binary."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from localtools.host import _engines


def test_a_second_build_waits_for_the_first_and_takes_its_binary(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    dest = tmp_path / "engines" / "llama-server-x" / "llama-server"
    builds: list[int] = []
    started = threading.Event()

    def build(into: Path, jobs: Any, progress: Any) -> None:
        builds.append(threading.get_ident())
        started.set()
        time.sleep(0.3)  # the second caller arrives while this one compiles
        into.write_text("binary")

    monkeypatch.setattr(_engines, "_binary_path", lambda version=_engines.LLAMA_CPP_PYTHON: dest)
    monkeypatch.setattr(_engines, "_build", build)
    monkeypatch.setattr(_engines.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.delenv(_engines.BINARY_ENV, raising=False)
    said: list[str] = []
    results: list[Path] = []
    first = threading.Thread(target=lambda: results.append(_engines.build_llama_server()))
    first.start()
    assert started.wait(5)
    results.append(_engines.build_llama_server(progress=said.append))
    first.join()
    assert results == [dest, dest] and len(builds) == 1
    assert any("another build" in line for line in said)
    # Forced, it builds again even with a binary there.
    _engines.build_llama_server(force=True)
    assert len(builds) == 2


def test_the_sdist_is_downloaded_once_for_the_build_and_the_templates(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    downloads: list[list[str]] = []

    def run(cmd: list[str], what: str, *, progress: Any) -> None:
        downloads.append(cmd)
        into = Path(cmd[cmd.index("-d") + 1])
        (into / f"llama_cpp_python-{_engines.LLAMA_CPP_PYTHON}.tar.gz").write_bytes(b"sdist")

    monkeypatch.setattr(_engines, "cache_dir", lambda: tmp_path / "cache" / "models")
    monkeypatch.setattr(_engines, "_run", run)
    first_work, second_work = tmp_path / "w1", tmp_path / "w2"
    first_work.mkdir()
    second_work.mkdir()
    first = _engines._sdist(first_work, lambda line: None)
    second = _engines._sdist(second_work, lambda line: None)
    assert first == second and first.read_bytes() == b"sdist" and len(downloads) == 1
    assert first.parent == tmp_path / "cache" / "engines"


def test_the_build_links_the_bindings_ggml_and_a_binary_whose_ggml_is_gone_is_built_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prefix = tmp_path / "site-packages"
    (prefix / "lib" / "cmake" / "ggml").mkdir(parents=True)
    monkeypatch.setattr(_engines, "binding_ggml", lambda: prefix)
    options = _engines._cmake_options()
    assert "-DLLAMA_USE_SYSTEM_GGML=ON" in options and f"-DCMAKE_PREFIX_PATH={prefix}" in options
    with_binding = _engines._build_key()
    monkeypatch.setattr(_engines, "binding_ggml", lambda: None)
    assert _engines._cmake_options() == _engines._CMAKE_OPTIONS and _engines._build_key() != with_binding

    dest = tmp_path / "engines" / "llama-server-x" / "llama-server"
    dest.parent.mkdir(parents=True)
    dest.write_text("binary")
    (dest.parent / "ggml-from").write_text(str(prefix))
    monkeypatch.setattr(_engines, "_binary_path", lambda version=_engines.LLAMA_CPP_PYTHON: dest)
    monkeypatch.delenv(_engines.BINARY_ENV, raising=False)
    (prefix / "lib" / "libggml-base.so").write_text("lib")
    assert _engines.built_llama_server() == dest
    (prefix / "lib" / "libggml-base.so").unlink()  # the binding was removed: the binary would not start
    assert _engines.built_llama_server() is None


def test_the_installed_binding_offers_its_ggml() -> None:
    pytest.importorskip("llama_cpp")
    prefix = _engines.binding_ggml()
    assert prefix is not None and (prefix / "lib" / "cmake" / "ggml" / "ggml-config.cmake").is_file()
