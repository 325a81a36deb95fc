"""What a WebGL view draws under its highlighted tokens: images of its points and the click cells
over them (:func:`backdrop`).

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
token's position, one integer (:mod:`explorer.deck_grid`); the layer's position accessor
puts it at its cell's centre (``cell_position``) and a click returns the row, which ``token_at``
maps back to the token. deck.gl's pick is one drawing pass over the pickable layers, which must
end within its 250 ms tap: over 152,000 points it took 1.8 s in software, over the cells about 0.1 s.
Zoomed in by hand (not centred), a click picks to the whole map's cell: the token nearest the
cell's centre, which may be a few points away from the one under the pointer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.deck_grid import BASE, GRID, VIEW_WIDTH_PX, ViewPoints, bounds_of, fit, points_json, rgba
from explorer.render import raster as rastering
from explorer.render.style import PALETTE

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
CHOSEN_ALPHA, FADED_ALPHA = 200, 14
"""Opacity (of 255) of a selected point and, beside a selection, of every other (faded, not hidden)."""
LAYER = "points-"  # a view's click cells over the whole map: LAYER + matrix
NEAR_LAYER = "near-"  # the finer click cells of the window around a centred token: NEAR_LAYER + matrix


@dataclass(frozen=True)
class Raster:
    """An image of points for a BitmapLayer: its data URL, the box it covers (grid steps: left,
    bottom, right, top) and its PNG's size in bytes."""

    url: str
    bounds: tuple[float, float, float, float]
    n_bytes: int


@dataclass(frozen=True)
class Colours:
    """Each matrix's point colours (``rgb``: matrix -> uint8 (n, 3), in its ViewPoints' order) and
    the points drawn on top (``top``: matrix -> bool (n,), or None): a selection, the others faded
    (``faded``), or the under-trained flag's tokens over the rest."""

    rgb: dict[str, np.ndarray]
    top: dict[str, np.ndarray] | None = None
    faded: bool = False


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
           radius_px: float, hole: tuple[float, float, float, float] | None = None,
           colours: Colours | None = None) -> Raster:
    """An image of ``points`` (each in its matrix's colour, or its own: ``colours``) over ``box``
    (grid steps), ``px_per_step`` image pixels a grid step, a point a disc of ``radius_px`` pixels;
    pixels inside ``hole`` (a box) left empty (a sharper image covers it)."""
    pad = int(math.ceil(radius_px)) + 1
    x0, y0, x1, y1 = box
    left, top = x0 - pad / px_per_step, y1 + pad / px_per_step
    width = int(math.ceil((x1 - x0) * px_per_step)) + 2 * pad + 1
    height = int(math.ceil((y1 - y0) * px_per_step)) + 2 * pad + 1
    pixels = [np.stack([(p.rows[:, 0] - left) * px_per_step, (top - p.rows[:, 1]) * px_per_step], axis=1)
              for p in points]
    if colours is None:
        image = rastering.compose([(tuple(rgba(PALETTE[p.matrix])[:3]), rastering.counts(pix, width, height, radius_px))
                                   for p, pix in zip(points, pixels)], POINT_ALPHA / 255)
    else:
        pix = np.concatenate(pixels) if pixels else np.zeros((0, 2))
        rgb = np.concatenate([colours.rgb[p.matrix] for p in points]) if points else np.zeros((0, 3))
        on = (np.concatenate([colours.top[p.matrix] for p in points]) if colours.top is not None and points
              else np.zeros(len(pix), dtype=bool))
        rest = (FADED_ALPHA if colours.faded else POINT_ALPHA) / 255
        image = rastering.paint(pix[~on], rgb[~on], width, height, radius_px, rest)
        if on.any():
            image = rastering.over(rastering.paint(pix[on], rgb[on], width, height, 1.75 * radius_px, CHOSEN_ALPHA / 255),
                                   image)
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
             height_px: float = 420, presentation: bool = False, colours: Colours | None = None) -> Backdrop:
    """A view's images and click cells: the whole map at ``RASTER_SCALE`` image pixels a screen
    pixel, cells of ``HIT_PX`` screen pixels; with ``centre`` (a grid position), also the window
    around it at the centred zoom (cut out of the whole map's image), its cells ``HIT_PX`` screen
    pixels there (coarser if there would be more than ``HIT_CAP``)."""
    own = [points[m] for m in matrices]
    _, whole = fit(bounds_of(own), width_px, height_px)
    radius = RASTER_SCALE * POINT_RADIUS_PX * (1.25 if presentation else 1.0)
    hole = None if centre is None else focus_box(centre, whole, width_px, height_px)
    rasters = [raster(own, bounds_of(own), RASTER_SCALE * 2 ** whole, radius, hole, colours)]
    cell = max(1, round(HIT_PX / 2 ** whole))
    hits = {LAYER + m: (p, cell) for m, p in one_per_cell([hit_cells(p, cell) for p in own], cell).items()}
    if hole is not None:
        rasters.append(raster(own, hole, RASTER_SCALE * 2 ** (whole + FOCUS_ZOOM), radius, colours=colours))
        fine = max(1, round(HIT_PX / 2 ** (whole + FOCUS_ZOOM)))
        while True:
            near = {NEAR_LAYER + m: (p, fine) for m, p in one_per_cell([hit_cells(p, fine, hole) for p in own],
                                                                       fine).items()}
            if fine >= cell or sum(len(v[0].ids) for v in near.values()) <= HIT_CAP:
                break
            fine *= 2
        hits.update(near)
    return Backdrop(tuple(rasters), hits)
