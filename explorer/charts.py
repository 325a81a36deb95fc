"""Chart builders: each takes DataFrames and returns an Altair chart (tests can inspect them).

Colours follow the paper's roles everywhere: T (tied) purple, I (untied input) blue,
O (untied output) orange.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from tying.cache.schema import DISPLAY_COMPARISONS, MATRIX_NAMES, display_comparison

COLOURS = {"T": "#7b3294", "I": "#2c7bb6", "O": "#e66101", "tied": "#7b3294", "untied": "#2c7bb6",
           "O->T": "#e66101", "I->T": "#2c7bb6", "I->O": "#999999",
           "O→T": "#e66101", "I→T": "#2c7bb6", "I→O": "#999999",
           "T~O": "#e66101", "T~I": "#2c7bb6", "I~O": "#999999"}
SAMPLE_POINTS = 12_000  # most points a projection scatter draws (the rest: density or a sample)

# Pages sample or aggregate large data themselves; Altair's 5,000-row guard would only stop
# specs (and PNG/SVG exports) of the samples they already chose.
alt.data_transformers.disable_max_rows()


def _scale(keys) -> alt.Scale:
    keys = list(keys)
    return alt.Scale(domain=keys, range=[COLOURS.get(k, "#555555") for k in keys])


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

def cosine_histogram(df: pd.DataFrame, *, comparisons=DISPLAY_COMPARISONS[:2], title: str = "") -> alt.Chart:
    """Histogram of per-token cosine by comparison (the paper's Figure 1).

    ``df``: columns comparison, cosine (one row per token and comparison).
    """
    data = df[df["comparison"].isin(comparisons)]
    bins = np.linspace(-0.2 if len(data) == 0 else min(-0.2, float(data["cosine"].min())), 1.0, 49)
    shown = [display_comparison(c) for c in comparisons]  # the page writes O→T: so does the legend
    rows = []
    for comp, g in data.groupby("comparison"):
        counts, edges = np.histogram(g["cosine"], bins=bins)
        rows.append(pd.DataFrame({"comparison": display_comparison(comp), "lo": edges[:-1], "hi": edges[1:],
                                  "share": counts / max(1, len(g))}))
    hist = pd.concat(rows) if rows else pd.DataFrame(columns=["comparison", "lo", "hi", "share"])
    means = data.groupby("comparison", as_index=False)["cosine"].mean()
    means["comparison"] = means["comparison"].map(display_comparison)
    bars = alt.Chart(hist).mark_bar(opacity=0.55, binSpacing=0).encode(
        x=alt.X("lo:Q", title="per-token cosine", scale=alt.Scale(domain=[float(bins[0]), 1.0])),
        x2="hi:Q",
        y=alt.Y("share:Q", title="share of tokens", stack=None),
        y2=alt.datum(0),  # bars stand on the axis (without it Vega-Lite draws floating dashes)
        color=alt.Color("comparison:N", scale=_scale(shown), title="comparison"),
        tooltip=["comparison", alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    )
    rules = alt.Chart(means).mark_rule(strokeDash=[4, 3], size=2).encode(
        x="cosine:Q", color=alt.Color("comparison:N", scale=_scale(shown)),
        tooltip=["comparison", alt.Tooltip("cosine:Q", title="mean", format=".3f")])
    return (bars + rules).properties(title=title, width="container", height=280)


def norm_vs_frequency(df: pd.DataFrame) -> alt.Chart:
    """Per-token L2 norm against corpus frequency for T, I and O (the paper's Figure 5).

    ``df``: columns matrix, token, norm, freq (freq > 0 rows are drawn, log scale).
    """
    data = df[df["freq"].fillna(0) > 0].copy()
    data["matrix_name"] = data["matrix"].map(lambda m: f"{m} ({MATRIX_NAMES[m]})")
    if len(data) > SAMPLE_POINTS:
        data = data.sample(SAMPLE_POINTS, random_state=0)
    return alt.Chart(data).mark_circle(size=10, opacity=0.35).encode(
        x=alt.X("freq:Q", scale=alt.Scale(type="log"), title="corpus frequency (count)"),
        y=alt.Y("norm:Q", title="L2 norm"),
        color=alt.Color("matrix:N", scale=_scale(["T", "I", "O"]), legend=None),
        tooltip=["token:Q", "freq:Q", alt.Tooltip("norm:Q", format=".3f")],
    ).properties(width=260, height=240).facet(column=alt.Column("matrix_name:N", title=None,
                                                                 sort=["T (tied)", "I (untied input)"]))


# -- neighbours ------------------------------------------------------------------------------

def overlap_histogram(counts: pd.DataFrame, k: int) -> alt.Chart:
    """Distribution over the vocabulary of overlap@k. ``counts``: columns pair, overlap, count."""
    counts = counts.assign(share=counts["count"] / counts.groupby("pair")["count"].transform("sum"))
    pairs = sorted(counts["pair"].unique(), key=["T~I", "T~O", "I~O"].index)
    return alt.Chart(counts).mark_bar(opacity=0.8).encode(
        x=alt.X("overlap:O", title=f"overlap@{k}", axis=alt.Axis(format=".1f")),
        xOffset="pair:N",
        y=alt.Y("share:Q", title="share of tokens"),
        color=alt.Color("pair:N", scale=_scale(pairs), title="matrices"),
        tooltip=["pair", alt.Tooltip("overlap:Q", format=".2f"), alt.Tooltip("share:Q", format=".3f")],
    ).properties(width="container", height=260)


def overlap_curve(df: pd.DataFrame, paper: dict | None = None, k: int | None = None) -> alt.Chart:
    """Mean overlap@k against k for T~I, T~O, I~O; the paper's Table 5 values at k=10 as diamonds."""
    pairs = list(dict.fromkeys(df["pair"]))
    line = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=18)).encode(
        x=alt.X("k:Q", title="k"), y=alt.Y("mean_overlap:Q", title="mean overlap@k", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("pair:N", scale=_scale(pairs), title="matrices"),
        tooltip=["pair", "k", alt.Tooltip("mean_overlap:Q", format=".3f")])
    layers = [line]
    if k is not None:
        layers.append(alt.Chart(pd.DataFrame({"k": [k]})).mark_rule(strokeDash=[2, 2], color="#888").encode(x="k:Q"))
    if paper:
        ref = pd.DataFrame({"pair": list(paper), "k": 10, "mean_overlap": list(paper.values())})
        layers.append(alt.Chart(ref).mark_point(shape="diamond", size=120, filled=False, strokeWidth=2).encode(
            x="k:Q", y="mean_overlap:Q", color=alt.Color("pair:N", scale=_scale(pairs)),
            tooltip=["pair", alt.Tooltip("mean_overlap:Q", title="paper (Table 5)")]))
    return alt.layer(*layers).properties(width="container", height=260)


# -- projection ------------------------------------------------------------------------------

PICK = "pick"  # the point-selection parameter of a projection view: a click picks that token
PROJECTION_ORDER = ("I", "T", "O")


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
            color=alt.Color("count():Q", scale=alt.Scale(scheme="greys", type="log"), legend=None))
    else:
        colour = (alt.Color("matrix:N", scale=_scale(list(PROJECTION_ORDER)), title="matrix") if colour_matrix
                  else alt.value(COLOURS.get(str(df["matrix"].iloc[0]) if len(df) else "T", "#555555")))
        points = alt.Chart(df).mark_circle(size=14, opacity=0.4, cursor="pointer").encode(
            x=alt.X("x:Q", title=None, axis=None), y=alt.Y("y:Q", title=None, axis=None),
            color=colour, tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
                                   "matrix:N"])
        if interactive:
            points = points.add_params(pick, zoom)
    hi = highlight.assign(label=highlight["shown"] + (" (" + highlight["matrix"] + ")" if label_matrix else ""))
    marks = alt.Chart(hi).mark_point(filled=True, stroke="black", strokeWidth=1, cursor="pointer").encode(
        x="x:Q", y="y:Q",
        size=alt.Size("role:O", scale=alt.Scale(domain=["picked", "neighbour"], range=[240, 80]), legend=None),
        shape=alt.Shape("role:N", scale=alt.Scale(domain=["picked", "neighbour"], range=["diamond", "circle"]),
                        title="highlighted"),
        color=alt.value("#ffd92f"), tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
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
               density: bool = False, height: int = 420) -> alt.TopLevelMixin:
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
                                label_matrix=False, interactive=False).properties(width=300, height=300, title=f"{m} ({MATRIX_NAMES[m]})")
             for m in PROJECTION_ORDER]
    return alt.hconcat(*views).resolve_scale(color="shared")


