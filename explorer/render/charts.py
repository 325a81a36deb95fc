"""Chart builders: each takes DataFrames and returns an Altair chart (tests can inspect them).

One palette everywhere (``PALETTE``, Okabe and Ito's colour-blind-safe set): T (tied) reddish
purple, I (untied input) blue, O (untied output) vermillion; rules, whiskers and legend strokes
in ``NEUTRAL``, a grey that reads on Streamlit's light and dark themes (no chart sets a
background, or black or white on the page's background: the theme gives those; black and white
appear only on marks of their own colour, a heat map's cells). Legends sit under the
plot and wrap to the chart's width, their labels never cut; runs are told apart by dash
pattern, with the dashes drawn in the legend.
"""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd

from tying.cache.schema import DISPLAY_COMPARISONS, MATRIX_NAMES, display_comparison

PALETTE = {"T": "#CC79A7", "I": "#0072B2", "O": "#D55E00"}
NEUTRAL = "#888888"  # 3.5:1 on white, 5.3:1 on Streamlit's dark background
HIGHLIGHT = "#ffd92f"  # the picked token and its neighbours on a projection (outlined in black)
COLOURS = {**PALETTE, "tied": PALETTE["T"], "untied": PALETTE["I"],
           "O→T": PALETTE["O"], "I→T": PALETTE["I"], "I→O": NEUTRAL,
           "O->T": PALETTE["O"], "I->T": PALETTE["I"], "I->O": NEUTRAL,
           "T~O": PALETTE["O"], "T~I": PALETTE["I"], "I~O": NEUTRAL}
DASHES = ([1, 0], [8, 4], [2, 3], [12, 3, 3, 3], [4, 4], [16, 4], [1, 6], [8, 3, 1, 3, 1, 3])
"""Dash patterns of runs, in order (solid first); more runs than patterns reuse them."""
SAMPLE_POINTS = 12_000  # most points a projection scatter draws (the rest: density or a sample)
LEGEND_CHAR_PX = 11  # a legend label's width per character at the largest (presentation) font

# Pages sample or aggregate large data themselves; Altair's 5,000-row guard would only stop
# specs (and PNG/SVG exports) of the samples they already chose.
alt.data_transformers.disable_max_rows()


def _scale(keys) -> alt.Scale:
    keys = list(keys)
    return alt.Scale(domain=keys, range=[COLOURS.get(k, NEUTRAL) for k in keys])


def _present(order, values) -> list:
    """The keys of ``order`` found in ``values``, in that order (a legend lists only what is drawn)."""
    have = set(values)
    return [k for k in order if k in have]


NARROW_PX = 600
"""A plot narrower than this (a phone, a column) stacks its legends one above the other."""
LEGEND_LAYOUT = {"bottom": {"anchor": "start", "margin": 12,
                            "direction": {"signal": f"width < {NARROW_PX} ? 'vertical' : 'horizontal'"}}}
"""Vega's layout of the legends under a plot: side by side, or stacked when the plot is narrow."""


def legend(title: str | None, labels=(), **props) -> alt.Legend:
    """A legend under the plot whose labels are never cut: its entries fill as many columns as
    the chart's width holds (one per row on a phone), from the longest of ``labels`` (at the
    presentation font, leaving a quarter of the width to a legend beside it)."""
    entry = 44 + LEGEND_CHAR_PX * max([len(str(x)) for x in labels] + [4])
    props.setdefault("columns", {"expr": f"max(1, floor(width * 0.75 / {entry}))"})
    return alt.Legend(title=title, orient="bottom", labelLimit=0, **props)


def with_legend_layout(spec: dict) -> dict:
    """A chart's Vega-Lite dict with ``LEGEND_LAYOUT`` in its config (set on the dict: Altair's
    schema types the setting as an expression only)."""
    config = spec.setdefault("config", {})
    config["legend"] = {**config.get("legend", {}), "layout": LEGEND_LAYOUT}
    return spec


def run_legend(title: str, labels) -> alt.Legend:
    """The legend of a dash channel: each entry a stroke drawn with its run's dash pattern."""
    return legend(title, labels, symbolType="stroke", symbolSize=1400, symbolStrokeWidth=2,
                  symbolStrokeColor=NEUTRAL)


