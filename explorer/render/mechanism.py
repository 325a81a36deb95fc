"""The mechanism lab's views (the Why? page, the tour's step, the figure pack, the static site):
each arm's effect on T against the baseline (toward I, away from O) beside what a rerun alone
changes, T's output bias per arm with 95% intervals over seeds, the bias over training, and every
arm's numbers in tables. Pure: frames from a summary in, Altair charts and tables out.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render import read
from explorer.render.figure import Figure, kind
from explorer.render.style import NEUTRAL, SERIES, legend
from tying.analysis import mechanism as M
from tying.cache.mechanism_claims import IDS as CLAIM_IDS  # noqa: F401 (the Why? page's claims, in order)
from tying.cache.summary_types import Summary

MEASURE_COLOURS = {M.MEASURES["bias"]: SERIES[0], M.MEASURES["bias_overlap"]: SERIES[1]}
"""The two readings of the bias: violet and dark cyan (none of T's, I's, O's or the verdicts' colours)."""

ARM_STYLE = {"baseline": ("#6B6B6B", [1, 0]), "null": ("#6B6B6B", [2, 2]), "size": (SERIES[0], [1, 0]),
             "size_update": (SERIES[0], [6, 3]), "reach": (SERIES[1], [1, 0]), "both": (SERIES[2], [1, 0]),
             "sgd": ("#6B6B6B", [8, 4]), "input_x5": (NEUTRAL, [2, 3])}
"""Each arm's line: the baseline grey, the null arm grey dotted, SGD grey dashed, the size arms violet
(the update-balanced one dashed), reach dark cyan, both brown, the input x5 reference light dotted;
the legend draws colour and dash together."""

DIRECTION_COLOURS = {M.DIRECTIONS["toward_i"]: SERIES[1], M.DIRECTIONS["away_from_o"]: SERIES[0]}
"""An arm's two effects: toward I dark cyan, away from O violet."""


def runs(s: Summary) -> pd.DataFrame:
    """The lab's runs, the untied twins left out."""
    df = pd.DataFrame(s.mechanism or [], columns=list(M.RUN_COLUMNS))
    return df[~df["arm"].isin((M.UNTIED, M.UNTIED_SGD))].reset_index(drop=True)


def bias_points(s: Summary) -> pd.DataFrame:
    """Per arm and reading: mean bias over seeds and its 95% interval (arm, label, measure, n,
    mean, lo, hi), in the arms' order."""
    df = runs(s)
    parts = [M.per_arm(df, col).assign(measure=label) for col, label in M.MEASURES.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def bias_chart(points: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """One row per arm: each reading's mean bias (dot) and 95% interval (whisker), the zero line,
    and the baseline's mean as a dotted line per reading (how far an arm lowers it)."""
    labels = [M.ARMS[a].label for a in M.ARMS if a in set(points["arm"])]
    measures = list(MEASURE_COLOURS)
    scale = alt.Scale(domain=measures, range=list(MEASURE_COLOURS.values()))
    colour = alt.Color("measure:N", scale=scale, legend=legend(None, measures))
    y = alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=0))
    off = alt.YOffset("measure:N", sort=measures)
    tip = ["label:N", "measure:N", alt.Tooltip("mean:Q", format="+.3f"), alt.Tooltip("lo:Q", format="+.3f",
                                                                                     title="95% low"),
           alt.Tooltip("hi:Q", format="+.3f", title="95% high"), alt.Tooltip("n:Q", title="seeds")]
    values = [0.0, *points["mean"].dropna(), *points["lo"].dropna(), *points["hi"].dropna()]
    lo, hi = min(values), max(values)
    pad = 0.06 * ((hi - lo) or 1.0)
    x = alt.X("mean:Q", title="T's output bias (mean, 95% interval)",
              scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False, zero=False))
    xs = alt.Scale(domain=[lo - pad, hi + pad], nice=False, zero=False)
    whisk = alt.Chart(points[points["lo"].notna()]).mark_rule(strokeWidth=3).encode(
        x=alt.X("lo:Q", scale=xs), x2="hi:Q", y=y, yOffset=off, color=colour, tooltip=tip)
    dots = alt.Chart(points).mark_point(filled=True, size=140, opacity=1).encode(x=x, y=y, yOffset=off, color=colour,
                                                                                 tooltip=tip)
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color=NEUTRAL, strokeWidth=1.5).encode(
        x=alt.X("x:Q", scale=xs))
    base = points[points["arm"] == "baseline"]
    refs = [alt.Chart(base[base["measure"] == m]).mark_rule(strokeDash=[2, 3], strokeWidth=1.5, color=c).encode(
        x=alt.X("mean:Q", scale=xs)) for m, c in MEASURE_COLOURS.items()]  # no colour channel: one legend
    chart = alt.layer(zero, *refs, whisk, dots).properties(width="container", height=max(180, 52 * len(labels)))
    return chart.properties(title=title) if title else chart


