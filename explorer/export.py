"""Figures out of the app: every chart as PNG and SVG, its data as CSV.

PNG and SVG are rendered by vl-convert from the chart's Vega-Lite spec only when the
user clicks (deferred download), so drawing a page costs nothing extra.
"""

from __future__ import annotations

import json
import re

import altair as alt
import pandas as pd
import streamlit as st

from explorer.charts import style

EXPORT_WIDTH = 720  # charts sized to their container get this width in exported files


def _fixed_width(spec):
    """The spec with every ``width: "container"`` replaced by a number (files have no container)."""
    if isinstance(spec, dict):
        return {k: (EXPORT_WIDTH if k == "width" and v == "container" else _fixed_width(v)) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_fixed_width(v) for v in spec]
    return spec


def vega_lite_spec(chart: alt.TopLevelMixin, *, presentation: bool = False) -> str:
    return json.dumps(_fixed_width(style(chart, presentation=presentation).to_dict()))


def to_png(chart: alt.TopLevelMixin, *, presentation: bool = False, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(vega_lite_spec(chart, presentation=presentation), scale=scale)


def to_svg(chart: alt.TopLevelMixin, *, presentation: bool = False) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(vega_lite_spec(chart, presentation=presentation))


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "figure"


@st.cache_resource(max_entries=256, show_spinner=False)
def _spec_cache() -> dict:
    return {}


def _spec(chart: alt.TopLevelMixin, presentation: bool, spec_key: object) -> dict:
    """The chart's Vega-Lite spec; memoised under ``spec_key`` (converting a chart to a spec
    costs tens of milliseconds, most of a rerun's time on a large cache)."""
    cache = _spec_cache()
    full_key = (spec_key, presentation)
    if full_key not in cache:
        if len(cache) > 512:
            cache.clear()
        cache[full_key] = style(chart, presentation=presentation).to_dict()
    return cache[full_key]


def show(chart: alt.TopLevelMixin, data: pd.DataFrame, name: str, *, key: str, spec_key=None) -> None:
    """Draw a chart with PNG, SVG and CSV download buttons under it.

    ``spec_key``: a hashable value that determines the chart's content (e.g. the cache and
    the page's parameters); when given, the spec is built once per key.
    """
    presentation = bool(st.session_state.get("presentation"))
    if spec_key is None:  # Streamlit sends an Altair chart's data as Arrow: best for large data
        st.altair_chart(style(chart, presentation=presentation), width="stretch")
    else:
        st.vega_lite_chart(_spec(chart, presentation, spec_key), width="stretch")
    base = slug(name)
    c1, c2, c3, _ = st.columns([1, 1, 1, 5])
    c1.download_button("PNG", data=lambda: to_png(chart, presentation=presentation), file_name=f"{base}.png",
                       mime="image/png", key=f"png_{key}", on_click="ignore")
    c2.download_button("SVG", data=lambda: to_svg(chart, presentation=presentation), file_name=f"{base}.svg",
                       mime="image/svg+xml", key=f"svg_{key}", on_click="ignore")
    c3.download_button("CSV", data=lambda: data.to_csv(index=False), file_name=f"{base}.csv", mime="text/csv",
                       key=f"csv_{key}", on_click="ignore")
