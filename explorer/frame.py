"""What every page starts with: the picked cache, or a clear message and a stop."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from explorer import data, state

DEMO_COMMAND = "python -m precompute demo"


def current() -> data.CacheRef:
    """The cache picked in the sidebar; stops the page with a message when there is none."""
    listing = data.caches(str(data.cache_dir()))
    if not listing:
        st.info(f"No caches in `{data.cache_dir()}` yet. Build the toy lab with `{DEMO_COMMAND}`, "
                "or a real pair with `python -m precompute pair --tied A --untied B`.")
        st.stop()
    names = [c.name for c in listing]
    name = state.get("pair")
    entry = listing[names.index(name)] if name in names else listing[0]
    if entry.error is None:
        try:
            ref = data.CacheRef.of(Path(entry.path))
            err = data.open_error(ref)
        except FileNotFoundError:
            ref, err = None, None
            entry = data.CacheListing(entry.name, entry.path, "the cache file disappeared", DEMO_COMMAND)
        if err is None and ref is not None:
            return ref
        if err is not None:
            entry = data.CacheListing(entry.name, entry.path, err.message, err.rebuild)
    st.error(f"Cannot open the cache '{entry.name}': {entry.error}")
    st.markdown("Rebuild it with:")
    st.code(entry.rebuild or DEMO_COMMAND, language="bash")
    st.stop()


SWEEP_COMMAND = "python -m precompute sweep"


def current_sweep() -> data.CacheRef:
    """The picked cache when it is a width sweep, else the first sweep cache in the folder;
    stops the page with the command that builds one when there is none."""
    listing = [c for c in data.caches(str(data.cache_dir())) if c.error is None]
    picked = state.get("pair")
    ordered = sorted(listing, key=lambda c: (c.name != picked, c.name != "sweep", c.name))
    for entry in ordered:
        try:
            ref = data.CacheRef.of(Path(entry.path))
        except FileNotFoundError:
            continue
        if data.open_error(ref) is None and data.summary(ref).get("sweep_cells"):
            return ref
    st.info(f"No width sweep in `{data.cache_dir()}` yet. Build one with `{SWEEP_COMMAND}` (13-18 minutes on 2 "
            f"cores) or `{SWEEP_COMMAND} --quick` (a few minutes).")
    st.stop()


def require(ref: data.CacheRef, table: str, what: str, command: str) -> None:
    """Stop the page with a note when the cache has no rows in ``table``."""
    if not data.has_rows(ref, table):
        kind = data.summary(ref).get("kind")
        if kind == "sweep":
            st.info(f"The cache '{ref.name}' is a width sweep of tied and untied twins: it has no {what}. "
                    "Open the Sweep page.")
        elif kind == "published":
            st.info(f"The cache '{ref.name}' holds the paper's published measurements (its tables, training dynamics "
                    f"and layerwise KL), not the models' matrices, so it has no {what}. Open Overview, Lens or "
                    "Training dynamics, or pick the toy lab or a pair built with `python -m precompute pair`.")
        else:
            st.info(f"The cache '{ref.name}' has no {what}. Add it with `{command}`.")
        st.stop()


def table(df, *, numbers=(), height=None, where=None) -> None:
    """A table: sortable and scrollable on screen; in presentation mode a static one whose text
    grows with the page (an interactive table is drawn on a canvas that CSS cannot enlarge).

    ``numbers``: columns shown with three decimals; ``where``: a column or container.
    """
    where = where if where is not None else st
    if state.get("presentation"):
        shown = df.copy()
        for c in numbers:
            if c in shown:
                shown[c] = shown[c].map(lambda v: "" if v is None or v != v else f"{v:.3f}")
        # a static table reads every cell and header as markdown: escape them (T~O would strike through)
        shown = shown.map(lambda v: data.escape_markdown(v, entities=False) if isinstance(v, str) else v)
        shown.columns = [data.escape_markdown(str(c), entities=False) for c in shown.columns]
        where.table(shown, hide_index=True)
    else:
        where.dataframe(df, hide_index=True, width="stretch", height=height or "auto",
                        column_config={c: st.column_config.NumberColumn(format="%.3f") for c in numbers if c in df})
