"""The Sweep page's tables and series, from a sweep's summary (pure functions): the grid
points, the series each chart draws, the learning-rate bands and probes, where a loss gap
changes sign, the arms still behind the bigram baseline, and the cell table in parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from explorer.render import read
from tying.analysis.sweep import PLOTTED, chosen_rates, crossing, lr_sensitivity
from tying.cache import sentences
from tying.cache.sweep_claims import undertrained_widths

SWEEP_SERIES = {"bias": {"bias_linear_in": "O→T minus I→T (linear, in-sample)",
                         "bias_linear": "O→T minus I→T (linear, held-out)",
                         "bias_overlap": "T~O minus T~I (overlap@10)"},
                "loss": {"loss_gap": "untied minus tied eval loss"},
                "gaps": {"loss_gap": "untied minus tied eval loss",
                         "loss_gap_matched": "untied minus parameter-matched tied"},
                "losses": {"eval_loss_tied": "tied", "eval_loss_untied": "untied",
                           "eval_loss_tied_matched": "tied, parameter-matched"}}
"""The sweep page's series per chart (column -> legend label); a column a cache lacks (one
written before the parameter-matched arm) is left out: :func:`sweep_series`."""


def sweep_bias_series(points: pd.DataFrame) -> dict[str, str]:
    """The bias chart's series: the linear bias the sweep_bias verdict is decided on (in-sample,
    the paper's protocol; held-out for a cache without it) and the overlap bias."""
    have = sweep_series(points, "bias")
    if "bias_linear_in" in have:
        have.pop("bias_linear")
    return have


def sweep_lr_bands(points: pd.DataFrame, probes: pd.DataFrame, series: dict[str, str]) -> pd.DataFrame:
    """The learning-rate sensitivity of each plotted loss gap: per grid point the mean gap plus the
    shift of the probes' gap when one arm's rate moves one step of the grid
    (:func:`tying.analysis.sweep.lr_sensitivity`). Columns vocab_size, d_model, series (the label),
    lo, hi; empty without probes."""
    arms = {"loss_gap": "tied", "loss_gap_matched": "tied_matched"}
    rows = []
    if probes is None or not len(probes):
        return pd.DataFrame(rows, columns=["vocab_size", "d_model", "series", "lo", "hi"])
    for _, p in points.iterrows():
        cell = probes[(probes["d_model"] == p["d_model"]) & (probes["vocab_size"] == p["vocab_size"])]
        for col, label in series.items():
            band = lr_sensitivity(cell, "untied", arms.get(col, "tied"))
            if band is not None and pd.notna(p.get(col)):
                rows.append({"vocab_size": p["vocab_size"], "d_model": p["d_model"], "series": label,
                             "lo": p[col] + band["low"], "hi": p[col] + band["high"]})
    return pd.DataFrame(rows, columns=["vocab_size", "d_model", "series", "lo", "hi"])


def lr_probe_table(probes: pd.DataFrame) -> pd.DataFrame:
    """The stored learning-rate probes as a table: a row per width and arm, a column per rate
    (validation loss, nats), the chosen (lowest) one marked with an asterisk."""
    if probes is None or not len(probes):
        return pd.DataFrame()
    rows = []
    for (v, d, arm), g in probes.groupby(["vocab_size", "d_model", "arm"], sort=True):
        chosen = chosen_rates(g)[arm]
        row = {"vocabulary": int(v), "d_model": int(d), "arm": SWEEP_ARM_NAMES.get(arm, arm),
               "probe steps": int(g["steps"].max())}
        for lr, loss in g.groupby("lr")["loss"].mean().items():
            row[f"lr {lr:g}"] = f"{loss:.3f}" + (" *" if lr == chosen else "")
        rows.append(row)
    return pd.DataFrame(rows)


SWEEP_ARM_NAMES = {"tied": "tied", "untied": "untied", "tied_matched": "parameter-matched tied"}

