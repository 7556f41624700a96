"""Backend loading without weights: install hints, option checks, catalog backends."""

from __future__ import annotations

import sys

import pytest

import localtools
from localtools import BackendNotInstalled, LocalToolsError
from localtools.host._catalog import catalog


@pytest.mark.parametrize(("module", "backend", "hint"), [
    ("llama_cpp", "localtools.backends.llama_cpp", "localtools[llama-cpp]"),
    ("torch", "localtools.backends.transformers", "localtools[transformers]"),
])
def test_missing_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch, tmp_path, module: str, backend: str,
                                          hint: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"GGUF")
    cls = {"localtools.backends.llama_cpp": "LlamaCppBackend", "localtools.backends.transformers": "TransformersBackend"}[backend]
    backend_cls = getattr(__import__(backend, fromlist=[cls]), cls)
    with pytest.raises(BackendNotInstalled, match=rf"pip install .*{hint.replace('[', '.').replace(']', '.')}"):
        backend_cls(fake)


def test_every_catalog_model_lists_known_backends() -> None:
    for entry in catalog().values():
        assert entry.backends and set(entry.backends) <= set(localtools.BACKENDS), entry


def test_load_refuses_an_option_the_backend_does_not_take() -> None:
    from localtools.backends.transformers import TransformersBackend

    options = "device, dtype, engine, fast_forward, keep_converted, mask, seed"
    with pytest.raises(LocalToolsError, match=f"takes no option n_gpu_layers; its options: {options}"):
        localtools.load("smollm2-135m", backend="transformers", download=False, n_gpu_layers=-1)
    with pytest.raises(LocalToolsError, match="unknown mask engine 'fast'"):
        TransformersBackend("x.gguf", engine="fast")


def test_llama_cpp_mask_must_be_lazy_or_full() -> None:
    pytest.importorskip("llama_cpp")
    from localtools.backends.llama_cpp import LlamaCppBackend

    with pytest.raises(LocalToolsError, match="mask must be 'lazy' or 'full', not 'fast'"):
        LlamaCppBackend("x.gguf", mask="fast")  # type: ignore[arg-type]


def test_load_refuses_an_unknown_backend() -> None:
    with pytest.raises(LocalToolsError, match="unknown backend 'nonesuch'; available: llama-cpp, transformers, "
                       "llama-server, vllm, sglang"):
        localtools.load("smollm2-135m", backend="nonesuch")


def test_cut_at_stop_takes_the_earliest_stop_string() -> None:
    from localtools.backends._base import cut_at_stop

    assert cut_at_stop("answer<|im_end|>junk<|endoftext|>", ["<|endoftext|>", "<|im_end|>"]) == "answer"
    assert cut_at_stop("no stop here", ["<|im_end|>"]) is None


def test_auto_dtype_is_bfloat16_only_where_the_hardware_computes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from localtools.backends import transformers as tf

    monkeypatch.setattr(tf, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "fma"}))
    assert tf.auto_dtype("cpu") == "float32"  # emulated bfloat16 would be slower than float32
    assert tf.auto_dtype("cuda:0") == "bfloat16"
    for flag in ("avx512_bf16", "amx_bf16"):
        monkeypatch.setattr(tf, "cpu_flags", lambda flag=flag: frozenset({"avx2", flag}))
        assert tf.auto_dtype("cpu") == "bfloat16"


def test_a_conversion_is_kept_per_file_version_and_dtype(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    import os

    from localtools.backends.transformers import converted_dir

    monkeypatch.setenv("LOCALTOOLS_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF one")
    first = converted_dir(gguf, "float32")
    assert first.parent == tmp_path / "cache" / "converted" and first.name.startswith("m-float32-")
    assert converted_dir(gguf, "float32") == first
    assert converted_dir(gguf, "bfloat16") != first
    gguf.write_bytes(b"GGUF two, longer")
    os.utime(gguf, ns=(1, 1))
    assert converted_dir(gguf, "float32") != first


class _Config:
    def __init__(self) -> None:
        self.quantization_config = "gguf"


class _Model:
    def __init__(self, fail: bool) -> None:
        self.hf_quantizer, self.config, self.fail = "quantizer", _Config(), fail
        self.saw: tuple[object, bool] | None = None

    def save_pretrained(self, where) -> None:
        # transformers refuses a model that still names its quantizer: it must be unset here.
        self.saw = (self.hf_quantizer, hasattr(self.config, "quantization_config"))
        if self.fail:
            raise OSError("No space left on device")
        (where / "model.safetensors").write_bytes(b"weights")


class _Tokenizer:
    def save_pretrained(self, where) -> None:
        where.mkdir(parents=True)
        (where / "tokenizer.json").write_text("{}")


@pytest.mark.parametrize("fail", [False, True])
def test_keeping_a_conversion_is_whole_or_nothing_and_leaves_the_model_as_it_was(tmp_path, fail: bool) -> None:
    from localtools.backends.transformers import _keep

    model, dest = _Model(fail), tmp_path / "converted" / "m-float32-abc"
    if fail:
        with pytest.warns(RuntimeWarning, match="could not keep the converted model in .*No space left"):
            _keep(model, _Tokenizer(), dest)
        assert not dest.exists()
    else:
        _keep(model, _Tokenizer(), dest)
        assert sorted(p.name for p in dest.iterdir()) == ["complete", "model.safetensors", "tokenizer.json"]
    assert model.saw == (None, False)
    assert model.hf_quantizer == "quantizer" and model.config.quantization_config == "gguf"
    assert [p.name for p in dest.parent.iterdir()] == ([] if fail else [dest.name])  # no partial left
