"""The static site's map: the cache page's projection figure coloured by what the reader picks, with a
selection drawn at full strength and the rest faded (``assets/map.js``, from ``precompute/templates/map.js``).

The figure's chart file (``<cache>/charts/projection-umap.js``, first written by :mod:`precompute.site`)
is written again here with every colouring the cache offers (:func:`explorer.render.map_colours.offered`):
the points once, as columns (``c_<colour>`` per colouring, ``shade`` each point's opacity), under the
dataset name ``map-points``, and one Vega-Lite spec per colouring that reads it (the styled spec of
:func:`explorer.render.projection_charts.projection`, the app's). ``assets/map.js`` reads ``colour=`` and
``select=`` (token ids, comma-separated) from the page's address (its query or ``#`` part), puts the
chosen colouring's spec in ``window.SITE_CHARTS`` before ``assets/site.js`` draws it, and writes the
reader's changes back to the ``#`` part (which a page opened from ``file://`` may change).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

MAP_FIGURES = ("projection-umap", "projection-umap-tied")
POINTS = "map-points"  # the dataset every colouring's spec reads
SCRIPT = "map.js"


def scripts(c) -> list[str]:
    """The cache page's extra script: the map's, where the page has a map."""
    return [f"../assets/{SCRIPT}"] if any(f in c.charts for f in MAP_FIGURES) else []


def map_data(ref, presentation: bool = False) -> dict[str, Any] | None:
    """What ``assets/map.js`` reads: ``colours`` [[key, label]], ``specs`` (key -> spec without the
    points), ``points`` (columns), ``about`` (a sentence on the under-trained rule, or on what is
    missing). None for a cache with no map."""
    from explorer.render import figures, projection_charts, read
    from explorer.render import map_colours as mc
    from explorer.render.spec import vega_lite_spec
    from explorer.render.token_traits import COLOURS, token_traits

    if not read.has_rows(ref, "umap"):
        return None
    coords = read.umap_sample(ref, figures.PROJECTION_SAMPLE)
    hi = figures.highlighted(ref)
    about = mc.about_of(ref)
    keys = mc.offered(ref)
    base = mc.colour_frame(coords, None, None, "matrix")[["matrix", "token", "x", "y", "shown"]]
    points = base.copy()
    specs = {}
    for key in keys:
        framed = mc.frame_of(ref, base, key).set_index(["matrix", "token"])["colour"]
        colour = framed.reindex(pd.MultiIndex.from_frame(base[["matrix", "token"]])).to_numpy()
        df = base.assign(colour=colour, shade=mc.SHOWN)
        if key == "under_trained":  # sent as 1/0, labelled again by assets/map.js
            colour = (colour == mc.FLAG_LABELS[0]).astype(int)
        if key not in ("matrix", "log_count"):  # the matrix's colour is its column, log_count log10(count)
            points[f"c_{key}"] = colour
        if key == "log_count":
            df = df.merge(token_traits(ref)[["token", "count"]], on="token", how="left")
            points["count"] = df["count"].to_numpy()
        df.attrs["colour"] = key
        # the spec's points are swapped for the shared columns (_shared_points): two rows a matrix make the same
        # spec as every row does, without Altair copying every point six times
        few = df.groupby("matrix", sort=False).head(2)
        few.attrs["colour"] = key
        chart = projection_charts.projection(few, hi, scale=mc.scale_for(ref, key), title=mc.legend_title(key, about))
        spec = json.loads(vega_lite_spec(chart, presentation=presentation))
        specs[key] = _shared_points(spec)
    note = mc.missing_sentence(ref) or (f"Under-trained ({about.n_under_trained:,} tokens): {about.rule}."
                                        if about else "")
    return {"colours": [[k, COLOURS[k]] for k in keys], "specs": specs, "about": note,
            "about_for": None if mc.missing_sentence(ref) else "under_trained",
            "points": {k: [_plain(v, 4 if k in ("x", "y") else 3 if k.startswith("c_") else 0) for v in points[k]]
                       for k in points.columns}, "shade": [mc.SHOWN, mc.CHOSEN,
                                                                                              mc.FADED],
            "max": mc.SELECT_MAX, "flags": list(mc.FLAG_LABELS)}


def _shared_points(spec: dict) -> dict:
    """``spec`` with each view's points (a dataset of rows with ``shade``) read from ``POINTS``,
    filtered to the view's matrix, and those datasets left out."""
    sets = spec.get("datasets") or {}
    views = {n: rows[0]["matrix"] for n, rows in sets.items()
             if isinstance(rows, list) and rows and "shade" in rows[0] and "matrix" in rows[0]}
    whole = {n for n, rows in sets.items() if n in views and len({r["matrix"] for r in rows}) > 1}

    def walk(node):
        if isinstance(node, dict):
            name = (node.get("data") or {}).get("name") if isinstance(node.get("data"), dict) else None
            if name in views:
                node["data"] = {"name": POINTS}
                if name not in whole:
                    node["transform"] = [{"filter": f"datum.matrix === {json.dumps(views[name])}"}] + node.get(
                        "transform", [])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    spec["datasets"] = {n: rows for n, rows in sets.items() if n not in views}
    return spec


def _plain(v, digits: int):
    """A value as JSON takes it, a float to ``digits`` significant digits (a view of 300 px needs 3 or 4)."""
    if isinstance(v, float) and v != v:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not digits:  # a count: whole
        return int(v) if v.is_integer() else v
    return float(f"{v:.{digits}g}") if isinstance(v, float) else v


def write(builder, c, js_data) -> None:
    """Write the map's chart file again with every colouring, and ``assets/map.js`` (once)."""
    from precompute import site_assets

    for fig in MAP_FIGURES:
        if fig not in c.charts:
            continue
        data = map_data(c.ref, builder.presentation)
        if data is None:
            return
        key = c.charts[fig]  # assets/map.js puts the chosen colouring's spec, with the points, in SITE_CHARTS
        builder.write(f"{c.folder}/charts/{fig}.js",
                      f"(window.SITE_MAPS = window.SITE_MAPS || {{}})[{js_data(key)}] = {js_data(data)};\n")
        if not (builder.root / "assets" / SCRIPT).exists():
            builder.write(f"assets/{SCRIPT}", site_assets.script(SCRIPT))