SWEEP_ARMS = {"eval_loss_tied": "tied", "eval_loss_untied": "untied", "eval_loss_tied_matched": "parameter-matched tied"}


def sweep_series(points: pd.DataFrame, chart: str) -> dict[str, str]:
    """The series of ``SWEEP_SERIES[chart]`` whose columns the points have."""
    return {c: label for c, label in SWEEP_SERIES[chart].items() if c in points and points[c].notna().any()}


def sweep_points(cells: list[dict[str, Any]]) -> pd.DataFrame:
    """A sweep summary's grid points; a half-width the summary leaves null (one seed) is inf:
    no whisker, and no interval that excludes zero."""

    d = pd.DataFrame(cells)
    for col in PLOTTED:
        if f"{col}_half" in d:
            d[f"{col}_half"] = d[f"{col}_half"].astype(float).fillna(float("inf"))
    return d


def sweep_crossings(points: pd.DataFrame, x: str, gap: str = "loss_gap",
                    against: str = "tied") -> tuple[pd.DataFrame, list[str]]:
    """Where a loss gap (``gap``: untied minus ``against``) changes sign, per vocabulary size: the
    named crossings (vocab_size, x, label) and one sentence per vocabulary that claims only what
    the 95% intervals allow."""

    rows, lines = [], []
    if gap not in points:
        return pd.DataFrame(rows, columns=["vocab_size", "x", "label"]), lines
    arms = [c for c in ("eval_loss_untied", "eval_loss_tied_matched" if gap == "loss_gap_matched" else "eval_loss_tied")
            if c in points]
    for v, g in points.groupby("vocab_size", sort=True):
        g = g.sort_values(x)
        where = "width" if x == "d_model" else "embedding share"
        head = f"Vocabulary {int(v):,}" + ("" if against == "tied" else f", untied against {against}")
        if "bigram_loss" in g and g["bigram_loss"].notna().all():
            below = set(undertrained_widths(g.to_dict("records"), arms))
            slow = pd.Series([(int(v), int(d)) in below for d in g["d_model"]], index=g.index)
            if slow.any():
                shown = ", ".join(f"d={int(d)}" for d in g.loc[slow, "d_model"])
                lines.append(f"{head}: {shown} undertrained (an arm of the gap still above the smoothed bigram): no "
                             "crossing is named from them.")
                g = g[~slow]
            if len(g) < 2:
                continue
        c = crossing(g[x], g[gap], g[f"{gap}_half"], log_x=(x == "d_model"))
        if c["x"] is not None:
            lo, hi = c["between"]
            shown = f"{c['x']:.0f}" if x == "d_model" else f"{c['x']:.1%}"
            span = (f"{lo:.0f} and {hi:.0f}" if x == "d_model" else f"{lo:.1%} and {hi:.1%}")
            rows.append({"vocab_size": int(v), "x": c["x"], "label": f"≈ {shown}"})
            falls = float(g.loc[g[x] == lo, gap].iloc[0]) > 0  # positive (tied ahead) below the crossing
            if x == "d_model":
                what = f"untying starts to pay off at a {where}" if falls else f"untying stops paying off at a {where}"
            else:
                what = f"untying pays off {'above' if falls else 'below'} an {where}"
            lines.append(f"{head}: {what} of about {shown} (between {span}; {c['why']}).")
        else:
            lines.append(f"{head}: no crossing named — {c['why']}.")
    return pd.DataFrame(rows, columns=["vocab_size", "x", "label"]), lines


def sweep_behind_bigram(points: pd.DataFrame) -> list[str]:
    """The arms whose mean eval loss is above the smoothed bigram's on the same windows, one
    "d=32 (tied, untied)" per width: not yet past bigram statistics. Empty without baselines."""
    if "bigram_loss" not in points or points["bigram_loss"].isna().all():
        return []
    out = []
    for _, r in points.sort_values(["vocab_size", "d_model"]).iterrows():
        behind = [name for col, name in SWEEP_ARMS.items() if col in r and pd.notna(r[col])
                  and r[col] > r["bigram_loss"]]
        if behind:
            out.append(f"V={int(r['vocab_size']):,} d={int(r['d_model'])} ({', '.join(behind)})")
    return out


