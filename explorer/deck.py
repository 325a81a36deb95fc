"""The Projection page's WebGL views (deck.gl through ``st.pydeck_chart``), for vocabularies too
large for Vega.

Vega draws a projection well up to some tens of thousands of points and exports it as PNG or
SVG; past ``VEGA_MAX_TOKENS`` projected tokens the page draws every token (up to
``WEBGL_MAX_POINTS`` per view) with deck.gl instead (``renderer``), one ScatterplotLayer per
matrix in an OrthographicView (UMAP coordinates are not geographic), the picked token and its
neighbours on top.

What a view sends is compact. ``st.pydeck_chart`` sends a deck as one JSON text (pydeck's
binary transport needs its Jupyter widget, which Streamlit does not use), and Streamlit's page
reads it with JSON5, a parser written in JavaScript whose time grows with every character. So a
point is one integer: its position on a grid of ``GRID + 1`` steps over the map's longer side
(about 4.5 significant digits), packed as ``x + BASE * y`` (at most nine digits), which the
layer's position accessor unpacks (``POSITION``). Its colour is its layer's (one layer per
matrix) and its token is its row: a click returns the layer and the row's index, and
``ViewPoints.ids`` maps that back to the token on the server. The deck's JSON is written
without pydeck's indentation (``CompactDeck``): a view of 152,000 points is about 1.5 MB
(``bytes_per_point``: about 10 bytes a point), where the view's DataFrame (x, y, token) as
pydeck writes it would be 17.6 MB. Rows ``[x, y]`` would cost 14 bytes a point and, measured
in Node on Streamlit's own JSON5, twice the parsing: about 0.4 s of CPU a view against 0.2 s
(the unpacking adds about 0.05 s).

A click is deck.gl's: a tap, then a pick (one drawing pass over the view's points). The tap
must end within 250 ms, and the pick runs in between, so where WebGL is drawn in software on a
slow or busy CPU (SwiftShader), a pick of 152,000 points can outlast it and the click is lost;
zooming in does not shorten it. The search picks and centres a token either way.

The builders (``grid_of``, ``view_points``, ``view_deck``, ``picked_token``) take DataFrames
and plain values; ``points_of`` caches a cache's points for every session.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pydeck as pdk
import streamlit as st
from pydeck.bindings.json_tools import default_serialize

from explorer import data
from explorer.charts import HIGHLIGHT, PALETTE, PROJECTION_ORDER

VEGA_MAX_TOKENS = 25_000
"""Most projected tokens the Projection page draws with Vega (and today's sampling slider);
a larger vocabulary is drawn with WebGL, every token in every view."""
WEBGL_MAX_POINTS = 160_000
"""Most points a WebGL view draws; a larger vocabulary is drawn as a seeded sample of this many
tokens, the same in every view."""
GRID = 31_621
"""The grid the coordinates are sent on: 0..GRID over the longer side of the map."""
BASE = GRID + 1
"""A point is sent as ``x + BASE * y``: below BASE ** 2 = 999,950,884, at most nine digits."""
POSITION = f"[this % {BASE}, (this - this % {BASE}) / {BASE}]"
"""The layers' position accessor (a deck.gl JSON expression, run on each row): the grid's x, y."""
FOCUS_ZOOM = 3.0
"""How much closer (in powers of two) a view is drawn around a searched or clicked token."""
POINT_ALPHA = 70
"""Opacity (of 255) of the background points: where many overlap the colour deepens, so the
dense regions of a large vocabulary keep their shape instead of filling in."""
POINT_RADIUS_PX = 1.0
"""Radius of a background point on the whole map, in screen pixels; it grows as the view zooms in
(so a point is easier to click) up to ``POINT_MAX_PX``."""
POINT_MAX_PX = 3.0
VIEW_WIDTH_PX = 300
"""The width a view is fitted to: the server does not know the column's width, and a column of
three on a 1440-pixel screen is about 310 pixels wide (wider screens leave a margin)."""
LAYER = "points-"  # a background layer's id: LAYER + matrix
HIGHLIGHT_LAYER = "highlight"  # the picked token and its neighbours
LABEL_LAYER = "label"  # the picked token's text
BLACK = [0, 0, 0, 255]


def renderer(n_tokens: int, choice: str = "auto") -> str:
    """The renderer a reader chose ('vega' or 'webgl'); for 'auto', 'webgl' for a vocabulary of
    more than ``VEGA_MAX_TOKENS`` projected tokens, else 'vega'."""
    if choice in ("vega", "webgl"):
        return choice
    return "webgl" if n_tokens > VEGA_MAX_TOKENS else "vega"


def rgba(hex_colour: str, alpha: int = 255) -> list[int]:
    h = hex_colour.lstrip("#")
    return [int(h[i:i + 2], 16) for i in (0, 2, 4)] + [int(alpha)]


@dataclass(frozen=True)
class Grid:
    """Map coordinates -> grid steps: ``round((x - x0) * scale)``, the same scale on both axes
    (the map keeps its shape) and for every matrix (the overlaid view shares it)."""

    x0: float
    y0: float
    scale: float

    def of(self, x, y) -> np.ndarray:
        """Grid coordinates (int32, shape (n, 2)) of map coordinates ``x``, ``y``."""
        gx = np.rint((np.asarray(x, dtype=np.float64) - self.x0) * self.scale)
        gy = np.rint((np.asarray(y, dtype=np.float64) - self.y0) * self.scale)
        return np.clip(np.stack([gx, gy], axis=-1), 0, GRID).astype(np.int32)


def grid_of(coords: pd.DataFrame) -> Grid:
    """The grid over every matrix's coordinates (columns x, y): the longer side spans 0..GRID."""
    if coords.empty:
        return Grid(0.0, 0.0, 1.0)
    x0, y0 = float(coords["x"].min()), float(coords["y"].min())
    side = max(float(coords["x"].max()) - x0, float(coords["y"].max()) - y0)
    return Grid(x0, y0, GRID / side if side > 0 else 1.0)


@dataclass(frozen=True)
class ViewPoints:
    """One matrix's background points: ``ids[i]`` is the token of row ``i`` of ``rows`` (grid
    coordinates, int32 (n, 2)); ``data`` is what the layer sends (``x + BASE * y`` per point)."""

    matrix: str
    ids: np.ndarray
    rows: np.ndarray
    data: list

    def bounds(self) -> tuple[float, float, float, float]:
        if not len(self.rows):
            return 0.0, 0.0, float(GRID), float(GRID)
        lo, hi = self.rows.min(axis=0), self.rows.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


def view_points(coords: pd.DataFrame, grid: Grid) -> dict[str, ViewPoints]:
    """Every matrix's points (``coords``: matrix, token, x, y), rows in token order."""
    out = {}
    for m in PROJECTION_ORDER:
        sub = coords[coords["matrix"] == m].sort_values("token")
        rows = grid.of(sub["x"].to_numpy(), sub["y"].to_numpy())
        packed = rows[:, 0].astype(np.int64) + BASE * rows[:, 1].astype(np.int64)
        out[m] = ViewPoints(m, sub["token"].to_numpy(dtype=np.int64), rows, packed.tolist())
    return out


def points_json(points: ViewPoints) -> str:
    """The layer's data as sent: ``[p,p,...]``, ``p = x + BASE * y``."""
    return json.dumps(points.data, separators=(",", ":"))


def bytes_per_point(points: ViewPoints) -> float:
    """Bytes of the layer's data per point (with the commas between rows)."""
    return len(points_json(points)) / max(1, len(points.ids))


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


def fit(bounds: tuple[float, float, float, float], width_px: float, height_px: float) -> tuple[list[float], float]:
    """The target and zoom (log2 of pixels per grid step) that show ``bounds`` whole, with a margin."""
    x0, y0, x1, y1 = bounds
    w, h = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    zoom = math.log2(0.9 * min(width_px / w, height_px / h))
    return [(x0 + x1) / 2, (y0 + y1) / 2, 0], zoom


def bounds_of(points: list[ViewPoints]) -> tuple[float, float, float, float]:
    """The box (grid steps) holding every point of ``points``."""
    boxes = [p.bounds() for p in points]
    return min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)


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


