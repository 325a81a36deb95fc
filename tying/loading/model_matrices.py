"""What a model's two matrices are, once read (torch-free): :class:`ModelMatrices`, filled by
:mod:`tying.loading.weights` (checkpoints) and :mod:`tying.loading.gguf_file` (GGUF files), and
the fingerprint both record."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ModelMatrices:
    """The input and output matrices of one model, with what is known about where they came from.

    ``input`` and ``output`` are float32 arrays of shape (n_vocab, d_model); row i belongs to
    token id i. When the model is tied, ``output is input`` (one array, not a copy).
    """

    source: str  # the id or path as given
    revision: str | None  # the revision as given (hub only)
    local_dir: str  # folder holding config and tokenizer (a cache snapshot for hub ids)
    commit: str | None  # hub commit sha the revision resolved to; None for local folders
    model_type: str  # config.model_type
    tied: bool  # decided from the weights, not the config
    input: np.ndarray  # float32, shape (n_vocab, d_model)
    output: np.ndarray  # float32, shape (n_vocab, d_model); `is input` when tied
    input_key: str  # tensor name of the input matrix in the checkpoint
    output_key: str | None  # tensor name of a separately stored output matrix, else None
    d_model: int
    n_rows_stored: int  # rows of the stored input matrix, padding rows included
    n_vocab: int  # len(tokenizer); rows beyond it are dropped
    n_params: int  # parameters in the checkpoint (from headers; buffers and tied copies excluded)
    n_embedding_params: int  # stored input rows*cols, plus output rows*cols when untied
    embedding_share: float  # n_embedding_params / n_params
    tokens: list[str]  # raw token strings of ids 0..n_vocab-1 ("" where the id has none)
    token_texts: list[str]  # decoded display string of each id
    fingerprint: dict[str, str]  # sha256 hex of the float32 bytes: {"input": ..., "output": ...}
    files: list[dict] = field(default_factory=list)  # files read: name, size, blob_id/sha256 when known
    dtype: str = "float32"  # stored dtype of the input matrix, e.g. "bfloat16"
    seconds: float = 0.0  # wall time of the load
    runs: bool = True  # the file holds a model that runs (its blocks), not only its matrices (a GGUF of matrices)


def file_sha256(path) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fingerprint(matrix: np.ndarray) -> str:
    return hashlib.sha256(memoryview(np.ascontiguousarray(matrix)).cast("B")).hexdigest()