def _dash_scale(keys) -> alt.Scale:
    keys = list(keys)
    return alt.Scale(domain=keys, range=[DASHES[i % len(DASHES)] for i in range(len(keys))])


def style(chart: alt.TopLevelMixin, *, presentation: bool = False) -> alt.TopLevelMixin:
    """Fonts for the screen, or large ones for talks (presentation mode)."""
    size = 20 if presentation else 12
    return (chart.configure_axis(labelFontSize=size, titleFontSize=size + 2)
            .configure_legend(labelFontSize=size, titleFontSize=size + 1, symbolSize=12 * size)
            .configure_title(fontSize=size + 6, anchor="start")
            .configure_header(labelFontSize=size + 1, titleFontSize=size + 2)
            .configure_text(fontSize=size + 1)
            .configure_view(strokeWidth=0))


# -- alignment -----------------------------------------------------------------------------

MEAN_LABEL = "mean of each comparison"


def cosine_histogram(df: pd.DataFrame, *, comparisons=DISPLAY_COMPARISONS[:2], title: str = "") -> alt.Chart:
    """Histogram of per-token cosine by comparison (the paper's Figure 1), each comparison's
    mean a dashed rule of its colour (named in a legend of its own).

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
    means["line"] = MEAN_LABEL
    colour = alt.Color("comparison:N", scale=_scale(shown), legend=legend("comparison", shown))
    bars = alt.Chart(hist).mark_bar(opacity=0.55, binSpacing=0).encode(
        x=alt.X("lo:Q", title="per-token cosine", scale=alt.Scale(domain=[float(bins[0]), 1.0])),
        x2="hi:Q",
        y=alt.Y("share:Q", title="share of tokens", stack=None),
        y2=alt.datum(0),  # bars stand on the axis (without it Vega-Lite draws floating dashes)
        color=colour,
        tooltip=["comparison", alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    )
    rules = alt.Chart(means).mark_rule(size=2).encode(
        x="cosine:Q", color=colour,
        strokeDash=alt.StrokeDash("line:N", scale=alt.Scale(domain=[MEAN_LABEL], range=[[4, 3]]),
                                  legend=run_legend(None, [MEAN_LABEL])),
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
        return alt.Chart(sub).mark_circle(size=10, opacity=0.35).encode(
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

PAPER_OVERLAP_LABEL = "paper, Table 5 (k = 10)"


def overlap_histogram(counts: pd.DataFrame, k: int) -> alt.Chart:
    """Distribution over the vocabulary of overlap@k. ``counts``: columns pair, overlap, count."""
    counts = counts.assign(share=counts["count"] / counts.groupby("pair")["count"].transform("sum"))
    pairs = sorted(counts["pair"].unique(), key=["T~I", "T~O", "I~O"].index)
    return alt.Chart(counts).mark_bar(opacity=0.8).encode(
        x=alt.X("overlap:O", title=f"overlap@{k}", axis=alt.Axis(format=".1f", labelAngle=0)),
        xOffset="pair:N",
        y=alt.Y("share:Q", title="share of tokens"),
        color=alt.Color("pair:N", scale=_scale(pairs), legend=legend("matrices", pairs)),
        tooltip=["pair", alt.Tooltip("overlap:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    ).properties(width="container", height=260)


def overlap_curve(df: pd.DataFrame, paper: dict | None = None, k: int | None = None) -> alt.Chart:
    """Mean overlap@k against k for T~I, T~O, I~O; the paper's Table 5 values at k=10 as hollow
    diamonds, named in the legend beside this cache's points (filled circles)."""
    pairs = list(dict.fromkeys(df["pair"]))
    here = "this cache"
    sources = [here] + ([PAPER_OVERLAP_LABEL] if paper else [])
    colour = alt.Color("pair:N", scale=_scale(pairs), legend=legend("matrices", pairs))
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
        ref = pd.DataFrame({"pair": list(paper), "k": 10, "mean_overlap": list(paper.values()),
                            "source": PAPER_OVERLAP_LABEL})
        layers.append(alt.Chart(ref).mark_point(size=120, filled=False, strokeWidth=2).encode(
            **enc, shape=shape, tooltip=["pair", alt.Tooltip("mean_overlap:Q", title="paper (Table 5)")]))
    return alt.layer(*layers).properties(width="container", height=260)


