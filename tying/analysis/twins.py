"""Headline numbers of a tied model beside its untied twin and a second tied run (the toy lab's
per-seed and per-cell figures).

The twins (a tied model with matrix ``T``; an untied one with input matrix ``I`` and output
matrix ``O``) are trained on the same corpus, by default each from an initial draw and a batch
order of its own, like the paper's independently trained models; ``T2`` (T') is a second tied run
of the same recipe from another start: the ceiling, how alike two runs of T are, that O->T and
I->T are read against. Their rows are the same tokens in the same order, so no restriction to
common tokens is needed.
"""

from __future__ import annotations

import numpy as np

from tying.analysis import token_traits as traits
from tying.analysis.align_protocol import CEILING
from tying.analysis.overlap import overlap_at_k

HELD_OUT_FRACTION = 0.2
"""The share of tokens the linear map is scored on (fitted on the rest)."""

K = 10
"""Neighbours per token for overlap@k (the paper's Table 5)."""

GRAPH_K = 64
"""Neighbours per token of the k-NN graphs of the spectral distance (``precompute pair``'s default)."""

SPECTRAL_COMPONENTS = 128
"""Dimensions of the adjacency spectral embedding (``precompute pair``'s default)."""



def compare_tied_to_twin(T: np.ndarray, I: np.ndarray, O: np.ndarray, seed: int, device=None,
                         T2: np.ndarray | None = None, spectral: bool = False,
                         counts: np.ndarray | None = None) -> dict[str, float]:
    """Headline numbers of one seed: cosine of I, O (and T2) mapped onto T (raw and centred
    identity, linear held-out and in-sample: the paper's protocol), overlap@10, linear CKA and,
    with ``spectral``, the spectral distance of the k-NN graphs.

    ``T``, ``I``, ``O``, ``T2``: arrays of shape (n_tokens, d), rows in the same token order
    (``T2``, the ceiling, optional). ``seed`` picks the held-out split of the linear map. Returns
    {metric name: value}, the names as the per-seed table writes them ("O->T linear held-out",
    "T'->T linear in-sample", "overlap@10 T~O", "overlap@10 T~T'", "CKA T~O", "spectral T~I", ...).
    ``counts``: each token's count in the training text; with it, Spearman's rho of log count
    against T's position between I and O (:data:`~tying.analysis.token_traits.POSITION_RHO`).
    """
    # here, not at the top: the commands that import this module stay torch-free until they compute
    from tying.analysis.align import alignment_cosines
    from tying.analysis.align_protocol import split_tokens
    from tying.analysis.cka import linear_cka
    from tying.analysis.neighbours import knn
    from tying.analysis.spectral import spectral_distance

    mats = {"T": T, "I": I, "O": O, **({CEILING: T2} if T2 is not None else {})}
    fit, ev = split_tokens(len(T), HELD_OUT_FRACTION, seed)
    out, in_sample = {}, {}
    for key in mats:
        if key == "T":
            continue
        src, name = mats[key], f"{key}->T"
        out[f"{name} identity (raw rows)"] = float(np.mean(alignment_cosines(src, T, "identity_raw", device=device)))
        out[f"{name} identity"] = float(np.mean(alignment_cosines(src, T, "identity", device=device)))
        out[f"{name} linear held-out"] = float(np.mean(
            alignment_cosines(src, T, "linear", fit_idx=fit, eval_idx=ev, device=device)))
        in_sample[key] = alignment_cosines(src, T, "linear", device=device)
        out[f"{name} linear in-sample"] = float(np.mean(in_sample[key]))
    if counts is not None:
        out[traits.POSITION_RHO] = traits.spearman(traits.log_count(counts),
                                                   traits.position(in_sample["O"], in_sample["I"]))[0]
    k = min(GRAPH_K, len(T) - 1) if spectral else K
    ids = {key: knn(m, max(k, K), device=device)[0] for key, m in mats.items()}
    pairs = [("T", "I"), ("T", "O"), ("I", "O")] + ([("T", CEILING)] if T2 is not None else [])
    for a, b in pairs:
        out[f"overlap@{K} {a}~{b}"] = float(np.mean(overlap_at_k(ids[a][:, :K], ids[b][:, :K], K)))
    for a, b in pairs:
        if a == "T":
            out[f"CKA {a}~{b}"] = linear_cka(mats[a], mats[b])
            if spectral:
                out[f"spectral {a}~{b}"] = spectral_distance(ids[a][:, :k], ids[b][:, :k],
                                                             n_components=SPECTRAL_COMPONENTS)
    return out


def positions(T, I, O, device=None) -> np.ndarray:
    """T's position between I and O of every token (:func:`tying.analysis.token_traits.position`), from
    the matrices (rows in the same token order): I and O each mapped onto T by the linear map fitted
    on every token, then each token's cosine to O minus its cosine to I."""
    from tying.analysis.align import alignment_cosines  # torch: only when matrices are compared

    return traits.position(alignment_cosines(O, T, "linear", device=device), alignment_cosines(I, T, "linear", device=device))
