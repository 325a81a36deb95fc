"""The Sweep page's chart: a measure against width (or embedding share) over the grid of
vocabulary sizes, with 95% whiskers, learning-rate bands and the named crossings.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from explorer.render.style import NEUTRAL, SERIES, legend, runs_dashed

SWEEP_X = {"d_model": ("width d_model (log scale)", "log"),
           "embedding_share_tied": ("embedding share of the tied model's parameters", "linear")}


def sweep_lines(df: pd.DataFrame, series: dict[str, str], *, x: str = "d_model", title: str = "",
                y_title: str = "", crossings: pd.DataFrame | None = None,
                bands: pd.DataFrame | None = None, y_include=(), zero: bool = True) -> alt.LayerChart:
    """Mean over seeds against width (or embedding share) with 95% whiskers, a zero line, and
    a dashed rule at each named crossing.

    ``df``: one row per grid point with vocab_size, ``x``, and for each column ``c`` of
    ``series`` (column -> legend label) ``c`` (mean) and ``c_half`` (95% half-width; inf or
    NaN: no whisker). ``crossings``: vocab_size, x (the crossing's position), label. ``bands``:
    vocab_size, d_model, series (a label), lo, hi: a shaded band per series (the learning-rate
    sensitivity), in the series' colour. ``y_include``: more values the y range must hold
    (reference lines a caller layers on). ``zero``: draw and hold the zero line (a gap or a bias;
    not a loss, whose chart is zoomed to its data).
    """
    rows = []
    for col, label in series.items():
        sub = df[["vocab_size", x, col, f"{col}_half"]].rename(columns={col: "mean", f"{col}_half": "half"})
        rows.append(sub.assign(series=label))
    d = pd.concat(rows, ignore_index=True)
    finite = np.isfinite(d["half"].astype(float))
    d["lo"] = np.where(finite, d["mean"] - d["half"], np.nan)
    d["hi"] = np.where(finite, d["mean"] + d["half"], np.nan)
    d["vocabulary"] = d["vocab_size"].map(lambda v: f"V={v:,}")
    x_title, x_type = SWEEP_X[x]
    lo_x, hi_x = float(df[x].min()), float(df[x].max())
    # a margin on both sides, so the first and last points and their whiskers sit inside the frame
    domain = ([lo_x / 1.25, hi_x * 1.25] if x_type == "log" else
              [lo_x - 0.06 * ((hi_x - lo_x) or abs(lo_x) or 1), hi_x + 0.06 * ((hi_x - lo_x) or abs(hi_x) or 1)])
    xenc = alt.X(f"{x}:Q", title=x_title,
                 scale=alt.Scale(type="log", base=2, nice=False, domain=domain) if x_type == "log"
                 else alt.Scale(zero=False, domain=domain),
                 axis=alt.Axis(format=".0%") if x == "embedding_share_tied" else alt.Axis(values=sorted(df[x].unique())))
    labels = list(series.values())
    palette = [*SERIES, NEUTRAL]  # not T's, I's or O's colours: these series are measures and models
    colour = alt.Color("series:N", scale=alt.Scale(domain=labels, range=palette[:len(labels)]),
                       legend=legend(None, labels))
    enc = dict(x=xenc, color=colour, detail="vocabulary:N")
    tip = ["series", "vocabulary", alt.Tooltip(f"{x}:Q", format=".3~g"), alt.Tooltip("mean:Q", format=".4f"),
           alt.Tooltip("half:Q", format=".4f", title="95% half-width")]
    # the y range holds every mean, whisker, band and zero, with a margin: nothing sits on the frame
    ys = [*([0.0] if zero else []), *d["mean"].dropna(), *d["lo"].dropna(), *d["hi"].dropna(), *y_include]
    if bands is not None and len(bands):
        ys += [*bands["lo"].dropna(), *bands["hi"].dropna()]
    y_lo, y_hi = float(min(ys)), float(max(ys))
    pad = 0.08 * ((y_hi - y_lo) or 1.0)
    yscale = alt.Scale(domain=[y_lo - pad, y_hi + pad], nice=False, zero=False)  # every layer: none adds zero
    line = alt.Chart(d).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        y=alt.Y("mean:Q", title=y_title, scale=yscale), tooltip=tip,
        **runs_dashed("vocabulary", sorted(d["vocabulary"].unique(), key=lambda v: int(v[2:].replace(",", ""))),
                       "vocabulary"), **enc)
    whiskers = alt.Chart(d[d["lo"].notna()]).mark_rule(strokeWidth=2, opacity=0.7).encode(
        y=alt.Y("lo:Q", scale=yscale), y2="hi:Q", **enc)
    zero_line = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color=NEUTRAL, strokeDash=[4, 4]).encode(y="y:Q")
    layers = [zero_line, whiskers, line] if zero else [whiskers, line]
    if bands is not None and len(bands):
        b = bands.merge(df[list(dict.fromkeys(["vocab_size", "d_model", x]))].drop_duplicates(),
                        on=["vocab_size", "d_model"])
        b["vocabulary"] = b["vocab_size"].map(lambda v: f"V={v:,}")
        band_enc = {k: v for k, v in enc.items() if k != "color"}  # no colour channel: the legend stays the lines'
        for label, colour in zip(labels, palette):
            sub = b[b["series"] == label]
            if len(sub):
                layers.insert(0, alt.Chart(sub).mark_area(opacity=0.18, color=colour).encode(
                    y=alt.Y("lo:Q", scale=yscale), y2="hi:Q", tooltip=["series", alt.Tooltip("lo:Q", format=".3f", title="band low"),
                                                  alt.Tooltip("hi:Q", format=".3f", title="band high")], **band_enc))
    if crossings is not None and len(crossings):
        cr = crossings.rename(columns={"x": x})
        layers.append(alt.Chart(cr).mark_rule(color=NEUTRAL, strokeDash=[6, 3], size=2).encode(
            x=f"{x}:Q", tooltip=[alt.Tooltip("label:N", title="crossing")]))
        layers.append(alt.Chart(cr).mark_text(align="left", dx=6, dy=-8, fontWeight="bold").encode(
            x=f"{x}:Q", y=alt.value(12), text="label:N"))
    return alt.layer(*layers).properties(width="container", height=300, title=title)
