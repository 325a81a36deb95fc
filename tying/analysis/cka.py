"""Linear centred kernel alignment (CKA) between T, I and O: a similarity of two whole
matrices over the same tokens that ignores rotations and overall scale.

Linear CKA (Kornblith et al., ICML 2019) compares the token-by-token Gram matrices
``K = X Xᵀ`` and ``L = Y Yᵀ`` of two matrices with the same rows:
``CKA = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))``. The plain estimator is biased upwards
when the width is not small against the number of tokens (two independent random matrices
score well above 0); the debiased one uses the unbiased HSIC estimator (Song et al., 2012),
as Nguyen, Raghu and Kornblith (ICLR 2021) recommend, and sits near 0 for independent
matrices. Both are computed here in feature space, with no n x n Gram matrix: the cost is
that of ``Xᵀ Y`` (a vocabulary of 50,000 tokens takes seconds).

``debiased_linear_cka(X, X @ Q * s)`` is 1 for any orthogonal Q and scale s != 0.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd


def _stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-centred float64 rows, their squared norms (the Gram diagonal) and column sums."""
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(axis=0, keepdims=True)
    return X, np.einsum("ij,ij->i", X, X), X.sum(axis=0)


def _hsic_terms(X, dx, sx, Y, dy, sy) -> tuple[float, float]:
    """The unbiased (Song et al.) and the plain HSIC of the linear kernels of X and Y, up to
    the same positive factor per estimator (it cancels in CKA)."""
    n = X.shape[0]
    cross = float(np.sum((X.T @ Y) ** 2))  # sum_ij K_ij L_ij = ||Xᵀ Y||_F^2
    trace = cross - float(dx @ dy)  # tr(K~ L~), K~ = K with a zero diagonal
    k1 = X @ sx - dx  # K~ 1
    l1 = Y @ sy - dy  # L~ 1
    sum_k, sum_l = float(k1.sum()), float(l1.sum())  # 1ᵀ K~ 1, 1ᵀ L~ 1
    unbiased = trace + sum_k * sum_l / ((n - 1) * (n - 2)) - 2.0 * float(k1 @ l1) / (n - 2)
    return unbiased, cross  # the columns are centred: the plain HSIC is ||Xᵀ Y||_F^2 / (n-1)^2


def linear_cka(X: np.ndarray, Y: np.ndarray, *, debiased: bool = True) -> float:
    """Linear CKA of two matrices with the same rows (tokens), any widths; in [0, 1] for the
    plain estimator, near 0 for unrelated matrices when ``debiased`` (it may dip below 0)."""
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"CKA needs the same rows in both matrices, got {X.shape[0]} and {Y.shape[0]}")
    if X.shape[0] < 4:
        raise ValueError("CKA needs at least 4 rows")
    a, b = _stats(X), _stats(Y)
    xy, xx, yy = _hsic_terms(*a, *b), _hsic_terms(*a, *a), _hsic_terms(*b, *b)
    i = 0 if debiased else 1
    denom = np.sqrt(xx[i] * yy[i]) if xx[i] > 0 and yy[i] > 0 else 0.0
    return float(xy[i] / denom) if denom > 0 else float("nan")


def cka_frame(matrices: dict[str, np.ndarray]) -> pd.DataFrame:
    """The cka table: debiased and plain linear CKA for each pair of the matrices, in their
    order (T, I, O give the pairs T~I, T~O, I~O, as the other pair tables)."""
    rows = []
    for a, b in combinations(matrices, 2):
        X, Y = matrices[a], matrices[b]
        rows.append({"pair": f"{a}~{b}", "n_tokens": int(X.shape[0]),
                     "cka": linear_cka(X, Y), "cka_biased": linear_cka(X, Y, debiased=False)})
    return pd.DataFrame(rows)


def cka_tables(run, progress) -> tuple[dict[str, pd.DataFrame], None]:
    """The cka stage of ``precompute pair``: every common token of the run's three matrices, and
    T~T' where the run has a ceiling (a second tied run)."""
    from tying.analysis.align_protocol import CEILING

    progress("linear CKA of T, I and O")
    frame = cka_frame({k: m for k, m in run.matrices.items() if k != CEILING})
    extra = [cka_frame({"T": run.matrices["T"], CEILING: run.matrices[CEILING]})] if CEILING in run.matrices else []
    return {"cka": pd.concat([frame, *extra], ignore_index=True)}, None


def cka_summary(con, summary: dict | None = None) -> dict[str, dict[str, float]] | None:
    """The summary's ``cka``: ``{"T~O": {"cka": ..., "cka_biased": ...}, ...}`` (None when empty)."""
    rows = con.execute("SELECT pair, cka, cka_biased FROM cka ORDER BY pair").fetchall()
    return {pair: {"cka": cka, "cka_biased": biased} for pair, cka, biased in rows} or None