def view_deck(points: dict[str, ViewPoints], highlight: pd.DataFrame, grid: Grid, matrices, *,
              focus: int | None = None, width_px: float = VIEW_WIDTH_PX, height_px: float = 420,
              presentation: bool = False) -> CompactDeck:
    """One WebGL view of ``matrices`` (one, or all three overlaid): each matrix's points in its
    colour, then the highlighted tokens (``HIGHLIGHT`` outlined in black, the picked one larger)
    and the picked token's label. ``focus``: a token to centre the view on, closer (its position
    in the first of ``matrices``: T when overlaid)."""
    matrices = list(matrices)
    big = 1.5 if presentation else 1.0
    rows = highlight_rows(highlight, grid, matrices)
    centre = None
    if focus is not None:
        own = points[matrices[0]]
        at = np.searchsorted(own.ids, focus)
        if at < len(own.ids) and own.ids[at] == focus:
            centre = own.rows[at]
        else:  # not among the drawn sample: its highlighted position
            mine = [r["p"] for r in rows if r["t"] == focus and r["r"]]
            centre = np.asarray(mine[0]) if mine else None
    state, whole = view_state([points[m] for m in matrices], centre, width_px, height_px)
    dot = POINT_RADIUS_PX * (1.25 if presentation else 1.0)  # a denser map would only fill in
    layers = [pdk.Layer("ScatterplotLayer", data=points[m].data, id=LAYER + m, get_position=POSITION,
                        get_fill_color=rgba(PALETTE[m], POINT_ALPHA), get_radius=round(dot / 2 ** whole, 3),
                        radius_units=pdk.types.String("common"), radius_min_pixels=dot,
                        radius_max_pixels=POINT_MAX_PX * big, pickable=True)
              for m in matrices]
    layers.append(pdk.Layer("ScatterplotLayer", data=rows, id=HIGHLIGHT_LAYER, get_position="p",
                            get_fill_color=rgba(HIGHLIGHT), get_line_color=BLACK, stroked=True,
                            line_width_units=pdk.types.String("pixels"), get_line_width=1.5 * big,
                            get_radius=f"r ? {8 * big:g} : {5 * big:g}", radius_units=pdk.types.String("pixels"),
                            pickable=True))
    # a label near the map's left or right edge runs inwards, so it stays on the canvas
    x0, _, x1, _ = bounds_of([points[m] for m in matrices])
    span = max(x1 - x0, 1.0)
    picked = [{**r, "a": "middle" if centre is not None or 0.25 <= (r["p"][0] - x0) / span <= 0.75
               else "start" if r["p"][0] - x0 < span / 2 else "end"} for r in rows if r["r"]]
    layers.append(pdk.Layer("TextLayer", data=picked, id=LABEL_LAYER, get_position="p", get_text="s",
                            get_text_anchor="a", get_size=round(15 * big), get_color=[20, 20, 20, 255],
                            get_pixel_offset=[0, round(-20 * big)], font_weight=pdk.types.String("bold"),
                            character_set=pdk.types.String("auto"), background=True,
                            get_background_color=[255, 255, 255, 225], background_padding=[5, 3],
                            pickable=False))
    return CompactDeck(layers=layers, views=[pdk.View(type="OrthographicView", controller=True, flip_y=False)],
                       initial_view_state=state, map_provider=None, map_style=None, tooltip=False)