def effect_points(s: Summary) -> pd.DataFrame:
    """Every arm's effects against the baseline (:func:`tying.analysis.mechanism.effects`) with the
    readings and directions named as the chart shows them (columns of the effects and
    ``reading_label``, ``direction_label``)."""
    eff = M.effects(runs(s))
    return eff.assign(reading_label=[M.READINGS[r][2] for r in eff["reading"]],
                      direction_label=[M.DIRECTIONS[d] for d in eff["direction"]])


def effects_chart(points: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """One row per arm, four marks in it: the effect toward I and away from O (colour) on the linear
    map and on overlap@10 (shape: circle, diamond), each a dot (mean over seeds) with
    its whisker (95% interval) over a grey band, what a rerun alone changes (the null arm's largest
    change): an effect counts where its whisker clears the band."""
    directions = list(DIRECTION_COLOURS)
    readings = [r[2] for r in M.READINGS.values()]
    labels = [M.ARMS[a].label for a in M.ARMS if a in set(points["arm"])]
    data = points.assign(neg=-points["band"], row=points["direction_label"] + " · " + points["reading_label"])
    rows = [f"{d} · {r}" for d in directions for r in readings]
    colour = alt.Color("direction_label:N", scale=alt.Scale(domain=directions, range=list(DIRECTION_COLOURS.values())),
                       legend=legend(None, directions))
    shape = alt.Shape("reading_label:N", scale=alt.Scale(domain=readings, range=["circle", "diamond"]),
                      legend=legend(None, readings, symbolFillColor="#444444"))
    y = alt.Y("label:N", sort=labels, title=None, axis=alt.Axis(labelLimit=0))
    off = alt.YOffset("row:N", sort=rows, scale=alt.Scale(domain=rows, paddingOuter=0.3))
    tip = ["label:N", alt.Tooltip("reading_label:N", title="reading"), alt.Tooltip("direction_label:N", title="effect"),
           alt.Tooltip("mean:Q", format="+.3f"), alt.Tooltip("lo:Q", format="+.3f", title="95% low"),
           alt.Tooltip("hi:Q", format="+.3f", title="95% high"),
           alt.Tooltip("band:Q", format=".3f", title="a rerun changes up to"), alt.Tooltip("n:Q", title="seeds")]
    values = [0.0, *data["lo"].dropna(), *data["hi"].dropna(), *data["band"].dropna(), *data["neg"].dropna()]
    lo, hi = min(values), max(values)
    pad = 0.06 * ((hi - lo) or 1.0)
    xs = alt.Scale(domain=[lo - pad, hi + pad], nice=False, zero=False)
    x = alt.X("mean:Q", scale=xs, title="change against the baseline's T")
    band = alt.Chart(data[data["band"].notna()]).mark_rule(color=NEUTRAL, opacity=0.35, strokeWidth=9).encode(
        x=alt.X("neg:Q", scale=xs), x2="band:Q", y=y, yOffset=off)
    whisk = alt.Chart(data[data["lo"].notna()]).mark_rule(strokeWidth=2.5).encode(
        x=alt.X("lo:Q", scale=xs), x2="hi:Q", y=y, yOffset=off, color=colour, tooltip=tip)
    dots = alt.Chart(data).mark_point(size=110, opacity=1, filled=True).encode(
        x=x, y=y, yOffset=off, color=colour, shape=shape, tooltip=tip)
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color=NEUTRAL, strokeWidth=1.5).encode(
        x=alt.X("x:Q", scale=xs))
    chart = alt.layer(band, zero, whisk, dots).properties(width="container", height=max(200, 56 * len(labels)))
    return chart.properties(title=title) if title else chart