# -- lens ----------------------------------------------------------------------------------

PAPER_LENS_LABEL = "paper (authors' indexing, see note)"
"""Legend entry of the paper's tuned-lens points (their evaluation is shifted by one hidden state)."""

_LENS_SERIES = ("tuned lens", "logit lens")
_SERIES_SHAPE = {"tuned lens": "circle", "logit lens": "square"}
_SERIES_DASH = {"tuned lens": [1, 0], "logit lens": [6, 4]}


def kl_curves(df: pd.DataFrame, paper: pd.DataFrame | None = None, *,
              paper_label: str = PAPER_LENS_LABEL, log_y: bool = False) -> alt.Chart:
    """Mean KL (bits) per hidden state for tuned and logit lens, tied and untied.

    ``df``: model ('tied'|'untied'), lens ('tuned'|'logit'), layer, kl_mean, kl_std;
    ``paper``: model, layer, kl_mean, drawn as hollow triangles (no line) under
    ``paper_label`` in the legend. The paper's points are drawn where ``paper`` puts them:
    a caller that shifts them by a hidden state says so in ``paper_label``.

    Colour is the model (tied / untied); the series legend tells tuned lens (solid line,
    circles), logit lens (dashed line, squares) and the paper (triangles) apart by mark.
    ``log_y``: a symmetric-log KL axis, so a large logit-lens KL at the input embedding does
    not flatten the tuned curves (0 stays drawable).
    """
    data = df.assign(series=df["lens"].map(lambda v: f"{v} lens"),
                     lo=(df["kl_mean"] - df["kl_std"]).clip(lower=0), hi=df["kl_mean"] + df["kl_std"])
    has_paper = paper is not None and len(paper) > 0
    names = list(_LENS_SERIES) + ([paper_label] if has_paper else [])
    shapes = [_SERIES_SHAPE.get(n, "triangle-up") for n in names]
    dashes = [_SERIES_DASH.get(n, [1, 0]) for n in names]
    # one legend for the series: shape and dash share the field and title, so Vega-Lite merges them
    legend = alt.Legend(title="series", symbolStrokeColor="#555555", symbolFillColor="white", symbolStrokeWidth=1.5,
                        labelLimit=320)
    shape = alt.Shape("series:N", scale=alt.Scale(domain=names, range=shapes), legend=legend)
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=dashes), legend=legend)
    enc = dict(x=alt.X("layer:O", title="hidden state (0 = input embedding)"),
               color=alt.Color("model:N", scale=_scale(["tied", "untied"]),
                               legend=alt.Legend(title="model", symbolOpacity=1.0)))
    tip = ["model", "series", "layer", alt.Tooltip("kl_mean:Q", format=".3f")]
    yscale = alt.Scale(type="symlog", constant=0.1) if log_y else alt.Scale()
    ytitle = "KL to final output (bits, symlog)" if log_y else "KL to final output (bits)"
    y = alt.Y("kl_mean:Q", title=ytitle, scale=yscale)
    band = alt.Chart(data[data["lens"] == "tuned"]).mark_area(opacity=0.12).encode(
        y=alt.Y("lo:Q", title=ytitle, scale=yscale), y2="hi:Q", detail="model:N", **enc)
    lines = alt.Chart(data).mark_line().encode(y=y, strokeDash=dash, detail="series:N", **enc)
    points = alt.Chart(data).mark_point(filled=True, size=40).encode(
        y=y, shape=shape, tooltip=tip + [alt.Tooltip("kl_std:Q", format=".3f")], **enc)
    layers = [band, lines, points]
    if has_paper:
        pts = paper.assign(series=paper_label)
        layers.append(alt.Chart(pts).mark_point(filled=False, size=90, strokeWidth=1.8).encode(
            y=y, shape=shape, tooltip=tip, **enc))
    return alt.layer(*layers).properties(width="container", height=320)


