"""Self-prediction (tying.lens.self_prediction): its chart, the figure it brings to the Lens page,
and the tour's line on it, every number read from the cache."""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render import read
from explorer.render.figure import Figure, has
from explorer.render.style import NEUTRAL, PALETTE, legend, present

READOUTS = {"T": "T (tied model)", "O": "O (untied model)", "I": "I (untied model, logit lens)"}
LENSES = {"logit": "logit lens", "tuned": "tuned lens"}


def self_prediction_chart(df: pd.DataFrame) -> alt.Chart:
    """Share of positions whose top-1 is the input token, per hidden state: colour is the readout
    matrix (T, O, I), the line's dash the lens (logit solid, tuned dashed)."""
    d = df.assign(readout=df["matrix"].map(READOUTS), reading=df["lens"].map(LENSES))
    readouts = present(list(READOUTS.values()), d["readout"])
    readings = present(list(LENSES.values()), d["reading"])
    colour = alt.Color("readout:N", scale=alt.Scale(domain=readouts, range=[PALETTE[m] for m in READOUTS
                                                                            if READOUTS[m] in readouts]),
                       legend=legend("read through", readouts, symbolOpacity=1.0))
    # one legend for the lens: shape and dash share its field and title, so Vega-Lite merges them
    lens_legend = legend("lens", readings, symbolStrokeColor=NEUTRAL, symbolFillColor="transparent",
                         symbolStrokeWidth=1.5)
    dash = alt.StrokeDash("reading:N", scale=alt.Scale(domain=readings, range=[[1, 0], [8, 4]][:len(readings)]),
                          legend=lens_legend)
    shape = alt.Shape("reading:N", scale=alt.Scale(domain=readings, range=["circle", "square"][:len(readings)]),
                      legend=lens_legend)
    tip = ["model", "reading", "readout", "layer", alt.Tooltip("share:Q", format=".1%"),
           alt.Tooltip("n_positions:Q", format=",")]
    return alt.Chart(d).mark_line(point=True).encode(
        x=alt.X("layer:O", title="hidden state (0 = input embedding)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("share:Q", title="top-1 is the typed token", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        color=colour, strokeDash=dash, shape=shape, detail="model:N", tooltip=tip,
    ).properties(width="container", height=300)


def figure(ref: read.CacheRef):
    df = read.table(ref, "self_prediction").sort_values(["model", "lens", "matrix", "layer"])
    return self_prediction_chart(df), df


def at_the_embedding(ref: read.CacheRef) -> str | None:
    """One sentence: the logit lens's self-prediction at hidden state 0, per readout (None when the
    cache has none)."""
    if not read.has_rows(ref, "self_prediction"):
        return None
    df = read.table(ref, "self_prediction")
    first = df[(df["lens"] == "logit") & (df["layer"] == 0)]
    parts = [f"{READOUTS[m]} {first.loc[first['matrix'] == m, 'share'].iloc[0]:.0%}"
             for m in READOUTS if m in set(first["matrix"])]
    return ("At the input embedding (hidden state 0) the logit lens reads back the typed token at: "
            + ", ".join(parts) + " of positions.")


FIGURES = (
    Figure("figure-self-prediction", "Self-prediction: the lens reads back the typed token",
           "Share of positions whose top-1, read through a lens at each hidden state, is the input token itself. "
           "A tied model reads through its embedding T: where the logit lens returns the typed token rather than a "
           "guess at the next one, its early layers look hard to read. An untied model is read through its O and, "
           "with the logit lens, through its I as well.",
           figure, has("self_prediction"), stages=("self_prediction",), page="lens"),
)