def picked_token(event, points: dict[str, ViewPoints]) -> int | None:
    """The token a click picked: ``event`` is the deck's selection state (Streamlit's
    ``{"selection": {"indices": {layer: [i]}, "objects": {layer: [row]}}}``)."""
    selection = (event or {}).get("selection") or {}
    indices, objects = selection.get("indices") or {}, selection.get("objects") or {}
    for layer, found in indices.items():
        if not found:
            continue
        if layer == HIGHLIGHT_LAYER:
            row = (objects.get(layer) or [None])[0]
            if isinstance(row, dict) and "t" in row:
                return int(row["t"])
        elif layer.startswith(LAYER) and layer[len(LAYER):] in points:
            ids = points[layer[len(LAYER):]].ids
            i = int(found[0])
            if 0 <= i < len(ids):
                return int(ids[i])
    return None


# -- the page's cached reads -------------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner=False)
def points_of(ref: data.CacheRef, limit: int = WEBGL_MAX_POINTS) -> tuple[Grid, dict[str, ViewPoints]]:
    """A cache's grid (over every projected token) and each matrix's points: every projected
    token, or a seeded sample of ``limit`` (the same in every view). Shared: read-only."""
    grid = grid_of(data.umap(ref))
    return grid, view_points(data.umap_sample(ref, limit), grid)
