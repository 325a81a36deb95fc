"""Nearest neighbours by cosine within one matrix, and k-NN overlap between matrices (Table 5).

Neighbours are token ids, so two matrices of different widths can be compared as long as
their rows are the same tokens. For a token, overlap@k is the share of its k nearest
neighbours in one matrix that are also among its k nearest neighbours in the other.

Conventions of :func:`knn`: cosine similarity (rows L2-normalised; a zero row has cosine 0
with every row), the token itself is never its own neighbour, neighbours are sorted by
descending cosine and equal cosines are ordered by lower token id.
"""

from __future__ import annotations

import numpy as np
import torch

from tying.analysis.overlap import overlap_at_k, overlap_curve  # noqa: F401 - part of this module's API
from tying.device import as_device, as_tensor, to_numpy

BACKENDS = ("auto", "faiss", "torch", "symmetric")

_EXTRA = 8
"""Candidates fetched beyond k, so ties at the k-th place can be settled by token id."""


# --------------------------------------------------------------------------- k nearest neighbours


def knn(X, k: int, *, device=None, block_rows: int = 4096, backend: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """The k nearest neighbours of every row of X by cosine similarity, self excluded.

    X: array of shape (n_tokens, d) (numpy or torch). Returns (ids, scores): int32 array of
    shape (n_tokens, k) and float32 array of shape (n_tokens, k), each row sorted by
    descending cosine, ties ordered by lower id.

    backend: "faiss" (exact inner-product search on the CPU), "torch" (blocked matrix
    products and top-k on ``device``), "symmetric" (on the CPU, each pair of row blocks'
    cosines computed once: :func:`_knn_symmetric`) or "auto" (torch when ``device`` is CUDA,
    else symmetric for many wide rows, see ``SYMMETRIC_MIN_WIDTH``, faiss otherwise).
    Rows are processed ``block_rows`` at a time.
    """
    if X.ndim != 2:
        raise ValueError(f"matrix must be 2-dimensional (tokens x width), got shape {tuple(X.shape)}")
    n = X.shape[0]
    k = int(k)
    if k < 1 or k >= n:
        raise ValueError(f"k must be between 1 and the number of tokens minus 1 ({n - 1}), got {k}")
    if block_rows < 1:
        raise ValueError(f"block_rows must be positive, got {block_rows}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown k-NN backend '{backend}' (choose from {', '.join(BACKENDS)})")
    dev = as_device(device)
    if backend == "auto":
        backend = ("torch" if dev.type == "cuda" else
                   "symmetric" if n > SYMMETRIC_MIN_ROWS and X.shape[1] >= SYMMETRIC_MIN_WIDTH else "faiss")
    if backend == "torch":
        return _knn_torch(X, k, dev, block_rows)
    if backend == "symmetric":
        return _knn_symmetric(X, k, block_rows)
    return _knn_faiss(X, k, block_rows)


SYMMETRIC_MIN_ROWS = 3 * 4096
SYMMETRIC_MIN_WIDTH = 1024
"""On the CPU, above ``SYMMETRIC_MIN_ROWS`` rows of at least ``SYMMETRIC_MIN_WIDTH`` columns
:func:`knn` computes each pair of row blocks' cosines once (:func:`_knn_symmetric`); otherwise
FAISS. Narrow rows make the products cheap and the top-k selections dominate: measured on 2
cores, 20,000 x 2,048 took 16.3 s against FAISS's 21.9 s, 15,000 x 256 4.1 s against 2.7 s."""


def _normalise_rows_numpy(X) -> np.ndarray:
    """Float32 copy of X, shape (n, d), with unit rows; zero rows stay zero."""
    X = np.asarray(to_numpy(X), dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(X / np.where(norms > 0, norms, 1.0).astype(np.float32))


def _normalise_rows_torch(X, device: torch.device) -> torch.Tensor:
    """Float32 tensor of X on device, shape (n, d), with unit rows; zero rows stay zero."""
    T = as_tensor(X, device)
    norms = T.norm(dim=1, keepdim=True)
    return T / torch.where(norms > 0, norms, torch.ones_like(norms))


def _knn_faiss(X, k: int, block_rows: int):
    import faiss

    Xn = _normalise_rows_numpy(X)
    n, d = Xn.shape
    index = faiss.IndexFlatIP(d)
    index.add(Xn)
    m = min(k + 1 + _EXTRA, n)  # +1 for self
    ids = np.empty((n, k), dtype=np.int32)
    scores = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, block_rows):
        rows = np.arange(start, min(start + block_rows, n))
        D, Idx = index.search(Xn[rows], m)
        D = D.astype(np.float32, copy=False)
        Idx = Idx.astype(np.int64, copy=False)
        # Drop self wherever it appears (with duplicates it need not rank first).
        cand_scores = np.where(Idx == rows[:, None], -np.inf, D).astype(np.float32)
        order = np.lexsort((Idx, -cand_scores), axis=1)
        cand_scores = np.take_along_axis(cand_scores, order, axis=1)
        cand_ids = np.take_along_axis(Idx, order, axis=1)
        block_scores, block_ids = cand_scores[:, :k], cand_ids[:, :k]
        if m < n:
            # Rows whose k-th score equals the lowest returned score may have tied rows
            # that the index left out: settle those with the full row of scores.
            unsettled = np.nonzero(block_scores[:, k - 1] <= D.min(axis=1))[0]
            if unsettled.size:
                s_ids, s_scores = _exact_rows_numpy(Xn, rows[unsettled], k)
                block_ids[unsettled], block_scores[unsettled] = s_ids, s_scores
        ids[rows] = block_ids
        scores[rows] = block_scores
    np.clip(scores, -1.0, 1.0, out=scores)  # rounding can put a unit row's cosine a hair above 1
    return ids, scores


def _exact_rows_numpy(Xn: np.ndarray, rows: np.ndarray, k: int, chunk: int = 256):
    """Exact top-k (self excluded, ties by lower id) of some rows from their full score rows.

    Returns int32 ids and float32 scores of shape (len(rows), k); ``chunk`` rows at a time.
    """
    ids = np.empty((len(rows), k), dtype=np.int32)
    scores = np.empty((len(rows), k), dtype=np.float32)
    for first in range(0, len(rows), chunk):
        part = rows[first:first + chunk]
        S = Xn[part] @ Xn.T
        S[np.arange(len(part)), part] = -np.inf
        order = np.argsort(-S, axis=1, kind="stable")[:, :k]
        ids[first:first + chunk] = order
        scores[first:first + chunk] = np.take_along_axis(S, order, axis=1)
    return ids, scores


def _knn_torch(X, k: int, device: torch.device, block_rows: int):
    Xn = _normalise_rows_torch(X, device)
    n = Xn.shape[0]
    m = min(k + _EXTRA, n - 1)  # self is masked, so at most n - 1 real candidates
    ids = torch.empty((n, k), dtype=torch.int64)
    scores = torch.empty((n, k), dtype=torch.float32)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        rows = torch.arange(start, stop, device=device)
        S = Xn[start:stop] @ Xn.T
        S[torch.arange(stop - start, device=device), rows] = -torch.inf
        top_scores, top_ids = torch.topk(S, m, dim=1, largest=True, sorted=True)
        top_scores, top_ids = _order_by_score_then_id(top_scores, top_ids)
        block_scores, block_ids = top_scores[:, :k], top_ids[:, :k]
        if m < n - 1:
            unsettled = torch.nonzero(block_scores[:, k - 1] <= top_scores[:, m - 1]).ravel()
            if unsettled.numel():
                # ascending sort of -S is stable, so equal scores keep lower ids first
                order = torch.sort(-S[unsettled], dim=1, stable=True).indices[:, :k]
                block_ids[unsettled] = order
                block_scores[unsettled] = torch.gather(S[unsettled], 1, order)
        ids[start:stop] = block_ids.cpu()
        scores[start:stop] = block_scores.cpu()
    return ids.numpy().astype(np.int32), scores.clamp_(-1.0, 1.0).numpy()


def _knn_symmetric(X, k: int, block_rows: int):
    """Exact k-NN on the CPU, each cosine computed once: the scores of block i against block j
    are those of j against i, transposed.

    FAISS's exact search (``IndexFlatIP``) computes every row against every row: n^2 d
    multiply-adds, twice what the symmetric matrix of cosines holds. Here the blocks (i, j),
    j >= i, are computed once (float32, torch's matrix product on every core); each block's
    top candidates update a running list for its rows (from the block's rows) and for its
    columns (from its transpose). Ties and rows whose k-th place may tie with a candidate
    left out are settled on the full row of scores, as in :func:`_knn_torch`. Measured on
    50,304 x 2,048 (k=64) on 2 idle cores: 63.8 s against FAISS's 76.6 s (1.2x, not 2x: the
    top-k selections, two a block pair, one over a transposed block, cost about a third of what
    the halved products save), the same neighbours but for near-ties within float32 rounding
    (0.05% of the ids, every score within 4.2e-7).
    """
    cpu = torch.device("cpu")
    Xn = _normalise_rows_torch(X, cpu)
    n = Xn.shape[0]
    m = min(k + _EXTRA, n - 1)
    best_s = torch.full((n, m), -torch.inf, dtype=torch.float32)
    best_i = torch.full((n, m), -1, dtype=torch.int64)

    def merge(rows: slice, scores: torch.Tensor, first_col: int) -> None:
        top_s, top_i = torch.topk(scores, min(m, scores.shape[1]), dim=1, largest=True, sorted=False)
        all_s = torch.cat([best_s[rows], top_s], dim=1)
        all_i = torch.cat([best_i[rows], top_i + first_col], dim=1)
        keep_s, pick = torch.topk(all_s, m, dim=1, largest=True, sorted=False)
        best_s[rows], best_i[rows] = keep_s, torch.gather(all_i, 1, pick)

    starts = list(range(0, n, block_rows))
    for i, a in enumerate(starts):
        rows_a = slice(a, min(a + block_rows, n))
        for b in starts[i:]:
            rows_b = slice(b, min(b + block_rows, n))
            S = Xn[rows_a] @ Xn[rows_b].T
            if a == b:
                S.fill_diagonal_(-torch.inf)
                merge(rows_a, S, b)
            else:
                merge(rows_a, S, b)
                merge(rows_b, S.T, a)
    scores, ids = _order_by_score_then_id(best_s, best_i)
    out_s, out_i = scores[:, :k].clone(), ids[:, :k].clone()
    if m < n - 1:
        # a row whose k-th score is no higher than its m-th candidate's may tie with a row left out
        unsettled = torch.nonzero(out_s[:, k - 1] <= scores[:, m - 1]).ravel().numpy()
        if unsettled.size:
            s_ids, s_scores = _exact_rows_numpy(Xn.numpy(), unsettled, k)
            out_i[unsettled], out_s[unsettled] = torch.from_numpy(s_ids).long(), torch.from_numpy(s_scores)
    return out_i.numpy().astype(np.int32), out_s.clamp_(-1.0, 1.0).numpy()


def _order_by_score_then_id(scores: torch.Tensor, ids: torch.Tensor):
    """Sort each row of candidates by descending score, equal scores by ascending id."""
    ids_sorted, perm = torch.sort(ids, dim=1)
    scores = torch.gather(scores, 1, perm)
    scores_sorted, perm = torch.sort(scores, dim=1, descending=True, stable=True)
    return scores_sorted, torch.gather(ids_sorted, 1, perm)


# --------------------------------------------------------------------------- overlap@k
