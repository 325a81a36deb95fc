"""Weight-tying explorer: ``streamlit run app.py``.

The shared frame around every page: the pair picker and presentation mode in the
sidebar, the view's state in the URL, and ``st.navigation`` over the pages in ``pages/``.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from explorer import data, state

# A folder named pages/ beside the entry point puts Streamlit in its legacy multipage mode
# for the first session of a server process, until st.navigation runs once. In that first
# run a deep link (/neighbours?token=...) cannot be resolved yet; it is followed below.
LEGACY_FIRST_RUN = bool(PagesManager.uses_pages_directory)

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="Weight-tying explorer", page_icon="🪢", layout="wide")

PAGES = [
    st.Page(HERE / "pages" / "views" / "overview.py", title="Overview", icon="🏠", default=True, url_path="overview"),
    st.Page(HERE / "pages" / "views" / "alignment.py", title="Alignment", icon="📐", url_path="alignment"),
    st.Page(HERE / "pages" / "views" / "neighbours.py", title="Neighbours", icon="🧭", url_path="neighbours"),
    st.Page(HERE / "pages" / "views" / "projection.py", title="Projection", icon="🗺️", url_path="projection"),
    st.Page(HERE / "pages" / "views" / "lens.py", title="Lens", icon="🔎", url_path="lens"),
    st.Page(HERE / "pages" / "views" / "dynamics.py", title="Training dynamics", icon="📈", url_path="dynamics"),
]
page = st.navigation(PAGES)
if LEGACY_FIRST_RUN:
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    manager = get_script_run_ctx().pages_manager
    wanted = {manager.intended_page_name, manager.intended_page_script_hash,
              urlparse(st.context.url or "").path.rstrip("/").rsplit("/", 1)[-1]} - {None, ""}
    target = next((p for p in PAGES if p.url_path in wanted or p._script_hash in wanted), None)
    if target is not None and target.url_path != page.url_path:
        st.switch_page(target)

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
    st.toggle("Presentation mode", key="presentation", help="Large fonts in every chart and text, for talks.")
    for note in notes:
        st.caption(f"⚠ {note}")

if st.session_state.get("presentation"):
    st.html("<style>.stMainBlockContainer p, .stMainBlockContainer li, .stMainBlockContainer td "
            "{font-size: 1.35rem !important;} h1 {font-size: 3rem !important;}</style>")

page.run()
