"""Linear alignment between embedding matrices and the per-token cosine it leaves (Table 1).

Notation follows the paper: ``I`` is the untied input matrix, ``O`` the untied output
matrix, ``T`` the tied matrix; rows are tokens (the same tokens, in the same order, in
every matrix). A map from a source matrix to a target matrix is fitted on centred rows:

* ``identity_raw`` -- no map and no centring: the cosine of the raw rows (needs equal
  widths); the paper's identity column;
* ``identity``   -- no map, centred rows (needs equal widths);
* ``orthogonal`` -- the Procrustes rotation (needs equal widths);
* ``linear``     -- the least-squares map (any widths).

Each token then gets the cosine between its mapped source row and its target row
(:func:`alignment_cosines`; every comparison, method and split of Table 1 at once:
:mod:`tying.analysis.align_table`; the methods, comparisons and splits, torch-free:
:mod:`tying.analysis.align_protocol`).
All functions take numpy float arrays or torch tensors and return numpy arrays. Heavy
products run in torch on ``device`` (default: the GPU when present) over blocks of rows,
so memory on the device stays bounded by a few ``d x d`` matrices and one block.
"""

from __future__ import annotations

import numpy as np
import torch

from tying.analysis.align_protocol import METHODS, UNFITTED, check_matrix, check_pair, require_equal_widths
from tying.device import as_device, as_tensor, to_numpy

BLOCK_ROWS = 4096
"""Rows per block for products accumulated over the token axis."""


def row_blocks(rows, n: int, block_rows: int):
    """Yield row selectors (slices, or index arrays when ``rows`` is given) in blocks."""
    if rows is None:
        for start in range(0, n, block_rows):
            yield slice(start, min(start + block_rows, n))
    else:
        for start in range(0, len(rows), block_rows):
            yield rows[start:start + block_rows]


