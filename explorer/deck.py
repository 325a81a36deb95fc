"""The Projection page's WebGL views (deck.gl through ``st.pydeck_chart``), for vocabularies too
large for Vega.

Vega draws a projection well up to some tens of thousands of points and exports it as PNG or
SVG; past ``VEGA_MAX_TOKENS`` projected tokens the page draws every token (up to
``WEBGL_MAX_POINTS`` per view) with deck.gl instead (``renderer``), in an OrthographicView (UMAP
coordinates are not geographic), the picked token and its neighbours on top.

A view's points are drawn on the server into an image (explorer/raster.py, as Datashader does for
Bokeh), which deck.gl draws as one textured rectangle (a BitmapLayer): drawn point by point, every
deck.gl point costs about 16 us of vertex work in software WebGL (SwiftShader: headless Chromium,
a machine without a graphics card), whatever its size, and three views of 152,000 took 20 s to
appear; as images they take 2.7 s (bench/bench_projection_webgl.py). The image is drawn for the
whole map at ``RASTER_SCALE`` image pixels a screen pixel (deck.gl mipmaps it, so it shrinks
smoothly); zoomed in, it magnifies and blurs. So a view centred on a token (a search or a click)
gets a second image, sharp at the centred zoom, of the window around the token (``FOCUS_WINDOW``
views wide), cut out of the whole map's image.

A click needs a token, which an image does not have: over the image lie transparent click cells
(one ScatterplotLayer per matrix, ``hit_cells``), one per non-empty square of ``HIT_PX`` screen
pixels at the whole map (about 3,600 for 152,000 clustered tokens), each naming the token nearest
its centre; a centred view adds finer cells over its window (``NEAR_LAYER``). A cell's row is its
token's position, one integer: ``x + BASE * y`` on a grid of ``GRID + 1`` steps over the map's
longer side (about 4.5 significant digits, at most nine digits); the layer's position accessor
puts it at its cell's centre (``cell_position``) and a click returns the row, which ``token_at``
maps back to the token. deck.gl's pick is one drawing pass over the pickable layers, which must
end within its 250 ms tap: over 152,000 points it took 1.8 s in software, over the cells about 0.1 s.
Zoomed in by hand (not centred), a click picks to the whole map's cell: the token nearest the
cell's centre, which may be a few points away from the one under the pointer.

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
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pydeck as pdk
import streamlit as st
from pydeck.bindings.json_tools import default_serialize

from explorer import data
from explorer.render import raster as rastering
from explorer.render.charts import HIGHLIGHT, PALETTE, PROJECTION_ORDER

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
FOCUS_ZOOM = 3.0
"""How much closer (in powers of two) a view is drawn around a searched or clicked token."""
POINT_ALPHA = 70
"""Opacity (of 255) of a point: where many overlap the colour deepens, so the dense regions of a
large vocabulary keep their shape instead of filling in."""
POINT_RADIUS_PX = 1.0
"""Radius of a point in screen pixels, at the zoom its image is drawn for (1.25 in presentation)."""
RASTER_SCALE = 2
"""Image pixels a screen pixel at the zoom an image is drawn for (sharp on a screen of two device
pixels a pixel, and at twice the zoom on others)."""
HIT_PX = 4
"""Side of a click cell in screen pixels at the zoom its cells are made for: a click picks the token
nearest the centre of the cell it falls in."""
HIT_CAP = 4_000
"""Most click cells in a centred view's window (each costs the browser as much as a drawn point)."""
FOCUS_WINDOW = 2.0
"""The window a centred view draws sharper: this many times the view's extent on each axis (a view
wider than ``VIEW_WIDTH_PX``, on a wide screen, shows more of the map around it)."""
WINDOW_MAX_PX = 2400
"""Longest side of a window's image in pixels (the overlaid view's window is narrowed to fit)."""
BLURRED_OPACITY = 0.3
"""Opacity of the whole map's image in a centred view: magnified 8x it is blurred, so outside the
sharp window it reads as a faint outline of the map rather than as points."""
VIEW_WIDTH_PX = 300
"""The width a view is fitted to: the server does not know the column's width, and a column of
three on a 1440-pixel screen is about 310 pixels wide (wider screens leave a margin)."""
LAYER = "points-"  # a view's click cells over the whole map: LAYER + matrix
NEAR_LAYER = "near-"  # the finer click cells of the window around a centred token: NEAR_LAYER + matrix
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