# -- projection ------------------------------------------------------------------------------

PICK = "pick"  # the point-selection parameter of a projection view: a click picks that token
PROJECTION_ORDER = ("I", "T", "O")
ROLE_SHAPES = {"picked": "diamond", "neighbour": "circle"}


def _projection_layers(df: pd.DataFrame, highlight: pd.DataFrame, *, density: bool, label_matrix: bool,
                       colour_matrix: bool = True, interactive: bool = True):
    """Background (points or density), highlighted tokens and the picked token's label.

    Points carry a click selection on ``token`` (``PICK``) and every view zooms and pans
    (wheel, drag; double-click resets) unless ``interactive`` is false (views concatenated
    into one figure cannot share parameter names).
    """
    # a click on a point picks it (nearest=True would let a click anywhere pick the closest token,
    # but its Voronoi layer doubled the drawing time: 0.85 -> 1.7 s for three views of 5,000)
    pick = alt.selection_point(name=PICK, fields=["token"], on="click", clear=False, empty=False)
    zoom = alt.selection_interval(name="zoom", bind="scales")
    if density:
        points = alt.Chart(df).mark_rect().encode(
            x=alt.X("x:Q", bin=alt.Bin(maxbins=60), title=None, axis=None),
            y=alt.Y("y:Q", bin=alt.Bin(maxbins=60), title=None, axis=None),
            # denser cells more opaque, in a grey that reads on light and dark backgrounds alike
            color=alt.value(NEUTRAL), opacity=alt.Opacity("count():Q", scale=alt.Scale(type="log", range=[0.15, 1]),
                                                          legend=None))
    else:
        colour = (alt.Color("matrix:N", scale=_scale(list(PROJECTION_ORDER)), legend=legend("matrix", PROJECTION_ORDER))
                  if colour_matrix else alt.value(COLOURS.get(str(df["matrix"].iloc[0]) if len(df) else "T", NEUTRAL)))
        points = alt.Chart(df).mark_circle(size=14, opacity=0.4, cursor="pointer").encode(
            x=alt.X("x:Q", title=None, axis=None), y=alt.Y("y:Q", title=None, axis=None),
            color=colour, tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
                                   "matrix:N"])
        if interactive:
            points = points.add_params(pick, zoom)
    roles = _present(ROLE_SHAPES, highlight["role"]) or list(ROLE_SHAPES)
    hi = highlight.assign(label=highlight["shown"] + (" (" + highlight["matrix"] + ")" if label_matrix else ""))
    marks = alt.Chart(hi).mark_point(filled=True, stroke="black", strokeWidth=1, cursor="pointer").encode(
        x="x:Q", y="y:Q",
        size=alt.Size("role:O", scale=alt.Scale(domain=["picked", "neighbour"], range=[240, 80]), legend=None),
        shape=alt.Shape("role:N", scale=alt.Scale(domain=roles, range=[ROLE_SHAPES[r] for r in roles]),
                        legend=legend("highlighted", roles)),
        color=alt.value(HIGHLIGHT), tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
                                             "matrix:N", "role:N"])
    if density and interactive:  # no background points to click: the highlighted ones carry the selection
        marks = marks.add_params(pick, zoom)
    labels = alt.Chart(hi[hi["role"] == "picked"]).mark_text(dy=-16, fontWeight="bold").encode(
        x="x:Q", y="y:Q", text="label:N")
    return alt.layer(points, marks, labels)


def projection_view(df: pd.DataFrame, highlight: pd.DataFrame, matrix: str, *, density: bool = False,
                    height: int = 420) -> alt.LayerChart:
    """One matrix's UMAP view at the width of its column, the picked token labelled."""
    sub = df[df["matrix"] == matrix]
    hi = highlight[highlight["matrix"] == matrix]
    return _projection_layers(sub, hi, density=density, label_matrix=False, colour_matrix=False).properties(
        width="container", height=height, title=f"{matrix} ({MATRIX_NAMES[matrix]})")