def take_rows(X, sel, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    """Rows ``sel`` of ``X`` (numpy array or tensor) as a ``dtype`` (float32) tensor on ``device``."""
    if isinstance(X, torch.Tensor) and not isinstance(sel, slice):
        sel = torch.as_tensor(sel, device=X.device)
    return as_tensor(X[sel], device, dtype=dtype)


def column_mean(X, rows, device: torch.device) -> torch.Tensor:
    """Column mean of ``X`` over ``rows`` (all rows if None), accumulated in float64.

    Returns a float32 tensor of shape (d,) on ``device``.
    """
    n = X.shape[0] if rows is None else len(rows)
    if n == 0:
        raise ValueError("cannot centre on zero rows")
    total = torch.zeros(X.shape[1], dtype=torch.float64, device=device)
    for sel in row_blocks(rows, X.shape[0], BLOCK_ROWS):
        total += take_rows(X, sel, device).sum(dim=0, dtype=torch.float64)
    return (total / n).to(torch.float32)


def _products(src, tgt, rows, mean_src, mean_tgt, device, gram: bool, cross: bool):
    """Float64 ``src^T src`` and ``src^T tgt`` over ``rows``, accumulated block by block.

    Rows are centred on the fly with ``mean_src`` / ``mean_tgt`` (tensors or None), so no
    centred or float64 copy of a full matrix is ever made. Returns (gram or None,
    cross or None) with shapes (d_src, d_src) and (d_src, d_tgt).
    """
    d_src, d_tgt = src.shape[1], tgt.shape[1]
    G = torch.zeros(d_src, d_src, dtype=torch.float64, device=device) if gram else None
    C = torch.zeros(d_src, d_tgt, dtype=torch.float64, device=device) if cross else None
    for sel in row_blocks(rows, src.shape[0], BLOCK_ROWS):
        s = take_rows(src, sel, device)
        if mean_src is not None:
            s = s - mean_src
        s = s.to(torch.float64)
        if gram:
            G += s.T @ s
        if cross:
            t = take_rows(tgt, sel, device)
            if mean_tgt is not None:
                t = t - mean_tgt
            C += s.T @ t.to(torch.float64)
    return G, C


def procrustes_from_cross(C: torch.Tensor) -> torch.Tensor:
    """Orthogonal W maximising trace(W^T C), C = src^T tgt: W = U V^T from C = U S V^T."""
    U, _, Vh = torch.linalg.svd(C, full_matrices=False)
    return U @ Vh


def ridged(G: torch.Tensor, ridge: float) -> torch.Tensor:
    """G + lambda I, lambda = ridge * mean diagonal of G (1 where that is not positive)."""
    d = G.shape[0]
    scale = float(torch.trace(G)) / d
    lam = ridge * (scale if scale > 0 else 1.0)
    return G + lam * torch.eye(d, dtype=G.dtype, device=G.device)


def _least_squares_from_products(G: torch.Tensor, C: torch.Tensor, ridge: float) -> torch.Tensor:
    """Solve (G + lambda I) W = C in float64, lambda = ridge * mean diagonal of G."""
    return torch.linalg.solve(ridged(G, ridge), C)


def _cosine_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of matching rows of two (m, d) tensors; 0 where either row is zero."""
    dot = (a * b).sum(dim=1)
    denom = a.norm(dim=1) * b.norm(dim=1)
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    cos = torch.where(denom > 0, dot / safe, torch.zeros_like(dot))
    return cos.clamp(-1.0, 1.0)


def score_maps(src, tgt, rows, mean_src, mean_tgt, maps: dict, device) -> dict:
    """Per-token cosine of mapped centred source vs centred target, for several maps in one pass.

    ``mean_src`` / ``mean_tgt`` None: the rows are not centred (the raw identity).
    ``maps`` maps a method name to a float32 tensor W of shape (d_src, d_tgt), or None for
    the identity. Returns {method: float32 array of shape (n_rows,)}.
    """
    out = {name: [] for name in maps}
    for sel in row_blocks(rows, src.shape[0], BLOCK_ROWS):
        s = take_rows(src, sel, device)
        t = take_rows(tgt, sel, device)
        if mean_src is not None:
            s = s - mean_src
        if mean_tgt is not None:
            t = t - mean_tgt
        for name, W in maps.items():
            mapped = s if W is None else s @ W
            out[name].append(_cosine_rows(mapped, t).cpu())
    return {name: (torch.cat(parts).numpy().astype(np.float32) if parts else np.zeros(0, np.float32))
            for name, parts in out.items()}



# --------------------------------------------------------------------------- public maths


def centre(X) -> np.ndarray:
    """Subtract the column mean.

    X: array of shape (n_tokens, d). Returns float32 array of shape (n_tokens, d) whose
    columns have mean zero (the mean is accumulated in float64).
    """
    X = check_matrix(to_numpy(X))
    mean = X.mean(axis=0, dtype=np.float64).astype(np.float32)
    return X.astype(np.float32, copy=False) - mean


def procrustes(src, tgt, device=None) -> np.ndarray:
    """Orthogonal map W minimising ||src W - tgt||_F (rows are not centred here).

    src: array of shape (n_tokens, d); tgt: array of shape (n_tokens, d).
    Returns float32 array of shape (d, d) with W^T W = I, from the SVD of src^T tgt.
    Raises NotApplicable when the widths differ.
    """
    check_pair(src, tgt)
    require_equal_widths("orthogonal map", src, tgt)
    dev = as_device(device)
    _, C = _products(src, tgt, None, None, None, dev, gram=False, cross=True)
    return procrustes_from_cross(C).to(torch.float32).cpu().numpy()


def least_squares(src, tgt, device=None, ridge: float = 1e-6) -> np.ndarray:
    """Linear map W minimising ||src W - tgt||_F (rows are not centred here).

    src: array of shape (n_tokens, d_src); tgt: array of shape (n_tokens, d_tgt).
    Solves the normal equations (src^T src + lambda I) W = src^T tgt in float64, with the
    products accumulated over row blocks and lambda = ``ridge`` times the mean diagonal of
    src^T src (a tiny relative ridge for stability). Returns float32 array (d_src, d_tgt).
    """
    check_pair(src, tgt)
    dev = as_device(device)
    G, C = _products(src, tgt, None, None, None, dev, gram=True, cross=True)
    return _least_squares_from_products(G, C, ridge).to(torch.float32).cpu().numpy()


def rowwise_cosine(A, B, device=None, *, double: bool = False) -> np.ndarray:
    """Cosine between matching rows of A and B.

    A, B: arrays of shape (n, d). Returns an array of shape (n,), float32 (float64 with
    ``double``, computed in float64 throughout); a row pair where either row is zero gets
    cosine 0.
    """
    check_pair(A, B)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"rows must have equal widths to compare: {A.shape[1]} vs {B.shape[1]}")
    dev = as_device(device)
    dtype = torch.float64 if double else torch.float32
    parts = [_cosine_rows(take_rows(A, sel, dev, dtype), take_rows(B, sel, dev, dtype)).cpu()
             for sel in row_blocks(None, A.shape[0], BLOCK_ROWS)]
    out_dtype = np.float64 if double else np.float32
    return torch.cat(parts).numpy().astype(out_dtype) if parts else np.zeros(0, out_dtype)


def alignment_cosines(src, tgt, method: str, *, fit_idx=None, eval_idx=None, device=None) -> np.ndarray:
    """Per-token cosine after aligning ``src`` to ``tgt`` with ``method``.

    src: array of shape (n_tokens, d_src); tgt: array of shape (n_tokens, d_tgt), rows the
    same tokens. Both are centred with the column mean of the fit rows (except for
    ``identity_raw``: raw rows); the map is fitted on ``fit_idx`` (all rows if None) and
    scored on ``eval_idx`` (all rows if None).
    Returns float32 array of shape (len(eval_idx),) in the order of ``eval_idx``.
    Raises NotApplicable for identity or orthogonal maps across different widths.
    """
    if method not in METHODS:
        raise ValueError(f"unknown alignment method '{method}' (choose from {', '.join(METHODS)})")
    check_pair(src, tgt)
    if method in UNFITTED:
        require_equal_widths("identity map", src, tgt)
    elif method == "orthogonal":
        require_equal_widths("orthogonal map", src, tgt)
    dev = as_device(device)
    fit_rows = _as_rows(fit_idx, src.shape[0])
    eval_rows = _as_rows(eval_idx, src.shape[0])
    if method == "identity_raw":
        return score_maps(src, tgt, eval_rows, None, None, {method: None}, dev)[method]
    mean_src = column_mean(src, fit_rows, dev)
    mean_tgt = column_mean(tgt, fit_rows, dev)
    W = _fit(src, tgt, method, fit_rows, mean_src, mean_tgt, dev)
    return score_maps(src, tgt, eval_rows, mean_src, mean_tgt, {method: W}, dev)[method]


def _as_rows(idx, n: int):
    if idx is None:
        return None
    rows = np.asarray(idx).astype(np.int64, copy=False).ravel()
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise ValueError(f"token indices must lie in 0..{n - 1}")
    return rows


def _fit(src, tgt, method, rows, mean_src, mean_tgt, device):
    """The fitted map as a float32 tensor (d_src, d_tgt) on device, or None for identity."""
    if method == "identity":
        return None
    G, C = _products(src, tgt, rows, mean_src, mean_tgt, device, gram=method == "linear", cross=True)
    W = procrustes_from_cross(C) if method == "orthogonal" else _least_squares_from_products(G, C, ridge=1e-6)
    return W.to(torch.float32)
