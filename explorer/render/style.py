"""The look every chart shares: palette, legends, dash patterns and fonts, and a table's height.

One palette everywhere (``PALETTE``, Okabe and Ito's colour-blind-safe set): T (tied) reddish
purple, I (untied input) blue, O (untied output) vermillion; rules, whiskers and legend strokes
in ``NEUTRAL``, a grey that reads on Streamlit's light and dark themes (no chart sets a
background, or black or white on the page's background: the theme gives those; black and white
appear only on marks of their own colour, a heat map's cells). Legends sit under the
plot and wrap to the chart's width, their labels never cut; runs are told apart by dash
pattern, with the dashes drawn in the legend.

The chart builders, each taking DataFrames and returning an Altair chart (tests can inspect
them), are grouped by what they draw: :mod:`~explorer.render.alignment_charts`,
:mod:`~explorer.render.projection_charts`, :mod:`~explorer.render.lens_charts`,
:mod:`~explorer.render.dynamics_charts` and :mod:`~explorer.render.sweep_charts`.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from explorer.render import altair_lookup

altair_lookup.install()  # every chart module imports this one: Altair's class lookup built once a process

PALETTE = {"T": "#CC79A7", "I": "#0072B2", "O": "#D55E00"}
SERIES = ("#7A5195", "#00838F", "#795548")
"""Colours of series that are none of T, I and O (the Sweep's measures and arms: tied, untied and
the parameter-matched tied model are models, not matrices): violet, dark cyan and brown, so that
pink, blue and vermillion keep one meaning each, and the verdicts' green, ochre, red and grey
theirs (tying/cache/verdicts.py)."""
ON = {"T": "#000000", "I": "#ffffff", "O": "#000000"}
"""Text on each matrix's colour (a chip naming T, I or O) at WCAG AA's 4.5:1 or more, in either theme."""
NEUTRAL = "#888888"  # 3.5:1 on white, 5.3:1 on Streamlit's dark background: for marks, not for text
MUTED_TEXT = "#5f6368"  # grey text on white at 6.1:1 (WCAG AA asks 4.5:1): the figure pack's source lines
LABEL_INK = {"light": "#555867", "dark": "#b4b7c2"}
"""Axis and legend text in the app's two themes: 7.1:1 on white and 9.4:1 on Streamlit's dark
background (its own theme greys them to 3.7:1 on white, under WCAG AA's 4.5:1)."""


def readable_labels(spec: dict, theme: str | None) -> dict:
    """``spec`` with its axes' and legends' labels and titles in :data:`LABEL_INK` of ``theme``
    ('light' or 'dark'; anything else: light), over whatever colour a theme would give them."""
    ink = LABEL_INK.get(theme or "light", LABEL_INK["light"])
    config = dict(spec.get("config") or {})
    for part in ("axis", "legend"):
        config[part] = {**(config.get(part) or {}), "labelColor": ink, "titleColor": ink}
    config["title"] = {**(config.get("title") or {}), "subtitleColor": ink}
    # a text mark of no colour of its own (the set-up diagram's titles, a heat map's labels): the same ink, not
    # the theme's first series colour (Streamlit gives text marks its marks' colour, a blue like I's)
    config["text"] = {**(config.get("text") or {}), "color": ink}
    return {**spec, "config": config}
HIGHLIGHT = "#ffd92f"  # the picked token and its neighbours on a projection (outlined in black)
UNTIED = SERIES[2]  # the untied model (its I and O both): brown, not I's blue
COLOURS = {**PALETTE, "tied": PALETTE["T"], "untied": UNTIED,
           "O→T": PALETTE["O"], "I→T": PALETTE["I"], "I→O": NEUTRAL,
           "O->T": PALETTE["O"], "I->T": PALETTE["I"], "I->O": NEUTRAL,
           "T~O": PALETTE["O"], "T~I": PALETTE["I"], "I~O": NEUTRAL}
DASHES = ([1, 0], [8, 4], [2, 3], [12, 3, 3, 3], [4, 4], [16, 4], [1, 6], [8, 3, 1, 3, 1, 3])
"""Dash patterns of runs, in order (solid first); more runs than patterns reuse them."""
SAMPLE_POINTS = 12_000  # most points a projection scatter draws (the rest: density or a sample)
PRESENTATION_FONT_PX = 22  # axis and legend labels in presentation mode: a slide's at 1920x1080 (render/slide.py)
LEGEND_CHAR_PX = 12  # a legend label's width per character at the largest (presentation) font

# Pages sample or aggregate large data themselves; Altair's 5,000-row guard would only stop
# specs (and PNG/SVG exports) of the samples they already chose.
alt.data_transformers.disable_max_rows()


def colour_scale(keys) -> alt.Scale:
    """The colour scale of ``keys`` in the palette (``NEUTRAL`` for a key without a colour)."""
    keys = list(keys)
    return alt.Scale(domain=keys, range=[COLOURS.get(k, NEUTRAL) for k in keys])


def present(order, values) -> list:
    """The keys of ``order`` found in ``values``, in that order (a legend lists only what is drawn)."""
    have = set(values)
    return [k for k in order if k in have]


NARROW_PX = 600
"""A plot narrower than this (a phone, a column) stacks its legends one above the other."""
LEGEND_LAYOUT = {"bottom": {"anchor": "start", "margin": 12,
                            "direction": {"signal": f"width < {NARROW_PX} ? 'vertical' : 'horizontal'"}}}
"""Vega's layout of the legends under a plot: side by side, or stacked when the plot is narrow."""


def legend(title: str | None, labels=(), **props) -> alt.Legend | None:
    """A legend under the plot whose labels are never cut: its entries fill as many columns as
    the chart's width holds (one per row on a phone), from the longest of ``labels`` (at the
    presentation font, leaving a quarter of the width to a legend beside it). None (no legend)
    for a single label: a key of one entry tells nothing a title or caption does not."""
    if len(labels) == 1:
        return None
    entry = 44 + LEGEND_CHAR_PX * max([len(str(x)) for x in labels] + [4])
    props.setdefault("columns", {"expr": f"max(1, floor(width * 0.75 / {entry}))"})
    return alt.Legend(title=title, orient="bottom", labelLimit=0, titleLimit=0, **props)


def with_legend_layout(spec: dict) -> dict:
    """A chart's Vega-Lite dict with ``LEGEND_LAYOUT`` in its config (set on the dict: Altair's
    schema types the setting as an expression only)."""
    config = spec.setdefault("config", {})
    config["legend"] = {**config.get("legend", {}), "layout": LEGEND_LAYOUT}
    return spec


def run_legend(title: str, labels) -> alt.Legend | None:
    """The legend of a dash channel: each entry a stroke drawn with its run's dash pattern."""
    return legend(title, labels, symbolType="stroke", symbolSize=1400, symbolStrokeWidth=2,
                  symbolStrokeColor=NEUTRAL)


def dash_scale(keys) -> alt.Scale:
    keys = list(keys)
    return alt.Scale(domain=keys, range=[DASHES[i % len(DASHES)] for i in range(len(keys))])


def style_config(presentation: bool = False) -> dict[str, dict]:
    """The charts' fonts as Vega-Lite config sections: for the screen, or large ones for talks (presentation mode)."""
    size = PRESENTATION_FONT_PX if presentation else 12
    return {"axis": {"labelFontSize": size, "titleFontSize": size + 2},
            "legend": {"labelFontSize": size, "titleFontSize": size + 1, "symbolSize": 12 * size},
            "title": {"fontSize": size + 6, "subtitleFontSize": size + 1, "anchor": "start"},
            "header": {"labelFontSize": size + 1, "titleFontSize": size + 2},
            "text": {"fontSize": size + 1},
            "view": {"strokeWidth": 0}}


def styled_dict(chart: alt.TopLevelMixin, *, presentation: bool = False, validate: bool = True) -> dict:
    """The chart's dict styled: :func:`style_config`'s sections merged into its config (on the dict: each
    of Altair's ``configure_*`` calls would copy the chart, its data included)."""
    spec = chart.to_dict(validate=validate)
    config = spec.setdefault("config", {})
    for section, values in style_config(presentation).items():
        config[section] = {**config.get(section, {}), **values}
    return spec


def runs_dashed(field: str, runs, title: str = "run") -> dict:
    """The dash channel of several runs (one pattern each, drawn in the legend); none for one run."""
    runs = list(runs)
    if len(runs) < 2:
        return {}
    return {"strokeDash": alt.StrokeDash(f"{field}:N", scale=dash_scale(runs), legend=run_legend(title, runs))}


def fit_height(df: pd.DataFrame, row_px: int = 35) -> int:
    """A st.dataframe height that shows every row (header included) without an inner scroll bar."""
    return row_px * (len(df) + 1) + 3
