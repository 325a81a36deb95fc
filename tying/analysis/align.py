"""Linear alignment between embedding matrices and the per-token cosine it leaves (Table 1).

Notation follows the paper: ``I`` is the untied input matrix, ``O`` the untied output
matrix, ``T`` the tied matrix; rows are tokens (the same tokens, in the same order, in
every matrix). A map from a source matrix to a target matrix is fitted on centred rows:

* ``identity_raw`` -- no map and no centring: the cosine of the raw rows (needs equal
  widths); the paper's identity column;
* ``identity``   -- no map, centred rows (needs equal widths);
* ``orthogonal`` -- the Procrustes rotation (needs equal widths);
* ``linear``     -- the least-squares map (any widths).

Each token then gets the cosine between its mapped source row and its target row.
All functions take numpy float arrays or torch tensors and return numpy arrays. Heavy
products run in torch on ``device`` (default: the GPU when present) over blocks of rows,
so memory on the device stays bounded by a few ``d x d`` matrices and one block.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from tying.errors import NotApplicable
from tying.loading.device import as_device, as_tensor, to_numpy

METHODS = ("identity_raw", "identity", "orthogonal", "linear")
"""Maps from source to target, weakest first (``identity_raw``: raw rows, no centring)."""

UNFITTED = ("identity_raw", "identity")
"""Methods with no fitted map."""

COMPARISONS = (("I", "O"), ("O", "T"), ("I", "T"))
"""(source, target) pairs of matrix names, as in Table 1."""

SPLITS = ("in_sample", "held_out")
"""``in_sample``: fit and score on every token (the paper). ``held_out``: fit on one split,
score on the other."""

BLOCK_ROWS = 4096
"""Rows per block for products accumulated over the token axis."""


def comparison_label(source: str, target: str) -> str:
    """The display label of a comparison, e.g. ``"I->O"``."""
    return f"{source}->{target}"


# --------------------------------------------------------------------------- helpers


def _check_matrix(X, name: str = "matrix"):
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (tokens x width), got shape {tuple(X.shape)}")
    return X


def _row_blocks(rows, n: int, block_rows: int):
    """Yield row selectors (slices, or index arrays when ``rows`` is given) in blocks."""
    if rows is None:
        for start in range(0, n, block_rows):
            yield slice(start, min(start + block_rows, n))
    else:
        for start in range(0, len(rows), block_rows):
            yield rows[start:start + block_rows]


def _take(X, sel, device: torch.device, dtype=torch.float32) -> torch.Tensor:
    """Rows ``sel`` of ``X`` (numpy array or tensor) as a ``dtype`` (float32) tensor on ``device``."""
    if isinstance(X, torch.Tensor) and not isinstance(sel, slice):
        sel = torch.as_tensor(sel, device=X.device)
    return as_tensor(X[sel], device, dtype=dtype)


def _column_mean(X, rows, device: torch.device) -> torch.Tensor:
    """Column mean of ``X`` over ``rows`` (all rows if None), accumulated in float64.

    Returns a float32 tensor of shape (d,) on ``device``.
    """
    n = X.shape[0] if rows is None else len(rows)
    if n == 0:
        raise ValueError("cannot centre on zero rows")
    total = torch.zeros(X.shape[1], dtype=torch.float64, device=device)
    for sel in _row_blocks(rows, X.shape[0], BLOCK_ROWS):
        total += _take(X, sel, device).sum(dim=0, dtype=torch.float64)
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
    for sel in _row_blocks(rows, src.shape[0], BLOCK_ROWS):
        s = _take(src, sel, device)
        if mean_src is not None:
            s = s - mean_src
        s = s.to(torch.float64)
        if gram:
            G += s.T @ s
        if cross:
            t = _take(tgt, sel, device)
            if mean_tgt is not None:
                t = t - mean_tgt
            C += s.T @ t.to(torch.float64)
    return G, C


def _procrustes_from_cross(C: torch.Tensor) -> torch.Tensor:
    """Orthogonal W maximising trace(W^T C), C = src^T tgt: W = U V^T from C = U S V^T."""
    U, _, Vh = torch.linalg.svd(C, full_matrices=False)
    return U @ Vh


def _ridged(G: torch.Tensor, ridge: float) -> torch.Tensor:
    """G + lambda I, lambda = ridge * mean diagonal of G (1 where that is not positive)."""
    d = G.shape[0]
    scale = float(torch.trace(G)) / d
    lam = ridge * (scale if scale > 0 else 1.0)
    return G + lam * torch.eye(d, dtype=G.dtype, device=G.device)


def _least_squares_from_products(G: torch.Tensor, C: torch.Tensor, ridge: float) -> torch.Tensor:
    """Solve (G + lambda I) W = C in float64, lambda = ridge * mean diagonal of G."""
    return torch.linalg.solve(_ridged(G, ridge), C)


def _cosine_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of matching rows of two (m, d) tensors; 0 where either row is zero."""
    dot = (a * b).sum(dim=1)
    denom = a.norm(dim=1) * b.norm(dim=1)
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    cos = torch.where(denom > 0, dot / safe, torch.zeros_like(dot))
    return cos.clamp(-1.0, 1.0)


