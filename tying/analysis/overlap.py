"""k-NN overlap between two matrices' neighbour lists (Table 5): numpy only, no torch.

The app reads stored neighbour lists and computes overlap@k for any k with these
functions, so its process never imports torch; :mod:`tying.analysis.neighbours` re-exports them.
"""

from __future__ import annotations

import numpy as np


def _check_ids(ids_a, ids_b, k: int):
    a, b = np.asarray(ids_a), np.asarray(ids_b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("neighbour ids must be 2-dimensional (tokens x neighbours)")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"neighbour ids must cover the same tokens: {a.shape[0]} vs {b.shape[0]} rows")
    if k < 1 or k > min(a.shape[1], b.shape[1]):
        raise ValueError(f"k must be between 1 and {min(a.shape[1], b.shape[1])} (neighbours stored), got {k}")
    return a, b


def overlap_at_k(ids_a, ids_b, k: int) -> np.ndarray:
    """Per-token overlap@k: |top-k of a  intersect  top-k of b| / k.

    ids_a, ids_b: int arrays of shape (n_tokens, >= k), each row's neighbour ids distinct
    and sorted by rank. Returns float32 array of shape (n_tokens,).
    """
    a, b = _check_ids(ids_a, ids_b, int(k))
    both = np.sort(np.concatenate([a[:, :k], b[:, :k]], axis=1), axis=1)
    shared = np.count_nonzero(both[:, 1:] == both[:, :-1], axis=1)
    return (shared / k).astype(np.float32)


def overlap_curve(ids_a, ids_b, k_max: int, block_rows: int = 512) -> np.ndarray:
    """Mean overlap@k over tokens for every k = 1..k_max.

    ids_a, ids_b: int arrays of shape (n_tokens, >= k_max), each row's ids distinct and
    sorted by rank. Returns float64 array of shape (k_max,), entry k-1 = mean overlap@k.

    A neighbour at rank i in a and rank j in b is shared at every k > max(i, j); counting
    matches per (i, j) over all tokens gives every k at once.
    """
    k_max = int(k_max)
    a, b = _check_ids(ids_a, ids_b, k_max)
    n = a.shape[0]
    if n == 0:
        raise ValueError("neighbour ids cover no tokens")
    a = np.ascontiguousarray(a[:, :k_max])
    b = np.ascontiguousarray(b[:, :k_max])
    matches = np.zeros((k_max, k_max), dtype=np.int64)  # [rank in a, rank in b]
    for start in range(0, n, block_rows):
        eq = a[start:start + block_rows, :, None] == b[start:start + block_rows, None, :]
        matches += eq.sum(axis=0, dtype=np.int64)
    shared_within = matches.cumsum(axis=0).cumsum(axis=1)  # [k-1, k-1] = matches with i, j < k
    ks = np.arange(1, k_max + 1)
    return np.diagonal(shared_within) / (n * ks)
