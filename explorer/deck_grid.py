"""The grid a WebGL view's points are sent on, and each matrix's points on it.

A point's map coordinates are sent as one integer: ``x + BASE * y`` on a grid of ``GRID + 1``
steps over the map's longer side (about 4.5 significant digits, at most nine digits), the same
grid for every matrix (:class:`Grid`, :func:`grid_of`); a matrix's points on it are a
:class:`ViewPoints` (:func:`view_points`). :func:`fit` and :func:`bounds_of` frame a view of
them. Used by :mod:`explorer.deck_backdrop` (the images and click cells) and :mod:`explorer.deck`
(the view).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.render.projection_charts import PROJECTION_ORDER

GRID = 31_621
"""The grid the coordinates are sent on: 0..GRID over the longer side of the map."""
BASE = GRID + 1
"""A point is sent as ``x + BASE * y``: below BASE ** 2 = 999,950,884, at most nine digits."""
VIEW_WIDTH_PX = 300
"""The width a view is fitted to: the server does not know the column's width, and a column of
three on a 1440-pixel screen is about 310 pixels wide (wider screens leave a margin)."""


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