def _score(src, tgt, rows, mean_src, mean_tgt, maps: dict, device) -> dict:
    """Per-token cosine of mapped centred source vs centred target, for several maps in one pass.

    ``mean_src`` / ``mean_tgt`` None: the rows are not centred (the raw identity).
    ``maps`` maps a method name to a float32 tensor W of shape (d_src, d_tgt), or None for
    the identity. Returns {method: float32 array of shape (n_rows,)}.
    """
    out = {name: [] for name in maps}
    for sel in _row_blocks(rows, src.shape[0], BLOCK_ROWS):
        s = _take(src, sel, device)
        t = _take(tgt, sel, device)
        if mean_src is not None:
            s = s - mean_src
        if mean_tgt is not None:
            t = t - mean_tgt
        for name, W in maps.items():
            mapped = s if W is None else s @ W
            out[name].append(_cosine_rows(mapped, t).cpu())
    return {name: (torch.cat(parts).numpy().astype(np.float32) if parts else np.zeros(0, np.float32))
            for name, parts in out.items()}


def _check_pair(src, tgt):
    _check_matrix(src, "source matrix")
    _check_matrix(tgt, "target matrix")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(f"source and target must have the same tokens (rows): "
                        f"{src.shape[0]} vs {tgt.shape[0]}")


def _require_equal_widths(method_words: str, src, tgt):
    if src.shape[1] != tgt.shape[1]:
        raise NotApplicable(f"{method_words} needs equal widths "
                            f"(d_src={src.shape[1]}, d_tgt={tgt.shape[1]})")


# --------------------------------------------------------------------------- public maths


def centre(X) -> np.ndarray:
    """Subtract the column mean.

    X: array of shape (n_tokens, d). Returns float32 array of shape (n_tokens, d) whose
    columns have mean zero (the mean is accumulated in float64).
    """
    X = _check_matrix(to_numpy(X))
    mean = X.mean(axis=0, dtype=np.float64).astype(np.float32)
    return X.astype(np.float32, copy=False) - mean


def procrustes(src, tgt, device=None) -> np.ndarray:
    """Orthogonal map W minimising ||src W - tgt||_F (rows are not centred here).

    src: array of shape (n_tokens, d); tgt: array of shape (n_tokens, d).
    Returns float32 array of shape (d, d) with W^T W = I, from the SVD of src^T tgt.
    Raises NotApplicable when the widths differ.
    """
    _check_pair(src, tgt)
    _require_equal_widths("orthogonal map", src, tgt)
    dev = as_device(device)
    _, C = _products(src, tgt, None, None, None, dev, gram=False, cross=True)
    return _procrustes_from_cross(C).to(torch.float32).cpu().numpy()


