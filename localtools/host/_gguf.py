"""Read the key/value metadata of a GGUF file without loading its tensors."""

from __future__ import annotations

import struct
from collections.abc import Collection
from pathlib import Path
from typing import Any, BinaryIO

from .._errors import ModelError

__all__ = ["read_controls", "read_metadata"]

_MAGIC = b"GGUF"
# GGUF value types -> struct format (scalars only; 8 = string, 9 = array).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Token lists are huge and never needed for family detection; skip their contents.
_SKIPPED_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges")


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise EOFError
    return struct.unpack(fmt, data)[0]


def _read_string(f: BinaryIO) -> str:
    length = _read(f, "<Q")
    return f.read(length).decode("utf-8", errors="replace")


def _read_value(f: BinaryIO, vtype: int, skip: bool = False) -> Any:
    if vtype in _SCALARS:
        return _read(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _read_string(f)
    if vtype == _ARRAY:
        item_type = _read(f, "<I")
        count = _read(f, "<Q")
        if skip and item_type in _SCALARS:
            f.seek(count * struct.calcsize(_SCALARS[item_type]), 1)
            return None
        items = [_read_value(f, item_type) for _ in range(count)]
        return None if skip else items
    raise ValueError(f"unknown GGUF value type {vtype}")


def read_metadata(path: str | Path) -> dict[str, Any]:
    """Return the GGUF header's metadata as a dict (token tables are left out)."""
    return _header(path)


def _header(path: str | Path, keep: Collection[str] = ()) -> dict[str, Any]:
    """The GGUF header's metadata; of the token tables, only those named in ``keep``."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            if f.read(4) != _MAGIC:
                raise ModelError(f"{path} is not a GGUF file (expected the magic bytes 'GGUF')")
            _version = _read(f, "<I")
            _tensors = _read(f, "<Q")
            count = _read(f, "<Q")
            meta: dict[str, Any] = {}
            for _ in range(count):
                key = _read_string(f)
                vtype = _read(f, "<I")
                value = _read_value(f, vtype, skip=key in _SKIPPED_ARRAYS and key not in keep)
                if value is not None:
                    meta[key] = value
            return meta
    except (EOFError, ValueError, struct.error) as exc:
        raise ModelError(f"{path}: truncated or corrupt GGUF header ({exc})") from exc


#: ``tokenizer.ggml.token_type`` of a control token (llama.cpp's ``LLAMA_TOKEN_TYPE_CONTROL``).
_CONTROL = 3
#: The ids a GGUF names as ends of generation.
_END_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def read_controls(path: str | Path) -> list[tuple[int, str]]:
    """The vocabulary's control tokens but those its header names as ends (eos, eot, eom), each
    with its text: what an engine's grammar may read as text (``backends._decode.unwritten``)."""
    meta = _header(path, keep=("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"))
    tokens: list[str] = meta.get("tokenizer.ggml.tokens") or []
    types: list[int] = meta.get("tokenizer.ggml.token_type") or []
    ends = {meta[key] for key in _END_KEYS if isinstance(meta.get(key), int)}
    return [(i, tokens[i]) for i, kind in enumerate(types) if kind == _CONTROL and i not in ends and i < len(tokens)]
