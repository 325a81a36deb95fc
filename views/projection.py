"""Projection: aligned UMAP views of T, I and O; click a point to pick its token, zoom and pan."""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame, state

ref = frame.current()
frame.require(ref, "umap", "UMAP projection", "python -m precompute pair ... (without --skip umap)")
st.title(f"Projection · {ref.name}")
st.markdown("2-D UMAP maps of the three matrices, computed jointly (AlignedUMAP) so that a token sits in "
            "comparable places. If T is output-like, its map's neighbourhoods echo O's rather than I's.")

coords = data.umap_shown(ref)
toks = data.tokens(ref)
projected = data.projected_tokens(ref)
n_proj = len(projected)
c1, c2, c3 = st.columns([2, 2, 2])
density = c2.toggle("Density instead of points", key=state.widget_key("density", False, lambda v: isinstance(v, bool)),
                    on_change=state.sync, args=("density",),
                    help="Bin every token into a grid, one grid per matrix; best for very large vocabularies.")
view = c1.radio("Layout", state.VIEWS, horizontal=True, disabled=density,
                key=state.widget_key("view", "side by side", lambda v: v in state.VIEWS),
                on_change=state.sync, args=("view",),
                help="Density is drawn per matrix, so it is always side by side." if density else None)
mode = "side by side" if density else view
POINTS = (2000, 5000, 12000, 25000)
# no choice past the projected tokens: the first step that holds them all reads "all N"
offered = tuple(p for p in POINTS if p < n_proj) + tuple(p for p in POINTS if p >= n_proj)[:1] or POINTS[-1:]
limit = c3.select_slider("Points drawn per view", options=offered,
                         key=state.widget_key("points", min(5000, offered[-1]), offered.__contains__,
                                              fit=lambda p: offered[-1] if p >= n_proj else p),
                         format_func=lambda p: f"all {n_proj:,}" if p >= n_proj else f"{p:,}",
                         on_change=state.sync, args=("points",))

token = state.get("token")  # picked here or on Neighbours: both read it from the URL
if token is not None and token not in projected:
    state.reject("token", "not among this cache's projected tokens")
    token = None
if token is None:
    token = data.default_token(toks, among=projected)  # the same default as Neighbours
k = min(int(state.get("k", 10)), data.max_k(ref) or 10)


def highlighted() -> pd.DataFrame:
    """The picked token and its k nearest neighbours in each matrix's own view."""
    nb = (data.neighbours_of(ref, token, k) if data.has_rows(ref, "neighbours")
          else pd.DataFrame(columns=["neighbour", "matrix"]))
    parts = []
    for m in charts.PROJECTION_ORDER:
        ids = [token] + nb[nb["matrix"] == m]["neighbour"].tolist()
        sub = coords[(coords["matrix"] == m) & coords["token"].isin(ids)].copy()
        sub["role"] = np.where(sub["token"] == token, "picked", "neighbour")
        parts.append(sub)
    return pd.concat(parts, ignore_index=True)


def shown() -> pd.DataFrame:
    return coords if density else data.umap_sample(ref, limit)


def on_pick(key: str) -> None:
    """A click on a point picks its token here, on Neighbours and in the URL. (Each chart's key
    names the token it was drawn for, so a click is always a new selection.)"""
    picked = (st.session_state.get(key) or {}).get("selection", {}).get(charts.PICK) or []
    if picked and "token" in picked[0]:
        state.put(token=int(picked[0]["token"]))


if density:
    how = f"density of all {n_proj:,} projected tokens per view (binned grid)"
elif n_proj > limit:
    how = f"a random sample of {limit:,} of {n_proj:,} projected tokens per view (same tokens in every view)"
else:
    how = f"all {n_proj:,} projected tokens"
if n_proj < len(toks):
    how += f"; UMAP was computed on {n_proj:,} of the {len(toks):,} tokens (precompute --umap-tokens)"
st.caption(f"Drawing {how}. The picked token (◆, labelled) and its {k} nearest neighbours in each matrix (●) "
           "are always drawn. **Click a point** to pick its token (Neighbours follows); scroll to zoom, drag to pan, "
           "double-click to reset.")
height = 420
params = (ref, token, k, density, limit)
if mode == "overlaid":
    export.show(lambda: (charts.projection(shown(), highlighted(), mode="overlaid", height=height), shown()),
                f"umap-{ref.name}", key=f"umap_all_{token}", spec_key=("umap-overlaid",) + params,
                on_select=lambda: on_pick(f"umap_all_{token}"), selection_mode=charts.PICK)
else:
    for col, m in zip(st.columns(3), charts.PROJECTION_ORDER):
        with col:
            export.show(lambda m=m: (charts.projection_view(shown(), highlighted(), m, density=density, height=height),
                                     shown()),
                        f"umap-{ref.name}-{m}", key=f"umap_{m}_{token}", spec_key=("umap-view", m) + params,
                        on_select=lambda m=m: on_pick(f"umap_{m}_{token}"), selection_mode=charts.PICK,
                        downloads=False)
    export.download_buttons(lambda: (charts.projection(shown(), highlighted(), density=density), shown()),
                            f"umap-{ref.name}", key="umap")
