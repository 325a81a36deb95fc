"""Figures on the page and out of the app: every chart drawn from a memoised spec, and
exported as PNG and SVG, its data as CSV.

Drawing a chart the ordinary way (``st.altair_chart``) rebuilds it on every rerun: the
chart object, its Vega-Lite dict and the Arrow bytes of its data, tens of milliseconds of
one core per chart, which a roomful of visitors pays many times over. Here a chart is
built once per ``spec_key`` (the cache and the view's parameters) and presentation mode:
the page passes a builder, and ``figure`` keeps the finished spec with its data already
serialised as Arrow IPC; a rerun only sends it. PNG and SVG are rendered by vl-convert
when the user clicks (deferred download), so drawing a page costs nothing extra.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

from explorer import state
from explorer.render.spec import PRESENTATION_SIZE, scaled_sizes, slug, to_png, to_svg
from explorer.render.style import readable_labels, styled_dict, with_legend_layout

MAX_FIGURES = 512  # figures kept in memory (least recently used dropped first)


# -- the spec a page sends ----------------------------------------------------------------------

def compact(df: pd.DataFrame) -> pd.DataFrame:
    """Chart data as small as a chart needs: 32-bit floats and integers, and repeated strings
    dictionary-encoded (a run name or matrix label repeated on every row is sent once)."""
    out = {}
    for col in df.columns:
        v = df[col]
        plain = isinstance(v.dtype, np.dtype)  # numpy dtypes; nullable and other extension types stay
        if plain and v.dtype.kind == "f":
            v = v.astype("float32")
        elif plain and v.dtype.kind in "iu" and len(v) and v.min() >= -2**31 and v.max() < 2**31:
            v = v.astype("int32")
        elif (pd.api.types.is_object_dtype(v) or pd.api.types.is_string_dtype(v)) and len(v) > 2 * v.nunique():
            v = v.astype("category")
        out[col] = v.reset_index(drop=True)
    return pd.DataFrame(out)


def arrow_bytes(df: pd.DataFrame) -> bytes:
    """A DataFrame as an Arrow IPC stream (how Streamlit's front end reads chart datasets)."""
    table = pa.Table.from_pandas(compact(df), preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


_ALTAIR_LOCK = threading.Lock()  # data transformers and themes are global to Altair


def _collect_as_arrow(data, datasets: dict):
    """Altair data transformer: keep each DataFrame as Arrow bytes under a content hash."""
    raw = arrow_bytes(data) if isinstance(data, pd.DataFrame) else json.dumps(data, sort_keys=True).encode()
    name = "d" + hashlib.sha1(raw).hexdigest()[:16]
    datasets[name] = raw if isinstance(data, pd.DataFrame) else data
    return {"name": name}


alt.data_transformers.register("tying_arrow", _collect_as_arrow)


CONCATS = ("hconcat", "vconcat", "concat", "facet", "repeat")  # views of several panels


def wire_spec(chart: alt.TopLevelMixin, *, presentation: bool = False) -> dict:
    """The chart as the dict ``st.vega_lite_chart`` sends: styled, sized for the mode, no
    default theme (Streamlit's own), every dataset already Arrow bytes in ``datasets``, and a
    chart at its container's width sized by width only (``fit-x``)."""
    datasets: dict = {}
    with _ALTAIR_LOCK, alt.theme.enable("none"), alt.data_transformers.enable("tying_arrow", datasets=datasets):
        spec = with_legend_layout(styled_dict(chart, presentation=presentation, validate=False))
    if presentation:
        spec = scaled_sizes(spec, PRESENTATION_SIZE)
    if spec.get("width") == "container":
        # the width fits the container; the height is the plot's, legends under it add to it
        # (Streamlit's default, "fit", would take a legend's height out of the plot's)
        spec.setdefault("autosize", {"type": "fit-x", "contains": "padding"})
    elif any(k in spec for k in CONCATS):  # panels side by side keep their sizes (Streamlit would ask for "fit",
        spec.setdefault("autosize", {"type": "pad"})  # which Vega ignores for them, warning in the console)
    spec["datasets"] = {**(spec.get("datasets") or {}), **datasets}
    return spec


@dataclass(frozen=True)
class Figure:
    spec: dict  # what the page sends (read-only: shared by every session)
    chart: alt.TopLevelMixin  # for PNG / SVG
    data: pd.DataFrame  # for CSV


@st.cache_resource(show_spinner=False)
def _figures() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def figure(spec_key: object, build: Callable[[], tuple[alt.TopLevelMixin, pd.DataFrame]],
           presentation: bool = False) -> Figure:
    """The figure under ``spec_key`` (hashable: the cache and every parameter the chart depends
    on), built by ``build() -> (chart, data)`` on first use and then shared by all sessions."""
    memo, lock = _figures()
    full_key = (spec_key, bool(presentation))
    with lock:
        hit = memo.get(full_key)
        if hit is not None:
            memo.move_to_end(full_key)
            return hit
    chart, data = build()
    fig = Figure(wire_spec(chart, presentation=presentation), chart, data)
    with lock:
        memo[full_key] = fig
        while len(memo) > MAX_FIGURES:
            memo.popitem(last=False)
    return fig


def show(build: Callable[[], tuple[alt.TopLevelMixin, pd.DataFrame]], name: str, *, key: str, spec_key: object,
         on_select=None, selection_mode=None, downloads: bool = True, width_px: int | None = None,
         height_scale: float = 1.0):
    """Draw a figure with an "Export" control (PNG, SVG, CSV) under it.

    ``build() -> (chart, data)`` runs only when ``spec_key`` (a hashable value fixing the
    chart's content, e.g. the cache and the page's parameters) is new. ``on_select``: a
    callback run when the user picks points (the chart must define ``selection_mode``).
    ``width_px``: the width of a chart that would fit its container, in CSS pixels (a tour
    slide is zoomed as a whole, and Streamlit measures a container's zoomed width).
    ``height_scale``: a single or layered view's plot height scaled (a 4:3 slide's shorter chart).
    """
    presentation = bool(state.get("presentation"))
    fig = figure(spec_key, build, presentation)
    spec = fig.spec
    # side-by-side panels keep their own widths: Vega fits only a single or layered view to a
    # container (asked to, it warns in the console and ignores it)
    width = "content" if any(k in spec for k in CONCATS) else "stretch"
    if width_px is not None and spec.get("width") == "container":
        spec = {**spec, "width": int(width_px), "autosize": {"type": "fit-x", "contains": "padding"}}
        width = "content"
    if height_scale != 1:
        spec = scaled_height(spec, height_scale)
    spec = readable_labels(spec, st.context.theme.type)  # at 4.5:1 or more in the app's light and dark themes
    if on_select is None:
        st.vega_lite_chart(spec, width=width)
    else:
        st.vega_lite_chart(spec, width=width, key=key, on_select=on_select, selection_mode=selection_mode)
    if downloads:
        download_buttons(lambda: (fig.chart, fig.data), name, key=key)
    return fig


def scaled_height(spec: dict, scale: float) -> dict:
    """``spec`` with its plot ``scale`` times as tall: a single or layered view's height (its
    width fits its container); panels side by side, their widths too (a map's keep their shape)."""
    if isinstance(spec.get("height"), int | float):
        return {**spec, "height": round(spec["height"] * scale)}
    if isinstance(spec.get("hconcat"), list):
        panels = [{**v, **{k: round(v[k] * scale) for k in ("width", "height") if isinstance(v.get(k), int | float)}}
                  for v in spec["hconcat"]]
        return {**spec, "hconcat": panels}
    return spec


EXPORTS = (("PNG", "PNG image"), ("SVG", "SVG vector image"), ("CSV", "CSV of the chart's data"))


def download_buttons(build: Callable[[], tuple[alt.TopLevelMixin, pd.DataFrame]], name: str, *, key: str) -> None:
    """One compact "Export" control (a popover) holding PNG, SVG and CSV downloads; ``build()
    -> (chart, data)`` runs only when one of them is clicked."""
    presentation = bool(state.get("presentation"))
    base = slug(name)
    makers = {"PNG": (lambda: to_png(build()[0], presentation=presentation), "png", "image/png"),
              "SVG": (lambda: to_svg(build()[0], presentation=presentation), "svg", "image/svg+xml"),
              "CSV": (lambda: build()[1].to_csv(index=False), "csv", "text/csv")}
    # lazy: the three buttons are drawn only while the popover is open (opening it reruns the
    # page), not on every run of every session: a class's server sends a third fewer elements
    with st.popover("Export", icon=":material/download:", key=f"export_{key}", on_change="rerun",
                    help="Download this chart as an image (PNG or SVG) or its data (CSV)") as pop:
        if not pop.open:
            return
        for kind, label in EXPORTS:
            make, ext, mime = makers[kind]
            st.download_button(label, data=make, file_name=f"{base}.{ext}", mime=mime, key=f"{ext}_{key}",
                               on_click="ignore", width="stretch")
