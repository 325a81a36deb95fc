"""Weight-tying explorer: ``streamlit run app.py``.

For now the app lists the pair caches in ``cache/`` and their headline numbers; the
multipage explorer builds on this.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from tying.store import CacheError, list_caches, open_cache
from tying.summary import format_summary, summarize

CACHE_DIR = Path(os.environ.get("TYING_CACHE_DIR", Path(__file__).parent / "cache"))

st.set_page_config(page_title="Weight-tying explorer", layout="wide")
st.title("Weight-tying explorer")
st.caption("Does a tied embedding matrix look like an untied input or output matrix?")

caches = list_caches(CACHE_DIR)
if not caches:
    st.info(f"No caches in `{CACHE_DIR}`. Build one with `python -m precompute pair --tied A --untied B`.")
    st.stop()

for info in caches:
    with st.expander(info.name, expanded=True):
        if info.error:
            st.error(info.error)
            st.code(info.rebuild or "", language="bash")
            continue
        try:
            con = open_cache(info.path)
        except CacheError as exc:
            st.error(exc.message)
            continue
        try:
            st.code(format_summary(summarize(con)), language=None)
        finally:
            con.close()