SWEEP_TABLE_PARTS = {
    "bias": ["vocabulary", "d_model", "seeds", "embedding share (tied)", "O→T linear in-sample",
             "I→T linear in-sample", "T~O overlap", "T~I overlap", "I cosine to start", "output share early (proxy)"],
    "loss": ["vocabulary", "d_model", "seeds", "eval loss tied", "eval loss untied", "eval loss matched",
             "bigram", "loss gap", "gap vs matched"],
    "budget": ["vocabulary", "d_model", "parameters (tied)", "parameters (untied)", "parameters (matched)",
               "d_ff (twins / matched)", "MFLOPs per token (twins / matched)", "lr tied", "lr untied", "lr matched"],
    "second": ["vocabulary", "d_model", "O→T linear", "I→T linear", "T·O raw-row cosine", "output share early (exact)",
               "tokens seen", "epochs"],
}
"""The sweep's cell table in parts, each narrow enough for a laptop's width: the bias side
(the in-sample map the verdict reads, overlap, how far I moved), the loss side, the budget
(every arm's parameter count, feed-forward width, FLOPs per token and learning rate) and the second figures
(the held-out map, T's raw-row cosine with O, the exact-norm share, the tokens each arm read), each with the cell's
vocabulary and width. Text cells read mean ± sample std
over seeds (the spread of the seeds, not the 95% interval of the mean)."""


def sweep_table(cells: list[dict[str, Any]], part: str | None = None) -> pd.DataFrame:
    """One row per grid point: mean ± sample std over seeds, as text ("—" where a cache lacks the
    column); ``part``: the columns of ``SWEEP_TABLE_PARTS[part]`` only (None: every column)."""
    def pm(c, col):
        return sentences.plus_minus(c.get(col), c.get(f"{col}_std"), c["n"], missing="—")

    def num(c, col, fmt):
        v = c.get(col)
        return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, fmt)

    def mflops(c, col):  # training FLOPs per token, in millions
        return num({col: None if c.get(col) is None else c[col] / 1e6}, col, ".2f")

    out = pd.DataFrame([{"vocabulary": c["vocab_size"], "d_model": c["d_model"], "seeds": c["n"],
                         "parameters (tied)": num(c, "params_tied", ",.0f"),
                         "parameters (untied)": num(c, "params_untied", ",.0f"),
                         "parameters (matched)": num(c, "params_tied_matched", ",.0f"),
                         "embedding share (tied)": f"{c['embedding_share_tied']:.1%}",
                         "O→T linear": pm(c, "linear_o_t"), "I→T linear": pm(c, "linear_i_t"),
                         "O→T linear in-sample": pm(c, "linear_o_t_in"), "I→T linear in-sample": pm(c, "linear_i_t_in"),
                         "I cosine to start": pm(c, "cos_start_input_untied"),
                         "d_ff (twins / matched)": f"{num(c, 'd_ff', '.0f')} / {num(c, 'd_ff_matched', '.0f')}",
                         "MFLOPs per token (twins / matched)": f"{mflops(c, 'flops_tied')} / "
                                                               f"{mflops(c, 'flops_tied_matched')}",
                         "T·O raw-row cosine": pm(c, "identity_raw_o_t"),
                         "T~O overlap": pm(c, "overlap_t_o"), "T~I overlap": pm(c, "overlap_t_i"),
                         "output share early (proxy)": pm(c, "output_share_early_proxy"),  # the paper's
                         "output share early (exact)": pm(c, "output_share_early"),
                         "eval loss tied": pm(c, "eval_loss_tied"), "eval loss untied": pm(c, "eval_loss_untied"),
                         "eval loss matched": pm(c, "eval_loss_tied_matched"), "bigram": num(c, "bigram_loss", ".3f"),
                         "loss gap": pm(c, "loss_gap"), "gap vs matched": pm(c, "loss_gap_matched"),
                         "tokens seen": num(c, "tokens_seen", ",.0f"), "epochs": num(c, "epochs", ".2f"),
                         "lr tied": num(c, "lr_tied", "g"), "lr untied": num(c, "lr_untied", "g"),
                         "lr matched": num(c, "lr_tied_matched", "g")} for c in cells])
    return out if part is None else out[SWEEP_TABLE_PARTS[part]]


