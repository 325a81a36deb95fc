"""The Dynamics page's charts: gradient norms and the output side's share (Figure 4), the
matrices' evolution from their start (Figure 3), both across caches, and the input-gradient
scaling of Table 2.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render.style import (
    COLOURS,
    NEUTRAL,
    PALETTE,
    colour_scale,
    dash_scale,
    legend,
    present,
    run_legend,
    runs_dashed,
)


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
        **runs_dashed("run", sorted(long["run"].unique())),
    ).properties(width="container", height=260)


def run_colour(run: str) -> str:
    """A run's colour by what it is: tied runs (input-scaled ones too) T's, untied ones the untied
    model's (not I's: the run trains I and O both), others neutral."""
    name = str(run).split(": ")[-1]
    if name.startswith("tied") or " tied" in name:
        return COLOURS["T"]
    if name.startswith("untied") or " untied" in name:
        return COLOURS["untied"]
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
            "strokeDash": alt.StrokeDash(f"{field}:N", scale=dash_scale(runs), legend=leg)}


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
    chart = (line + _half_line()).properties(width="container", height=240)
    return chart.properties(title=f"run: {runs[0]}") if len(runs) == 1 else chart  # named without a legend


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
                   alt.Chart(early).mark_text(align="left", dx=4, dy=10, baseline="top").encode(  # the theme's ink
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
    mats = present(["T", "I", "O"], d["matrix"]) or ["T", "I", "O"]
    return alt.Color("matrix:N", scale=colour_scale(mats), legend=legend("matrix", mats))


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
    return _lines_with_points(d, enc, runs_dashed("run", sorted(d["run"].unique()))).properties(
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
    dashed = runs_dashed("source", sources) or {"strokeDash": alt.StrokeDash(
        "source:N", scale=dash_scale(sources), legend=run_legend("run", sources))}
    chart = _lines_with_points(d, enc, dashed, size=16).properties(width="container", height=300)
    return chart.properties(title=f"run: {sources[0]}") if len(sources) == 1 else chart  # named without a legend


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
               xOffset="target:N", color=alt.Color("target:N", scale=colour_scale(["I", "O"]),
                                                   legend=legend("vs untied", ["I", "O"])))
    bars = alt.Chart(d).mark_bar().encode(y=alt.Y("mean:Q", title="mean per-token cosine"),
                                          tooltip=["factor", "target", alt.Tooltip("mean:Q", format=".3f"),
                                                   alt.Tooltip("std:Q", format=".3f")], **enc)
    err = alt.Chart(d).mark_rule(color=NEUTRAL, size=2).encode(y="lo:Q", y2="hi:Q", **enc)
    return (bars + err).properties(width="container", height=260)
