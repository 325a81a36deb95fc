"""Page sections that more than one page shows (layout only: the numbers come from explorer.tables)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from explorer import frame, tables


def across_seeds(s: dict[str, Any], intro: str | None = None) -> None:
    """The "Across seeds" section of a toy-lab summary ``s``: the headline numbers' mean and
    spread over seeds, then whether each of the paper's directions holds seed by seed."""
    st.subheader("Across seeds")
    if intro:
        st.markdown(intro)
    per_seed = tables.seeds(s)
    frame.table(per_seed, numbers=("mean", "std"), height=tables.fit_height(per_seed))
    d = tables.directions(s)
    if len(d):
        frame.table(d)
