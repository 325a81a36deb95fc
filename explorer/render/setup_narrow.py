"""The set-up diagram for a phone's column (about 330 px): the untied and the tied model side by
side, each a column of boxes read from the top (tokens, the input matrix, the blocks, the output
matrix, the loss), and the gradients flowing back up beside them: a thick dashed line from the loss
into the output matrix (every row, every step), a thin one into the input matrix (only the rows of
tokens in the batch). What :func:`explorer.render.setup_diagram.setup_diagram` draws in one row per
model, which needs about 570 px; the static site draws this one where its column is narrower
(assets/site.js), at a screen's text sizes.
"""

from __future__ import annotations

import itertools

import altair as alt
import pandas as pd

from explorer.render.style import NEUTRAL, ON, PALETTE

TITLE = ["Which gradients reach", "the embedding matrices"]  # two lines: one would not fit a phone
LEVELS = {"tokens": 9.0, "input": 7.0, "blocks": 5.0, "output": 3.0, "loss": 1.0}  # box centres, top to bottom
COLUMNS = {"untied": 2.4, "tied": 7.6}  # column centres (x, of 10)
HALF_W, HALF_H = 1.8, 0.55  # a box's half width and half height, in the axes' units
GREY = "#9a9a9a"  # the boxes that are no matrix (black text on it at 7.5:1)


def setup_diagram_narrow() -> alt.LayerChart:
    """The diagram in two columns, untied left and tied right, for a phone's width."""
    names = {"untied": {"input": ("I  input", "I"), "output": ("O  output", "O")},
             "tied": {"input": ("T  (input)", "T"), "output": ("T  (output)", "T")}}
    rows = []
    for model, cx in COLUMNS.items():
        for part, y in LEVELS.items():
            label, key = names[model].get(part, (part, "n"))
            rows.append((model, label, key, cx - HALF_W, cx + HALF_W, y - HALF_H, y + HALF_H, cx, y))
    boxes = pd.DataFrame(rows, columns=["model", "label", "key", "x0", "x1", "y0", "y1", "xm", "ym"])
    colours = {**PALETTE, "n": GREY}
    boxes["fill"] = boxes["key"].map(colours)
    boxes["ink"] = boxes["key"].map(lambda k: ON.get(k, "#000000"))
    x = alt.X("x0:Q", axis=None, scale=alt.Scale(domain=[0, 10]))
    y = alt.Y("y0:Q", axis=None, scale=alt.Scale(domain=[-1.6, 10.8]))
    rect = alt.Chart(boxes).mark_rect(cornerRadius=6).encode(
        x=x, x2="x1:Q", y=y, y2="y1:Q", color=alt.Color("fill:N", scale=None, legend=None))
    text = alt.Chart(boxes).mark_text(fontWeight="bold", fontSize=14).encode(
        x="xm:Q", y="ym:Q", text="label:N", color=alt.Color("ink:N", scale=None, legend=None))
    # forward: down the column, box to box
    steps = list(LEVELS.values())
    forward = pd.DataFrame([(cx, a - HALF_H, b + HALF_H) for cx in COLUMNS.values() for a, b in itertools.pairwise(steps)],
                           columns=["x", "ya", "yb"])
    fwd = alt.Chart(forward).mark_rule(color=NEUTRAL, strokeWidth=2).encode(x="x:Q", y="ya:Q", y2="yb:Q")
    heads = alt.Chart(forward).mark_point(shape="triangle-down", filled=True, color=NEUTRAL, size=50).encode(
        x="x:Q", y="yb:Q")
    # backward: from the loss up into each matrix, beside the boxes (dense right, sparse left)
    grads = pd.DataFrame([
        ("untied", COLUMNS["untied"] + HALF_W + 0.35, LEVELS["loss"], LEVELS["output"] - HALF_H, "O", 4.0),
        ("untied", COLUMNS["untied"] - HALF_W - 0.35, LEVELS["loss"], LEVELS["input"] - HALF_H, "I", 1.5),
        ("tied", COLUMNS["tied"] + HALF_W + 0.35, LEVELS["loss"], LEVELS["output"] - HALF_H, "T", 4.0),
        ("tied", COLUMNS["tied"] - HALF_W - 0.35, LEVELS["loss"], LEVELS["input"] - HALF_H, "T", 1.5),
    ], columns=["model", "x", "ya", "yb", "key", "width"])
    scale = alt.Scale(domain=list(colours), range=list(colours.values()))
    back = alt.Chart(grads).mark_rule(strokeDash=[6, 4]).encode(
        x="x:Q", y="ya:Q", y2="yb:Q", color=alt.Color("key:N", scale=scale, legend=None),
        strokeWidth=alt.StrokeWidth("width:Q", legend=None, scale=None))
    back_heads = alt.Chart(grads).mark_point(shape="triangle-up", filled=True, size=70).encode(
        x="x:Q", y="yb:Q", color=alt.Color("key:N", scale=scale, legend=None))
    # what each column is, and what the dashes mean, in the theme's text colour
    notes = pd.DataFrame([
        (COLUMNS["untied"], 10.25, "untied: I and O", "center", "bold"),
        (COLUMNS["tied"], 10.25, "tied: one T", "center", "bold"),
        (0.0, -0.35, "thick dashes: every row, every step", "left", "normal"),
        (0.0, -1.15, "thin dashes: only tokens in the batch", "left", "normal"),
    ], columns=["x", "y", "label", "align", "weight"])
    heads_text = [alt.Chart(notes[(notes["align"] == a) & (notes["weight"] == w)]).mark_text(
        align=a, fontWeight=w, fontSize=14, fontStyle="normal" if w == "bold" else "italic").encode(
        x="x:Q", y="y:Q", text="label:N") for a, w in (("center", "bold"), ("left", "normal"))]
    return alt.layer(rect, fwd, heads, back, back_heads, text, *heads_text).properties(
        width="container", height=440, title=alt.TitleParams(TITLE))
