"""The Projection page's WebGL views (deck.gl through ``st.pydeck_chart``), for vocabularies too
large for Vega.

Vega draws a projection well up to some tens of thousands of points and exports it as PNG or
SVG; past ``VEGA_MAX_TOKENS`` projected tokens the page draws every token (up to
``WEBGL_MAX_POINTS`` per view) with deck.gl instead (``renderer``), in an OrthographicView (UMAP
coordinates are not geographic), the picked token and its neighbours on top.

The view's points and the grid they are sent on are :mod:`explorer.deck_grid`; the images and
click cells under the highlighted tokens, :mod:`explorer.deck_backdrop`.

What a view sends is compact: ``st.pydeck_chart`` sends a deck as one JSON text (written without
pydeck's indentation: ``CompactDeck``), read in the page by JSON5, a parser written in JavaScript.
A view of 152,000 tokens sends about 0.3 MB (the image's PNG as base64, and the cells), where its
points as integers sent 1.5 MB and its DataFrame (x, y, token) in pydeck's JSON would be 17.6 MB.

The builders (``grid_of``, ``view_points``, ``backdrop``, ``view_deck``, ``picked_token``) take
DataFrames, arrays and plain values; ``points_of`` and ``backdrop_of`` cache a cache's points and
views' images for every session.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pydeck as pdk
import streamlit as st
from pydeck.bindings.json_tools import default_serialize

from explorer import data
from explorer.deck_backdrop import FOCUS_ZOOM, LAYER, NEAR_LAYER, Backdrop, Colours, backdrop, cell_position, token_at
from explorer.deck_grid import VIEW_WIDTH_PX, Grid, ViewPoints, bounds_of, fit, grid_of, rgba, view_points
from explorer.render import map_colours
from explorer.render.style import HIGHLIGHT

VEGA_MAX_TOKENS = 25_000
"""Most projected tokens the Projection page draws with Vega (and today's sampling slider);
a larger vocabulary is drawn with WebGL, every token in every view."""
WEBGL_MAX_POINTS = 160_000
"""Most points a WebGL view draws; a larger vocabulary is drawn as a seeded sample of this many
tokens, the same in every view."""
BLURRED_OPACITY = 0.3
"""Opacity of the whole map's image in a centred view: magnified 8x it is blurred, so outside the
sharp window it reads as a faint outline of the map rather than as points."""
RASTER_LAYER = "image-"  # the images of the points: RASTER_LAYER + 0 (the whole map), 1 (the window)
HIGHLIGHT_LAYER = "highlight"  # the picked token and its neighbours
LABEL_LAYER = "label"
"""The picked token's text beside it, in a view centred on it. On the whole map the page names the
picked token above each view instead: a TextLayer builds its glyphs in a 2-D canvas and uploads
them, which in software WebGL held the first drawing of three views back by about 1 s (measured:
3.70 s with it, 2.65 s without, bench/bench_projection_webgl.py), more than the points cost."""
BLACK = [0, 0, 0, 255]


def renderer(n_tokens: int, choice: str = "auto") -> str:
    """The renderer a reader chose ('vega' or 'webgl'); for 'auto', 'webgl' for a vocabulary of
    more than ``VEGA_MAX_TOKENS`` projected tokens, else 'vega'."""
    if choice in ("vega", "webgl"):
        return choice
    return "webgl" if n_tokens > VEGA_MAX_TOKENS else "vega"


def size_text(n_bytes: int) -> str:
    """``n_bytes`` as a reader says it: '1.5 MB', '12.3 kB', '800 bytes'."""
    if n_bytes >= 1e6:
        return f"{n_bytes / 1e6:.1f} MB"
    return f"{n_bytes / 1e3:.1f} kB" if n_bytes >= 1e3 else f"{n_bytes} bytes"


class CompactDeck(pdk.Deck):
    """A pydeck Deck whose JSON has no indentation or spaces (pydeck indents by two: a point's
    ``[x, y]`` would take five lines)."""

    def to_json(self) -> str:
        return json.dumps(self, sort_keys=True, default=default_serialize, separators=(",", ":"))


def view_state(points: list[ViewPoints], focus: np.ndarray | None, width_px: float,
               height_px: float) -> tuple[pdk.ViewState, float]:
    """The whole map of ``points``; or, with ``focus`` (a grid position), centred there, closer.
    Also the zoom of the whole map."""
    target, whole = fit(bounds_of(points), width_px, height_px)
    zoom = whole
    if focus is not None:
        target, zoom = [float(focus[0]), float(focus[1]), 0], whole + FOCUS_ZOOM
    return pdk.ViewState(target=target, zoom=round(zoom, 4), min_zoom=round(whole - 1, 4),
                         max_zoom=round(whole + 12, 4)), whole


def highlight_rows(highlight: pd.DataFrame, grid: Grid, matrices) -> list[dict]:
    """The highlighted tokens of ``matrices`` (``highlight``: matrix, token, x, y, shown, role),
    neighbours first and the picked token last, so it is drawn on top: position ``p`` (grid),
    token ``t``, ``r`` 1 for the picked token, label text ``s``."""
    hi = highlight[highlight["matrix"].isin(list(matrices))]
    hi = hi.assign(_order=(hi["role"] == "picked").astype(int)).sort_values(["_order", "matrix", "token"],
                                                                            kind="stable")
    pos = grid.of(hi["x"].to_numpy(), hi["y"].to_numpy())
    return [{"p": [int(px), int(py)], "t": int(t), "r": int(role == "picked"),
             "s": str(s) + (f" ({m})" if len(matrices) > 1 else "")}
            for (px, py), t, role, s, m in zip(pos, hi["token"], hi["role"], hi["shown"], hi["matrix"])]


def centre_of(points: dict[str, ViewPoints], highlight_rows_: list[dict], matrices, focus: int | None):
    """The grid position to centre on for ``focus`` (its position in the first of ``matrices``, or
    its highlighted position when it is not among the drawn points); None for the whole map."""
    if focus is None:
        return None
    own = points[list(matrices)[0]]
    at = np.searchsorted(own.ids, focus)
    if at < len(own.ids) and own.ids[at] == focus:
        return own.rows[at]
    mine = [r["p"] for r in highlight_rows_ if r["t"] == focus and r["r"]]
    return np.asarray(mine[0]) if mine else None


def view_deck(points: dict[str, ViewPoints], highlight: pd.DataFrame, grid: Grid, matrices, *,
              focus: int | None = None, width_px: float = VIEW_WIDTH_PX, height_px: float = 420,
              presentation: bool = False, back: Backdrop | None = None) -> CompactDeck:
    """One WebGL view of ``matrices`` (one, or all three overlaid): each matrix's points drawn into
    an image (``backdrop``; ``back`` if the caller has it already), transparent click cells over it,
    then the highlighted tokens (``HIGHLIGHT`` outlined in black, the picked one larger). ``focus``:
    a token to centre the view on, closer, its label beside it."""
    matrices = list(matrices)
    big = 1.5 if presentation else 1.0
    rows = highlight_rows(highlight, grid, matrices)
    centre = centre_of(points, rows, matrices, focus)
    state, _ = view_state([points[m] for m in matrices], centre, width_px, height_px)
    if back is None:
        back = backdrop(points, matrices, centre, width_px=width_px, height_px=height_px, presentation=presentation)
    faded = len(back.rasters) > 1  # centred: the whole map's image magnified, under the window's sharp one
    layers = [pdk.Layer("BitmapLayer", id=f"{RASTER_LAYER}{i}", image=pdk.types.String(r.url), bounds=list(r.bounds),
                        opacity=BLURRED_OPACITY if faded and i == 0 else 1.0, pickable=False)
              for i, r in enumerate(back.rasters)]
    layers += [pdk.Layer("ScatterplotLayer", data=cells.data, id=layer_id, get_position=cell_position(cell),
                         get_fill_color=[0, 0, 0, 0], get_radius=round(0.72 * cell, 2),
                         radius_units=pdk.types.String("common"), pickable=True)
               for layer_id, (cells, cell) in back.hits.items()]
    layers.append(pdk.Layer("ScatterplotLayer", data=rows, id=HIGHLIGHT_LAYER, get_position="p",
                            get_fill_color=rgba(HIGHLIGHT), get_line_color=BLACK, stroked=True,
                            line_width_units=pdk.types.String("pixels"), get_line_width=1.5 * big,
                            get_radius=f"r ? {8 * big:g} : {5 * big:g}", radius_units=pdk.types.String("pixels"),
                            pickable=True))
    if centre is not None:  # centred: the picked token's label beside it (see LABEL_LAYER)
        picked = [{**r, "a": "middle"} for r in rows if r["r"]]
        layers.append(pdk.Layer("TextLayer", data=picked, id=LABEL_LAYER, get_position="p", get_text="s",
                                get_text_anchor="a", get_size=round(15 * big), get_color=[20, 20, 20, 255],
                                get_pixel_offset=[0, round(-20 * big)], font_weight=pdk.types.String("bold"),
                                character_set=pdk.types.String("auto"), background=True,
                                get_background_color=[255, 255, 255, 225], background_padding=[5, 3],
                                pickable=False))
    return CompactDeck(layers=layers, views=[pdk.View(type="OrthographicView", controller=True, flip_y=False)],
                       initial_view_state=state, map_provider=None, map_style=None, tooltip=False)


def point_colours(points: dict[str, ViewPoints], frame: pd.DataFrame, scale: map_colours.Scale,
                  selected=()) -> Colours:
    """Each matrix's point colours (``frame``: :func:`map_colours.colour_frame` of the points'
    tokens, coloured by ``scale``) in its points' order; on top, the ``selected`` tokens (the rest
    faded) or, without a selection, the under-trained flag's."""
    chosen = set(int(t) for t in selected)
    rgb, top = {}, {}
    for m, p in points.items():
        f = frame[frame["matrix"] == m].drop_duplicates("token").set_index("token").reindex(p.ids)
        rgb[m] = map_colours.rgb(scale, f["colour"])
        top[m] = (np.isin(p.ids, list(chosen)) if chosen
                  else (f["colour"] == map_colours.FLAG_LABELS[0]).to_numpy(dtype=bool))
    return Colours(rgb, top, faded=bool(chosen))


