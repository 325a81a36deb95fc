"""The two matrices: checked, read into float32 arrays a chunk at a time, compared (their record and
fingerprint: :mod:`tying.loading.model_matrices`).

Only the first ``n_vocab`` rows are read (the tokenizer's tokens; padding rows beyond them
are dropped). Tied or untied is decided from the weights: a model whose stored output
matrix equals its input matrix (:func:`equals`, stopping at the first difference) is tied
whatever its config says.
"""

from __future__ import annotations

import numpy as np
import torch

from tying.errors import UserError
from tying.loading.headers import FLOAT_DTYPES
from tying.loading.readers import Reader


def check_matrix_tensors(
    reader: Reader, input_key: str, output_key: str | None, n_vocab: int, source: str
) -> None:
    """Refuse matrices that are not 2-D floats with at least n_vocab rows and a common width."""
    for key in (input_key, output_key):
        if key is None:
            continue
        t = reader.tensors[key]
        if len(t.shape) != 2:
            raise UserError(f"'{source}': {key} has shape {list(t.shape)}, not (rows, d)")
        if t.dtype not in FLOAT_DTYPES:
            raise UserError(f"'{source}': {key} is stored as {t.dtype}; only float checkpoints are supported")
        if t.shape[0] < n_vocab:
            raise UserError(
                f"'{source}': the tokenizer has {n_vocab} tokens but {key} has only {t.shape[0]} rows"
            )
    if output_key is not None and reader.tensors[output_key].shape[1] != reader.tensors[input_key].shape[1]:
        raise UserError(f"'{source}': {input_key} and {output_key} have different widths")


def _all_finite(block: torch.Tensor) -> bool:
    """Whether a float32 block holds no NaN or inf.

    A sum is non-finite whenever an element is, and is far cheaper than an elementwise test
    (no boolean temporary); the exact test runs only to rule out an overflowing sum.
    """
    if torch.isfinite(block.sum()):
        return True
    return bool(torch.isfinite(block).all())


def read_matrix(reader: Reader, key: str, n_rows: int, source: str) -> np.ndarray:
    """Rows 0..n_rows-1 of tensor ``key`` as a new float32 array; refuses NaN and inf."""
    d = reader.tensors[key].shape[1]
    out = np.empty((n_rows, d), dtype=np.float32)
    dest = torch.from_numpy(out)
    for start, stop, part in reader.chunks(key, n_rows):
        dest[start:stop].copy_(part)
        del part  # drop the chunk (and its mapped file pages) before the next is read
        if not _all_finite(dest[start:stop]):
            raise UserError(f"'{source}' contains NaN or inf values in {key}")
    return out


def equals(reader: Reader, key: str, matrix: np.ndarray) -> bool:
    """Whether tensor ``key`` (first len(matrix) rows) equals ``matrix`` exactly, read in chunks
    and stopping at the first difference."""
    theirs = torch.from_numpy(matrix)
    for start, stop, part in reader.chunks(key, matrix.shape[0]):
        same = torch.equal(part.to(torch.float32), theirs[start:stop])
        del part
        if not same:
            return False
    return True