def lens_training_curve(df: pd.DataFrame, window: int | None = None, *, log_y: bool = False) -> alt.Chart:
    """Tuned-lens training KL per step (df: model, step, layer, kl_bits), one panel per model.

    Each line is the rolling mean over ``window`` steps (default: a twentieth of the steps,
    at least 1; 1 draws the raw curve), per model and hidden state; the raw value is in the
    tooltip. ``log_y`` puts KL on a log scale; hidden states whose KL never exceeds 1e-3 bits
    (the last one, read through the identity) are then left out.
    """
    d = df.sort_values(["model", "layer", "step"]).copy()
    n_steps = int(d.groupby(["model", "layer"])["step"].nunique().max()) if len(d) else 1
    w = max(1, n_steps // 20) if window is None else max(1, int(window))
    d["kl_smooth"] = d.groupby(["model", "layer"])["kl_bits"].transform(
        lambda v: v.rolling(w, min_periods=1).mean())
    if log_y:
        d = d[d.groupby(["model", "layer"])["kl_bits"].transform("max") > 1e-3]
    title = "training KL (bits)" + (f", rolling mean of {w} steps" if w > 1 else "")
    y = alt.Y("kl_smooth:Q", title=title, scale=alt.Scale(type="log") if log_y else alt.Undefined)
    return alt.Chart(d).mark_line(opacity=0.85).encode(
        x=alt.X("step:Q"), y=y,
        color=alt.Color("layer:O", scale=alt.Scale(scheme="viridis"), title="hidden state"),
        tooltip=["model", "layer", "step", alt.Tooltip("kl_bits:Q", format=".3f", title="KL (bits)"),
                 alt.Tooltip("kl_smooth:Q", format=".3f", title=f"rolling mean ({w})")],
    ).properties(width=320, height=220).facet(column=alt.Column("model:N", title=None))


def trajectory(df: pd.DataFrame) -> alt.Chart:
    """Top-1 prediction of every layer at every position: a heat map of probability with the text."""
    top = df[df["rank"] == 1]
    base = alt.Chart(top).encode(
        x=alt.X("position:O", title="position (input token)",
                axis=alt.Axis(labelExpr="datum.label")),
        y=alt.Y("layer:O", sort="descending", title="hidden state"))
    rect = base.mark_rect().encode(color=alt.Color("prob:Q", scale=alt.Scale(scheme="blues", domain=[0, 1]),
                                                   title="top-1 prob"),
                                   tooltip=["token:N", "layer:O", "prediction:N", alt.Tooltip("prob:Q", format=".2f")])
    text = base.mark_text().encode(text="prediction:N",
                                               color=alt.condition("datum.prob > 0.5", alt.value("white"),
                                                                   alt.value("black")))
    # a row per hidden state tall enough for its label and text, and never a sliver
    return (rect + text).properties(width="container", height=max(260, 44 * max(1, top["layer"].nunique())))


# -- training dynamics ----------------------------------------------------------------------

def gradient_norms(df: pd.DataFrame) -> alt.Chart:
    """Gradient L2 norms per step, input side vs output side (the paper's Figure 4).

    ``df``: run, step, grad_input_norm, grad_output_norm.
    """
    long = df.melt(id_vars=["run", "step"], value_vars=["grad_input_norm", "grad_output_norm"],
                   var_name="side", value_name="norm")
    long["side"] = long["side"].map({"grad_input_norm": "input lookup", "grad_output_norm": "output projection"})
    return alt.Chart(long).mark_line(opacity=0.85).encode(
        x=alt.X("step:Q"), y=alt.Y("norm:Q", scale=alt.Scale(type="log"), title="gradient L2 norm"),
        color=alt.Color("side:N", scale=alt.Scale(domain=["input lookup", "output projection"],
                                                  range=[COLOURS["I"], COLOURS["O"]])),
        detail="run:N", tooltip=["run", "step", "side", alt.Tooltip("norm:Q", format=".4g")],
    ).properties(width="container", height=260)


def run_colours(runs) -> alt.Scale:
    """Tied runs in the tied purple (input-scaled ones in a lighter shade), untied in blue, others grey."""
    palette = []
    for r in runs:
        name = str(r).split(": ")[-1]
        if name.startswith("tied_scaled"):
            palette.append("#c2a5cf")
        elif name.startswith("tied") or " tied" in name:
            palette.append(COLOURS["T"])
        elif name.startswith("untied"):
            palette.append(COLOURS["I"])
        else:
            palette.append("#555555")
    return alt.Scale(domain=list(runs), range=palette)


def output_share(df: pd.DataFrame, window: int = 10) -> alt.Chart:
    """Output side's share per step (rolling mean over ``window`` steps), with the 0.5 line.

    Runs are coloured by what they are (tied purple, input-scaled tied light purple).
    """
    d = df.sort_values(["run", "step"]).copy()
    d["share"] = d.groupby("run")["output_share"].transform(lambda s: s.rolling(window, min_periods=1).mean())
    runs = sorted(d["run"].unique())
    line = alt.Chart(d).mark_line().encode(
        x="step:Q", y=alt.Y("share:Q", title=f"output share (rolling {window})", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("run:N", title="run", scale=run_colours(runs)),
        strokeDash=alt.StrokeDash("run:N", title="run"),
        tooltip=["run", "step", alt.Tooltip("share:Q", format=".3f")])
    half = alt.Chart(pd.DataFrame({"y": [0.5]})).mark_rule(strokeDash=[4, 4], color="#888").encode(y="y:Q")
    return (line + half).properties(width="container", height=240)


def evolution(df: pd.DataFrame, column: str = "cos_init") -> alt.Chart:
    """Mean per-token cosine to the initial (or previous) checkpoint against step (Figure 3).

    Colour is the matrix (T, I, O); with several runs each run has its own dash pattern.
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    title = "cosine to initial" if column == "cos_init" else "cosine to previous checkpoint"
    last = max(2, int(d["step_plot"].max())) if len(d) else 2
    enc = dict(  # the axis ends at the last step (a log scale would round 250 up to 1,000)
        x=alt.X("step_plot:Q", scale=alt.Scale(type="log", domain=[1, last], nice=False), title="step (log)"),
        y=alt.Y(f"{column}:Q", title=title),
        color=alt.Color("matrix:N", scale=_scale(["T", "I", "O"]), title="matrix"),
        detail="run:N", tooltip=["run", "label", "matrix", alt.Tooltip(f"{column}:Q", format=".3f")],
    )
    if d["run"].nunique() > 1:
        enc["strokeDash"] = alt.StrokeDash("run:N", title="run")
    return alt.Chart(d).mark_line(point=True).encode(**enc).properties(width="container", height=260)


def evolution_compared(df: pd.DataFrame, x: str = "fraction") -> alt.Chart:
    """Figure 3 across caches: cosine to initial against the fraction of each run (or log step).

    ``df``: source (cache and run, e.g. "demo: untied/seed0"), matrix, step, fraction, cos_init.
    Colour is the matrix, the dash pattern the source.
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    xenc = (alt.X("fraction:Q", title="fraction of the run", scale=alt.Scale(domain=[0, 1]))
            if x == "fraction" else alt.X("step_plot:Q", scale=alt.Scale(type="log"), title="step (log)"))
    return alt.Chart(d).mark_line(point=True).encode(
        x=xenc, y=alt.Y("cos_init:Q", title="cosine to initial"),
        color=alt.Color("matrix:N", scale=_scale(["T", "I", "O"]), title="matrix"),
        strokeDash=alt.StrokeDash("source:N", title="run"), detail="source:N",
        tooltip=["source", "matrix", "step", alt.Tooltip("cos_init:Q", format=".3f")],
    ).properties(width="container", height=300)


def share_compared(df: pd.DataFrame, x: str = "fraction") -> alt.Chart:
    """Figure 4 across caches: rolling output share against the fraction of each run (or log step).

    ``df``: source, step, fraction, share (already a rolling mean).
    """
    d = df.copy()
    d["step_plot"] = d["step"].clip(lower=1)
    xenc = (alt.X("fraction:Q", title="fraction of the run", scale=alt.Scale(domain=[0, 1]))
            if x == "fraction" else alt.X("step_plot:Q", scale=alt.Scale(type="log"), title="step (log)"))
    line = alt.Chart(d).mark_line().encode(
        x=xenc, y=alt.Y("share:Q", title="output share (rolling)", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("source:N", title="run"), tooltip=["source", "step", alt.Tooltip("share:Q", format=".3f")])
    half = alt.Chart(pd.DataFrame({"y": [0.5]})).mark_rule(strokeDash=[4, 4], color="#888").encode(y="y:Q")
    return (line + half).properties(width="container", height=260)


def scaling(df: pd.DataFrame) -> alt.Chart:
    """Table 2: mean cosine of each tied run's matrix to the untied I and O, by input-gradient factor.

    ``df``: input_grad_scale, target ('I'|'O'), mean, std (over seeds).
    """
    d = df.assign(factor=df["input_grad_scale"].map(lambda f: f"x{f:g}"),
                  lo=df["mean"] - df["std"].fillna(0), hi=df["mean"] + df["std"].fillna(0))
    enc = dict(x=alt.X("factor:N", title="input-gradient factor", sort=sorted(d["factor"].unique(), key=lambda s: float(s[1:]))),
               xOffset="target:N", color=alt.Color("target:N", scale=_scale(["I", "O"]), title="vs untied"))
    bars = alt.Chart(d).mark_bar().encode(y=alt.Y("mean:Q", title="mean per-token cosine"),
                                          tooltip=["factor", "target", alt.Tooltip("mean:Q", format=".3f"),
                                                   alt.Tooltip("std:Q", format=".3f")], **enc)
    err = alt.Chart(d).mark_rule(color="black").encode(y="lo:Q", y2="hi:Q", **enc)
    return (bars + err).properties(width="container", height=260)


# -- width sweep -------------------------------------------------------------------------------

SWEEP_X = {"d_model": ("width d_model (log scale)", "log"),
           "embedding_share_tied": ("embedding share of the tied model's parameters", "linear")}


def sweep_lines(df: pd.DataFrame, series: dict[str, str], *, x: str = "d_model", title: str = "",
                y_title: str = "", crossings: pd.DataFrame | None = None) -> alt.LayerChart:
    """Mean over seeds against width (or embedding share) with 95% whiskers, a zero line, and
    a dashed rule at each named crossing.

    ``df``: one row per grid point with vocab_size, ``x``, and for each column ``c`` of
    ``series`` (column -> legend label) ``c`` (mean) and ``c_half`` (95% half-width; inf or
    NaN: no whisker). ``crossings``: vocab_size, x (the crossing's position), label.
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
    xenc = alt.X(f"{x}:Q", title=x_title,
                 scale=alt.Scale(type="log", base=2, nice=False) if x_type == "log" else alt.Scale(zero=False),
                 axis=alt.Axis(format=".0%") if x == "embedding_share_tied" else alt.Axis(values=sorted(df[x].unique())))
    labels = list(series.values())
    palette = ["#e66101", "#7b3294", "#2c7bb6", "#555555"]
    colour = alt.Color("series:N", title=None, scale=alt.Scale(domain=labels, range=palette[:len(labels)]),
                       legend=alt.Legend(orient="bottom", labelLimit=600, direction="vertical"))
    enc = dict(x=xenc, color=colour, detail="vocabulary:N")
    tip = ["series", "vocabulary", alt.Tooltip(f"{x}:Q", format=".3~g"), alt.Tooltip("mean:Q", format=".4f"),
           alt.Tooltip("half:Q", format=".4f", title="95% half-width")]
    many_vocab = d["vocabulary"].nunique() > 1
    line = alt.Chart(d).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        y=alt.Y("mean:Q", title=y_title), tooltip=tip,
        **({"strokeDash": alt.StrokeDash("vocabulary:N", title="vocabulary")} if many_vocab else {}), **enc)
    whiskers = alt.Chart(d[d["lo"].notna()]).mark_rule(strokeWidth=2, opacity=0.7).encode(
        y="lo:Q", y2="hi:Q", **enc)
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color="#888", strokeDash=[4, 4]).encode(y="y:Q")
    layers = [zero, whiskers, line]
    if crossings is not None and len(crossings):
        cr = crossings.rename(columns={"x": x})
        layers.append(alt.Chart(cr).mark_rule(color="black", strokeDash=[6, 3], size=2).encode(
            x=f"{x}:Q", tooltip=[alt.Tooltip("label:N", title="crossing")]))
        layers.append(alt.Chart(cr).mark_text(align="left", dx=6, dy=-8, fontWeight="bold").encode(
            x=f"{x}:Q", y=alt.value(12), text="label:N"))
    return alt.layer(*layers).properties(width="container", height=300, title=title)
