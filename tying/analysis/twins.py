"""Headline numbers of a tied model beside its untied twin (the toy lab's per-seed and per-cell figures).

Twins are trained from the same initial weights on the same batches, one with a tied
matrix ``T``, the other with an input matrix ``I`` and an output matrix ``O``; their rows
are the same tokens in the same order, so no restriction to common tokens is needed.
"""

from __future__ import annotations

import numpy as np

from tying.analysis.overlap import overlap_at_k

HELD_OUT_FRACTION = 0.2
"""The share of tokens the linear map is scored on (fitted on the rest)."""

K = 10
"""Neighbours per token for overlap@k (the paper's Table 5)."""


def compare_tied_to_twin(T: np.ndarray, I: np.ndarray, O: np.ndarray, seed: int, device=None) -> dict[str, float]:
    """Headline numbers of one seed: cosine of T to I and O (raw and centred identity, linear held-out and
    in-sample: the paper's protocol), overlap@10.

    ``T``, ``I``, ``O``: arrays of shape (n_tokens, d), rows in the same token order. ``seed``
    picks the held-out split of the linear map. Returns {metric name: mean over tokens}, the
    names as the per-seed table writes them ("O->T linear held-out", "overlap@10 T~O", ...).
    """
    # here, not at the top: the commands that import this module stay torch-free until they compute
    from tying.analysis.align import alignment_cosines
    from tying.analysis.align_protocol import split_tokens
    from tying.analysis.neighbours import knn

    fit, ev = split_tokens(len(T), HELD_OUT_FRACTION, seed)
    out = {}
    for src, name in ((I, "I->T"), (O, "O->T")):
        out[f"{name} identity (raw rows)"] = float(np.mean(alignment_cosines(src, T, "identity_raw", device=device)))
        out[f"{name} identity"] = float(np.mean(alignment_cosines(src, T, "identity", device=device)))
        out[f"{name} linear held-out"] = float(np.mean(
            alignment_cosines(src, T, "linear", fit_idx=fit, eval_idx=ev, device=device)))
        out[f"{name} linear in-sample"] = float(np.mean(alignment_cosines(src, T, "linear", device=device)))
    ids = {k: knn(m, K, device=device)[0] for k, m in (("T", T), ("I", I), ("O", O))}
    for a, b in (("T", "I"), ("T", "O"), ("I", "O")):
        out[f"overlap@{K} {a}~{b}"] = float(np.mean(overlap_at_k(ids[a], ids[b], K)))
    return out
