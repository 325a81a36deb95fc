"""Weight-tying explorer: ``streamlit run app.py``.

The shared frame around every page: the pair picker and presentation mode in the
sidebar, the view's state in the URL, and ``st.navigation`` over the page scripts in
``views/``. (They are not in a folder named ``pages/``: beside the entry point such a
folder puts Streamlit in its legacy multipage mode until ``st.navigation`` has run once in
the server, which shows "Page not found" over a cold deep link.)
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from explorer import data, state

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="Weight-tying explorer", page_icon="🪢", layout="wide")

PAGES = [
    st.Page(HERE / "views" / "overview.py", title="Overview", icon="🏠", default=True, url_path="home"),
    st.Page(HERE / "views" / "alignment.py", title="Alignment", icon="📐", url_path="alignment"),
    st.Page(HERE / "views" / "neighbours.py", title="Neighbours", icon="🧭", url_path="neighbours"),
    st.Page(HERE / "views" / "projection.py", title="Projection", icon="🗺️", url_path="projection"),
    st.Page(HERE / "views" / "lens.py", title="Lens", icon="🔎", url_path="lens"),
    st.Page(HERE / "views" / "dynamics.py", title="Training dynamics", icon="📈", url_path="dynamics"),
    st.Page(HERE / "views" / "sweep.py", title="Sweep", icon="📏", url_path="sweep"),
]
# The default page is served at "/"; the same script under its own name answers /overview
# (a hidden entry: links and old bookmarks to /overview open it with no "Page not found").
OVERVIEW_ALIAS = st.Page(HERE / "views" / "overview.py", title="Overview", icon="🏠", url_path="overview",
                         visibility="hidden")
page = st.navigation(PAGES + [OVERVIEW_ALIAS])

notes = state.load_from_url()
listing = data.caches(str(data.cache_dir()))

with st.sidebar:
    st.markdown("### Weight-tying explorer")
    st.caption("Does a tied embedding look like an untied input or output matrix? "
               "T = tied, I = untied input, O = untied output.")
    if listing:
        names = [c.name for c in listing]
        default = "demo" if "demo" in names else names[0]
        st.selectbox("Model pair (cache)", names, key=state.widget_key("pair", default, lambda v: v in names),
                     on_change=state.sync, args=("pair",),
                     format_func=lambda n: n + ("  ⚠" if next(c for c in listing if c.name == n).error else ""))
        state.sync("pair")
    st.toggle("Presentation mode", key=state.widget_key("presentation", False, lambda v: isinstance(v, bool)),
              on_change=state.sync, args=("presentation",),
              help="Large headline numbers, text and chart fonts, for talks; kept in the URL.")
    state.sync("presentation")
    for note in notes:
        st.caption(f"⚠ {note}")

if state.get("presentation"):
    # a room reads the headline numbers first: they grow most (the default is 2.25rem)
    st.html("<style>.stMainBlockContainer p, .stMainBlockContainer li, .stMainBlockContainer td "
            "{font-size: 1.35rem !important;} h1 {font-size: 3rem !important;} "
            ".stMainBlockContainer [data-testid='stMetricValue'], "
            ".stMainBlockContainer [data-testid='stMetricValue'] p, "
            ".stMainBlockContainer [data-testid='stMetricValue'] * "
            "{font-size: 3.6rem !important; line-height: 1.15 !important;} "
            ".stMainBlockContainer [data-testid='stMetricLabel'] p {font-size: 1.3rem !important;} "
            ".stMainBlockContainer [data-testid='stCaptionContainer'] p {font-size: 1.15rem !important;}</style>")

page.run()