def projection(df: pd.DataFrame, highlight: pd.DataFrame, *, mode: str = "side by side",
               density: bool = False, height: int = 420, view_size: int = 300) -> alt.TopLevelMixin:
    """UMAP coordinates of T, I, O with highlighted tokens drawn on top in every view.

    ``df``: matrix, token, x, y, shown (already sampled by the caller);
    ``highlight``: the same columns plus ``role`` ('picked' or 'neighbour').
    Overlaid: one view, each highlighted token labelled with its matrix; density is drawn
    per matrix, so it is always side by side. Side by side: three views in one figure (the
    exported one; the page draws the three views in columns of their own).
    """
    if mode == "overlaid" and not density:
        return _projection_layers(df, highlight, density=False, label_matrix=True).properties(
            width="container", height=int(height * 1.25))
    views = [_projection_layers(df[df["matrix"] == m], highlight[highlight["matrix"] == m], density=density,
                                label_matrix=False, interactive=False).properties(width=view_size, height=view_size,
                                                                   title=f"{m} ({MATRIX_NAMES[m]})")
             for m in PROJECTION_ORDER]
    return alt.hconcat(*views).resolve_scale(color="shared")


# -- lens ----------------------------------------------------------------------------------

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
    names = _present(_LENS_SERIES, data["series"]) + ([paper_label] if has_paper else [])
    shapes = [_SERIES_SHAPE.get(n, "triangle-up") for n in names]
    dashes = [_SERIES_DASH.get(n, [1, 0]) for n in names]
    # one legend for the series: shape and dash share the field and title, so Vega-Lite merges them
    series_legend = legend("series", names, symbolStrokeColor=NEUTRAL, symbolFillColor="transparent",
                           symbolStrokeWidth=1.5)
    shape = alt.Shape("series:N", scale=alt.Scale(domain=names, range=shapes), legend=series_legend)
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=dashes), legend=series_legend)
    models = _present(["tied", "untied"], data["model"]) or ["tied", "untied"]
    enc = dict(x=alt.X("layer:O", title="hidden state (0 = input embedding)", axis=alt.Axis(labelAngle=0)),
               color=alt.Color("model:N", scale=_scale(models), legend=legend("model", models, symbolOpacity=1.0)))
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
    y = alt.Y("kl_mean:Q", title=ytitle, scale=yscale)
    clip = top is not None
    band = alt.Chart(tuned).mark_area(opacity=0.12, clip=clip).encode(
        y=alt.Y("lo:Q", title=ytitle, scale=yscale), y2="hi:Q", detail="model:N", **enc)
    lines = alt.Chart(data).mark_line(clip=clip).encode(y=y, strokeDash=dash, detail="series:N", **enc)
    points = alt.Chart(data).mark_point(filled=True, size=40, clip=clip).encode(
        y=y, shape=shape, tooltip=tip + [alt.Tooltip("kl_std:Q", format=".3f")], **enc)
    layers = [band, lines, points]
    if clip:  # each point beyond the top: an arrow on the edge and its value
        # the models' arrows one above the other, so two at one hidden state both show
        over = data[data["kl_mean"] > top].assign(
            edge=lambda d: np.where(d["model"] == models[0], top, top * 0.9),
            value=lambda d: d["kl_mean"].map(lambda v: f"{v:.2f} ↑"))
        layers.append(alt.Chart(over).mark_point(shape="triangle-up", filled=True, size=70).encode(
            y=alt.Y("edge:Q", scale=yscale, title=ytitle), tooltip=tip, **enc))
        layers.append(alt.Chart(over).mark_text(align="left", dx=7, dy=2, baseline="top").encode(
            y=alt.Y("edge:Q", scale=yscale, title=ytitle), text="value:N", **enc))
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


