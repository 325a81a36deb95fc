"""The Alignment and Neighbours pages' charts: per-token cosine (Figure 1), norm against
frequency (Figure 5) and nearest-neighbour overlap (Table 5).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from explorer.render.style import COLOURS, NEUTRAL, SAMPLE_POINTS, colour_scale, legend
from tying.cache.reference import OVERLAP_K
from tying.cache.schema import DISPLAY_COMPARISONS, MATRIX_NAMES, display_comparison

MEAN_LABEL = "its mean"


def cosine_histogram(df: pd.DataFrame, *, comparisons=DISPLAY_COMPARISONS[:2], title: str = "") -> alt.Chart:
    """Histogram of per-token cosine by comparison (the paper's Figure 1), each comparison's
    mean a dashed rule of its colour (the legend's title says so).

    ``df``: columns comparison, cosine (one row per token and comparison).
    """
    data = df[df["comparison"].isin(comparisons)]
    bins = np.linspace(-0.2 if len(data) == 0 else min(-0.2, float(data["cosine"].min())), 1.0, 49)
    shown = [display_comparison(c) for c in comparisons if c in set(data["comparison"])]  # the page writes O→T
    rows = []
    for comp, g in data.groupby("comparison"):
        counts, edges = np.histogram(g["cosine"], bins=bins)
        rows.append(pd.DataFrame({"comparison": display_comparison(comp), "lo": edges[:-1], "hi": edges[1:],
                                  "share": counts / max(1, len(g))}))
    hist = pd.concat(rows) if rows else pd.DataFrame(columns=["comparison", "lo", "hi", "share"])
    means = data.groupby("comparison", as_index=False)["cosine"].mean()
    means["comparison"] = means["comparison"].map(display_comparison)
    colour = alt.Color("comparison:N", scale=colour_scale(shown),
                       legend=legend(f"comparison (dashed: {MEAN_LABEL})", shown))
    bars = alt.Chart(hist).mark_bar(opacity=0.55, binSpacing=0).encode(
        x=alt.X("lo:Q", title="per-token cosine", scale=alt.Scale(domain=[float(bins[0]), 1.0])),
        x2="hi:Q",
        y=alt.Y("share:Q", title="share of tokens", stack=None),
        y2=alt.datum(0),  # bars stand on the axis (without it Vega-Lite draws floating dashes)
        color=colour,
        tooltip=["comparison", alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    )
    rules = alt.Chart(means).mark_rule(size=2, strokeDash=[4, 3]).encode(
        x="cosine:Q", color=colour,
        tooltip=["comparison", alt.Tooltip("cosine:Q", title="mean", format=".3f")])
    return (bars + rules).properties(title=title, width="container", height=280)


def _norm_data(df: pd.DataFrame) -> pd.DataFrame:
    data = df[df["freq"].fillna(0) > 0].copy()
    data["matrix_name"] = data["matrix"].map(lambda m: f"{m} ({MATRIX_NAMES[m]})")
    if len(data) > SAMPLE_POINTS:
        data = data.sample(SAMPLE_POINTS, random_state=0)
    return data


def norm_vs_frequency(df: pd.DataFrame, matrix: str | None = None) -> alt.TopLevelMixin:
    """Per-token L2 norm against corpus frequency for T, I and O (the paper's Figure 5).

    ``df``: columns matrix, token, norm, freq (freq > 0 rows are drawn, log scale). With
    ``matrix``, that matrix's panel at the width of its container (a page sets the three in
    columns, which stack on a phone); without, the three panels side by side (the exported
    figure). Every panel has the same axes.
    """
    data = _norm_data(df)
    xs = alt.Scale(type="log", domain=[float(data["freq"].min()), float(data["freq"].max())] if len(data) else alt.Undefined)
    ys = alt.Scale(domain=[0, float(data["norm"].max()) * 1.02] if len(data) else alt.Undefined)

    def panel(sub: pd.DataFrame, m: str) -> alt.Chart:
        return alt.Chart(sub).mark_circle(size=10, opacity=0.35, aria=False).encode(
            x=alt.X("freq:Q", scale=xs, title="corpus frequency (count)"),
            y=alt.Y("norm:Q", scale=ys, title="L2 norm"),
            color=alt.value(COLOURS[m]),
            tooltip=["token:Q", "freq:Q", alt.Tooltip("norm:Q", format=".3f")],
        ).properties(title=f"{m} ({MATRIX_NAMES[m]})")

    if matrix is not None:
        return panel(data[data["matrix"] == matrix], matrix).properties(width="container", height=240)
    return alt.hconcat(*[panel(data[data["matrix"] == m], m).properties(width=260, height=240)
                         for m in ("T", "I", "O")])


# -- neighbours ------------------------------------------------------------------------------

PAPER_OVERLAP_LABEL = f"paper, Table 5 (k = {OVERLAP_K})"


def overlap_histogram(counts: pd.DataFrame, k: int) -> alt.Chart:
    """Distribution over the vocabulary of overlap@k. ``counts``: columns pair, overlap, count."""
    counts = counts.assign(share=counts["count"] / counts.groupby("pair")["count"].transform("sum"))
    pairs = sorted(counts["pair"].unique(), key=["T~I", "T~O", "I~O"].index)
    return alt.Chart(counts).mark_bar(opacity=0.8).encode(
        x=alt.X("overlap:O", title=f"overlap@{k}", axis=alt.Axis(format=".1f", labelAngle=0)),
        xOffset="pair:N",
        y=alt.Y("share:Q", title="share of tokens"),
        color=alt.Color("pair:N", scale=colour_scale(pairs), legend=legend("matrices", pairs)),
        tooltip=["pair", alt.Tooltip("overlap:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    ).properties(width="container", height=260)


def overlap_curve(df: pd.DataFrame, paper: dict | None = None, k: int | None = None) -> alt.Chart:
    """Mean overlap@k against k for T~I, T~O, I~O; the paper's Table 5 values at k=10 as hollow
    diamonds, named in the legend beside this cache's points (filled circles)."""
    pairs = list(dict.fromkeys(df["pair"]))
    here = "this cache"
    sources = [here] + ([PAPER_OVERLAP_LABEL] if paper else [])
    colour = alt.Color("pair:N", scale=colour_scale(pairs), legend=legend("matrices", pairs))
    shape = alt.Shape("source:N", scale=alt.Scale(domain=sources, range=["circle", "diamond"][:len(sources)]),
                      legend=legend("points", sources, symbolStrokeColor=NEUTRAL, symbolFillColor="transparent",
                                    symbolStrokeWidth=2))
    d = df.assign(source=here)
    enc = dict(x=alt.X("k:Q", title="k"),
               y=alt.Y("mean_overlap:Q", title="mean overlap@k", scale=alt.Scale(domain=[0, 1])), color=colour)
    tip = ["pair", "k", alt.Tooltip("mean_overlap:Q", format=".3f")]
    layers = [alt.Chart(d).mark_line().encode(**enc, tooltip=tip),
              alt.Chart(d).mark_point(filled=True, size=18).encode(**enc, shape=shape, tooltip=tip)]
    if k is not None:
        layers.append(alt.Chart(pd.DataFrame({"k": [k]})).mark_rule(strokeDash=[2, 2], color=NEUTRAL).encode(x="k:Q"))
    if paper:
        ref = pd.DataFrame({"pair": list(paper), "k": OVERLAP_K, "mean_overlap": list(paper.values()),
                            "source": PAPER_OVERLAP_LABEL})
        layers.append(alt.Chart(ref).mark_point(size=120, filled=False, strokeWidth=2).encode(
            **enc, shape=shape, tooltip=["pair", alt.Tooltip("mean_overlap:Q", title="paper (Table 5)")]))
    return alt.layer(*layers).properties(width="container", height=260)
