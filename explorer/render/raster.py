"""Points drawn into an image on the server, for the Projection page's WebGL views (explorer/deck.py).

A WebGL view of 152,000 points drawn one by one in software (SwiftShader, headless Chromium or a
machine without a graphics card) costs about 16 us a point whatever its size, in deck.gl's vertex
work: 2.5 s a view, 7.5 s for three (measured; the same points as bare GL points take 0.16 s).
So a view's background is one image of its points, drawn here with numpy, as Datashader draws a
large scatter for Bokeh: the browser draws one textured rectangle. Pure functions on arrays.

A point is a disc of ``radius`` pixels; where discs overlap, each adds its opacity ``alpha`` as
WebGL's blending would (``1 - (1 - alpha) ** n`` for ``n`` discs) and the colour is the count-
weighted mean of their colours (blending's result up to the drawing order, which is arbitrary).
The image's alpha is straight (not premultiplied), as PNG stores it.
"""

from __future__ import annotations

import base64
import io

import numpy as np


def disc(radius: float) -> np.ndarray:
    """The pixel offsets (dx, dy) within ``radius`` of a pixel (itself included), shape (k, 2)."""
    r = int(np.floor(radius))
    d = np.arange(-r, r + 1)
    dx, dy = np.meshgrid(d, d)
    keep = dx ** 2 + dy ** 2 <= radius ** 2 + 1e-9
    return np.stack([dx[keep], dy[keep]], axis=1)


def counts(pixels: np.ndarray, width: int, height: int, radius: float, weights=None) -> np.ndarray:
    """How many points' discs cover each pixel: int32, shape (height, width). ``pixels``: (n, 2)
    pixel coordinates (x to the right, y down; a point at (2.7, 0.2) is in pixel column 2, row 0);
    points outside the image are left out, and so is the part of a disc that falls outside.
    ``weights`` (n,): the sum of the covering points' weights instead (float64)."""
    px = np.floor(np.asarray(pixels, dtype=np.float64)).astype(np.int64).reshape(-1, 2)
    inside = (px[:, 0] >= 0) & (px[:, 0] < width) & (px[:, 1] >= 0) & (px[:, 1] < height)
    px = px[inside]
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)[inside]
    centre = np.bincount(px[:, 1] * width + px[:, 0], weights=w, minlength=width * height).reshape(height, width)
    out = np.zeros((height, width), dtype=np.int32 if w is None else np.float64)
    for dx, dy in disc(radius):  # each disc = the centres' counts shifted by every offset
        ys, yd = (slice(0, height - dy), slice(dy, height)) if dy >= 0 else (slice(-dy, height), slice(0, height + dy))
        xs, xd = (slice(0, width - dx), slice(dx, width)) if dx >= 0 else (slice(-dx, width), slice(0, width + dx))
        out[yd, xd] += centre[ys, xs]
    return out


def compose(layers: list[tuple[tuple[int, int, int], np.ndarray]], alpha: float) -> np.ndarray:
    """RGBA (uint8, straight alpha) of coloured counts: ``layers`` is [(rgb, counts)], every
    counts array the same shape; a pixel of ``n`` discs has opacity ``1 - (1 - alpha) ** n``."""
    total = sum(c for _, c in layers)
    out = np.zeros(total.shape + (4,), dtype=np.uint8)
    some = total > 0
    n = total[some].astype(np.float32)
    for ch in range(3):
        mix = sum(np.float32(rgb[ch]) * c[some] for rgb, c in layers)
        out[..., ch][some] = np.rint(mix / n).astype(np.uint8)
    out[..., 3][some] = np.rint(255 * (1 - np.float32(1 - alpha) ** n)).astype(np.uint8)
    return out


def paint(pixels: np.ndarray, rgb: np.ndarray, width: int, height: int, radius: float, alpha: float) -> np.ndarray:
    """RGBA (uint8, straight alpha) of points each in its own colour (``rgb``: (n, 3)): a pixel of
    ``n`` discs has opacity ``1 - (1 - alpha) ** n`` and their mean colour, as :func:`compose`."""
    n = counts(pixels, width, height, radius)
    out = np.zeros((height, width, 4), dtype=np.uint8)
    some = n > 0
    rgb = np.asarray(rgb, dtype=np.float64).reshape(-1, 3)
    for ch in range(3):
        out[..., ch][some] = np.rint(counts(pixels, width, height, radius, rgb[:, ch])[some] / n[some]).astype(np.uint8)
    out[..., 3][some] = np.rint(255 * (1 - np.float32(1 - alpha) ** n[some].astype(np.float32))).astype(np.uint8)
    return out


def over(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``top`` drawn over ``bottom`` (RGBA uint8 of one shape, straight alpha): the Porter-Duff "over"."""
    ta, ba = top[..., 3:4] / 255.0, bottom[..., 3:4] / 255.0
    a = ta + ba * (1 - ta)
    rgb = np.where(a > 0, (top[..., :3] * ta + bottom[..., :3] * ba * (1 - ta)) / np.maximum(a, 1e-12), 0)
    return np.concatenate([np.rint(rgb), np.rint(a * 255)], axis=-1).astype(np.uint8)


def png(rgba: np.ndarray, colours: int = 256) -> bytes:
    """The image as PNG bytes (Pillow). With ``colours``, a palette PNG of at most that many
    colours (Pillow's fast octree quantiser, which keeps alpha): about a third of the bytes of the
    full RGBA image for one matrix's points, a quarter for three overlaid, each channel within a
    few levels (measured: at most 24 of 255, 0.6 on average); an image whose clear and painted
    pixels the palette would not keep apart is saved whole. ``colours=0``: RGBA, exact."""
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(rgba), "RGBA")
    if colours:
        small = image.quantize(colours, method=Image.Quantize.FASTOCTREE)
        back = np.asarray(small.convert("RGBA"))
        if np.array_equal(back[..., 3] == 0, rgba[..., 3] == 0):
            image = small
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def data_url(png_bytes: bytes) -> str:
    """A ``data:image/png;base64,...`` URL of PNG bytes (what deck.gl's BitmapLayer loads)."""
    return "data:image/png;base64," + base64.b64encode(png_bytes).decode("ascii")
