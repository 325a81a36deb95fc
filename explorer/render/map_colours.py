"""What the Projection map is coloured by and which tokens it highlights, for the app's Vega and
WebGL views and the static site's map alike.

A map is coloured by one of :data:`COLOUR_KEYS` (``colour=`` in the URL; the titles are
:data:`explorer.render.token_traits.COLOURS`): the matrix (T, I, O), the token's corpus frequency
(log10 count), the row norm of the matrix drawn, T's position between I and O (cosine to O minus
cosine to I: negative nearer I, positive nearer O) or the under-trained flag. A selection
(``select=``: token ids, comma-separated, e.g. ``select=12,345,6789``) is drawn at full strength
and every other point faded, never hidden.

:func:`colour_frame` is pure: the coordinates and the traits in, the frame the chart is given out
(its ``colour`` column: the matrix, log10 of the count, the norm, the position, or the flag's
label; ``shade``: each point's opacity). :func:`rgb` maps the same values to the same colours in
numpy for the WebGL views' images (linear RGB interpolation, as the Vega scales are told to use).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.render import read, token_traits
from explorer.render.style import NEUTRAL, PALETTE

COLOUR_KEYS: tuple[str, ...] = tuple(token_traits.COLOURS)
"""``matrix``, ``log_count``, ``norm``, ``position``, ``under_trained``: what ``colour=`` may name."""
CONTINUOUS = ("log_count", "norm", "position")
LABELS = {"matrix": "matrix", "log_count": "frequency", "norm": "row norm", "position": "position I↔O",
          "under_trained": "under-trained"}
"""Short names for a narrow picker (the legends' titles say the whole of it)."""
SELECT_MAX = 1000
"""Most tokens ``select=`` holds (a box over a dense map keeps the first this many, by id)."""
SHOWN, CHOSEN, FADED = 0.45, 0.95, 0.07
"""A point's opacity: with no selection; selected; not selected (faded, still drawn)."""
VIRIDIS = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")
MIDDLE = "#b8b8b8"  # the position scale's centre (0: as near I as O), between I's blue and O's vermillion
MISSING = NEUTRAL  # a token with no value (never seen: no log count)
FLAGGED, UNFLAGGED = "#009E73", "#b0b0b0"
FLAG_LABELS = ("under-trained", "not flagged")


def parse_select(raws: list[str]) -> tuple[int, ...]:
    """``select=12,345,6789``: token ids, comma-separated (spaces ignored), at most ``SELECT_MAX``;
    raises on anything else (the URL's junk is then ignored with a note)."""
    parts = [p.strip() for p in raws[-1].split(",") if p.strip()]
    if not parts or len(parts) > SELECT_MAX or not all(p.isdigit() and len(p) <= 9 for p in parts):
        raise ValueError(raws)
    return tuple(dict.fromkeys(int(p) for p in parts))


def select_text(ids) -> str:
    """The URL's value of a selection: its ids, comma-separated, in order."""
    return ",".join(str(int(t)) for t in ids)


def offered(ref: read.CacheRef) -> tuple[str, ...]:
    """The colourings this cache can draw: the matrix always; the rest with the token_traits table
    (position only where the cache has a twin; frequency only where counts were taken)."""
    if not token_traits.has_traits(ref):
        return ("matrix",)
    about = token_traits.traits_about(ref)
    skip = {"position"} if not about.has_position else set()
    if not about.counts:
        skip.add("log_count")
    return tuple(k for k in COLOUR_KEYS if k not in skip)


def missing_sentence(ref: read.CacheRef) -> str | None:
    """One plain sentence where the cache lacks the traits (None where it has them)."""
    if token_traits.has_traits(ref):
        return None
    command = read.build_command(ref) or "python -m precompute pair ... (the command that built this cache)"
    return ("This cache has no per-token traits, so the map is coloured by matrix only: run "
            f"`{command}` again to add them (it computes only the missing token_traits stage).")


def legend_title(colour: str, about: token_traits.TraitsAbout | None) -> str:
    """The legend's title: what the colour is, the counted text and the flag's rule included."""
    if colour == "log_count" and about and about.counts:
        return f"count in {about.counts} (log scale)"
    if colour == "norm":
        return "row norm (of the matrix drawn)"
    if colour == "position":
        return "T's position between I and O (cos to O − cos to I)"
    if colour == "under_trained" and about:
        return f"under-trained: {about.rule}" if about.rule else "under-trained"
    return token_traits.COLOURS[colour]


def title_lines(title: str, width: int = 56) -> list[str]:
    """A legend title in lines of at most about ``width`` characters (Vega draws a list as lines)."""
    return textwrap.wrap(title, width) or [title]


@dataclass(frozen=True)
class Scale:
    """A colouring's scale: ``domain`` and ``range`` (hex colours), piecewise linear for a
    continuous one (interpolated in RGB), one colour a value for a nominal one."""

    colour: str
    domain: tuple
    range: tuple[str, ...]

    @property
    def continuous(self) -> bool:
        return self.colour in CONTINUOUS


def scale_of(frame: pd.DataFrame) -> Scale:
    """The scale of ``frame``'s colour (its ``attrs['colour']``), over every view's values."""
    colour = frame.attrs.get("colour", "matrix")
    if colour == "matrix":
        keys = tuple(m for m in ("I", "T", "O") if m in set(frame["matrix"]))
        return Scale(colour, keys, tuple(PALETTE[m] for m in keys))
    if colour == "under_trained":
        return Scale(colour, FLAG_LABELS, (FLAGGED, UNFLAGGED))
    v = pd.to_numeric(frame["colour"], errors="coerce").to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    if colour == "position":  # symmetric about 0, to the 98th percentile of |position| (beyond: clamped)
        m = float(np.quantile(np.abs(v), 0.98)) if len(v) else 1.0
        m = m if m > 0 else 1.0
        return Scale(colour, (-m, 0.0, m), (PALETTE["I"], MIDDLE, PALETTE["O"]))
    # counts from fewest to most; norms from the 1st to the 99th percentile (an outlier row does not wash the rest)
    q = (0.0, 1.0) if colour == "log_count" else (0.01, 0.99)
    lo, hi = (float(np.quantile(v, q[0])), float(np.quantile(v, q[1]))) if len(v) else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    steps = np.linspace(lo, hi, len(VIRIDIS))
    return Scale(colour, tuple(float(s) for s in steps), VIRIDIS)


def _rgb(hexes) -> np.ndarray:
    return np.array([[int(h.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)] for h in hexes], dtype=np.float64)


def rgb(scale: Scale, values) -> np.ndarray:
    """Each value's colour as the Vega scale draws it: uint8, shape (n, 3); a missing value
    (NaN, None) in ``MISSING``."""
    values = pd.Series(values).reset_index(drop=True)
    out = np.tile(_rgb([MISSING]), (len(values), 1))
    stops = _rgb(scale.range)
    if scale.continuous:
        v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v)
        dom = np.asarray(scale.domain, dtype=float)
        for ch in range(3):
            out[ok, ch] = np.interp(v[ok], dom, stops[:, ch])
    else:
        for key, c in zip(scale.domain, stops):
            out[(values == key).to_numpy()] = c
    return np.rint(out).astype(np.uint8)


