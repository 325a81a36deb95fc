"""The set-up diagram: which gradients reach the embedding matrices of an untied and a tied
model (drawn here, no image file). The tour's first step and the figure pack's
``figure-setup`` draw it."""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render.style import ON, PALETTE, PRESENTATION_FONT_PX

GRADIENTS = pd.DataFrame([
    ("untied", "I", "input lookup", "only the rows of tokens in the batch"),
    ("untied", "O", "output projection", "every row, every step"),
    ("tied", "T", "input lookup", "only the rows of tokens in the batch"),
    ("tied", "T", "output projection", "every row, every step"),
], columns=["model", "matrix", "gradient from", "rows it reaches"])
"""What the diagram draws, as a table (the figure pack's CSV)."""


def setup_diagram(presentation: bool = False) -> alt.LayerChart:
    """Two rows, untied above tied: tokens -> input matrix -> blocks -> output matrix -> loss, with
    the gradients flowing back into the embedding matrices (drawn here, no image file). Its text
    sizes are marks' own: ``presentation`` enlarges them as the chart styles do axes and titles."""
    f = PRESENTATION_FONT_PX / 13 if presentation else 1.0  # on a slide its smallest text as large as an axis label
    boxes = pd.DataFrame([
        # row, x0, x1, label, colour key
        (1, 0.0, 1.4, "tokens", "n"), (1, 2.0, 3.4, "I  input", "I"), (1, 4.0, 5.6, "blocks", "n"),
        (1, 6.2, 7.6, "O  output", "O"), (1, 8.2, 9.6, "loss", "n"),
        (0, 0.0, 1.4, "tokens", "n"), (0, 2.0, 3.4, "T  (input)", "T"), (0, 4.0, 5.6, "blocks", "n"),
        (0, 6.2, 7.6, "T  (output)", "T"), (0, 8.2, 9.6, "loss", "n"),
    ], columns=["row", "x0", "x1", "label", "key"])
    boxes["y0"], boxes["y1"] = boxes["row"] * 3 + 0.6, boxes["row"] * 3 + 1.8
    boxes["xm"], boxes["ym"] = (boxes["x0"] + boxes["x1"]) / 2, (boxes["y0"] + boxes["y1"]) / 2
    colours = {"T": PALETTE["T"], "I": PALETTE["I"], "O": PALETTE["O"], "n": "#9a9a9a"}
    scale = alt.Scale(domain=list(colours), range=list(colours.values()))
    x, y = alt.X("x0:Q", axis=None, scale=alt.Scale(domain=[-0.2, 9.8])), alt.Y("y0:Q", axis=None,
                                                                                  scale=alt.Scale(domain=[-0.6, 6.2]))
    rect = alt.Chart(boxes).mark_rect(cornerRadius=6).encode(  # opaque: its text reads on it in either theme
        x=x, x2="x1:Q", y=y, y2="y1:Q", color=alt.Color("key:N", scale=scale, legend=None))
    # a box's name in the text its colour carries at 4.5:1 or more (style.ON; black on the grey ones); every
    # other text in the theme's own colour (dark on a light page, light on a dark one), none of T, I or O's
    ink = boxes.assign(ink=boxes["key"].map(lambda k: ON.get(k, "#000000")))  # the colour as it is: no shared scale
    text = alt.Chart(ink).mark_text(fontWeight="bold", fontSize=15 * f).encode(
        x="xm:Q", y="ym:Q", text="label:N", color=alt.Color("ink:N", scale=None, legend=None))
    forward = pd.DataFrame([(r, a, b) for r in (0, 1) for a, b in ((1.4, 2.0), (3.4, 4.0), (5.6, 6.2), (7.6, 8.2))],
                           columns=["row", "xa", "xb"])
    forward["y"] = forward["row"] * 3 + 1.2
    fwd = alt.Chart(forward).mark_rule(color="#777", strokeWidth=2).encode(x="xa:Q", x2="xb:Q", y="y:Q")
    heads = alt.Chart(forward).mark_point(shape="triangle-right", filled=True, color="#777", size=70).encode(
        x="xb:Q", y="y:Q")
    # gradients: loss -> output matrix (dense: every row, every step), loss -> ... -> input (sparse)
    grads = pd.DataFrame([
        (1, 8.9, 6.9, 0.25, "O", "every row, every step", 4.0),
        (1, 8.9, 2.7, 2.15, "I", "only rows of tokens in the batch", 1.5),
        (0, 8.9, 6.9, 0.25, "T", "output side: every row, every step", 4.0),
        (0, 8.9, 2.7, 2.15, "T", "input side: only tokens in the batch", 1.5),
    ], columns=["row", "xa", "xb", "dy", "key", "label", "width"])
    grads["y"] = grads["row"] * 3 + 0.15 + (grads["dy"] > 1) * 1.7
    grads["ylab"] = grads["y"] + (grads["dy"] > 1) * 0.35 - (grads["dy"] < 1) * 0.35
    grads["xm"] = (grads["xa"] + grads["xb"]) / 2
    back = alt.Chart(grads).mark_rule(strokeDash=[6, 4]).encode(
        x="xa:Q", x2="xb:Q", y="y:Q", color=alt.Color("key:N", scale=scale, legend=None),
        strokeWidth=alt.StrokeWidth("width:Q", legend=None, scale=None))
    back_heads = alt.Chart(grads).mark_point(shape="triangle-left", filled=True, size=80).encode(
        x="xb:Q", y="y:Q", color=alt.Color("key:N", scale=scale, legend=None))
    labels = alt.Chart(grads).mark_text(fontSize=13 * f, fontStyle="italic").encode(
        x="xm:Q", y="ylab:Q", text="label:N")
    rows = pd.DataFrame([(5.9, "untied: two matrices, I reads the tokens and O predicts them"),
                         (2.9, "tied: one matrix T does both, so it receives both gradients")], columns=["y", "label"])
    titles = alt.Chart(rows).mark_text(align="left", fontSize=15 * f, fontWeight="bold").encode(
        x=alt.value(4), y="y:Q", text="label:N")
    return alt.layer(rect, fwd, heads, back, back_heads, labels, text, titles).properties(
        width="container", height=300, title="Which gradients reach the embedding matrices")
