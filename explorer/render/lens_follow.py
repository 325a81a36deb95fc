"""Following a token through the hidden states on the Lens page (pure functions, no Streamlit):
a cell's top-k, each position's commitment hidden state (tied beside untied), and pinned tokens'
probability at every hidden state, from the full softmax where a model ran or from the stored
top-k, where a pin outside it is a stated gap (with the bound it stays under), never a number.
"""

from __future__ import annotations

import json

import altair as alt
import numpy as np
import pandas as pd

from explorer.render.style import NEUTRAL, colour_scale, legend, present
from tying.lens.follow import commitment, pinned_from_ranked

CELL = "cell"
"""The trajectory grid's click selection (fields position and layer)."""

_LENS_DASH = {"tuned lens": [1, 0], "logit lens": [6, 4]}


def cell_top(t: pd.DataFrame, position: int, layer: int) -> pd.DataFrame:
    """One cell's top-k of a trajectory (one model and lens): rank, prediction, probability."""
    at = t[(t["position"] == position) & (t["layer"] == layer)].sort_values("rank")
    return pd.DataFrame({"rank": at["rank"].astype(int).to_numpy(), "prediction": at["prediction"].to_numpy(),
                         "probability": at["prob"].round(4).to_numpy()})


def commitment_rows(t: pd.DataFrame) -> pd.DataFrame:
    """Each model's and position's commitment hidden state (:func:`tying.lens.follow.commitment`)
    from trajectory rows of one lens (model, position, token, layer, rank, prediction): columns
    model, position, token, final (the final top-1), commits, states (hidden states in all)."""
    out = []
    for model, rows in t[t["rank"] == 1].groupby("model", sort=False):
        grid = rows.pivot_table(index="layer", columns="position", values="prediction", aggfunc="first")
        grid = grid.sort_index().sort_index(axis=1)
        commits = commitment(grid.to_numpy(dtype=object))
        tokens = rows.drop_duplicates("position").set_index("position")["token"]
        out.append(pd.DataFrame({"model": model, "position": grid.columns.astype(int), "commits": commits,
                                 "token": [tokens.get(p, "") for p in grid.columns],
                                 "final": grid.iloc[-1].to_numpy(), "states": len(grid)}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["model", "position", "commits", "token", "final", "states"])


def _token_axis(df: pd.DataFrame, title: str = "input token") -> alt.X:
    names = {int(p): str(t) for p, t in zip(df["position"], df["token"], strict=True)}
    label = f"{json.dumps([names.get(i, '') for i in range(max(names) + 1 if names else 0)])}[datum.value]"
    return alt.X("position:O", title=title, axis=alt.Axis(labelExpr=label, labelAngle=-45, labelLimit=90,
                                                          labelOverlap=False))


def commitment_strip(df: pd.DataFrame) -> alt.Chart:
    """A strip per model (tied above untied; one for a one-model cache), a cell per position: the
    hidden state from which the final top-1 stays top-1, as a number and a shade (darker = later)."""
    models = present(["tied", "untied"], df["model"]) or sorted(df["model"].unique())
    data = df.assign(share=df["commits"] / (df["states"] - 1).clip(lower=1))
    base = alt.Chart(data).encode(x=_token_axis(data), y=alt.Y("model:N", sort=models, title=None))
    tip = ["model:N", "position:O", "token:N", alt.Tooltip("commits:Q", title="commits at hidden state"),
           alt.Tooltip("final:N", title="final top-1")]
    rect = base.mark_rect(stroke=NEUTRAL, strokeWidth=0.5).encode(
        color=alt.Color("share:Q", scale=alt.Scale(scheme="greys", domain=[0, 1]), legend=None), tooltip=tip)
    text = base.mark_text(fontWeight="bold").encode(
        text="commits:Q", color=alt.condition("datum.share > 0.5", alt.value("white"), alt.value("black")))
    return (rect + text).properties(width="container", height=46 * len(models))


def pinned_stored(rows: pd.DataFrame, pins: list[str], position: int) -> pd.DataFrame:
    """Each pin's probability at every hidden state of ``position`` from stored top-k rows
    (model, lens, layer, position, rank, prediction, prob; tokens as shown): columns model, lens,
    layer, pin, prob (NaN where the pin is outside the cell's top k) and bound (the cell's k-th
    probability there: the pin's is at most that)."""
    at = rows[rows["position"] == position].sort_values(["model", "lens", "layer", "rank"])
    out = []
    for (model, lens, layer), cell in at.groupby(["model", "lens", "layer"], sort=True):
        preds, probs = cell["prediction"].to_numpy()[None, :], cell["prob"].to_numpy()[None, :]
        for pin in pins:
            prob, bound = pinned_from_ranked(preds, probs, pin)
            out.append((model, lens, int(layer), pin, float(prob[0]), float(bound[0])))
    return pd.DataFrame(out, columns=["model", "lens", "layer", "pin", "prob", "bound"])


def pinned_full(pinned: pd.DataFrame, position: int) -> pd.DataFrame:
    """The worker's pinned rows (model, lens, layer, position, pin, prob: the full softmax) at
    ``position``, in :func:`pinned_stored`'s columns (bound: NaN, nothing is missing)."""
    at = pinned[pinned["position"] == position]
    return pd.DataFrame({"model": at["model"].to_numpy(), "lens": at["lens"].to_numpy(),
                         "layer": at["layer"].astype(int).to_numpy(), "pin": at["pin"].to_numpy(),
                         "prob": at["prob"].astype(float).to_numpy(), "bound": np.nan})


def gaps_line(df: pd.DataFrame, k: int) -> str | None:
    """What the charts leave out: per pin drawn (known in some cell), how many cells had it outside
    the stored top k (a pin outside it everywhere has no chart and is named alone)."""
    drawn = df.groupby("pin")["prob"].transform(lambda v: v.notna().any())
    missing = df[df["prob"].isna() & drawn]
    if missing.empty:
        return None
    counts = missing.groupby("pin", sort=False).size()
    parts = [f"{json.dumps(str(p), ensure_ascii=False)} in {n} of {int((df['pin'] == p).sum())}"
             for p, n in counts.items()]
    return (f"Outside the stored top {k}, so not drawn (a gap in its line; the hollow mark is the cell's "
            f"{k}th probability, which the pin's stays under): " + "; ".join(parts) + ".")


def pinned_chart(df: pd.DataFrame, pin: str) -> alt.Chart:
    """One pin's probability at every hidden state (x) for each model (colour) and lens (dash);
    a missing value breaks its line and shows a hollow triangle at its bound."""
    d = df[df["pin"] == pin].sort_values(["model", "lens", "layer"]).copy()
    d["series"] = d["lens"].map(lambda v: f"{v} lens")
    # a run of known values per model and lens: a gap ends a run, so the line breaks there
    d["run"] = d.groupby(["model", "lens"])["prob"].transform(lambda v: v.isna().cumsum())
    d["line"] = d["model"] + " " + d["series"] + " " + d["run"].astype(str)
    models = present(["tied", "untied"], d["model"]) or sorted(d["model"].unique())
    names = present(list(_LENS_DASH), d["series"])
    enc = dict(x=alt.X("layer:O", title="hidden state (0 = input embedding)", axis=alt.Axis(labelAngle=0)),
               color=alt.Color("model:N", scale=colour_scale(models), legend=legend("model", models, symbolOpacity=1)))
    # from 0 to the largest value drawn (a toy's probabilities are small: a 0-1 axis would flatten them)
    top = float(np.nanmax(np.r_[d["prob"].to_numpy(dtype=float), d["bound"].to_numpy(dtype=float), 1e-3]))
    scale = alt.Scale(domain=[0, min(1.0, top * 1.1)], nice=True)
    y = alt.Y("prob:Q", title="probability", scale=scale)
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=[_LENS_DASH[n] for n in names]),
                          legend=legend("lens", names, symbolStrokeColor=NEUTRAL))
    known = d.dropna(subset=["prob"])
    tip = ["model:N", "series:N", "layer:O", alt.Tooltip("prob:Q", format=".4f", title="probability")]
    layers = [alt.Chart(known).mark_line().encode(y=y, strokeDash=dash, detail="line:N", **enc),
              alt.Chart(known).mark_point(filled=True, size=36).encode(y=y, tooltip=tip, **enc)]
    gaps = d[d["prob"].isna()]
    if len(gaps):
        layers.append(alt.Chart(gaps).mark_point(shape="triangle-down", filled=False, size=60).encode(
            y=alt.Y("bound:Q", scale=scale, title="probability"),
            tooltip=["model:N", "series:N", "layer:O", alt.Tooltip("bound:Q", format=".4f",
                                                                     title="outside the top k; under")], **enc))
    return alt.layer(*layers).properties(width="container", height=220, title=f"“{pin}”")
