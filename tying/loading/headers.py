"""What a checkpoint file holds, from its header alone: tensor names, dtype codes and shapes.

A safetensors file starts with an 8-byte little-endian header length and a JSON header
naming every tensor with its dtype code ("F32", "BF16", ...), shape and byte range; no
tensor data is read here. The header is parsed by hand rather than through
``safetensors.safe_open(...).keys()`` / ``get_slice(key).get_shape()``: ``python
bench/bench_header.py`` measured both (figures in its docstring); the package was no faster
on headers of checkpoint size (hundreds of tensors) and held more memory on larger ones, so
it would not have been equal or better. The data itself is read through safe_open
(:mod:`tying.loading.readers`), which checks the whole header again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import torch

from tying.errors import UserError

FLOAT_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}
"""safetensors dtype codes -> torch dtypes, for the floating types an embedding can have."""
if hasattr(torch, "float8_e4m3fn"):
    FLOAT_DTYPES["F8_E4M3"] = torch.float8_e4m3fn
    FLOAT_DTYPES["F8_E5M2"] = torch.float8_e5m2

MAX_HEADER_BYTES = 100 * 2**20
"""The safetensors format's own limit on a header's length."""


class TensorInfo(NamedTuple):
    """One tensor as a checkpoint header describes it: which file, its dtype code and shape."""

    file: str
    dtype: str
    shape: tuple[int, ...]


def dtype_name(code: str) -> str:
    """A dtype code as a torch dtype name ("BF16" -> "bfloat16"); unknown codes in lower case."""
    dtype = FLOAT_DTYPES.get(code)
    return str(dtype).removeprefix("torch.") if dtype is not None else code.lower()


def corrupt(path: Path | str, why: str) -> UserError:
    """The one-line error for an unreadable safetensors file."""
    return UserError(f"corrupt safetensors file '{path}': {why}")


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Tensor names, dtypes and shapes of one safetensors file, from its header alone.

    The file starts with an 8-byte little-endian header length and a JSON header; no tensor
    data is read. Raises UserError ("corrupt safetensors file ...") for a short file, a bad
    header length, a header that is not a JSON object, or a tensor outside the file.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise corrupt(path, "shorter than its 8-byte header length")
        n = int.from_bytes(raw, "little")
        if n <= 1 or n > MAX_HEADER_BYTES or 8 + n > size:
            raise corrupt(path, f"bad header length {n}")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise corrupt(path, f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise corrupt(path, "header is not a JSON object")
    data_bytes = size - 8 - n
    tensors = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (start, stop) = entry["dtype"], entry["shape"], entry["data_offsets"]
            shape = tuple(int(s) for s in shape)
        except (KeyError, TypeError, ValueError):
            raise corrupt(path, f"bad header entry for '{key}'") from None
        if not 0 <= start <= stop <= data_bytes:
            raise corrupt(path, f"tensor '{key}' lies outside the file (truncated?)")
        tensors[key] = TensorInfo(path.name, str(dtype), shape)
    return tensors