def colour_frame(coords: pd.DataFrame, traits: pd.DataFrame | None, norms: pd.DataFrame | None, colour: str,
                 selected=()) -> pd.DataFrame:
    """The points a map draws, with what colours them.

    ``coords``: matrix, token, x, y, shown (one row a token of a matrix's view); ``traits``:
    token, count, log_count, position, under_trained (``token_traits.token_traits``; None: none);
    ``norms``: matrix, token, norm. Returns ``coords`` with ``colour`` (the matrix; log10 of the
    count, NaN for a token never seen; the norm of that view's matrix; T's position; or
    ``FLAG_LABELS``' label), ``count`` where there are counts, and ``shade`` (opacity:
    ``SHOWN``, or with a selection ``CHOSEN`` for its tokens and ``FADED`` for the rest), the
    highlighted rows (flagged, selected) last, so drawn on top. ``attrs['colour']`` names it."""
    df = coords.copy()
    if colour not in COLOUR_KEYS:
        raise ValueError(f"unknown colour {colour!r}")
    if colour == "matrix":
        df["colour"] = df["matrix"].astype(str)
    elif colour == "norm":
        n = norms[["matrix", "token", "norm"]] if norms is not None else pd.DataFrame(columns=["matrix", "token", "norm"])
        df = df.merge(n.rename(columns={"norm": "colour"}), on=["matrix", "token"], how="left")
    else:
        t = traits if traits is not None else pd.DataFrame(columns=["token", colour])
        df = df.merge(t[["token", colour]].rename(columns={colour: "colour"}), on="token", how="left")
        if colour == "under_trained":
            df["colour"] = np.where(df["colour"].fillna(False).astype(bool), FLAG_LABELS[0], FLAG_LABELS[1])
        else:
            df["colour"] = pd.to_numeric(df["colour"], errors="coerce").astype(float)
    if colour == "log_count" and traits is not None and "count" in traits:
        df = df.merge(traits[["token", "count"]], on="token", how="left")
    chosen = set(int(t) for t in selected)
    hit = df["token"].isin(chosen).to_numpy()
    df["shade"] = np.where(hit, CHOSEN, FADED) if chosen else SHOWN
    top = hit | (df["colour"] == FLAG_LABELS[0]).to_numpy() if colour == "under_trained" else hit
    df = df.assign(_top=top).sort_values("_top", kind="stable").drop(columns="_top").reset_index(drop=True)
    df.attrs["colour"] = colour
    return df


def frame_of(ref: read.CacheRef, coords: pd.DataFrame, colour: str, selected=()) -> pd.DataFrame:
    """:func:`colour_frame` of a cache's points (``coords``), its traits read where the colour needs them."""
    traits = token_traits.token_traits(ref) if colour not in ("matrix", "norm") else None
    norms = read.norms(ref) if colour == "norm" else None
    return colour_frame(coords, traits, norms, colour, selected)


def tokens_in_box(coords: pd.DataFrame, matrices, box: dict) -> tuple[int, ...]:
    """The tokens of ``matrices`` whose point lies in ``box`` (a box selection: ``{"x": [a, b], "y":
    [c, d]}`` in map coordinates), by id, at most ``SELECT_MAX``."""
    (x0, x1), (y0, y1) = sorted(box["x"][:2]), sorted(box["y"][:2])
    c = coords[coords["matrix"].isin(list(matrices))]
    inside = c[(c["x"] >= x0) & (c["x"] <= x1) & (c["y"] >= y0) & (c["y"] <= y1)]
    return tuple(sorted(set(int(t) for t in inside["token"])))[:SELECT_MAX]


@read.memo(16)
def scale_for(ref: read.CacheRef, colour: str) -> Scale:
    """The scale of ``colour`` over every projected token of the cache (every view and sample shares it)."""
    return scale_of(frame_of(ref, read.umap_shown(ref), colour))


def about_of(ref: read.CacheRef) -> token_traits.TraitsAbout | None:
    return token_traits.traits_about(ref) if token_traits.has_traits(ref) else None
