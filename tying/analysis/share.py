"""The output side's share of the gradient reaching a tied embedding matrix (the paper's Figure 4).

The paper's quantity is the **mean over logged steps of the per-step ratio**
output / (input + output) of the two gradient norms, over the logged steps whose step
number is at most N ("early"; N = 1,000 for the authors' 10,010-step OLMo-1B run) and over
every logged step ("overall"). Windows are by step number, never by row count: a log may
be sparse (every 10th step) and need not start at step 1. The ratio of the summed norms,
sum(output) / (sum(input) + sum(output)), is a different number (0.7384 instead of 0.7033
on the authors' log); it is reported beside the paper's quantity, labelled as such.

Pure functions on arrays; the cache stores the per-step norms and each run's N.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_EARLY_STEPS = 1000
"""N of an imported log: the paper's "early" is steps 1-1,000."""

TOYLAB_EARLY_FRACTION = 0.1
"""A toy-lab run's "early" is the first 10% of its steps by step number (like 1,000 of 10,000)."""


def early_steps_for(total_steps: int, fraction: float = TOYLAB_EARLY_FRACTION) -> int:
    """N for a run of ``total_steps`` optimiser steps: round(fraction * total), at least 1."""
    if total_steps < 1:
        raise ValueError(f"a run needs at least 1 step, got {total_steps}")
    return max(1, int(round(fraction * total_steps)))


def _mean_ratio(inp: np.ndarray, out: np.ndarray) -> float | None:
    both = inp + out
    ok = both > 0  # a step with both norms zero has no share
    return float(np.mean(out[ok] / both[ok])) if ok.any() else None


def _ratio_of_sums(inp: np.ndarray, out: np.ndarray) -> float | None:
    total = float(inp.sum() + out.sum())
    return float(out.sum()) / total if total > 0 else None


def output_share(steps, input_norms, output_norms, *, early_steps: int = DEFAULT_EARLY_STEPS) -> dict:
    """Output share of the gradient norm, early and overall: the mean of per-step ratios.

    The paper's figure is this mean with the authors' input-side proxy as ``input_norms``; with
    the exact input norm it is another (labelled) figure.

    Args:
        steps: step number of each logged row (any order, may be sparse).
        input_norms, output_norms: the two gradient norms of each row (>= 0).
        early_steps: N; "early" is every logged step with step number <= N.

    Returns:
        ``early`` and ``overall``: mean over logged steps of output / (input + output)
        (None when no logged step falls in the window or every one has both norms 0);
        ``ratio_of_sums``: ``{"early", "overall"}`` with sum(output) / sum(input + output),
        a different quantity kept for comparison; ``early_steps`` (N), ``logged_steps`` and
        ``early_logged_steps`` (rows in each window), ``first_step`` and ``last_step``.
    """
    s = np.asarray(steps, dtype=np.int64).ravel()
    i = np.asarray(input_norms, dtype=np.float64).ravel()
    o = np.asarray(output_norms, dtype=np.float64).ravel()
    if not (len(s) == len(i) == len(o)):
        raise ValueError(f"steps, input and output norms differ in length: {len(s)}, {len(i)}, {len(o)}")
    if early_steps < 1:
        raise ValueError(f"early_steps must be a positive step number, got {early_steps}")
    keep = np.isfinite(i) & np.isfinite(o)
    s, i, o = s[keep], i[keep], o[keep]
    if (i < 0).any() or (o < 0).any():
        raise ValueError("gradient norms cannot be negative")
    early = s <= early_steps
    return {
        "early": _mean_ratio(i[early], o[early]),
        "overall": _mean_ratio(i, o),
        "ratio_of_sums": {"early": _ratio_of_sums(i[early], o[early]), "overall": _ratio_of_sums(i, o)},
        "early_steps": int(early_steps),
        "logged_steps": int(len(s)),
        "early_logged_steps": int(early.sum()),
        "first_step": int(s.min()) if len(s) else None,
        "last_step": int(s.max()) if len(s) else None,
    }


def step_share(input_norms, output_norms) -> np.ndarray:
    """Per-step output / (input + output); NaN where both norms are 0."""
    i = np.asarray(input_norms, dtype=np.float64)
    o = np.asarray(output_norms, dtype=np.float64)
    both = i + o
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(both > 0, o / np.where(both > 0, both, 1.0), math.nan)


def with_output_share(log):
    """A gradient-provenance log (``grad_input_norm``, ``grad_output_norm`` per step, as
    :func:`tying.loading.gradlog.read_provenance_csv` reads one) with its ``output_share`` column."""
    return log.assign(output_share=step_share(log["grad_input_norm"], log["grad_output_norm"]))

