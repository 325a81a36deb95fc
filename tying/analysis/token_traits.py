"""Per-token traits that may explain where a token sits on the maps: how often it was seen, and
where its tied row T sits between the untied twin's input row I and output row O.

* **log count**: ``log10`` of the number of times the token occurs in a text (a token seen N
  times gets ``log10 N``; a token never seen has none: NaN).
* **position between I and O**: the token's cosine to O minus its cosine to I after the paper's
  linear map fitted on every token (in-sample): each of I and O mapped onto T by least squares,
  then the per-token cosine to T (:func:`tying.analysis.twins.positions` computes it from the
  matrices, with torch; this module stays torch-free for the views). Positive:
  T's row reads as O's; negative: as I's. Its mean over the tokens is the headline's gap
  (O->T minus I->T, linear, in-sample).
* **under-trained**: on a trained toy model, the tokens seen fewer than :data:`MIN_COUNT` times
  in the training text (rarely or never seen); on a model whose training text is unknown, a
  heuristic in the spirit of under-trained token detection (Land and Bartolo 2024, "Fishing for
  Magikarp"): rows whose norm or whose distance to the mean row lies far below the others'
  (robust z-score under :data:`ROBUST_Z`), rows that barely moved from where every row starts.
* **Spearman's rho** of log count against position over the tokens seen at least once.

Every function is pure: arrays in, arrays or numbers out.
"""

from __future__ import annotations

import numpy as np

MIN_COUNT = 5
"""A token of a toy model seen fewer times than this in its training text counts as under-trained."""

ROBUST_Z = -3.5
"""The geometry heuristic flags a row whose robust z-score (median and scaled MAD of the log) of its
norm or of its distance to the mean row is below this."""

POSITION_RHO = "rho position~log count"
"""The per-seed metric of the toy lab: Spearman's rho of log count against T's position between I and O."""

COUNT_RULE = f"seen fewer than {MIN_COUNT} times in the corpus the model trained on"
GEOMETRY_RULE = ("heuristic: row norm or distance to the mean row far below the others' (robust z < "
                 f"{ROBUST_Z:g} on the log), as rows that barely left their start")


def log_count(counts) -> np.ndarray:
    """``log10`` of each count; NaN where the count is 0 (never seen) or missing."""
    c = np.asarray(counts, dtype=np.float64)
    out = np.full(c.shape, np.nan)
    seen = np.isfinite(c) & (c > 0)
    out[seen] = np.log10(c[seen])
    return out


def position(cos_to_output, cos_to_input) -> np.ndarray:
    """T's position between I and O per token: its cosine to O minus its cosine to I (in [-2, 2])."""
    o, i = np.asarray(cos_to_output, dtype=np.float64), np.asarray(cos_to_input, dtype=np.float64)
    if o.shape != i.shape:
        raise ValueError(f"cosines to O and to I differ in shape: {o.shape} vs {i.shape}")
    return o - i


def under_trained_by_count(counts, min_count: int = MIN_COUNT) -> np.ndarray:
    """True where a token was seen fewer than ``min_count`` times (0 included)."""
    c = np.asarray(counts, dtype=np.float64)
    return ~(np.isfinite(c) & (c >= min_count))


def robust_z(x) -> np.ndarray:
    """(x - median) / (1.4826 MAD): a z-score that a few outliers cannot drag; 0 where MAD is 0."""
    x = np.asarray(x, dtype=np.float64)
    med = np.median(x)
    mad = 1.4826 * np.median(np.abs(x - med))
    return np.zeros_like(x) if mad == 0 else (x - med) / mad


def under_trained_by_geometry(M, z: float = ROBUST_Z) -> np.ndarray:
    """True for rows of ``M`` (n_tokens, d) whose norm or distance to the mean row has a robust
    z-score (of its log) below ``z``: the :data:`GEOMETRY_RULE` heuristic."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or len(M) < 3:
        raise ValueError(f"need a matrix of at least 3 rows, got shape {M.shape}")
    tiny = np.finfo(np.float64).tiny
    norm = np.log(np.linalg.norm(M, axis=1) + tiny)
    dist = np.log(np.linalg.norm(M - M.mean(axis=0), axis=1) + tiny)
    return (robust_z(norm) < z) | (robust_z(dist) < z)


def spearman(log_counts, pos) -> tuple[float, int]:
    """Spearman's rho of log count against position over the tokens with both (seen at least
    once), and how many tokens that is; NaN with fewer than 3."""
    from scipy.stats import spearmanr

    a, b = np.asarray(log_counts, dtype=np.float64), np.asarray(pos, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    n = int(ok.sum())
    if n < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan"), n
    return float(spearmanr(a[ok], b[ok]).statistic), n
