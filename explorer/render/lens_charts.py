"""The Lens page's charts: KL to the final output per hidden state (tuned and logit lens, tied
and untied), the tuned lenses' training curves, and a text's top-1 trajectory.
"""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd

from explorer.render.style import NEUTRAL, colour_scale, legend, present

PAPER_LENS_LABEL = "paper (authors' indexing, see note)"
"""Legend entry of the paper's tuned-lens points (their evaluation is shifted by one hidden state)."""

_LENS_SERIES = ("tuned lens", "logit lens")
_SERIES_SHAPE = {"tuned lens": "circle", "logit lens": "square"}
_SERIES_DASH = {"tuned lens": [1, 0], "logit lens": [6, 4]}
KL_AXES = {"tuned": "the tuned lens's range (logit lens clipped)", "full": "the whole range", "symlog": "symlog"}
"""The KL axis of ``kl_curves``: by default it spans the tuned lens (the paper's quantity) and the
paper's points, and a logit-lens KL beyond it is clipped at the top edge with its value written
there; ``full`` spans every series, ``symlog`` too, on a symmetric-log scale."""


def kl_curves(df: pd.DataFrame, paper: pd.DataFrame | None = None, *,
              paper_label: str = PAPER_LENS_LABEL, y_axis: str = "tuned") -> alt.Chart:
    """Mean KL (bits) per hidden state for tuned and logit lens, tied and untied.

    ``df``: model ('tied'|'untied'), lens ('tuned'|'logit'), layer, kl_mean, kl_std;
    ``paper``: model, layer, kl_mean, drawn as hollow triangles (no line) under
    ``paper_label`` in the legend. The paper's points are drawn where ``paper`` puts them:
    a caller that shifts them by a hidden state says so in ``paper_label``.

    Colour is the model (tied / untied); the series legend tells tuned lens (solid line,
    circles), logit lens (dashed line, squares) and the paper (triangles) apart by mark, and
    lists only the series drawn. ``y_axis``: one of ``KL_AXES``.
    """
    if y_axis not in KL_AXES:
        raise ValueError(f"y_axis must be one of {', '.join(KL_AXES)}, got {y_axis!r}")
    data = df.assign(series=df["lens"].map(lambda v: f"{v} lens"),
                     lo=(df["kl_mean"] - df["kl_std"]).clip(lower=0), hi=df["kl_mean"] + df["kl_std"])
    has_paper = paper is not None and len(paper) > 0
    names = present(_LENS_SERIES, data["series"]) + ([paper_label] if has_paper else [])
    shapes = [_SERIES_SHAPE.get(n, "triangle-up") for n in names]
    dashes = [_SERIES_DASH.get(n, [1, 0]) for n in names]
    # one legend for the series: shape and dash share the field and title, so Vega-Lite merges them
    series_legend = legend("series", names, symbolStrokeColor=NEUTRAL, symbolFillColor="transparent",
                           symbolStrokeWidth=1.5)
    shape = alt.Shape("series:N", scale=alt.Scale(domain=names, range=shapes), legend=series_legend)
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=dashes), legend=series_legend)
    models = present(["tied", "untied"], data["model"]) or ["tied", "untied"]
    enc = dict(x=alt.X("layer:O", title="hidden state (0 = input embedding)", axis=alt.Axis(labelAngle=0)),
               color=alt.Color("model:N", scale=colour_scale(models), legend=legend("model", models, symbolOpacity=1.0)))
    tip = ["model", "series", "layer", alt.Tooltip("kl_mean:Q", format=".3f")]
    tuned = data[data["lens"] == "tuned"]
    top = None  # the axis's top when the logit lens is clipped
    if y_axis == "tuned" and len(tuned) and (data["lens"] != "tuned").any():
        top = max([float(tuned["hi"].max())] + ([float(paper["kl_mean"].max())] if has_paper else [])) * 1.1
        if float(data["kl_mean"].max()) <= top:
            top = None  # nothing to clip
    if y_axis == "symlog":
        yscale, ytitle = alt.Scale(type="symlog", constant=0.1), "KL to final output (bits, symlog)"
    elif top is not None:
        yscale, ytitle = alt.Scale(domain=[0, top], nice=False), "KL to final output (bits; logit lens clipped)"
    else:
        yscale, ytitle = alt.Scale(), "KL to final output (bits)"
    if len(names) == 1:  # one series: no legend of one entry, the axis names it
        ytitle = f"{names[0]}: {ytitle}"
    y = alt.Y("kl_mean:Q", title=ytitle, scale=yscale)
    clip = top is not None
    spread = tuned.dropna(subset=["lo", "hi"])  # published means come without a spread: no band (an empty
    band = alt.Chart(spread).mark_area(opacity=0.12, clip=clip).encode(  # one is an "infinite extent" warning)
        y=alt.Y("lo:Q", title=ytitle, scale=yscale), y2="hi:Q", detail="model:N", **enc)
    lines = alt.Chart(data).mark_line(clip=clip).encode(y=y, strokeDash=dash, detail="series:N", **enc)
    points = alt.Chart(data).mark_point(filled=True, size=40, clip=clip).encode(
        y=y, shape=shape, tooltip=tip + [alt.Tooltip("kl_std:Q", format=".3f")], **enc)
    layers = ([band] if len(spread) else []) + [lines, points]
    if clip:  # each point beyond the top: an arrow on the edge and its value
        # the models' arrows one above the other, so two at one hidden state both show
        over = data[data["kl_mean"] > top].assign(
            edge=lambda d: np.where(d["model"] == models[0], top, top * 0.9),
            value=lambda d: d["kl_mean"].map(lambda v: f"{v:.2f} ↑"))
        layers.append(alt.Chart(over).mark_point(shape="triangle-up", filled=True, size=70).encode(
            y=alt.Y("edge:Q", scale=yscale, title=ytitle), tooltip=tip, **enc))
        # its value in the theme's text colour (the arrow beside it has the model's): brown or pink text
        # would fall under 4.5:1 on a dark or a light ground
        layers.append(alt.Chart(over).mark_text(align="left", dx=7, dy=2, baseline="top").encode(
            y=alt.Y("edge:Q", scale=yscale, title=ytitle), text="value:N", x=enc["x"]))
    if has_paper:
        pts = paper.assign(series=paper_label)
        layers.append(alt.Chart(pts).mark_point(filled=False, size=90, strokeWidth=1.8).encode(
            y=y, shape=shape, tooltip=tip, **enc))
    return alt.layer(*layers).properties(width="container", height=320)


