"""What a phone (390 CSS px wide) shows in place of what does not fit it, on the tour's map step and
the Neighbours page.

The server cannot know a screen's width, so both versions are sent and a media query in the
browser shows the one that fits: below :data:`MAP_PX` the map step's three panels (I, T and O,
734 px side by side) give way to one panel at the column's width under a T / I / O switch (a
segmented control: a pick reruns the page, drawing only that panel); below :data:`LISTS_PX`,
where Streamlit stacks columns one under another, the Neighbours page's three tables give way to
one compact table of T, I and O side by side, rank by rank, so that the lists can be compared.
On a wider screen the phone's version is hidden (the panel's spec, a third of the map's data,
and a table of text are what it costs).
"""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from explorer import export
from explorer.render import slide
from explorer.render.style import ON, PALETTE
from explorer.words import MATRIX_NAMES

MAP_PX = slide.NARROW_PX  # narrower than this, a screen is a phone's (no slide either)
LISTS_PX = 640  # narrower than this, Streamlit stacks a page's columns
MAP_KEY = "phone_map"  # the one-panel map's container (st-key-phone_map) and its switch's state
PANEL_PX = 320  # the panel's plot, square, on a phone's column (about 358 px at 390)

SETUP_KEY = "phone_setup"  # the set-up diagram's phone layout (two columns: explorer.render.setup_narrow)
SETUP_PX = LISTS_PX  # its one row per model needs about 570 px


def swap_css(key: str, px: float) -> str:
    """CSS that shows the container ``key`` (st-key-<key>) on a screen narrower than ``px`` and, there,
    hides the chart drawn just before it in the same column; wider, the other way round."""
    return f"""
@media (min-width: {px}px) {{ .st-key-{key} {{ display: none !important; }} }}
@media (max-width: {px - 0.02}px) {{
  /* the wide chart, drawn before the phone's in the same column (its container in a layout wrapper) */
  [data-testid="stElementContainer"]:has([data-testid="stVegaLiteChart"]):is(:has(~ .st-key-{key}),
    :has(~ * > .st-key-{key})) {{ display: none !important; }}
}}
"""


MAP_CSS = swap_css(MAP_KEY, MAP_PX) + f"""
.st-key-{MAP_KEY} [data-testid="stButtonGroup"] button {{ min-width: 3.4rem; min-height: 2.75rem; }}  /* a finger's size */
"""

LISTS_CSS = f"""
@media (min-width: {LISTS_PX + 0.02}px) {{ .st-key-nb_phone {{ display: none !important; }} }}
@media (max-width: {LISTS_PX}px) {{ .st-key-nb_lists {{ display: none !important; }} }}
.nb-phone table {{ width: 100%; border-collapse: collapse; table-layout: fixed; font-size: 0.8rem; }}
.nb-phone th, .nb-phone td {{ padding: 0.2rem 0.25rem; vertical-align: top; text-align: left;
  border-bottom: 1px solid rgba(128, 128, 128, 0.3); overflow-wrap: anywhere; }}
.nb-phone th:first-child, .nb-phone td:first-child {{ width: 1.8em; text-align: right; opacity: 0.8; }}
.nb-phone th span {{ display: block; border-radius: 5px; padding: 0.1rem 0.35rem; font-weight: 700; }}
.nb-phone code {{ font-size: 0.8rem; padding: 0 0.15rem; overflow-wrap: anywhere; white-space: pre-wrap; }}
.nb-phone small {{ display: block; opacity: 0.8; font-size: 0.72rem; }}
"""


def one_map(chart_of, source_name: str, spec_key: tuple) -> None:
    """On a phone, the map step's switch and the panel it picks, at the column's width (hidden on a
    wider screen, where the three panels drawn just before show instead). ``chart_of()`` gives the
    step's ``(chart, data)``: its three panels in one row (explorer.render.tour.step_figure)."""
    st.html(f"<style>{MAP_CSS}</style>")
    with st.container(key=MAP_KEY):
        pick = st.segmented_control("The map of", ["T", "I", "O"], default="T", key=f"{MAP_KEY}_pick",
                                    label_visibility="collapsed",
                                    help="One map at a time on a narrow screen: T (tied), I (untied input), "
                                         "O (untied output)")
        pick = pick or "T"

        def panel():
            chart, data = chart_of()
            for view in chart.hconcat:
                if str(view.title).startswith(f"{pick} "):
                    return view.properties(width="container", height=PANEL_PX), data
            return chart, data

        export.show(panel, f"map-{pick}-{source_name}", key=f"{MAP_KEY}_chart", spec_key=(*spec_key, "phone", pick),
                    downloads=False)


def one_setup() -> None:
    """On a phone, the set-up diagram in two columns, untied and tied (hidden on a wider screen, where
    the diagram drawn just before shows, one row per model)."""
    from explorer.render.setup_narrow import setup_diagram_narrow

    st.html(f"<style>{swap_css(SETUP_KEY, SETUP_PX)}</style>")
    with st.container(key=SETUP_KEY):
        export.show(lambda: (setup_diagram_narrow(), None), "setup-phone", key=f"{SETUP_KEY}_chart",
                    spec_key=("setup-phone",), downloads=False)


def lists_side_by_side(lists: dict[str, pd.DataFrame]) -> None:
    """On a phone, each matrix's top-k as one table, T, I and O side by side, rank by rank: each
    neighbour with its cosine and the other lists holding it (hidden on a wider screen)."""
    order = [m for m in ("T", "I", "O") if m in lists]
    head = "".join(f"<th><span style='background:{PALETTE[m]};color:{ON[m]}'>{m}</span></th>" for m in order)
    n = max((len(lists[m]) for m in order), default=0)
    rows = []
    for i in range(n):
        cells = []
        for m in order:
            sub = lists[m]
            if i >= len(sub):
                cells.append("<td></td>")
                continue
            r = sub.iloc[i]
            also = r["also in"] if "also in" in sub.columns and isinstance(r["also in"], str) else ""
            note = f"{float(r['cosine']):.2f}" + (f" · {html.escape(also)}" if also else "")
            cells.append(f"<td><code>{html.escape(str(r['neighbour']))}</code><small>{note}</small></td>")
        rows.append(f"<tr><td>{i + 1}</td>{''.join(cells)}</tr>")
    names = ", ".join(f"{m} {MATRIX_NAMES[m]}" for m in order)
    st.html(f"<style>{LISTS_CSS}</style>")
    with st.container(key="nb_phone"):
        st.html(f"<div class='nb-phone'><table aria-label='nearest neighbours: {html.escape(names)}'><thead><tr>"
                f"<th>#</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
