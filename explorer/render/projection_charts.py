"""The Projection page's charts: UMAP coordinates of T, I and O, the picked token and its
neighbours highlighted, one view per matrix or all three overlaid.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render import map_colours
from explorer.render.style import COLOURS, HIGHLIGHT, NEUTRAL, colour_scale, legend, present
from tying.cache.schema import MATRIX_NAMES

PICK = "pick"  # the point-selection parameter of a projection view: a click picks that token
BOX = "box"  # the box selection of a view (shift and drag): its tokens are selected, the rest faded
SHIFT_DRAG = "[pointerdown[event.shiftKey], window:pointerup] > window:pointermove!"
PLAIN_DRAG = "[pointerdown[!event.shiftKey], window:pointerup] > window:pointermove!"
PROJECTION_ORDER = ("I", "T", "O")
ROLE_SHAPES = {"picked": "diamond", "neighbour": "circle"}  # the words the tour and the page use name these
ROLE_SIZES = {"picked": 300, "neighbour": 80}  # marker areas (px²): a diamond reaches sqrt(area) / 2 from its centre
LABEL_OFFSET = (9, -9)  # the picked token's label: its lower left corner this far (px) right of and above the marker


def colour_encoding(scale: map_colours.Scale, title: str | None, *, show_legend: bool = True):
    """The points' colour by ``scale`` (:mod:`map_colours`), a legend titled ``title`` under the plot;
    a continuous colour's missing values (a token never seen) grey."""
    lines = map_colours.title_lines(title or "")
    if not scale.continuous:
        return alt.Color("colour:N", scale=alt.Scale(domain=list(scale.domain), range=list(scale.range)),
                         legend=legend(lines, scale.domain) if show_legend else None)
    props = {"labelExpr": "format(pow(10, datum.value), ',.0f')"} if scale.colour == "log_count" else {}
    field = alt.Color("colour:Q", scale=alt.Scale(domain=list(scale.domain), range=list(scale.range), interpolate="rgb",
                                                  clamp=True),
                      legend=alt.Legend(title=lines, orient="bottom", direction="horizontal", gradientLength=260, labelOverlap=True,
                                        gradientOpacity=1, titleLimit=0, labelLimit=0, **props) if show_legend else None)
    return alt.condition("isValid(datum.colour) && isFinite(datum.colour)", field, alt.value(map_colours.MISSING))


def _tooltip(df: pd.DataFrame) -> list:
    tip = [alt.Tooltip("shown:N", title="token"), alt.Tooltip("token:Q", title="id"), "matrix:N"]
    colour = df.attrs.get("colour", "matrix")
    if "count" in df:
        tip.append(alt.Tooltip("count:Q", title="count", format=","))
    elif colour in ("norm", "position"):
        tip.append(alt.Tooltip("colour:Q", title=colour, format=".3f"))
    elif colour == "under_trained":
        tip.append(alt.Tooltip("colour:N", title="flag"))
    return tip


