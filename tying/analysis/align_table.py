"""Table 1 for one model pair: every comparison x method x split, in one pass over the rows.

The maps are those of :func:`tying.analysis.align.alignment_cosines` (same centring, same
ridge), computed from products that one pass accumulates for both splits
(:func:`_split_products`) instead of one pass per fit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from tying.analysis.align import (
    BLOCK_ROWS,
    column_mean,
    procrustes_from_cross,
    ridged,
    row_blocks,
    score_maps,
    take_rows,
)
from tying.analysis.align_protocol import (
    COMPARISONS,
    METHODS,
    SPLITS,
    UNFITTED,
    check_matrix,
    comparison_label,
    require_equal_widths,
    result_note,
    split_tokens,
)
from tying.device import as_device
from tying.errors import NotApplicable


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
    c = {m: column_mean(matrices[m], None, device) for m in names}
    f64 = {"dtype": torch.float64, "device": device}
    sums = {m: [torch.zeros(matrices[m].shape[1], **f64) for _ in range(2)] for m in names}
    prod = {(a, b): [torch.zeros(matrices[a].shape[1], matrices[b].shape[1], **f64) for _ in range(2)]
            for a, b in pairs}
    for sel in row_blocks(None, n, BLOCK_ROWS):
        rows = {m: take_rows(matrices[m], sel, device) - c[m] for m in names}
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
    scores every map. The maps are those of :func:`~tying.analysis.align.alignment_cosines` (same centring, same
    ridge), computed from the same sums in another order.

    Returns one dict per comparison, method and split with keys ``comparison`` ("I->O"),
    ``method``, ``split``, ``applicable`` (bool), ``note`` (str), ``token_idx`` (int64
    array of the scored rows), ``cosine`` (float32 array of shape (len(token_idx),), empty
    when not applicable), ``mean`` and ``std`` (float, NaN when not applicable).
    """
    for name, X in matrices.items():
        check_matrix(X, f"matrix {name}")
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
            system = ridged(_centred_products(P, src_name, src_name, split), 1e-6)
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
                        require_equal_widths(words, src, tgt)
                    if method == "identity_raw":
                        raw = True
                    elif method == "identity":
                        maps[method] = None
                    elif method == "orthogonal":
                        maps[method] = procrustes_from_cross(C).to(torch.float32)
                    else:
                        maps[method] = linear_map(source, C, split).to(torch.float32)
                    notes[method] = result_note(method, split, n_fit, len(eval_rows))
                except NotApplicable as exc:
                    notes[method] = str(exc)
            cosines = score_maps(src, tgt, eval_rows, mean_src, mean_tgt, maps, dev) if maps else {}
            if raw:
                cosines |= score_maps(src, tgt, eval_rows, None, None, {"identity_raw": None}, dev)
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
