"""The alignment's protocol, torch-free: what Table 1 compares, how, and on which tokens.

Notation follows the paper: ``I`` is the untied input matrix, ``O`` the untied output
matrix, ``T`` the tied matrix; rows are tokens (the same tokens, in the same order, in
every matrix). A map from a source matrix to a target matrix is fitted on centred rows:

* ``identity_raw`` -- no map and no centring: the cosine of the raw rows (needs equal
  widths); the paper's identity column;
* ``identity``   -- no map, centred rows (needs equal widths);
* ``orthogonal`` -- the Procrustes rotation (needs equal widths);
* ``linear``     -- the least-squares map (any widths).

Each is scored ``in_sample`` (fitted and scored on every token, the paper) or ``held_out``
(fitted on a seeded split of the tokens, :func:`split_tokens`, scored on the rest). The
maps themselves are computed in torch (:mod:`tying.analysis.align`, and the whole table in
one pass, :mod:`tying.analysis.align_table`); this module loads no torch.
"""

from __future__ import annotations

import numpy as np

from tying.errors import NotApplicable

METHODS = ("identity_raw", "identity", "orthogonal", "linear")
"""Maps from source to target, weakest first (``identity_raw``: raw rows, no centring)."""

UNFITTED = ("identity_raw", "identity")
"""Methods with no fitted map."""

CEILING = "T'"
"""A second tied run of T's recipe from another start (the toy lab's T'): the ceiling, how alike two
runs of T are. Its name in the tables ("T'->T", "T~T'") and the per-seed metrics."""

COMPARISONS = (("I", "O"), ("O", "T"), ("I", "T"), (CEILING, "T"))
"""(source, target) pairs of matrix names, as in Table 1, and the ceiling T'->T (a second tied run,
where there is one)."""

SPLITS = ("in_sample", "held_out")
"""``in_sample``: fit and score on every token (the paper). ``held_out``: fit on one split,
score on the other."""


def comparison_label(source: str, target: str) -> str:
    """The display label of a comparison, e.g. ``"I->O"``."""
    return f"{source}->{target}"


def check_matrix(X, name: str = "matrix"):
    """``X`` itself when it is 2-dimensional (tokens x width); ValueError otherwise."""
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional (tokens x width), got shape {tuple(X.shape)}")
    return X


def check_pair(src, tgt):
    """ValueError unless ``src`` and ``tgt`` are matrices over the same tokens (rows)."""
    check_matrix(src, "source matrix")
    check_matrix(tgt, "target matrix")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(f"source and target must have the same tokens (rows): "
                        f"{src.shape[0]} vs {tgt.shape[0]}")


def require_equal_widths(method_words: str, src, tgt):
    """NotApplicable (naming ``method_words``) unless ``src`` and ``tgt`` have one width."""
    if src.shape[1] != tgt.shape[1]:
        raise NotApplicable(f"{method_words} needs equal widths "
                            f"(d_src={src.shape[1]}, d_tgt={tgt.shape[1]})")


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


def result_note(method: str, split: str, n_fit: int, n_eval: int) -> str:
    """The ``note`` of an applicable result row: what was fitted on, and what scored."""
    if method == "identity_raw":
        return f"no map, raw rows (not centred); scored on {n_eval:,} tokens"
    if method == "identity":
        return f"no map; scored on {n_eval:,} tokens"
    if split == "in_sample":
        return f"fitted and scored on the same {n_eval:,} tokens"
    return f"fitted on {n_fit:,} tokens, scored on {n_eval:,} held-out tokens"