def picked_token(event, points: dict[str, ViewPoints]) -> int | None:
    """The token a click picked: ``event`` is the deck's selection state (Streamlit's
    ``{"selection": {"indices": {layer: [i]}, "objects": {layer: [row]}}}``). A click cell's row is
    its token's grid position (``token_at``), a highlighted row names its token (``t``)."""
    selection = (event or {}).get("selection") or {}
    indices, objects = selection.get("indices") or {}, selection.get("objects") or {}
    for layer, found in indices.items():
        row = (objects.get(layer) or [None])[0]
        if not found:
            continue
        if layer == HIGHLIGHT_LAYER:
            if isinstance(row, dict) and "t" in row:
                return int(row["t"])
            continue
        for prefix in (LAYER, NEAR_LAYER):
            m = layer[len(prefix):] if layer.startswith(prefix) else None
            if m in points and isinstance(row, int) and not isinstance(row, bool):
                return token_at(points[m], row)
    return None


# -- the page's cached reads -------------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner=False)
def points_of(ref: data.CacheRef, limit: int = WEBGL_MAX_POINTS) -> tuple[Grid, dict[str, ViewPoints]]:
    """A cache's grid (over every projected token) and each matrix's points: every projected
    token, or a seeded sample of ``limit`` (the same in every view). Shared: read-only."""
    grid = grid_of(data.umap(ref))
    return grid, view_points(data.umap_sample(ref, limit), grid)


@st.cache_resource(max_entries=16, show_spinner=False)
def colours_of(ref: data.CacheRef, colour: str, selected: tuple[int, ...]) -> Colours | None:
    """``point_colours`` of a cache's points; None for the matrix's colours and no selection."""
    if colour == "matrix" and not selected:
        return None
    _, points = points_of(ref)
    coords = pd.concat([pd.DataFrame({"matrix": m, "token": p.ids}) for m, p in points.items()], ignore_index=True)
    return point_colours(points, map_colours.frame_of(ref, coords, colour), map_colours.scale_for(ref, colour), selected)


@st.cache_resource(max_entries=32, show_spinner=False)
def backdrop_of(ref: data.CacheRef, matrices: tuple[str, ...], centre: tuple[int, int] | None, width_px: float,
                height_px: float, presentation: bool, colour: str = "matrix",
                selected: tuple[int, ...] = ()) -> Backdrop:
    """``backdrop`` of a cache's view, shared by every session (an image takes about 0.1 s)."""
    return backdrop(points_of(ref)[1], matrices, None if centre is None else np.asarray(centre),
                    width_px=width_px, height_px=height_px, presentation=presentation,
                    colours=colours_of(ref, colour, selected))
