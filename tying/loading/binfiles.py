"""The fallback for checkpoints that have only pickled weights (``pytorch_model.bin`` or its shards).

Used only when a checkpoint has no safetensors file at all (``model.safetensors``, its
index, or any ``*.safetensors``): older Hub checkpoints that were never converted. The files
are read with ``torch.load(..., weights_only=True)``, which unpickles tensors and plain
containers only and refuses any other object, so a pickle cannot run code; they are
memory-mapped where the zip format allows it (``mmap=True``), else read whole. Unlike the
safetensors reader, the whole state dict is opened, not only the two matrices' rows.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tying.errors import UserError, first_line
from tying.loading.checkpoint import Checkpoint
from tying.loading.headers import FLOAT_DTYPES, TensorInfo
from tying.loading.readers import Reader, rows_per_chunk


class TorchBinReader(Reader):
    """Fallback for checkpoints with only pytorch_model*.bin files (memory-mapped where possible)."""

    def __init__(self, ckpt: Checkpoint, files: list[str]):
        self.ckpt = ckpt
        self.state: dict[str, torch.Tensor] = {}
        self.tensors = {}
        for name in files:
            path = ckpt.fetch(name)
            state = self._load(path)
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    self.state[key] = value
                    dtype = next((c for c, d in FLOAT_DTYPES.items() if d == value.dtype), str(value.dtype))
                    self.tensors[key] = TensorInfo(name, dtype, tuple(value.shape))

    @staticmethod
    def _load(path: Path) -> dict:
        try:
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc).lower() and "zip" not in str(exc).lower():
                    raise
                # Legacy (pre-zip) format cannot be memory-mapped.
                return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle, zip or unpickling-policy errors: an unreadable file
            raise UserError(f"corrupt checkpoint file '{path}': {first_line(exc, typed=True, limit=160)}") from None

    def chunks(self, key, n_rows):
        t = self.tensors[key]
        step = rows_per_chunk(t)
        value = self.state[key]
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            yield start, stop, value[start:stop]
