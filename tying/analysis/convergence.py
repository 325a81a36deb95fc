"""Has a tuned-lens training curve settled? A pure function on the curve (no torch, no model).

Used by the Lens page (the app never imports torch) on the curves :func:`tying.lens.train.train_tuned_lens` returns.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def convergence(curve: pd.DataFrame, tail: float = 0.1) -> pd.DataFrame:
    """How far a tuned-lens training curve has settled, per hidden state (pure; no model).

    curve: columns step, layer, kl_bits (as :func:`train_tuned_lens` returns it), and
        optionally model (then one row per model and layer). Several rows of one step are
        averaged.
    tail: share of the steps compared at each end, 0 < tail <= 1; at least 2 steps.

    Returns a DataFrame with columns [model,] layer, steps (distinct steps), kl_first and
    kl_last (mean KL in bits over the first and over the last ``tail`` share of the steps),
    change: the relative change of the KL over the last ``tail`` share, i.e. the rise of
    the least-squares line through that window's (step, kl_bits) points from its first step
    to its last, divided by kl_last. So -0.02 reads "KL fell by 2% over the last 10% of the
    steps"; a window that is flat gives 0 (also when its KL is 0). change is NaN for a curve
    of fewer than 2 steps, or when kl_last is 0 but the window is not flat.
    change_se: the standard error of change, from the scatter of the window's points about
    that line (each step is a different batch of text, so a settled curve still jitters;
    a change well within two standard errors is no trend). NaN for a window of 2 points.
    """
    try:
        share = float(tail)
    except (TypeError, ValueError):
        raise ValueError(f"tail must be a number between 0 and 1, got {tail!r}") from None
    if not 0.0 < share <= 1.0:
        raise ValueError(f"tail must be a number between 0 and 1, got {tail!r}")
    missing = [c for c in ("step", "layer", "kl_bits") if c not in curve.columns]
    if missing:
        raise ValueError(f"a training curve needs the columns step, layer and kl_bits; missing {', '.join(missing)}")
    keys = ["model", "layer"] if "model" in curve.columns else ["layer"]
    per_step = curve.groupby(keys + ["step"], as_index=False, sort=True)["kl_bits"].mean()
    rows = []
    for key, g in per_step.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        x = g["step"].to_numpy(dtype=np.float64)
        y = g["kl_bits"].to_numpy(dtype=np.float64)
        n = len(x)
        n_tail = min(n, max(2, math.ceil(share * n - 1e-9)))
        first, last = y[:n_tail], y[n - n_tail :]
        change = change_se = math.nan
        if n >= 2:
            xs = x[n - n_tail :]
            dx = xs - xs.mean()
            sxx = float((dx * dx).sum())
            dy = last - last[0]
            slope = float((dx * dy).sum() / sxx)  # exactly 0 when flat
            span = float(xs[-1] - xs[0])
            mean_last = float(last.mean())
            residual = dy - dy.mean() - slope * dx
            slope_se = math.sqrt(float((residual * residual).sum()) / (n_tail - 2) / sxx) if n_tail > 2 else math.nan
            if mean_last != 0.0:
                change, change_se = slope * span / mean_last, slope_se * span / abs(mean_last)
            elif slope == 0.0:  # a KL of 0 throughout the window
                change, change_se = 0.0, (0.0 if n_tail > 2 else math.nan)
        rows.append((*key, n, float(first.mean()), float(last.mean()), change, change_se))
    return pd.DataFrame(rows, columns=keys + ["steps", "kl_first", "kl_last", "change", "change_se"])