def least_squares(src, tgt, device=None, ridge: float = 1e-6) -> np.ndarray:
    """Linear map W minimising ||src W - tgt||_F (rows are not centred here).

    src: array of shape (n_tokens, d_src); tgt: array of shape (n_tokens, d_tgt).
    Solves the normal equations (src^T src + lambda I) W = src^T tgt in float64, with the
    products accumulated over row blocks and lambda = ``ridge`` times the mean diagonal of
    src^T src (a tiny relative ridge for stability). Returns float32 array (d_src, d_tgt).
    """
    _check_pair(src, tgt)
    dev = as_device(device)
    G, C = _products(src, tgt, None, None, None, dev, gram=True, cross=True)
    return _least_squares_from_products(G, C, ridge).to(torch.float32).cpu().numpy()


def rowwise_cosine(A, B, device=None, *, double: bool = False) -> np.ndarray:
    """Cosine between matching rows of A and B.

    A, B: arrays of shape (n, d). Returns an array of shape (n,), float32 (float64 with
    ``double``, computed in float64 throughout); a row pair where either row is zero gets
    cosine 0.
    """
    _check_pair(A, B)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"rows must have equal widths to compare: {A.shape[1]} vs {B.shape[1]}")
    dev = as_device(device)
    dtype = torch.float64 if double else torch.float32
    parts = [_cosine_rows(_take(A, sel, dev, dtype), _take(B, sel, dev, dtype)).cpu()
             for sel in _row_blocks(None, A.shape[0], BLOCK_ROWS)]
    out_dtype = np.float64 if double else np.float32
    return torch.cat(parts).numpy().astype(out_dtype) if parts else np.zeros(0, out_dtype)


def split_tokens(n: int, held_out_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic random split of ``n`` token rows into a fit split and a held-out split.

    Returns (fit_idx, eval_idx): sorted int64 arrays, disjoint, together 0..n-1; eval_idx
    holds round(held_out_fraction * n) rows (at least 1, leaving at least 1 to fit).
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise ValueError(f"held-out fraction must be between 0 and 1, got {held_out_fraction}")
    if n < 2:
        raise ValueError(f"need at least 2 tokens to split, got {n}")
    n_eval = min(max(int(round(held_out_fraction * n)), 1), n - 1)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_eval:]).astype(np.int64), np.sort(perm[:n_eval]).astype(np.int64)


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
    _check_pair(src, tgt)
    if method in UNFITTED:
        _require_equal_widths("identity map", src, tgt)
    elif method == "orthogonal":
        _require_equal_widths("orthogonal map", src, tgt)
    dev = as_device(device)
    fit_rows = _as_rows(fit_idx, src.shape[0])
    eval_rows = _as_rows(eval_idx, src.shape[0])
    if method == "identity_raw":
        return _score(src, tgt, eval_rows, None, None, {method: None}, dev)[method]
    mean_src = _column_mean(src, fit_rows, dev)
    mean_tgt = _column_mean(tgt, fit_rows, dev)
    W = _fit(src, tgt, method, fit_rows, mean_src, mean_tgt, dev)
    return _score(src, tgt, eval_rows, mean_src, mean_tgt, {method: W}, dev)[method]


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
    W = _procrustes_from_cross(C) if method == "orthogonal" else _least_squares_from_products(G, C, ridge=1e-6)
    return W.to(torch.float32)