@dataclass(frozen=True)
class Raster:
    """An image of points for a BitmapLayer: its data URL, the box it covers (grid steps: left,
    bottom, right, top) and its PNG's size in bytes."""

    url: str
    bounds: tuple[float, float, float, float]
    n_bytes: int


@dataclass(frozen=True)
class Backdrop:
    """What a view draws under its highlighted tokens: images of its points (the whole map; and,
    centred on a token, a sharper one of the window around it, cut out of the whole map's) and its
    click cells (``hits``: layer id -> (a ViewPoints of one token per cell, the cell's side))."""

    rasters: tuple[Raster, ...]
    hits: dict[str, tuple[ViewPoints, int]]

    def n_bytes(self) -> int:
        """Bytes the backdrop sends: the images (base64) and the cells' rows."""
        return sum(len(r.url) for r in self.rasters) + sum(len(points_json(p)) for p, _ in self.hits.values())


def raster(points: list[ViewPoints], box: tuple[float, float, float, float], px_per_step: float,
           radius_px: float, hole: tuple[float, float, float, float] | None = None) -> Raster:
    """An image of ``points`` (each in its matrix's colour) over ``box`` (grid steps), ``px_per_step``
    image pixels a grid step, a point a disc of ``radius_px`` pixels; pixels inside ``hole`` (a box)
    left empty (a sharper image covers it)."""
    pad = int(math.ceil(radius_px)) + 1
    x0, y0, x1, y1 = box
    left, top = x0 - pad / px_per_step, y1 + pad / px_per_step
    width = int(math.ceil((x1 - x0) * px_per_step)) + 2 * pad + 1
    height = int(math.ceil((y1 - y0) * px_per_step)) + 2 * pad + 1
    layers = []
    for p in points:
        pix = np.stack([(p.rows[:, 0] - left) * px_per_step, (top - p.rows[:, 1]) * px_per_step], axis=1)
        layers.append((tuple(rgba(PALETTE[p.matrix])[:3]), rastering.counts(pix, width, height, radius_px)))
    image = rastering.compose(layers, POINT_ALPHA / 255)
    if hole is not None:
        hx0, hy0, hx1, hy1 = hole
        c0, c1 = (int(np.clip(math.floor((v - left) * px_per_step), 0, width)) for v in (hx0, hx1))
        r0, r1 = (int(np.clip(math.floor((top - v) * px_per_step), 0, height)) for v in (hy1, hy0))
        image[r0:r1, c0:c1] = 0
    png = rastering.png(image)
    return Raster(rastering.data_url(png), (left, top - height / px_per_step, left + width / px_per_step, top), len(png))


def _nearest_in_cell(rows: np.ndarray, tie: np.ndarray, cell: int) -> np.ndarray:
    """Indices of ``rows`` (grid positions), one per non-empty cell of ``cell`` grid steps: the row
    nearest the cell's centre, the lowest ``tie`` among equals."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    corner = rows // cell
    key = corner[:, 0].astype(np.int64) * (GRID // cell + 2) + corner[:, 1]
    off = (rows - (corner * cell + cell / 2)).astype(np.float64)
    order = np.lexsort((tie, (off ** 2).sum(axis=1), key))
    return order[np.r_[True, key[order][1:] != key[order][:-1]]]


def hit_cells(points: ViewPoints, cell: int, box: tuple[float, float, float, float] | None = None) -> ViewPoints:
    """One token per non-empty cell of ``cell`` x ``cell`` grid steps (inside ``box``, if given):
    the token nearest the cell's centre (the lowest id on a tie), so a click anywhere in the cell
    picks it. Cells are ``floor(x / cell)``, ``floor(y / cell)``: what ``cell_position`` draws."""
    rows, ids = points.rows, points.ids
    if box is not None:
        x0, y0, x1, y1 = box
        keep = (rows[:, 0] >= x0) & (rows[:, 0] <= x1) & (rows[:, 1] >= y0) & (rows[:, 1] <= y1)
        rows, ids = rows[keep], ids[keep]
    first = _nearest_in_cell(rows, ids, cell)
    first = first[np.argsort(ids[first], kind="stable")]
    rows, ids = rows[first], ids[first]
    packed = rows[:, 0].astype(np.int64) + BASE * rows[:, 1].astype(np.int64)
    return ViewPoints(points.matrix, ids, rows, packed.tolist())


def one_per_cell(cells: list[ViewPoints], cell: int) -> dict[str, ViewPoints]:
    """Several matrices' cells (``hit_cells``, overlaid in one view) with one token per cell: of
    the matrices' tokens for a cell, the one nearest its centre (on a tie, the earlier matrix)."""
    if len(cells) == 1:
        return {cells[0].matrix: cells[0]}
    which = np.concatenate([np.full(len(c.ids), i) for i, c in enumerate(cells)])
    best = np.zeros(len(which), dtype=bool)
    best[_nearest_in_cell(np.concatenate([c.rows for c in cells]), which, cell)] = True
    out, start = {}, 0
    for c in cells:
        keep = best[start:start + len(c.ids)]
        start += len(c.ids)
        out[c.matrix] = ViewPoints(c.matrix, c.ids[keep], c.rows[keep], [d for d, k in zip(c.data, keep) if k])
    return out