def effects_table(s: Summary) -> pd.DataFrame:
    """One row per arm: its effect toward I and away from O on each reading, mean [95% interval]
    over seeds, and T's raw-row cosine with its twin's O; a last row, what a rerun alone changes
    (the null arm's band, ±)."""
    eff = M.effects(runs(s))
    df = runs(s)
    if not len(eff):
        return pd.DataFrame()
    col = lambda r, d: f"{M.DIRECTIONS[d]}, {M.READINGS[r][2]}"
    rows = []
    for arm, g in eff.groupby("arm", sort=False):
        row = {"arm": M.ARMS[arm].label}
        for e in g.itertuples():
            row[col(e.reading, e.direction)] = _cell(e.n, e.mean, e.lo, e.hi) + (" *" if e.beyond else "")
        raw = df.loc[df["arm"] == arm, "identity_raw_o_t"].mean()
        row["T·O raw-row cosine"] = f"{raw:.3f}" if pd.notna(raw) else "—"
        rows.append(row)
    first = eff.drop_duplicates(["reading", "direction"])
    rows.append({"arm": "a rerun changes (null band)", **{col(e.reading, e.direction): f"±{e.band:.3f}" if
                                                          pd.notna(e.band) else "no null arm" for e in first.itertuples()},
                 "T·O raw-row cosine": "—"})
    return pd.DataFrame(rows)


def curve_points(s: Summary) -> pd.DataFrame:
    """The bias (linear, in-sample) over training per arm: mean over seeds and 95% interval at
    every snapshot (arm, label, step, n, mean, lo, hi)."""
    return M.mean_curves(pd.DataFrame(s.mechanism_curves or [], columns=list(M.CURVE_COLUMNS)))


def curves_chart(curves: pd.DataFrame, title: str = "") -> alt.LayerChart:
    """T's bias against the training step, one line per arm (mean over seeds), on a symmetric-log
    step axis so the early steps, where the output side dominates, get room."""
    labels = [M.ARMS[a].label for a in M.ARMS if a in set(curves["arm"])]
    arms = [a for a in M.ARMS if a in set(curves["arm"])]
    arm_legend = legend(None, labels, symbolType="stroke", symbolSize=900, symbolStrokeWidth=3)  # colour and dash
    colour = alt.Color("label:N", scale=alt.Scale(domain=labels, range=[ARM_STYLE[a][0] for a in arms]),
                       legend=arm_legend)
    dash = alt.StrokeDash("label:N", scale=alt.Scale(domain=labels, range=[ARM_STYLE[a][1] for a in arms]),
                          legend=arm_legend)
    tip = ["label:N", alt.Tooltip("step:Q"), alt.Tooltip("mean:Q", format="+.3f"),
           alt.Tooltip("lo:Q", format="+.3f", title="95% low"), alt.Tooltip("hi:Q", format="+.3f", title="95% high")]
    x = alt.X("step:Q", title="training step (symmetric log scale)", scale=alt.Scale(type="symlog", constant=10))
    lines = alt.Chart(curves).mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=40)).encode(
        x=x, y=alt.Y("mean:Q", title="T's output bias, O→T minus I→T"), color=colour, strokeDash=dash, tooltip=tip)
    zero = alt.Chart(pd.DataFrame({"y": [0.0]})).mark_rule(color=NEUTRAL, strokeDash=[4, 4]).encode(y="y:Q")
    chart = alt.layer(zero, lines).properties(width="container", height=300)
    return chart.properties(title=title) if title else chart


def _cell(n: int, mean: float, lo: float, hi: float, pct: bool = False) -> str:
    f = (lambda v: f"{v:.0%}") if pct else (lambda v: f"{v:+.3f}")
    if n == 0:
        return "—"
    return f"{f(mean)} [{f(lo)}, {f(hi)}]" if n > 1 else f(mean)


