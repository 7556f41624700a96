"""llama-server on this machine: built from the llama.cpp sources in llama-cpp-python's sdist (the
version the llama-cpp backend runs), cached, and started on the loopback for a model.

``localtools engines build llama-server`` and ``localtools engines start llama-server`` use these;
so do the tests that run the engine backends against a real engine.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .._errors import EngineUnavailable, ModelError, UsageError
from ._catalog import cache_dir

__all__ = ["LLAMA_CPP_PYTHON", "RunningEngine", "build_llama_server", "built_llama_server", "llama_server_command",
           "official_templates", "running_llama_server"]

#: The llama-cpp-python release whose vendored llama.cpp builds llama-server (the llama-cpp extra's pin).
LLAMA_CPP_PYTHON = "0.3.36"
#: Set to a llama-server binary to use it instead of building one.
BINARY_ENV = "LOCALTOOLS_LLAMA_SERVER"
_CMAKE_OPTIONS = (
    # Tuned for this CPU, said outright: ggml turns it off by itself where SOURCE_DATE_EPOCH is set.
    "-DGGML_NATIVE=ON",
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_OPENSSL=OFF",
    # The prebuilt web UI is downloaded at configure time; the server runs without it.
    "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF",
)


def _build_key() -> str:
    """The build is tuned for this CPU (GGML_NATIVE), so a cache shared between machines keeps one
    per CPU; and one per set of build options (with the ggml it links, when it takes the binding's)."""
    from ._machine import cpu_flags

    flags = ",".join(sorted(cpu_flags()))
    options = " ".join(_cmake_options())
    return hashlib.sha256(f"{platform.machine()}|{flags}|{options}".encode()).hexdigest()[:12]


def binding_ggml() -> Path | None:
    """Where the llama-cpp binding installed ggml as a CMake package (its ``lib/cmake/ggml``, the
    shared libraries and headers beside it), when it is the release llama-server is built from:
    the build links that ggml instead of compiling it again (the largest part of llama.cpp). The
    binding compiled it for this machine when it was installed."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover - Python 3.11 has it
        return None
    try:
        dist = distribution("llama_cpp_python")
    except PackageNotFoundError:
        return None
    if dist.version != LLAMA_CPP_PYTHON:
        return None
    prefix = Path(str(dist.locate_file(""))).resolve()
    config = prefix / "lib" / "cmake" / "ggml" / "ggml-config.cmake"
    return prefix if config.is_file() and any((prefix / "lib").glob("libggml-cpu.*")) else None


def _cmake_options() -> tuple[str, ...]:
    prefix = binding_ggml()
    if prefix is None:
        return _CMAKE_OPTIONS
    # The binary then loads the binding's ggml from there (its build RPATH): a binding removed or
    # rebuilt elsewhere is another key, so another build.
    return (*_CMAKE_OPTIONS, "-DLLAMA_USE_SYSTEM_GGML=ON", f"-DCMAKE_PREFIX_PATH={prefix}")


def _binary_path(version: str = LLAMA_CPP_PYTHON) -> Path:
    return cache_dir().parent / "engines" / f"llama-server-{version}-{_build_key()}" / "llama-server"


def built_llama_server() -> Path | None:
    """``$LOCALTOOLS_LLAMA_SERVER``, or the binary a build cached for this CPU, or ``None``."""
    env = os.environ.get(BINARY_ENV)
    if env:
        path = Path(env).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"${BINARY_ENV} is {env!r}, which is no executable file")
        return path
    path = _binary_path()
    return path if path.is_file() and _links_resolve(path) else None


def _links_resolve(binary: Path) -> bool:
    """Whether the shared libraries a built binary takes from outside it (the binding's ggml) are
    still where it was linked against them."""
    marker = binary.with_name("ggml-from")
    if not marker.is_file():
        return True
    lib = Path(marker.read_text(encoding="utf-8").strip()) / "lib"
    return any(lib.glob("libggml-base.*"))


def build_llama_server(*, force: bool = False, jobs: int | None = None,
                       progress: Callable[[str], None] = lambda line: None) -> Path:
    """Build llama-server (its target alone) from llama-cpp-python's sdist and cache it; return its path.

    Takes minutes (most of it compiling ggml and llama.cpp; ggml is the binding's where it has the
    same release: ``binding_ggml``); a second call returns the cached binary.
    Needs cmake, a C++ compiler and pip's access to PyPI for the sdist.
    """
    if not force and (found := built_llama_server()) is not None:
        return found
    dest = _binary_path()
    for tool in ("cmake", "cc", "c++"):
        if shutil.which(tool) is None:
            raise ModelError(f"building llama-server needs {tool} on PATH (e.g. apt-get install cmake g++)")
    with _one_builder(dest, progress):
        # A build that ran while this one waited left its binary: minutes of compiling saved.
        if not force and dest.is_file():
            return dest
        _build(dest, jobs, progress)
    progress(f"built {dest}")
    return dest


@contextmanager
def _one_builder(dest: Path, progress: Callable[[str], None]) -> Iterator[None]:
    """One build of a binary at a time on this machine: a second waits for the first, then
    finds its binary (the set-up starts a build while it installs; the tests may ask for one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; two builds each move a whole binary into place
        yield
        return
    with open(dest.with_name(".build.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("another build of llama-server is running here; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(dest: Path, jobs: int | None, progress: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="localtools-llama-server-") as tmp:
        work = Path(tmp)
        sdist = _sdist(work, progress)
        progress("unpacking llama.cpp's sources")
        source = _unpack_llama_cpp(sdist, work / "src")
        build = work / "build"
        options = _cmake_options()
        prefix = binding_ggml()
        progress("configuring (cmake)" + (f"; ggml from the llama-cpp binding at {prefix}" if prefix else ""))
        _run(["cmake", "-S", str(source), "-B", str(build), *options], "cmake", progress=None)
        progress(f"compiling llama-server with {jobs or os.cpu_count() or 1} jobs (minutes)")
        _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs or os.cpu_count() or 1)],
             "cmake --build", progress=progress)
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise ModelError(f"the build finished without {built}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a killed build leaves no half binary behind, and two builds at
        # once each move a whole one into place.
        partial = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
        shutil.copy2(built, partial)
        marker = dest.with_name("ggml-from")
        if prefix is not None:
            marker.write_text(str(prefix), encoding="utf-8")
        else:
            marker.unlink(missing_ok=True)
        partial.replace(dest)


def _sdist(work: Path, progress: Callable[[str], None]) -> Path:
    """llama-cpp-python's sdist: downloaded once, kept beside the engines (the build and the
    official templates both read it)."""
    kept = cache_dir().parent / "engines" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if kept.is_file():
        return kept
    progress(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON} sdist (about 75 MB)")
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet", "-d", str(work),
          f"llama-cpp-python=={LLAMA_CPP_PYTHON}"], "pip download", progress=None)
    sdists = sorted(work.glob("llama_cpp_python-*.tar.gz"))
    if not sdists:
        raise ModelError("pip download left no llama-cpp-python sdist")
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_name(f"{kept.name}.{os.getpid()}.partial")
    shutil.copy2(sdists[0], partial)
    partial.replace(kept)  # whole or not at all, as the binary
    return kept


def official_templates(progress: Callable[[str], None] = lambda line: None) -> Path:
    """The folder of official chat templates llama.cpp vendors (``models/templates``), taken from
    llama-cpp-python's sdist on first use and cached; the family tests check every one of them."""
    target = cache_dir().parent / "suites" / f"llama-cpp-templates-{LLAMA_CPP_PYTHON}"
    if (target / ".complete").is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="localtools-templates-") as tmp:
        sdist = _sdist(Path(tmp), progress)
        staged = Path(tmp) / "templates"
        staged.mkdir()
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts
                if member.isfile() and parts[-3:-1] == ("models", "templates") and "vendor" in parts:
                    data = tar.extractfile(member)
                    if data is not None:
                        (staged / parts[-1]).write_bytes(data.read())
        if not any(staged.glob("*.jinja")):
            raise ModelError(f"{sdist.name} holds no vendor/llama.cpp/models/templates")
        (staged / ".complete").write_text("", encoding="utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staged), target)
    return target


def _unpack_llama_cpp(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(into, members=members, filter="data")
        else:
            if any(m.name.startswith("/") or ".." in Path(m.name).parts or m.issym() or m.islnk() for m in members):
                raise ModelError(f"{sdist.name} holds a path outside its folder or a link; not unpacked")
            tar.extractall(into, members=members)
    found = sorted(into.glob("*/vendor/llama.cpp"))
    if not found:
        raise ModelError(f"{sdist.name} holds no vendor/llama.cpp")
    return found[0]


def _run(cmd: Sequence[str], what: str, *, progress: Callable[[str], None] | None) -> None:
    """Run a build step; its output goes to ``progress`` a line at a time, and its tail into the error."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = [*tail[-40:], line]
        if progress is not None and line.startswith("["):
            progress(line)
    if proc.wait() != 0:
        raise ModelError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def llama_server_command(binary: Path, model: Path, *, port: int, host: str = "127.0.0.1", parallel: int = 4,
                         n_ctx: int = 4096, threads: int | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The command line localtools starts llama-server with: ``n_ctx`` tokens for each of
    ``parallel`` slots, and weight repacking off where llama.cpp's AMX kernels would crash."""
    from ._machine import cpu_flags

    cmd = [str(binary), "-m", str(model), "--host", host, "--port", str(port), "--parallel", str(parallel),
           "-c", str(n_ctx * parallel), "--no-webui"]
    if threads:
        cmd += ["--threads", str(threads)]
    if {"amx_tile", "amx_int8"} & cpu_flags():
        cmd.append("--no-repack")  # see llama_cpp.extra_buffers_choice
    return [*cmd, *extra]


@dataclass
class RunningEngine:
    """A llama-server started by ``running_llama_server``."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def running_llama_server(model: Path, *, binary: Path | None = None, parallel: int = 4, n_ctx: int = 4096,
                         port: int | None = None, threads: int | None = None, extra: Sequence[str] = (),
                         ready_timeout: float = 300) -> Iterator[RunningEngine]:
    """llama-server on 127.0.0.1 for ``model``, ready to answer; stopped on leaving the block."""
    import urllib.error
    import urllib.request

    binary = binary or built_llama_server()
    if binary is None:
        raise UsageError("no llama-server here: run 'localtools engines build llama-server' or set "
                         f"${BINARY_ENV} to one")
    if port is None:
        port = free_port()
    elif not _port_free(port):
        # Otherwise whatever already answers there would pass for the engine started here.
        raise UsageError(f"port {port} on 127.0.0.1 is in use; pick another (--port)")
    with tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False) as log_file:
        log = Path(log_file.name)
    cmd = llama_server_command(binary, model, port=port, parallel=parallel, n_ctx=n_ctx, threads=threads, extra=extra)
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        log.unlink(missing_ok=True)
        raise EngineUnavailable(f"cannot start {binary}: {exc} (built for another machine? rebuild with "
                                "'localtools engines build llama-server --force')", engine="llama-server") from exc
    engine = RunningEngine(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise EngineUnavailable(f"llama-server exited ({proc.returncode}) before it was ready:\n{engine.log_tail()}",
                                        engine="llama-server")
            try:
                with urllib.request.urlopen(f"{engine.url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"llama-server was not ready within {ready_timeout:g} s:\n{engine.log_tail()}",
                                        engine="llama-server")
            time.sleep(0.2)
        yield engine
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.unlink(missing_ok=True)