def trajectory(df: pd.DataFrame) -> alt.Chart:
    """Top-1 prediction of every layer at every position: a heat map of probability with the text.

    Columns are the input tokens, labelled with their (visible) text; a prediction longer than
    its cell is cut with an ellipsis to the cell's width (the tooltip has it whole); in cells
    narrower than 24 px the text is left out.
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
    rect = base.mark_rect().encode(color=alt.Color("prob:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                                                   legend=legend("top-1 prob", ["1.0"], columns=alt.Undefined, values=[0, 0.5, 1],
                                                                 format=".1f", gradientLength=180)),
                                   tooltip=["position:O", "token:N", "layer:O", "prediction:N",
                                            alt.Tooltip("prob:Q", format=".2f")])
    # too narrow a cell (a phone) shows the colours only: the text would be all ellipses
    text = base.mark_text(limit={"expr": "max(8, bandwidth('x') - 4)"},
                          opacity={"expr": "bandwidth('x') < 24 ? 0 : 1"}).encode(
        text="prediction:N", color=alt.condition("datum.prob > 0.5", alt.value("white"), alt.value("black")))
    # a row per hidden state tall enough for its label and text, and never a sliver
    return (rect + text).properties(width="container", height=max(260, 44 * max(1, top["layer"].nunique())))


# -- training dynamics ----------------------------------------------------------------------

def _runs_dashed(field: str, runs, title: str = "run") -> dict:
    """The dash channel of several runs (one pattern each, drawn in the legend); none for one run."""
    runs = list(runs)
    if len(runs) < 2:
        return {}
    return {"strokeDash": alt.StrokeDash(f"{field}:N", scale=_dash_scale(runs), legend=run_legend(title, runs))}


def gradient_norms(df: pd.DataFrame) -> alt.Chart:
    """Gradient L2 norms per step, input side vs output side (the paper's Figure 4).

    ``df``: run, step, grad_input_norm, grad_output_norm. Colour is the side (I's and O's
    colours); with several runs each run has its own dash pattern, named in the legend.
    """
    long = df.melt(id_vars=["run", "step"], value_vars=["grad_input_norm", "grad_output_norm"],
                   var_name="side", value_name="norm")
    sides = ["input lookup", "output projection"]
    long["side"] = long["side"].map({"grad_input_norm": sides[0], "grad_output_norm": sides[1]})
    return alt.Chart(long).mark_line(opacity=0.85).encode(
        x=alt.X("step:Q"), y=alt.Y("norm:Q", scale=alt.Scale(type="log"), title="gradient L2 norm"),
        color=alt.Color("side:N", scale=alt.Scale(domain=sides, range=[COLOURS["I"], COLOURS["O"]]),
                        legend=legend("side", sides)),
        detail="run:N", tooltip=["run", "step", "side", alt.Tooltip("norm:Q", format=".4g")],
        **_runs_dashed("run", sorted(long["run"].unique())),
    ).properties(width="container", height=260)


def run_colour(run: str) -> str:
    """A run's colour by what it is: tied runs (input-scaled ones too) T's, untied I's, others neutral."""
    name = str(run).split(": ")[-1]
    if name.startswith("tied") or " tied" in name:
        return COLOURS["T"]
    if name.startswith("untied") or " untied" in name:
        return COLOURS["I"]
    return NEUTRAL


def run_colours(runs) -> alt.Scale:
    """The colour scale of ``runs`` (see ``run_colour``)."""
    return alt.Scale(domain=list(runs), range=[run_colour(r) for r in runs])


def _runs_coloured_and_dashed(field: str, runs, title: str = "run") -> dict:
    """Colour (what each run is) and dash pattern (which run) on one field: one legend whose
    entries are strokes in the run's colour and dash."""
    runs = list(runs)
    leg = run_legend(title, runs)
    return {"color": alt.Color(f"{field}:N", scale=run_colours(runs), legend=leg),
            "strokeDash": alt.StrokeDash(f"{field}:N", scale=_dash_scale(runs), legend=leg)}


def _half_line() -> alt.Chart:
    return alt.Chart(pd.DataFrame({"y": [0.5]})).mark_rule(strokeDash=[4, 4], color=NEUTRAL).encode(y="y:Q")


def output_share(df: pd.DataFrame, window: int = 10) -> alt.Chart:
    """Output side's share per step (rolling mean over ``window`` steps), with the 0.5 line.

    Runs are coloured by what they are (tied T's colour, untied I's) and dashed each its own way.
    """
    d = df.sort_values(["run", "step"]).copy()
    d["share"] = d.groupby("run")["output_share"].transform(lambda s: s.rolling(window, min_periods=1).mean())
    runs = sorted(d["run"].unique())
    line = alt.Chart(d).mark_line().encode(
        x="step:Q", y=alt.Y("share:Q", title=f"output share (rolling {window})", scale=alt.Scale(domain=[0, 1])),
        tooltip=["run", "step", alt.Tooltip("share:Q", format=".3f")], **_runs_coloured_and_dashed("run", runs))
    return (line + _half_line()).properties(width="container", height=240)


def output_share_band(df: pd.DataFrame, window: int = 10, early_steps: int | None = None) -> alt.LayerChart:
    """The output side's share per step over several seeds of one tied model: the mean over seeds
    of each seed's rolling mean (``window`` steps) as a line, the seeds' range (min to max) as a
    band, the 0.5 line, and the early steps a verdict averages (``early_steps``) shaded.

    ``df``: run, step, output_share, one run per seed."""
    d = df.sort_values(["run", "step"]).copy()
    d["share"] = d.groupby("run")["output_share"].transform(lambda s: s.rolling(window, min_periods=1).mean())
    g = d.groupby("step")["share"].agg(["mean", "min", "max", "count"]).reset_index()
    n = int(d["run"].nunique())
    label = f"mean of {n} seeds" if n > 1 else "one run"
    y = alt.Y("mean:Q", title=f"output share (rolling {window})", scale=alt.Scale(domain=[0, 1]))
    layers = []
    if early_steps:
        early = pd.DataFrame({"x0": [0], "x1": [early_steps], "label": [f"early: steps ≤ {early_steps:,}"]})
        layers += [alt.Chart(early).mark_rect(color=NEUTRAL, opacity=0.15).encode(x="x0:Q", x2="x1:Q"),
                   alt.Chart(early).mark_text(align="left", dx=4, dy=10, baseline="top", color="#555").encode(
                       x="x0:Q", y=alt.value(0), text="label:N")]
    if n > 1:
        layers.append(alt.Chart(g).mark_area(color=PALETTE["T"], opacity=0.25).encode(
            x="step:Q", y=alt.Y("min:Q", scale=alt.Scale(domain=[0, 1])), y2="max:Q"))
    line = alt.Chart(g.assign(series=label)).mark_line(color=PALETTE["T"], strokeWidth=2.5).encode(
        x=alt.X("step:Q", title="optimiser step"), y=y,
        tooltip=["step", alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("min:Q", format=".3f", title="lowest seed"),
                 alt.Tooltip("max:Q", format=".3f", title="highest seed")])
    return alt.layer(*layers, line, _half_line()).properties(width="container", height=240)


def _matrix_colour(d: pd.DataFrame) -> alt.Color:
    mats = _present(["T", "I", "O"], d["matrix"]) or ["T", "I", "O"]
    return alt.Color("matrix:N", scale=_scale(mats), legend=legend("matrix", mats))


def _lines_with_points(d: pd.DataFrame, enc: dict, dashed: dict, size: int = 22) -> alt.LayerChart:
    """Lines (dashed per run) with a point at every checkpoint: points in a layer of their own,
    so the dash legend draws strokes, not the points' dots."""
    line = alt.Chart(d).mark_line(strokeWidth=2).encode(**enc, **dashed)
    points = alt.Chart(d).mark_circle(size=size, opacity=1).encode(**enc)
    if "matrix" not in d or not (d["matrix"] == "T").any() or d["matrix"].nunique() < 2:
        return alt.layer(line, points)
    # T drawn last: where it runs with O (the paper's claim) it must not vanish under O's marks
    on_top = alt.datum.matrix == "T"
    below = [c.transform_filter(~on_top) for c in (line, points)]
    above = [line.transform_filter(on_top).mark_line(strokeWidth=3), points.transform_filter(on_top)]
    return alt.layer(*below, *above)


def evolution(df: pd.DataFrame, column: str = "cos_init") -> alt.LayerChart:
    """Mean per-token cosine to the initial (or previous) checkpoint against step (Figure 3).

    Colour is the matrix (only those drawn: T, I, O); with several runs each run has its own
    dash pattern, drawn in the run legend.
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    title = "cosine to initial" if column == "cos_init" else "cosine to previous checkpoint"
    last = max(2, int(d["step_plot"].max())) if len(d) else 2
    enc = dict(  # the axis ends at the last step (a log scale would round 250 up to 1,000)
        x=alt.X("step_plot:Q", scale=alt.Scale(type="log", domain=[1, last], nice=False), title="step (log)"),
        y=alt.Y(f"{column}:Q", title=title), color=_matrix_colour(d),
        detail="run:N", tooltip=["run", "label", "matrix", alt.Tooltip(f"{column}:Q", format=".3f")],
    )
    return _lines_with_points(d, enc, _runs_dashed("run", sorted(d["run"].unique()))).properties(
        width="container", height=260)


def _compared_x(x: str) -> alt.X:
    return (alt.X("fraction:Q", title="fraction of the released steps (each run's last = 1)",
                  scale=alt.Scale(domain=[0, 1]))
            if x == "fraction" else alt.X("step_plot:Q", scale=alt.Scale(type="log"), title="step (log)"))


def evolution_compared(df: pd.DataFrame, x: str = "fraction") -> alt.LayerChart:
    """Figure 3 across caches: cosine to initial against the fraction of each run (or log step).

    ``df``: source (cache and run, e.g. "demo: untied/seed0"), matrix, step, fraction, cos_init.
    Colour is the matrix, the dash pattern the source.
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    enc = dict(x=_compared_x(x), y=alt.Y("cos_init:Q", title="cosine to initial"), color=_matrix_colour(d),
               detail="source:N", tooltip=["source", "matrix", "step", alt.Tooltip("cos_init:Q", format=".3f")])
    sources = sorted(d["source"].unique())
    dashed = _runs_dashed("source", sources) or {"strokeDash": alt.StrokeDash(
        "source:N", scale=_dash_scale(sources), legend=run_legend("run", sources))}  # one run: still named
    return _lines_with_points(d, enc, dashed, size=16).properties(width="container", height=300)


def share_compared(df: pd.DataFrame, x: str = "fraction") -> alt.LayerChart:
    """Figure 4 across caches: rolling output share against the fraction of each run (or log step).

    ``df``: source, step, fraction, share (already a rolling mean). Runs are coloured by what
    they are (tied T's colour, untied I's) and dashed each its own way, as on the page above.
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    line = alt.Chart(d).mark_line().encode(
        x=_compared_x(x), y=alt.Y("share:Q", title="output share (rolling)", scale=alt.Scale(domain=[0, 1])),
        tooltip=["source", "step", alt.Tooltip("share:Q", format=".3f")],
        **_runs_coloured_and_dashed("source", sorted(d["source"].unique())))
    return (line + _half_line()).properties(width="container", height=260)


def scaling(df: pd.DataFrame) -> alt.Chart:
    """Table 2: mean cosine of each tied run's matrix to the untied I and O, by input-gradient factor.

    ``df``: input_grad_scale, target ('I'|'O'), mean, std (over seeds).
    """
    d = df.assign(factor=df["input_grad_scale"].map(lambda f: f"x{f:g}"),
                  lo=df["mean"] - df["std"].fillna(0), hi=df["mean"] + df["std"].fillna(0))
    enc = dict(x=alt.X("factor:N", title="input-gradient factor", axis=alt.Axis(labelAngle=0),
                       sort=sorted(d["factor"].unique(), key=lambda s: float(s[1:]))),
               xOffset="target:N", color=alt.Color("target:N", scale=_scale(["I", "O"]),
                                                   legend=legend("vs untied", ["I", "O"])))
    bars = alt.Chart(d).mark_bar().encode(y=alt.Y("mean:Q", title="mean per-token cosine"),
                                          tooltip=["factor", "target", alt.Tooltip("mean:Q", format=".3f"),
                                                   alt.Tooltip("std:Q", format=".3f")], **enc)
    err = alt.Chart(d).mark_rule(color=NEUTRAL, size=2).encode(y="lo:Q", y2="hi:Q", **enc)
    return (bars + err).properties(width="container", height=260)


# -- width sweep -------------------------------------------------------------------------------

SWEEP_X = {"d_model": ("width d_model (log scale)", "log"),
           "embedding_share_tied": ("embedding share of the tied model's parameters", "linear")}


def sweep_lines(df: pd.DataFrame, series: dict[str, str], *, x: str = "d_model", title: str = "",
                y_title: str = "", crossings: pd.DataFrame | None = None,
                bands: pd.DataFrame | None = None, y_include=()) -> alt.LayerChart:
    """Mean over seeds against width (or embedding share) with 95% whiskers, a zero line, and
    a dashed rule at each named crossing.

    ``df``: one row per grid point with vocab_size, ``x``, and for each column ``c`` of
    ``series`` (column -> legend label) ``c`` (mean) and ``c_half`` (95% half-width; inf or
    NaN: no whisker). ``crossings``: vocab_size, x (the crossing's position), label. ``bands``:
    vocab_size, d_model, series (a label), lo, hi: a shaded band per series (the learning-rate
    sensitivity), in the series' colour. ``y_include``: more values the y range must hold
    (reference lines a caller layers on).
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
    palette = [COLOURS["O"], COLOURS["T"], COLOURS["I"], NEUTRAL]
    colour = alt.Color("series:N", scale=alt.Scale(domain=labels, range=palette[:len(labels)]),
                       legend=legend(None, labels))
    enc = dict(x=xenc, color=colour, detail="vocabulary:N")
    tip = ["series", "vocabulary", alt.Tooltip(f"{x}:Q", format=".3~g"), alt.Tooltip("mean:Q", format=".4f"),
           alt.Tooltip("half:Q", format=".4f", title="95% half-width")]
    # the y range holds every mean, whisker, band and zero, with a margin: nothing sits on the frame
    ys = [0.0, *d["mean"].dropna(), *d["lo"].dropna(), *d["hi"].dropna(), *y_include]
    if bands is not None and len(bands):
        ys += [*bands["lo"].dropna(), *bands["hi"].dropna()]
    y_lo, y_hi = float(min(ys)), float(max(ys))
    pad = 0.08 * ((y_hi - y_lo) or 1.0)
    line = alt.Chart(d).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        y=alt.Y("mean:Q", title=y_title, scale=alt.Scale(domain=[y_lo - pad, y_hi + pad], nice=False)), tooltip=tip,
        **_runs_dashed("vocabulary", sorted(d["vocabulary"].unique(), key=lambda v: int(v[2:].replace(",", ""))),
                       "vocabulary"), **enc)
    whiskers = alt.Chart(d[d["lo"].notna()]).mark_rule(strokeWidth=2, opacity=0.7).encode(
        y="lo:Q", y2="hi:Q", **enc)
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color=NEUTRAL, strokeDash=[4, 4]).encode(y="y:Q")
    layers = [zero, whiskers, line]
    if bands is not None and len(bands):
        b = bands.merge(df[list(dict.fromkeys(["vocab_size", "d_model", x]))].drop_duplicates(),
                        on=["vocab_size", "d_model"])
        b["vocabulary"] = b["vocab_size"].map(lambda v: f"V={v:,}")
        band_enc = {k: v for k, v in enc.items() if k != "color"}  # no colour channel: the legend stays the lines'
        for label, colour in zip(labels, palette):
            sub = b[b["series"] == label]
            if len(sub):
                layers.insert(0, alt.Chart(sub).mark_area(opacity=0.18, color=colour).encode(
                    y="lo:Q", y2="hi:Q", tooltip=["series", alt.Tooltip("lo:Q", format=".3f", title="band low"),
                                                  alt.Tooltip("hi:Q", format=".3f", title="band high")], **band_enc))
    if crossings is not None and len(crossings):
        cr = crossings.rename(columns={"x": x})
        layers.append(alt.Chart(cr).mark_rule(color=NEUTRAL, strokeDash=[6, 3], size=2).encode(
            x=f"{x}:Q", tooltip=[alt.Tooltip("label:N", title="crossing")]))
        layers.append(alt.Chart(cr).mark_text(align="left", dx=6, dy=-8, fontWeight="bold").encode(
            x=f"{x}:Q", y=alt.value(12), text="label:N"))
    return alt.layer(*layers).properties(width="container", height=300, title=title)
