"""A chart as a file: the styled Vega-Lite spec the pages draw, at a fixed width, and its
SVG and PNG (vl-convert). Used by the pages' export buttons, the figure pack and the site."""

from __future__ import annotations

import json
import re

import altair as alt

from explorer.render.style import styled_dict, with_legend_layout

EXPORT_WIDTH = 720  # charts sized to their container get this width in exported files
PRESENTATION_SIZE = 1.5  # presentation mode: fixed chart heights (and widths) grow by this much


def _fixed_width(spec):
    """The spec with every ``width: "container"`` replaced by a number (files have no container)."""
    if isinstance(spec, dict):
        return {k: (EXPORT_WIDTH if k == "width" and v == "container" else _fixed_width(v)) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_fixed_width(v) for v in spec]
    return spec


def scaled_sizes(spec, factor: float):
    """The spec with every numeric ``width`` and ``height`` multiplied by ``factor``: charts for a
    projector are taller, so enlarged titles and labels keep their room."""
    if isinstance(spec, dict):
        return {k: (round(v * factor) if k in ("width", "height") and isinstance(v, (int, float))
                    and not isinstance(v, bool) else scaled_sizes(v, factor)) for k, v in spec.items()}
    if isinstance(spec, list):
        return [scaled_sizes(v, factor) for v in spec]
    return spec


def vega_lite_spec(chart: alt.TopLevelMixin, *, presentation: bool = False) -> str:
    spec = with_legend_layout(styled_dict(chart, presentation=presentation))
    if presentation:
        spec = scaled_sizes(spec, PRESENTATION_SIZE)
    return json.dumps(_fixed_width(spec))


def to_png(chart: alt.TopLevelMixin, *, presentation: bool = False, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(vega_lite_spec(chart, presentation=presentation), scale=scale)


def to_svg(chart: alt.TopLevelMixin, *, presentation: bool = False) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(vega_lite_spec(chart, presentation=presentation))


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "figure"
