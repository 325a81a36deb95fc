"""Projection: aligned UMAP views of T, I and O with the picked token and its neighbours."""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame, state

ref = frame.current()
frame.require(ref, "umap", "UMAP projection", "python -m precompute pair ... (without --skip umap)")
st.title(f"Projection · {ref.name}")
st.markdown("2-D UMAP maps of the three matrices, computed jointly (AlignedUMAP) so that a token sits in "
            "comparable places. If T is output-like, its map's neighbourhoods echo O's rather than I's.")

coords = data.umap(ref)
toks = data.tokens(ref)
coords = coords.merge(toks[["token", "shown"]], on="token", how="left")
n_proj = coords["token"].nunique()
c1, c2, c3 = st.columns([2, 2, 2])
c1.radio("Layout", ("side by side", "overlaid"), horizontal=True,
         key=state.widget_key("view", "side by side", lambda v: v in ("side by side", "overlaid")),
         on_change=state.sync, args=("view",))
state.sync("view")
density = c2.toggle("Density instead of points", key="density",
                    help="Bin every token into a grid; best for very large vocabularies.")
limit = c3.select_slider("Points drawn per view", options=[2000, 5000, 12000, 25000], value=5000, key="points")

token = state.get("token")
if token is None or token not in set(coords["token"]):
    token = data.default_token(toks, among=coords["token"].unique())  # the same default as Neighbours
k = min(int(state.get("k", 10) or 10), data.max_k(ref) or 10)
# reached from the sidebar, the URL has lost them: the view is a link again
for name, value in (("token", token), ("k", k)):
    if st.query_params.get(name) != str(value):
        state.put(name, value)
nb = data.neighbours_of(ref, token, k) if data.has_rows(ref, "neighbours") else pd.DataFrame(columns=["neighbour", "matrix"])

# highlighted: the picked token and its neighbours in each matrix's own view
hl = []
for m in ("T", "I", "O"):
    ids = [token] + nb[nb["matrix"] == m]["neighbour"].tolist()
    sub = coords[(coords["matrix"] == m) & coords["token"].isin(ids)].copy()
    sub["role"] = np.where(sub["token"] == token, "picked", "neighbour")
    hl.append(sub)
highlight = pd.concat(hl, ignore_index=True)

if density:
    shown = coords
    how = f"density of all {n_proj:,} projected tokens per view (binned grid)"
elif n_proj > limit:
    keep = coords["token"].drop_duplicates().sample(limit, random_state=0)
    shown = coords[coords["token"].isin(keep)]
    how = f"a random sample of {limit:,} of {n_proj:,} projected tokens per view (same tokens in every view)"
else:
    shown = coords
    how = f"all {n_proj:,} projected tokens"
total = len(toks)
if n_proj < total:
    how += f"; UMAP was computed on {n_proj:,} of the {total:,} tokens (precompute --umap-tokens)"
st.caption(f"Drawing {how}. The picked token (◆, labelled) and its {k} nearest neighbours in each matrix (●) "
           "are always drawn. Pick another token on the Neighbours page.")
chart = charts.projection(shown, highlight, mode=state.get("view"), density=density)
export.show(chart, shown, f"umap-{ref.name}", key="umap")