def input_moved(points: pd.DataFrame) -> str | None:
    """"d=64 0.98, d=128 0.95, ...": the untied input matrix's mean per-token cosine to its
    start per grid point (None for a cache without it)."""
    if "cos_start_input_untied" not in points or not points["cos_start_input_untied"].notna().any():
        return None
    return ", ".join(f"d={int(r.d_model)} {r.cos_start_input_untied:.2f}" for r in points.itertuples())


def sweep_baselines(points: pd.DataFrame) -> pd.DataFrame:
    """The reference lines of the losses chart: per vocabulary, the unigram (add-one) and the
    smoothed bigram eval loss (mean over the cells of that vocabulary), with a label; columns
    vocab_size, baseline, loss, label (empty for a cache without them)."""
    if "bigram_loss" not in points or not points["bigram_loss"].notna().any():
        return pd.DataFrame(columns=["vocab_size", "baseline", "loss", "label"])
    refs = points.groupby("vocab_size", as_index=False)[["unigram_loss", "bigram_loss"]].mean().melt(
        "vocab_size", var_name="baseline", value_name="loss")
    refs["label"] = refs["baseline"].str.replace("_loss", "") + " " + refs["loss"].map("{:.2f}".format)
    return refs


# -- what the Sweep page shows of one cache, computed once per cache ---------------------------


@dataclass(frozen=True)
class SweepView:
    """The Sweep page's frames for one sweep cache (read-only, shared by every session)."""

    points: pd.DataFrame
    probes: pd.DataFrame | None
    gap_series: dict[str, str]
    bands: pd.DataFrame
    tables: dict[str, pd.DataFrame]  # the cell table's parts: bias, loss, budget, second
    probe_table: pd.DataFrame | None
    behind: list[str]
    baselines: pd.DataFrame  # the unigram and bigram reference losses per vocabulary
    input_moved: str | None  # how far the untied input matrix moved from its start, per width


@read.memo(8)
def sweep_view(ref: read.CacheRef) -> SweepView:
    """:class:`SweepView` of ``ref``: every page run of every session reads the same one (the
    learning-rate bands alone took a tenth of a loaded server's time when each run recomputed them)."""
    cells = read.summary(ref).sweep_cells
    points = sweep_points(cells)
    probes = read.table(ref, "lr_probe") if read.has_rows(ref, "lr_probe") else None
    gaps = sweep_series(points, "gaps")
    return SweepView(points, probes, gaps, sweep_lr_bands(points, probes, gaps),
                     {part: sweep_table(cells, part) for part in ("bias", "loss", "budget", "second")},
                     lr_probe_table(probes) if probes is not None else None,
                     sweep_behind_bigram(points) if "bigram_loss" in points else [],
                     sweep_baselines(points), input_moved(points))


@read.memo(16)
def sweep_crossings_of(ref: read.CacheRef, x: str) -> tuple[pd.DataFrame, list[str]]:
    """:func:`sweep_crossings` of the cache's points against ``x``, with the parameter-matched
    arm's sentences after the plain gap's when the cache has that arm."""
    points = sweep_view(ref).points
    crossings, sentences_ = sweep_crossings(points, x)
    if "loss_gap_matched" in points and points["loss_gap_matched"].notna().any():
        sentences_ = sentences_ + sweep_crossings(points, x, "loss_gap_matched", "the parameter-matched tied model")[1]
    return crossings, sentences_