def _split_products(matrices: dict, pairs: set, eval_rows: np.ndarray, device) -> dict:
    """Every product the fits need, for both splits, in one pass over the rows.

    Rows are centred on each matrix's mean over every row (``c``) and each block is split into
    its fit rows and its held-out rows, so one pass gives, for each (a, b) in ``pairs`` (a
    Gram matrix when a == b), ``a^T b`` over the fit rows and over the held-out rows (their
    sum: over every row), and each matrix's column sums over both. Block products run in
    float32 and are accumulated in float64. Returns {"c": {name: mean}, "n": (n_fit, n_eval),
    "sum": {name: (fit, eval)}, "prod": {(a, b): (fit, eval)}}.
    """
    names = sorted({m for pair in pairs for m in pair})
    n = next(iter(matrices.values())).shape[0]
    held = np.zeros(n, dtype=bool)
    held[eval_rows] = True
    c = {m: _column_mean(matrices[m], None, device) for m in names}
    f64 = {"dtype": torch.float64, "device": device}
    sums = {m: [torch.zeros(matrices[m].shape[1], **f64) for _ in range(2)] for m in names}
    prod = {(a, b): [torch.zeros(matrices[a].shape[1], matrices[b].shape[1], **f64) for _ in range(2)]
            for a, b in pairs}
    for sel in _row_blocks(None, n, BLOCK_ROWS):
        rows = {m: _take(matrices[m], sel, device) - c[m] for m in names}
        mask = torch.as_tensor(held[sel], device=device)
        for part, keep in enumerate((~mask, mask)):
            if not bool(keep.any()):
                continue
            picked = {m: r[keep] for m, r in rows.items()}
            for m in names:
                sums[m][part] += picked[m].sum(dim=0, dtype=torch.float64)
            for (a, b), acc in prod.items():
                acc[part] += (picked[a].T @ picked[b]).to(torch.float64)
    n_eval = int(held.sum())
    return {"c": c, "n": (n - n_eval, n_eval), "sum": sums, "prod": prod}


def _centred_products(P: dict, a: str, b: str, split: str) -> torch.Tensor:
    """``a^T b`` of the rows a split fits on, each centred on its own mean over those rows.

    ``in_sample`` fits on every row, whose mean is the pass's centre: the fit and held-out
    parts summed. ``held_out`` fits on the fit rows, mean ``c + s/n`` (``s``: their sum after
    centring on ``c``): sum_F (x - m)(y - m')^T = sum_F (x - c)(y - c')^T - s s'^T / n.
    """
    fit, ev = P["prod"][(a, b)]
    if split == "in_sample":
        return fit + ev
    n_fit = P["n"][0]
    return fit - torch.outer(P["sum"][a][0], P["sum"][b][0]) / n_fit


def _split_mean(P: dict, name: str, split: str) -> torch.Tensor:
    """Column mean (float32) of the rows a split fits on (every row for ``in_sample``)."""
    if split == "in_sample":
        return P["c"][name]
    return P["c"][name] + (P["sum"][name][0] / P["n"][0]).to(torch.float32)


