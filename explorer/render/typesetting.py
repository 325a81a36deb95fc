"""Typesetting for the figure pack: the caption and source line under a plot, and tables drawn
as charts.

The font sizes are the charts' own (:func:`explorer.render.style.style_config`, large with
``presentation``); text widths are estimated for the sans-serif font vl-convert draws with
(:func:`text_px`), and characters that font lacks are replaced (:data:`MISSING_GLYPHS`).
:func:`with_footer` puts a caption and, smaller and grey, a source line under a finished
Vega-Lite spec; :func:`formatted` writes a table's cells as the tables show them (the LaTeX
of :mod:`explorer.render.formats` and the static site use it too), and :func:`table_chart`
draws them as a text grid to paste on a slide.
"""

from __future__ import annotations

import functools
import json
import math
import re
import textwrap

import altair as alt
import pandas as pd

from explorer.render.spec import vega_lite_spec
from explorer.render.style import MUTED_TEXT, NEUTRAL, style_config, styled_dict

FOOTER_GAP = 16  # pixels between a plot (or its legends) and its caption
TEXT_COLOUR = "#333333"  # the caption; the source line is MUTED_TEXT


@functools.cache
def _fonts(presentation: bool) -> dict:
    """The font sizes of the charts' styling (explorer.render.style.style_config) in this mode."""
    config = style_config(presentation)
    label = config["axis"]["labelFontSize"]
    return {"label": label, "text": config["text"]["fontSize"], "source": max(9, round(label * 0.8))}


_CHAR_EM = {**dict.fromkeys("0123456789", 0.556), **dict.fromkeys("mwMW", 0.94), **dict.fromkeys(" .,:;'|!il", 0.3),
            **dict.fromkeys("ABCDEFGHIJKLNOPQRSTUVXYZ", 0.72), **dict.fromkeys("—→←‖", 1.0)}


def text_px(text: str, size: float, *, bold: bool = False) -> float:
    """A generous estimate of a text's width in the sans-serif font vl-convert draws with."""
    em = sum(_CHAR_EM.get(c, 0.6 if not c.islower() else 0.53) for c in text)
    return em * size * (1.08 if bold else 1.0)


def _spec_width(spec: dict) -> float:
    """The drawn width of a Vega-Lite view, plots only (axes and legends not counted)."""
    if "hconcat" in spec:
        return sum(_spec_width(s) for s in spec["hconcat"]) + 20 * (len(spec["hconcat"]) - 1)
    if "vconcat" in spec:
        return max(_spec_width(s) for s in spec["vconcat"])
    w = spec.get("width")
    if isinstance(w, (int, float)) and not isinstance(w, bool):
        return float(w)
    if "layer" in spec:
        return max([_spec_width(s) for s in spec["layer"]] + [0.0]) or 300.0
    return 300.0


MISSING_GLYPHS = {"‖": "||"}
"""Characters the font vl-convert draws with lacks (a line holding one falls back to a serif
font as a whole), and what is drawn instead."""


def drawable(text: str) -> str:
    return "".join(MISSING_GLYPHS.get(c, c) for c in text)


def _lines(text: str, width: float, size: float) -> list[str]:
    """``text`` wrapped to ``width`` pixels, each of its lines (paragraphs) on new lines."""
    chars = max(30, int(width / (0.5 * size)))
    return [line for para in drawable(text).split("\n")
            for line in textwrap.wrap(para, chars, break_on_hyphens=False) or [""]]


TOP_LEVEL = ("$schema", "config", "datasets", "background", "padding", "autosize", "usermeta")


def _title_text(title) -> str | None:
    text = title.get("text") if isinstance(title, dict) else title
    return " ".join(text) if isinstance(text, list) else text


def with_footer(spec: dict, caption: str, source: str, *, presentation: bool, heading: str | None = None) -> dict:
    """A finished Vega-Lite spec with its caption and, smaller and grey, its source line drawn
    under it (under its legends too), wrapped to the plot's width: the view goes into a
    one-view ``vconcat`` whose title, at the bottom, holds the two. ``heading`` ("Figure 1.
    Per-token alignment") goes on top, the chart's own title under it as a subtitle."""
    spec = dict(spec)
    top = {k: spec.pop(k) for k in TOP_LEVEL if k in spec}
    fonts = _fonts(presentation)
    if heading:
        below = _title_text(spec.get("title"))
        spec["title"] = {"text": drawable(heading), "anchor": "start", "fontSize": fonts["label"] + 8,
                         "fontWeight": "bold", "color": TEXT_COLOUR, "offset": round(fonts["label"] * 0.8),
                         **({"subtitle": drawable(below), "subtitleFontSize": fonts["label"] + 2,
                             "subtitleColor": TEXT_COLOUR} if below and below != heading else {})}
    width = max(_spec_width(spec), 30.0 * fonts["label"])  # a narrow table's caption still reads as prose
    title = {"text": _lines(caption, width, fonts["label"]), "subtitle": _lines(source, width, fonts["source"]),
             "orient": "bottom", "anchor": "start", "frame": "group", "offset": FOOTER_GAP,
             "fontSize": fonts["label"], "fontWeight": "normal", "color": TEXT_COLOUR,
             "lineHeight": round(fonts["label"] * 1.35), "subtitleFontSize": fonts["source"],
             "subtitleColor": MUTED_TEXT, "subtitleLineHeight": round(fonts["source"] * 1.35),
             "subtitlePadding": round(fonts["source"] * 0.6)}
    return {**top, "description": caption, "usermeta": {"caption": caption, "source": source},
            "vconcat": [spec], "title": title}


