"""The extra-buffers decision, the child-process probe, and ``localtools doctor``."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
from probe_backends import REPLIES

from localtools._errors import UsageError
from localtools.backends.llama_cpp import _model_params, build_features, extra_buffers_choice
from localtools.cli import main
from localtools.host._machine import _cpuinfo
from localtools.ops._doctor import diagnose, render
from localtools.ops._probe import MAX_TOKENS, probe

# llama_print_system_info() of a native build on a Sapphire Rapids Xeon, and on an AVX2-only EPYC.
AMX_BUILD = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
             "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
             "REPACK = 1 | ")
AVX2_BUILD = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | REPACK = 1 | "
EPYC = frozenset({"fpu", "sse2", "avx", "avx2", "fma", "f16c"})
ICELAKE = EPYC | {"avx512f", "avx512_vnni"}
SAPPHIRE = ICELAKE | {"avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"}


def test_build_features_reads_llama_cpps_system_info() -> None:
    assert {"AVX2", "AVX512", "AMX_INT8", "REPACK"} <= build_features(AMX_BUILD)
    assert "AMX_INT8" not in build_features(AVX2_BUILD)
    assert "SSE3" in build_features(AVX2_BUILD)  # the backend's name before the first feature is not part of it
    assert build_features("") == frozenset()


@pytest.mark.parametrize(("cpu", "build", "use"), [
    (SAPPHIRE, AMX_BUILD, False),  # the crash: AMX kernels compiled in and runnable
    (frozenset(), AMX_BUILD, False),  # the CPU's flags unknown: AMX may run, so stay safe
    (SAPPHIRE, AVX2_BUILD, True),  # a wheel built without AMX: no AMX kernels to run
    (ICELAKE, AMX_BUILD, True),  # AVX-512 without AMX: llama.cpp finds no AMX at run time
    (ICELAKE, AVX2_BUILD, True),
    (EPYC, AVX2_BUILD, True),  # AVX2: repacked Q4_0/Q4_K weights are the fast path
])
def test_auto_turns_extra_buffers_off_exactly_where_amx_would_run(cpu: frozenset[str], build: str, use: bool) -> None:
    choice = extra_buffers_choice("auto", cpu, build_features(build))
    assert choice.use is use
    assert choice.reason.startswith("on: " if use else "off: ") and "AMX" in choice.reason


def test_extra_buffers_can_be_forced_either_way() -> None:
    amx = build_features(AMX_BUILD)
    assert extra_buffers_choice("on", SAPPHIRE, amx).use is True
    assert extra_buffers_choice("off", EPYC, build_features(AVX2_BUILD)).use is False
    with pytest.raises(UsageError, match="extra_buffers must be 'auto', 'on' or 'off', not 'yes'"):
        extra_buffers_choice("yes", EPYC, amx)


def test_model_params_are_set_for_one_load_and_restored() -> None:
    def defaults() -> Any:
        return types.SimpleNamespace(use_extra_bufts=True, n_gpu_layers=0)

    module = types.SimpleNamespace(llama_model_default_params=defaults)
    fake = types.SimpleNamespace(llama_cpp=module)
    with _model_params(fake, use_extra_bufts=False):
        params = module.llama_model_default_params()
        assert params.use_extra_bufts is False and params.n_gpu_layers == 0
    assert module.llama_model_default_params is defaults
    with pytest.raises(RuntimeError), _model_params(fake, use_extra_bufts=False):
        raise RuntimeError("load failed")
    assert module.llama_model_default_params is defaults


def test_model_params_survive_loads_from_two_threads() -> None:
    import threading
    import time

    def defaults() -> Any:
        return types.SimpleNamespace(use_extra_bufts=True)

    module = types.SimpleNamespace(llama_model_default_params=defaults)
    fake = types.SimpleNamespace(llama_cpp=module)
    seen: list[bool] = []

    def load(use: bool) -> None:
        with _model_params(fake, use_extra_bufts=use):
            time.sleep(0.05)  # the other thread tries to patch meanwhile
            seen.append(module.llama_model_default_params().use_extra_bufts)

    threads = [threading.Thread(target=load, args=(use,)) for use in (False, True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == [False, False, True]  # each load saw its own setting
    assert module.llama_model_default_params is defaults


def test_cpuinfo_gives_the_model_and_amx() -> None:
    text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu avx2 avx512f amx_tile amx_int8\n"
    model, flags = _cpuinfo(text * 2)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"amx_tile", "amx_int8", "avx512f"} <= flags


@pytest.fixture
def repo_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # tests.probe_backends is imported by the child (through PYTHONPATH: it ignores its working
    # directory) and, for the doctor's reading of its attributes, by this process.
    root = str(Path(__file__).parents[1])
    monkeypatch.syspath_prepend(root)
    monkeypatch.setenv("PYTHONPATH", root)


@pytest.fixture
def weights(tmp_path: Path, repo_on_path: None) -> str:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return str(path)


def test_probe_reports_a_generation_that_works(weights: str) -> None:
    result = probe("tests.probe_backends:Healthy", weights)
    assert result.ok, result.describe()
    assert result.measured["tokens"] > 1 and result.measured["prompt_tokens"] > 1
    assert result.measured["text"] == REPLIES[1][:MAX_TOKENS]  # the call, cut at the probe's token budget


def test_probe_reports_a_native_crash_with_its_signal(weights: str) -> None:
    result = probe("tests.probe_backends:Crashing", weights)
    assert (result.status, result.signal) == ("crashed", "SIGSEGV")
    assert "died of SIGSEGV" in result.describe()


def test_probe_reports_an_error_with_its_text(weights: str) -> None:
    result = probe("tests.probe_backends:Failing", weights)
    assert result.status == "error"
    assert "RuntimeError: no kernels for this CPU" in result.detail


def test_probe_reports_a_model_that_is_not_there(tmp_path: Path, repo_on_path: None) -> None:
    result = probe("tests.probe_backends:Healthy", str(tmp_path / "missing.gguf"))
    assert result.status == "error" and "no GGUF file at" in result.detail


def test_doctor_retries_a_crash_with_the_safe_options_and_says_so(weights: str) -> None:
    report = diagnose(backends=["tests.probe_backends:Crashing"], model=weights, checksums=False)
    (backend,) = report.backends
    assert report.failed
    assert [p.status for p in backend.probes] == ["crashed", "ok"]
    assert "--safe True" in backend.fix and "safe=True" in backend.fix
    text = render(report)
    assert "crashed: the child process died of SIGSEGV" in text
    assert "with safe=True ok" in " ".join(text.split())
    assert "a backend cannot generate on this machine" in text


def test_doctor_gives_the_backends_fix_when_nothing_helps(weights: str) -> None:
    report = diagnose(backends=["tests.probe_backends:AlwaysCrashing"], model=weights, checksums=False)
    assert report.failed
    assert report.backends[0].fix == "load it with safe=True"


def test_doctor_passes_a_healthy_backend(weights: str) -> None:
    report = diagnose(backends=["tests.probe_backends:Healthy"], model=weights, checksums=False)
    assert not report.failed
    text = render(report)
    assert "pytest" in text and "scripted: replies from a script" in text
    assert f"[{weights}]" in text  # each generation names its model
    assert text.rstrip().endswith("every installed backend generates")


def test_doctor_command_prints_the_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--no-generate", "--no-checksum"]) == 0
    out = capsys.readouterr().out
    assert "machine\n  CPU" in out and "cores" in out and "memory" in out
    assert "llama-cpp     installed: llama-cpp-python 0.3.36" in out  # the test environment has both backends
    assert "transformers  installed: torch " in out and "grammar engines: xgrammar " in out
    assert "llama.cpp system info: CPU : " in out
    assert out.rstrip().endswith("no problem found, but generation was not checked (--no-generate)")


def test_doctor_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    assert "child process" in capsys.readouterr().out


def test_an_unknown_backend_path_is_a_typed_error() -> None:
    from localtools._errors import LocalToolsError
    from localtools.model._load import backend_class

    with pytest.raises(LocalToolsError, match=r"cannot import tests\.probe_backends:Nope"):
        backend_class("tests.probe_backends:Nope")


def test_doctor_checks_a_backend_that_declares_nothing(weights: str) -> None:
    report = diagnose(backends=["tests.probe_backends:Bare"], model=weights, checksums=False)
    assert not report.failed and report.backends[0].ok
    assert report.backends[0].build == {}