def _projection_layers(df: pd.DataFrame, highlight: pd.DataFrame, *, density: bool, label_matrix: bool,
                       colour_matrix: bool = True, interactive: bool = True,
                       scale: map_colours.Scale | None = None, title: str | None = None, show_legend: bool = True,
                       box: bool = False):
    """Background (points or density), highlighted tokens and the picked token's label.

    Points carry a click selection on ``token`` (``PICK``) and every view zooms and pans
    (wheel, drag; double-click resets) unless ``interactive`` is false (views concatenated
    into one figure cannot share parameter names).
    """
    # a click on a point picks it (nearest=True would let a click anywhere pick the closest token,
    # but its Voronoi layer doubled the drawing time: 0.85 -> 1.7 s for three views of 5,000)
    pick = alt.selection_point(name=PICK, fields=["token"], on="click", clear=False, empty=False)
    zoom = alt.selection_interval(name="zoom", bind="scales", **({"translate": PLAIN_DRAG} if box else {}))
    if density:
        points = alt.Chart(df).mark_rect().encode(
            x=alt.X("x:Q", bin=alt.Bin(maxbins=60), title=None, axis=None),
            y=alt.Y("y:Q", bin=alt.Bin(maxbins=60), title=None, axis=None),
            # denser cells more opaque, in a grey that reads on light and dark backgrounds alike
            color=alt.value(NEUTRAL), opacity=alt.Opacity("count():Q", scale=alt.Scale(type="log", range=[0.15, 1]),
                                                          legend=None))
    else:
        one = df["matrix"].nunique() == 1  # one tied model's map: no legend of matrices it does not have
        traits = scale is not None and scale.colour != "matrix"
        colour = colour_encoding(scale, title, show_legend=show_legend) if traits else (alt.Color("matrix:N", scale=colour_scale(list(PROJECTION_ORDER)),
                            legend=None if one else legend("matrix", PROJECTION_ORDER))
                  if colour_matrix else alt.value(COLOURS.get(str(df["matrix"].iloc[0]) if len(df) else "T", NEUTRAL)))
        shade = {"opacity": alt.Opacity("shade:Q", scale=None, legend=None)} if "shade" in df else {}
        cut = (map_colours.SHOWN + map_colours.CHOSEN) / 2  # above: a selected point (float32 in the frame)
        if "shade" in df and (df["shade"] > cut).any():  # a selection: its points larger, outlined
            chosen = alt.datum.shade > cut
            shade |= {"size": alt.condition(chosen, alt.value(70), alt.value(14)),
                      "stroke": alt.condition(chosen, alt.value("#000000"), alt.value(None)),
                      "strokeWidth": alt.condition(chosen, alt.value(0.8), alt.value(0))}
        points = alt.Chart(df).mark_circle(size=14, opacity=0.4, cursor="pointer", aria=False).encode(
            x=alt.X("x:Q", title=None, axis=None), y=alt.Y("y:Q", title=None, axis=None),
            color=colour, tooltip=_tooltip(df), **shade)
        if interactive:
            points = points.add_params(pick, zoom)
            if box:
                points = points.add_params(alt.selection_interval(name=BOX, encodings=["x", "y"], on=SHIFT_DRAG,
                                                                  translate=SHIFT_DRAG, zoom=False, clear="dblclick"))
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
                    height: int = 420, title: str | None = None, show_legend: bool = True,
                    box: bool = False, scale: map_colours.Scale | None = None) -> alt.LayerChart:
    """One matrix's UMAP view at the width of its column, the picked token labelled; ``df`` a
    :func:`map_colours.colour_frame` (its scale over every view) or plain coordinates (by matrix);
    ``box``: shift and drag selects the points in a box (``BOX``); ``scale``: the colour's scale
    over every token (else over ``df``'s)."""
    scale = scale or (map_colours.scale_of(df) if "colour" in df else None)
    sub = df[df["matrix"] == matrix]
    sub.attrs = dict(df.attrs)
    hi = highlight[highlight["matrix"] == matrix]
    return _projection_layers(sub, hi, density=density, label_matrix=False, colour_matrix=False, scale=scale,
                              title=title, show_legend=show_legend, box=box).properties(
        width="container", height=height, title=f"{matrix} ({MATRIX_NAMES[matrix]})")


def projection(df: pd.DataFrame, highlight: pd.DataFrame, *, mode: str = "side by side",
               density: bool = False, height: int = 420, view_size: int = 300, title: str | None = None,
               box: bool = False, scale: map_colours.Scale | None = None) -> alt.TopLevelMixin:
    """UMAP coordinates of T, I, O with highlighted tokens drawn on top in every view.

    ``df``: matrix, token, x, y, shown (already sampled by the caller);
    ``highlight``: the same columns plus ``role`` ('picked' or 'neighbour').
    Overlaid: one view, each highlighted token labelled with its matrix; density is drawn
    per matrix, so it is always side by side. Side by side: three views in one figure (the
    exported one; the page draws the three views in columns of their own).
    """
    scale = scale or (map_colours.scale_of(df) if "colour" in df else None)
    if mode == "overlaid" and not density:
        return _projection_layers(df, highlight, density=False, label_matrix=True, scale=scale, title=title,
                                  box=box).properties(width="container", height=int(height * 1.25))

    def part(m):
        sub = df[df["matrix"] == m]
        sub.attrs = dict(df.attrs)
        return sub

    views = [_projection_layers(part(m), highlight[highlight["matrix"] == m], density=density, label_matrix=False,
                                interactive=False, scale=scale, title=title).properties(
                                    width=view_size, height=view_size, title=f"{m} ({MATRIX_NAMES[m]})")
             for m in PROJECTION_ORDER if m in set(df["matrix"])]
    return alt.hconcat(*views).resolve_scale(color="shared")


def colour_legend(scale: map_colours.Scale, title: str) -> alt.Chart:
    """A colouring's legend alone (the WebGL views draw their points as images, with no legend)."""
    df = pd.DataFrame({"colour": list(scale.domain), "x": 0.0, "y": 0.0})
    return alt.Chart(df).mark_circle(opacity=0).encode(
        x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None), color=colour_encoding(scale, title)).properties(
        width="container", height=1)