def figure_spec(chart: alt.TopLevelMixin, caption: str, source: str, *, presentation: bool,
                heading: str | None = None) -> dict:
    """The spec of a figure as written: the pages' chart, styled for files, with its heading and caption."""
    return with_footer(json.loads(vega_lite_spec(chart, presentation=presentation)), caption, source,
                       presentation=presentation, heading=heading)


def _blank(v) -> bool:
    try:
        return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
    except TypeError:
        return False


def formatted(df: pd.DataFrame) -> pd.DataFrame:
    """A table's cells as text, as the tables show them: 3 decimals (whole numbers for a
    column of whole numbers), "—" for a missing value."""
    out = {}
    for col in df.columns:
        v = df[col]
        if pd.api.types.is_float_dtype(v):
            whole = v.dropna().map(lambda x: float(x).is_integer()).all()
            out[col] = ["—" if _blank(x) else (f"{x:,.0f}" if whole else f"{x:.3f}") for x in v]
        elif pd.api.types.is_bool_dtype(v):
            out[col] = ["—" if _blank(x) else ("yes" if x else "no") for x in v]
        else:
            out[col] = ["—" if _blank(x) else str(x) for x in v]
    return pd.DataFrame(out, columns=[str(c) for c in df.columns])


_NUMBER = re.compile(r"^[-−+]?[0-9.,]+")


def is_numeric(values: list[str]) -> bool:
    """Whether a column of cell texts holds numbers ("—" cells aside): drawn right-aligned."""
    shown = [v for v in values if v != "—"]
    return bool(shown) and all(_NUMBER.match(v) for v in shown)


WIDE = 10  # a table of more columns than this (and than rows) is drawn transposed: one column per row


def _for_slide(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells as drawn: a wide table (a sweep's 23 columns) transposed, each row becoming a
    column headed by the first column whose values are all different ("d_model 32")."""
    if len(cells.columns) <= WIDE or len(cells.columns) <= len(cells):
        return cells
    key = next((c for c in cells.columns if cells[c].nunique() == len(cells)), None)
    heads = [f"{key} {v}" if key else f"row {i + 1}" for i, v in enumerate(cells[key] if key else cells.index)]
    body = {"": list(cells.columns)}
    for head, (_, row) in zip(heads, cells.iterrows()):
        body[head] = list(row)
    return pd.DataFrame(body)


def table_chart(df: pd.DataFrame, *, presentation: bool) -> alt.LayerChart:
    """A table drawn as a text grid (header bold, rules above and under the header and at the
    end, numbers right-aligned), at the charts' text size: a table to paste on a slide."""
    size = _fonts(presentation)["text"]
    cells = _for_slide(formatted(df))
    cells = pd.DataFrame({drawable(c): [drawable(v) for v in cells[c]] for c in cells.columns})
    gap, row_h = size * 1.6, round(size * 1.8)
    rows, x = [], 0.0
    for col in cells.columns:
        values = list(cells[col])
        width = max([text_px(col, size, bold=True)] + [text_px(v, size) for v in values])
        right = is_numeric(values)
        anchor = x + width if right else x
        rows.append({"text": col, "x": anchor, "y": row_h / 2, "align": "right" if right else "left", "head": 1})
        rows += [{"text": v, "x": anchor, "y": row_h * (i + 1.5) + 4, "align": "right" if right else "left",
                  "head": 0} for i, v in enumerate(values)]
        x += width + gap
    width, height = round(x - gap), round(row_h * (len(cells) + 1) + 8)
    grid = pd.DataFrame(rows)
    layers = []
    for align in ("left", "right"):
        for head in (1, 0):
            sub = grid[(grid["align"] == align) & (grid["head"] == head)]
            if len(sub):
                layers.append(alt.Chart(sub).mark_text(
                    align=align, baseline="middle", fontSize=size, fontWeight="bold" if head else "normal",
                    color=TEXT_COLOUR).encode(x=alt.X("x:Q", scale=None, axis=None),
                                              y=alt.Y("y:Q", scale=None, axis=None), text="text:N"))
    rules = pd.DataFrame({"y": [0.5, row_h + 2, height - 0.5], "w": [1.5, 1.0, 1.5]})
    layers.append(alt.Chart(rules).mark_rule(color=NEUTRAL).encode(
        y=alt.Y("y:Q", scale=None, axis=None), x=alt.value(0), x2=alt.value(width),
        strokeWidth=alt.StrokeWidth("w:Q", scale=None, legend=None)))
    return alt.layer(*layers).properties(width=width, height=height)


def table_spec(df: pd.DataFrame, caption: str, source: str, *, presentation: bool, heading: str | None = None) -> dict:
    """The spec of a table drawn as a figure, with its heading and caption: sized here, so not
    rescaled for presentation (its font already is)."""
    spec = styled_dict(table_chart(df, presentation=presentation), presentation=presentation)
    return with_footer(spec, caption, source, presentation=presentation, heading=heading)
