"""Reading row ranges of a checkpoint's tensors, a chunk at a time, in their stored dtype.

A :class:`Reader` knows each tensor's file, dtype code and shape (``tensors``) and yields
(start, stop, rows) chunks of about CHUNK_BYTES of stored data, so the caller converts each
chunk into its own array and peak extra memory stays near one chunk.
:class:`SafetensorsReader` reads safetensors files (the headers by
:func:`~tying.loading.headers.read_safetensors_header`, or remotely for a Hub checkpoint);
:class:`~tying.loading.binfiles.TorchBinReader` is the fallback for pickled checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from tying.errors import first_line
from tying.loading.checkpoint import Checkpoint
from tying.loading.headers import FLOAT_DTYPES, TensorInfo, corrupt, read_safetensors_header

CHUNK_BYTES = 32 * 2**20
"""Bytes of stored tensor data read per chunk. The checkpoint is reopened for every chunk so
that the memory map (whose touched pages count as resident memory) is released each time."""


class Reader:
    """Reads row ranges of named tensors as torch tensors in their stored dtype."""

    tensors: dict[str, TensorInfo]

    def chunks(self, key: str, n_rows: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        raise NotImplementedError

    def used_files(self, keys) -> list[str]:
        return sorted({self.tensors[k].file for k in keys if k is not None})


def rows_per_chunk(t: TensorInfo) -> int:
    """Rows of tensor ``t`` in one chunk: CHUNK_BYTES of stored data, at least one row."""
    itemsize = torch.empty((), dtype=FLOAT_DTYPES.get(t.dtype, torch.float32)).element_size()
    row_bytes = max(1, int(np.prod(t.shape[1:], dtype=np.int64)) * itemsize)
    return max(1, CHUNK_BYTES // row_bytes)


class SafetensorsReader(Reader):
    """The tensors of a checkpoint's safetensors ``files``; each file fetched only when a chunk of it is read."""

    def __init__(self, ckpt: Checkpoint, files: list[str]):
        self.ckpt = ckpt
        self.tensors: dict[str, TensorInfo] = {}
        for name in files:
            if ckpt.headers is not None:
                header = ckpt.headers(name)
            else:
                header = read_safetensors_header(ckpt.fetch(name))
            self.tensors.update(header)
        self._paths: dict[str, Path] = {}

    def _path(self, file: str) -> Path:
        if file not in self._paths:
            self._paths[file] = self.ckpt.fetch(file)
        return self._paths[file]

    def chunks(self, key, n_rows):
        from safetensors import SafetensorError, safe_open

        t = self.tensors[key]
        path = self._path(t.file)
        step = rows_per_chunk(t)
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            # A fresh handle per chunk: the memory map, and the file pages it made resident,
            # go away when the handle closes and the chunk is dropped.
            try:
                handle = safe_open(str(path), framework="pt")
                part = handle.get_slice(key)[start:stop]
            except (SafetensorError, OSError, ValueError) as exc:
                raise corrupt(path, first_line(exc, typed=True, limit=160)) from None
            yield start, stop, part
            del part, handle
