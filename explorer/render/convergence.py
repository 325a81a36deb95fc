"""Whether a tuned lens converged, in one markdown line per model (pure: a table in, text out).

Below the data layer: ``explorer.data`` caches these lines per cache, ``explorer.render (the *_tables modules)``
re-exports them beside the other page tables.
"""

from __future__ import annotations

import pandas as pd

from tying.analysis.convergence import convergence
from tying.lens import LensBudget

LENS_CONVERGED = 0.05
"""Converged: no hidden state's KL moved by 5% or more (beyond twice its noise) over the last steps."""
LENS_TAIL = 0.1
"""The share of the last training steps the convergence check looks at."""


def lens_convergence(curve: pd.DataFrame, budget: dict | None) -> list[str]:
    """One markdown line per model: did its tuned lens converge, and with what budget.

    ``curve``: model, step, layer, kl_bits (the lens_curve table). ``budget``: the lens
    stage's recorded budget or None: per model as trained, ``{model: {steps, tokens_per_step,
    accumulate, batch_size, seq_len, device, ...}}``, or one for both in caches written before
    issue 18 (see :meth:`tying.lens.LensBudget.recorded`).
    """

    last_layer = curve.groupby("model")["layer"].transform("max")
    trained = curve[curve["layer"] < last_layer]  # the last translator stays the identity (KL ~ 0)
    conv = convergence(trained, tail=LENS_TAIL)
    lines = []
    for model, g in conv.groupby("model", sort=True):
        spent = _spent(LensBudget.recorded(budget, model))
        g = g.dropna(subset=["change"])
        n_steps = int(curve.loc[curve["model"] == model, "step"].nunique())
        if g.empty:
            lines.append(f"**{model}**: too few steps ({n_steps}) to judge convergence.{spent}")
            continue
        # a trend: a change of 5% or more that the step-to-step jitter (other text each step) does not explain
        trend = (g["change"].abs() >= LENS_CONVERGED) & ~(g["change"].abs() < 2 * g["change_se"])

        def change(row) -> str:
            se = f" ± {row['change_se']:.1%}" if pd.notna(row["change_se"]) else ""
            return f"{row['change']:+.1%}{se} (hidden state {int(row['layer'])})"

        if not trend.any():
            worst = g.loc[g["change"].abs().idxmax()]
            lines.append(f"**{model}**: converged — over the last {LENS_TAIL:.0%} of its {n_steps:,} steps no hidden "
                         f"state's tuned-lens KL moved by {LENS_CONVERGED:.0%} or more beyond twice its step-to-step "
                         f"noise; largest change {change(worst)}.{spent}")
        else:
            moving = g[trend]
            worst = moving.loc[moving["change"].abs().idxmax()]
            lines.append(f"**{model}**: **not converged** — over the last {LENS_TAIL:.0%} of its {n_steps:,} steps "
                         f"the tuned-lens KL still moved by {change(worst)}.{spent}")
    return lines


def _spent(budget: LensBudget | None) -> str:
    """The sentence " Budget: ..." for one model's recorded lens budget ("" when none)."""
    if budget is None:
        return ""
    n_micro = budget.accumulate
    return (f" Budget: {budget.steps:,} steps × {budget.tokens_per_step:,} tokens "
            f"({n_micro} micro-batch{'es' if n_micro > 1 else ''} of {budget.batch_size} × "
            f"{budget.seq_len}) = {budget.tokens_seen:,} tokens on {budget.device or 'cpu'}.")