def _smoothed(df: pd.DataFrame, window: int | None, log_y: bool) -> tuple[pd.DataFrame, int]:
    d = df.sort_values(["model", "layer", "step"]).copy()
    n_steps = int(d.groupby(["model", "layer"])["step"].nunique().max()) if len(d) else 1
    w = max(1, n_steps // 20) if window is None else max(1, int(window))
    d["kl_smooth"] = d.groupby(["model", "layer"])["kl_bits"].transform(
        lambda v: v.rolling(w, min_periods=1).mean())
    if log_y:
        d = d[d.groupby(["model", "layer"])["kl_bits"].transform("max") > 1e-3]
    return d, w


def lens_training_curve(df: pd.DataFrame, window: int | None = None, *, log_y: bool = False,
                        model: str | None = None) -> alt.TopLevelMixin:
    """Tuned-lens training KL per step (df: model, step, layer, kl_bits), one panel per model.

    Each line is the rolling mean over ``window`` steps (default: a twentieth of the steps,
    at least 1; 1 draws the raw curve), per model and hidden state; the raw value is in the
    tooltip. ``log_y`` puts KL on a log scale; hidden states whose KL never exceeds 1e-3 bits
    (the last one, read through the identity) are then left out. With ``model``, that model's
    panel at the width of its container; without, both side by side (the exported figure).
    """
    d, w = _smoothed(df, window, log_y)
    title = "training KL (bits)" + (f", rolling mean of {w} steps" if w > 1 else "")
    y = alt.Y("kl_smooth:Q", title=title, scale=alt.Scale(type="log") if log_y else alt.Undefined)
    layers = sorted(d["layer"].unique())
    # viridis without its darkest and lightest ends: every line reads on light and dark backgrounds
    colour = alt.Color("layer:O", scale=alt.Scale(scheme=alt.SchemeParams(name="viridis", extent=[0.1, 0.85])),
                       legend=legend("hidden state", [str(v) for v in layers]))
    if model is not None:
        d = d[d["model"] == model]
    chart = alt.Chart(d).mark_line(opacity=0.85).encode(
        x=alt.X("step:Q"), y=y, color=colour,
        tooltip=["model", "layer", "step", alt.Tooltip("kl_bits:Q", format=".3f", title="KL (bits)"),
                 alt.Tooltip("kl_smooth:Q", format=".3f", title=f"rolling mean ({w})")])
    if model is not None:
        return chart.properties(width="container", height=220, title=model)
    return chart.properties(width=320, height=220).facet(column=alt.Column("model:N", title=None))


def trajectory(df: pd.DataFrame, *, pick: str | None = None, picked: tuple[int, int] | None = None) -> alt.Chart:
    """Top-1 prediction of every layer at every position: a heat map of probability with the text.

    Columns are the input tokens, labelled with their (visible) text; a prediction longer than
    its cell is cut with an ellipsis to the cell's width (the tooltip has it whole); in cells
    narrower than 24 px the text is left out. ``pick``: the name of a click selection of a cell
    (fields position and layer); ``picked``: the (position, layer) outlined as followed.
    """
    top = df[df["rank"] == 1]
    tokens = top.drop_duplicates("position").sort_values("position")
    names = {int(p): str(t) for p, t in zip(tokens["position"], tokens["token"])}
    # the axis reads each column's token from a list in the spec (JSON-escaped: any text is safe)
    label = f"{json.dumps([names.get(i, '') for i in range(max(names) + 1 if names else 0)])}[datum.value]"
    base = alt.Chart(top).encode(
        x=alt.X("position:O", title="input token",
                axis=alt.Axis(labelExpr=label, labelAngle=-45, labelLimit=90, labelOverlap=False)),
        y=alt.Y("layer:O", sort="descending", title="hidden state"))
    rect = base.mark_rect().encode(color=alt.Color("prob:Q", scale=alt.Scale(scheme="greys", domain=[0, 1]),
                                                   legend=legend("top-1 prob", ["1.0"], columns=alt.Undefined, values=[0, 0.5, 1],
                                                                 format=".1f", gradientLength=180)),
                                   tooltip=["position:O", "token:N", "layer:O", "prediction:N",
                                            alt.Tooltip("prob:Q", format=".2f")])
    # too narrow a cell (a phone) shows the colours only: the text would be all ellipses
    text = base.mark_text(limit={"expr": "max(8, bandwidth('x') - 4)"},
                          opacity={"expr": "bandwidth('x') < 24 ? 0 : 1"}).encode(
        text="prediction:N", color=alt.condition("datum.prob > 0.5", alt.value("white"), alt.value("black")))
    if pick:
        rect = rect.add_params(alt.selection_point(name=pick, fields=["position", "layer"], on="click", clear=False,
                                                   empty=False))
    layers = [rect, text]
    if picked is not None:  # the followed cell, outlined in the theme's text colour
        cell = top[(top["position"] == picked[0]) & (top["layer"] == picked[1])]
        layers.append(alt.Chart(cell).mark_rect(filled=False, stroke=NEUTRAL, strokeWidth=3).encode(
            x="position:O", y=alt.Y("layer:O", sort="descending")))
    # a row per hidden state tall enough for its label and text, and never a sliver
    return alt.layer(*layers).properties(width="container", height=max(260, 44 * max(1, top["layer"].nunique())))