def arm_table(s: Summary) -> pd.DataFrame:
    """Every arm in one table: what it changes, both readings of the bias and the share of the
    baseline's bias it lowers (mean [95% interval] over seeds), the output share as applied
    over the early steps, how far T moved from its start, the eval loss, the learning rate."""
    df = runs(s)
    rows = []
    base = df[df["arm"] == "baseline"].set_index("seed")["bias"]
    for name, arm in M.ARMS.items():
        g = df[df["arm"] == name]
        if not len(g):
            continue
        removed = [d / base[k] for k, d in M.paired(df, "baseline", name).items() if base[k] > 0] \
            if name != "baseline" else []
        rows.append({"arm": arm.label, "what it changes": arm.about, "seeds": len(g),
                     "bias O→T − I→T": _cell(*M.interval(g["bias"])),
                     "bias T~O − T~I": _cell(*M.interval(g["bias_overlap"])),
                     "baseline's bias lowered": _cell(*M.interval(removed), pct=True) if removed else "—",
                     "T·O raw-row cosine": f"{g['identity_raw_o_t'].mean():.3f}" if g["identity_raw_o_t"].notna().any()
                     else "—",
                     "output share early, as applied": f"{g['output_share_applied_early'].mean():.1%}",
                     "T's cosine to its start": f"{g['cos_start_tied'].mean():.3f}",
                     "eval loss (nats)": f"{g['eval_loss'].mean():.3f}", "peak lr": f"{g['lr'].iloc[0]:g}"})
    return pd.DataFrame(rows)


def untied_line(s: Summary) -> str:
    """How far the untied twins' I moved from its start and their eval loss (the reference every
    arm is measured against), and the unigram every run must beat."""
    df = pd.DataFrame(s.mechanism or [], columns=list(M.RUN_COLUMNS))
    out = []
    for twin, what in ((M.UNTIED, "The untied twins"), (M.UNTIED_SGD, "The untied twins trained by SGD")):
        u = df[df["arm"] == twin]
        if len(u):
            out.append(f"{what} ({len(u)} seeds, {int(u['steps'].iloc[0])} steps): I's mean cosine to its start "
                       f"{u['cos_start_input_untied'].mean():.3f} (1: not moved), eval loss {u['eval_loss'].mean():.3f} "
                       "nats.")
    if df["unigram_loss"].notna().any():
        out.append(f"The add-one unigram scores {df['unigram_loss'].mean():.3f} nats on the same windows.")
    return " ".join(out)


# -- the figure registry's entries -------------------------------------------------------------------


def bias_figure(ref):
    points = bias_points(read.summary(ref))
    return bias_chart(points), points


def effects_figure(ref):
    points = effect_points(read.summary(ref))
    return effects_chart(points), points


def effects_table_figure(ref):
    return None, effects_table(read.summary(ref))


def curves_figure(ref):
    curves = curve_points(read.summary(ref))
    return curves_chart(curves), curves


def table_figure(ref):
    return None, arm_table(read.summary(ref))


FIGURES: tuple[Figure, ...] = (
    Figure("figure-mechanism-effects", "Why? Each arm's effect on T: toward I, away from O (mechanism lab)",
           "Against the baseline's T of the same seed: I→T's rise (toward I) and O→T's fall (away from O), on the "
           "linear map (in-sample) and on overlap@10, mean over seeds with 95% intervals; grey, what a rerun of the "
           "baseline alone changes. An effect counts where its whisker clears the grey band.", effects_figure,
           kind("mechanism"), stages=("mechanism",)),
    Figure("table-mechanism-effects", "Each arm's effect on T, toward I and away from O (mechanism lab)",
           "Mean [95% interval] over seeds of each arm's effect against the baseline's T; * beyond what a rerun "
           "changes (last row).", effects_table_figure, kind("mechanism"), stages=("mechanism",)),
    Figure("figure-mechanism-bias", "Why? T's output bias per arm (mechanism lab)",
           "T's output bias against the untied twin, per arm: O→T minus I→T (linear map, in-sample) and overlap@10 "
           "T~O minus T~I, mean over seeds with 95% intervals; dotted, the baseline's. An arm left of the dotted "
           "line lowers the bias; whether T came closer to I or only left O is the effects figure's question.",
           bias_figure, kind("mechanism"), stages=("mechanism",)),
    Figure("figure-mechanism-curves", "T's output bias over training, per arm (mechanism lab)",
           "O→T minus I→T at each snapshot, T against the untied twin's I and O at the same step, mean over seeds.",
           curves_figure, kind("mechanism"), stages=("mechanism",)),
    Figure("table-mechanism", "Every arm of the mechanism lab",
           "Both readings of T's output bias and the share of the baseline's bias each arm lowers, mean [95% "
           "interval] over seeds.", table_figure, kind("mechanism"), stages=("mechanism",)),
)