def cell_position(cell: int) -> str:
    """The click cells' position accessor: the centre of the cell holding the row's point."""
    x, y = f"this % {BASE}", f"(this - this % {BASE}) / {BASE}"
    half = f"{cell / 2:g}"
    return f"[{x} - {x} % {cell} + {half}, {y} - {y} % {cell} + {half}]"


def token_at(points: ViewPoints, packed: int) -> int | None:
    """The token (the lowest id) drawn at grid position ``packed`` (``x + BASE * y``), if any."""
    at = np.flatnonzero(np.asarray(points.data, dtype=np.int64) == int(packed))
    return int(points.ids[at].min()) if len(at) else None


def focus_box(centre, whole: float, width_px: float, height_px: float) -> tuple[float, float, float, float]:
    """The window (grid steps) around a centred token that gets a sharper image and finer click
    cells: ``FOCUS_WINDOW`` times the view's extent at the centred zoom on each axis, narrowed to
    ``WINDOW_MAX_PX`` image pixels."""
    scale = 2 ** (whole + FOCUS_ZOOM)
    side = min(1.0, WINDOW_MAX_PX / (RASTER_SCALE * FOCUS_WINDOW * max(width_px, height_px)))
    hw, hh = side * FOCUS_WINDOW * width_px / 2 / scale, side * FOCUS_WINDOW * height_px / 2 / scale
    return float(centre[0]) - hw, float(centre[1]) - hh, float(centre[0]) + hw, float(centre[1]) + hh


def backdrop(points: dict[str, ViewPoints], matrices, centre=None, *, width_px: float = VIEW_WIDTH_PX,
             height_px: float = 420, presentation: bool = False) -> Backdrop:
    """A view's images and click cells: the whole map at ``RASTER_SCALE`` image pixels a screen
    pixel, cells of ``HIT_PX`` screen pixels; with ``centre`` (a grid position), also the window
    around it at the centred zoom (cut out of the whole map's image), its cells ``HIT_PX`` screen
    pixels there (coarser if there would be more than ``HIT_CAP``)."""
    own = [points[m] for m in matrices]
    _, whole = fit(bounds_of(own), width_px, height_px)
    radius = RASTER_SCALE * POINT_RADIUS_PX * (1.25 if presentation else 1.0)
    hole = None if centre is None else focus_box(centre, whole, width_px, height_px)
    rasters = [raster(own, bounds_of(own), RASTER_SCALE * 2 ** whole, radius, hole)]
    cell = max(1, round(HIT_PX / 2 ** whole))
    hits = {LAYER + m: (p, cell) for m, p in one_per_cell([hit_cells(p, cell) for p in own], cell).items()}
    if hole is not None:
        rasters.append(raster(own, hole, RASTER_SCALE * 2 ** (whole + FOCUS_ZOOM), radius))
        fine = max(1, round(HIT_PX / 2 ** (whole + FOCUS_ZOOM)))
        while True:
            near = {NEAR_LAYER + m: (p, fine) for m, p in one_per_cell([hit_cells(p, fine, hole) for p in own],
                                                                       fine).items()}
            if fine >= cell or sum(len(v[0].ids) for v in near.values()) <= HIT_CAP:
                break
            fine *= 2
        hits.update(near)
    return Backdrop(tuple(rasters), hits)


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


@st.cache_resource(max_entries=32, show_spinner=False)
def backdrop_of(ref: data.CacheRef, matrices: tuple[str, ...], centre: tuple[int, int] | None, width_px: float,
                height_px: float, presentation: bool) -> Backdrop:
    """``backdrop`` of a cache's view, shared by every session (an image takes about 0.1 s)."""
    return backdrop(points_of(ref)[1], matrices, None if centre is None else np.asarray(centre),
                    width_px=width_px, height_px=height_px, presentation=presentation)