def run_alignment(matrices: dict, *, held_out_fraction: float = 0.2, seed: int = 0, device=None,
                  progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every comparison x method x split of Table 1 for one model pair.

    matrices: {"I": array (n_tokens, d_I), "O": array (n_tokens, d_O), "T": array
    (n_tokens, d_T)}, rows the same tokens; a comparison runs when both of its matrices
    are present. Splits: ``in_sample`` fits and scores every token (the paper);
    ``held_out`` fits on a seeded split and scores the held-out tokens (the identities
    need no fit and are scored on the same held-out tokens; ``identity`` centres with the
    fit rows' mean, ``identity_raw`` not at all).

    One pass over the rows gives every product every fit of both splits needs
    (:func:`_split_products`: each source's Gram matrix once, each comparison's cross
    product once, split into fit and held-out rows); each source's Gram matrix is factorised
    once per split (Cholesky) and serves every target. Then one pass per comparison and split
    scores every map. The maps are those of :func:`alignment_cosines` (same centring, same
    ridge), computed from the same sums in another order.

    Returns one dict per comparison, method and split with keys ``comparison`` ("I->O"),
    ``method``, ``split``, ``applicable`` (bool), ``note`` (str), ``token_idx`` (int64
    array of the scored rows), ``cosine`` (float32 array of shape (len(token_idx),), empty
    when not applicable), ``mean`` and ``std`` (float, NaN when not applicable).
    """
    for name, X in matrices.items():
        _check_matrix(X, f"matrix {name}")
    comparisons = [(a, b) for a, b in COMPARISONS if a in matrices and b in matrices]
    if not comparisons:
        raise ValueError(f"no comparison possible: need two of I, O, T, got {sorted(matrices)}")
    sizes = {name: X.shape[0] for name, X in matrices.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"all matrices must have the same tokens (rows), got {sizes}")
    n = next(iter(sizes.values()))
    dev = as_device(device)
    fit_idx, eval_idx = split_tokens(n, held_out_fraction, seed)
    plan = {"in_sample": (None, np.arange(n, dtype=np.int64)), "held_out": (fit_idx, eval_idx)}
    say = progress or (lambda message: None)

    say("alignment: the products of every fit, one pass")
    pairs = {(a, b) for a, b in comparisons} | {(a, a) for a, _ in comparisons}
    P = _split_products(matrices, pairs, eval_idx, dev)
    factors: dict[tuple[str, str], tuple[torch.Tensor, torch.Tensor | None]] = {}

    def linear_map(src_name: str, C: torch.Tensor, split: str) -> torch.Tensor:
        """(G + lambda I) W = C, with G's Cholesky factor computed once per source and split."""
        key = (src_name, split)
        if key not in factors:
            system = _ridged(_centred_products(P, src_name, src_name, split), 1e-6)
            L, info = torch.linalg.cholesky_ex(system)
            factors[key] = (system, L if int(info) == 0 else None)
        system, L = factors[key]
        if L is None:  # not positive definite in floating point: the general solver
            return torch.linalg.solve(system, C)
        return torch.cholesky_solve(C, L)

    results = []
    for source, target in comparisons:
        src, tgt = matrices[source], matrices[target]
        label = comparison_label(source, target)
        for split in SPLITS:
            fit_rows, eval_rows = plan[split]
            n_fit = n if fit_rows is None else len(fit_rows)
            mean_src, mean_tgt = _split_mean(P, source, split), _split_mean(P, target, split)
            C = _centred_products(P, source, target, split)
            maps, notes, raw = {}, {}, False
            for method in METHODS:
                say(f"alignment {label} {method} {split}")
                try:
                    if method != "linear":
                        words = "identity map" if method in UNFITTED else "orthogonal map"
                        _require_equal_widths(words, src, tgt)
                    if method == "identity_raw":
                        raw = True
                    elif method == "identity":
                        maps[method] = None
                    elif method == "orthogonal":
                        maps[method] = _procrustes_from_cross(C).to(torch.float32)
                    else:
                        maps[method] = linear_map(source, C, split).to(torch.float32)
                    notes[method] = _describe(method, split, n_fit, len(eval_rows))
                except NotApplicable as exc:
                    notes[method] = str(exc)
            cosines = _score(src, tgt, eval_rows, mean_src, mean_tgt, maps, dev) if maps else {}
            if raw:
                cosines |= _score(src, tgt, eval_rows, None, None, {"identity_raw": None}, dev)
            for method in METHODS:
                applicable = method in cosines
                cos = cosines[method] if applicable else np.zeros(0, np.float32)
                results.append({
                    "comparison": label,
                    "method": method,
                    "split": split,
                    "applicable": applicable,
                    "note": notes[method],
                    "token_idx": eval_rows,
                    "cosine": cos,
                    "mean": float(cos.mean(dtype=np.float64)) if applicable and cos.size else float("nan"),
                    "std": float(cos.std(dtype=np.float64)) if applicable and cos.size else float("nan"),
                })
    return results


def _describe(method: str, split: str, n_fit: int, n_eval: int) -> str:
    if method == "identity_raw":
        return f"no map, raw rows (not centred); scored on {n_eval:,} tokens"
    if method == "identity":
        return f"no map; scored on {n_eval:,} tokens"
    if split == "in_sample":
        return f"fitted and scored on the same {n_eval:,} tokens"
    return f"fitted on {n_fit:,} tokens, scored on {n_eval:,} held-out tokens"
