"""Linear CKA of T, I and O (tying.analysis.cka): the chart and the figure it contributes."""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render import read
from explorer.render.figure import Figure, has
from explorer.render.style import COLOURS, NEUTRAL

ORDER = ("T~O", "T~I", "I~O")  # the paper's contrast first: is T closer to O than to I?


def cka_bars(df: pd.DataFrame) -> alt.LayerChart:
    """Debiased linear CKA per matrix pair as bars (1: the same up to a rotation and a scale,
    0: unrelated), the plain estimator as a dark tick on each."""
    d = df.assign(label=df["cka"].map(lambda v: f"{v:.2f}"))
    pairs = [p for p in ORDER if p in set(d["pair"])]
    x = alt.X("pair:N", sort=pairs, title=None, axis=alt.Axis(labelAngle=0))
    y = alt.Y("cka:Q", title="linear CKA (debiased)", scale=alt.Scale(domain=[min(0.0, float(d["cka"].min())), 1]))
    tip = ["pair", alt.Tooltip("cka:Q", title="CKA (debiased)", format=".3f"),
           alt.Tooltip("cka_biased:Q", title="CKA (plain)", format=".3f"), alt.Tooltip("n_tokens:Q", format=",")]
    colour = alt.Color("pair:N", scale=alt.Scale(domain=pairs, range=[COLOURS.get(p, NEUTRAL) for p in pairs]),
                       legend=None)
    bars = alt.Chart(d).mark_bar(width={"band": 0.6}).encode(x=x, y=y, color=colour, tooltip=tip)
    text = alt.Chart(d).mark_text(dy=-12, fontWeight="bold").encode(x=x, y=y, text="label:N")  # sized by style_config()
    plain = alt.Chart(d).mark_tick(color="black", thickness=2, size=60, opacity=0.6).encode(
        x=x, y="cka_biased:Q", tooltip=tip)
    return alt.layer(bars, plain, text).properties(width="container", height=280)


def cka_figure(ref: read.CacheRef):
    df = read.table(ref, "cka")
    return cka_bars(df), df


FIGURES = (
    Figure("figure-cka", "Linear CKA of T, I and O",
           "Debiased linear CKA between each pair of matrices over every common token (Kornblith et al. 2019): 1 "
           "means the same up to a rotation and a scale, 0 unrelated; dark ticks: the plain, upward-biased "
           "estimator. Output-like T: T~O above T~I.", cka_figure, has("cka"), stages=("cka",)),
)
