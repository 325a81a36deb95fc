"""The app's door to the caches: the readers of :mod:`explorer.render.read` (the same ones the
figure pack and the static site use), and the one thing only a running server needs, the
cache listing re-read every few seconds.

Pages never open connections or write SQL; they call the readers here.
"""

from __future__ import annotations

import streamlit as st

from explorer.render import read
from explorer.render.read import *  # noqa: F403  (the readers: data.tokens(ref), data.summary(ref), ...)


@st.cache_data(ttl=5, show_spinner=False)
def caches(directory: str) -> list[read.CacheListing]:
    """Every cache in ``directory`` with its error, if it cannot be opened (re-read at most
    every 5 seconds, so a new cache shows up without a restart)."""
    return read.caches(directory)
