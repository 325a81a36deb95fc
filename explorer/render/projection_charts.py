"""The Projection page's charts: UMAP coordinates of T, I and O, the picked token and its
neighbours highlighted, one view per matrix or all three overlaid.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render.style import COLOURS, HIGHLIGHT, NEUTRAL, colour_scale, legend, present
from tying.cache.schema import MATRIX_NAMES

PICK = "pick"  # the point-selection parameter of a projection view: a click picks that token
PROJECTION_ORDER = ("I", "T", "O")
ROLE_SHAPES = {"picked": "diamond", "neighbour": "circle"}  # the words the tour and the page use name these
ROLE_SIZES = {"picked": 300, "neighbour": 80}  # marker areas (px²): a diamond reaches sqrt(area) / 2 from its centre
LABEL_OFFSET = (9, -9)  # the picked token's label: its lower left corner this far (px) right of and above the marker


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
        one = df["matrix"].nunique() == 1  # one tied model's map: no legend of matrices it does not have
        colour = (alt.Color("matrix:N", scale=colour_scale(list(PROJECTION_ORDER)),
                            legend=None if one else legend("matrix", PROJECTION_ORDER))
                  if colour_matrix else alt.value(COLOURS.get(str(df["matrix"].iloc[0]) if len(df) else "T", NEUTRAL)))
        points = alt.Chart(df).mark_circle(size=14, opacity=0.4, cursor="pointer").encode(
            x=alt.X("x:Q", title=None, axis=None), y=alt.Y("y:Q", title=None, axis=None),
            color=colour, tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
                                   "matrix:N"])
        if interactive:
            points = points.add_params(pick, zoom)
    roles = present(ROLE_SHAPES, highlight["role"]) or list(ROLE_SHAPES)
    hi = highlight.assign(label=highlight["shown"] + (" (" + highlight["matrix"] + ")" if label_matrix else ""))
    hi = hi.sort_values("role", key=lambda r: r.eq("picked"), kind="stable")  # the picked marker drawn last, on top
    # shape and size on one field in one order (size wants one), one legend object: Vega-Lite merges them (no
    # "conflicting legend" warning)
    role_legend = legend("highlighted", roles)
    # opaque (a point's default is 0.7): the picked marker, drawn last, hides the neighbours under it
    marks = alt.Chart(hi).mark_point(filled=True, opacity=1, stroke="black", strokeWidth=1, cursor="pointer").encode(
        x="x:Q", y="y:Q",
        size=alt.Size("role:N", sort=roles, scale=alt.Scale(domain=roles, range=[ROLE_SIZES[r] for r in roles]),
                      legend=role_legend),
        shape=alt.Shape("role:N", sort=roles, scale=alt.Scale(domain=roles, range=[ROLE_SHAPES[r] for r in roles]),
                        legend=role_legend),
        color=alt.value(HIGHLIGHT), tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"),
                                             "matrix:N", "role:N"])
    if density and interactive:  # no background points to click: the highlighted ones carry the selection
        marks = marks.add_params(pick, zoom)
    # the label beside the marker, up and to the right of it (never over it), in black on a halo of the
    # highlight's yellow: legible over the points in either theme
    picked = alt.Chart(hi[hi["role"] == "picked"])
    where = {"x": "x:Q", "y": "y:Q", "text": "label:N"}
    label = {"dx": LABEL_OFFSET[0], "dy": LABEL_OFFSET[1], "align": "left", "baseline": "bottom", "fontWeight": "bold"}
    halo = picked.mark_text(**label, stroke=HIGHLIGHT, strokeWidth=4, strokeJoin="round", fill=HIGHLIGHT).encode(**where)
    text = picked.mark_text(**label, fill="#000000").encode(**where)
    return alt.layer(points, marks, halo, text)


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
             for m in PROJECTION_ORDER if m in set(df["matrix"])]
    return alt.hconcat(*views).resolve_scale(color="shared")
