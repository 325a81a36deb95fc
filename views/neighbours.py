"""Neighbours: a token's top-k in T, I and O side by side, and overlap@k over the vocabulary."""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame, state
from tying.schema import MATRIX_NAMES, MATRIX_PAIRS, pair_label

ref = frame.current()
frame.require(ref, "neighbours", "neighbour lists", "python -m precompute pair ... (without --skip neighbours)")
st.title(f"Neighbours · {ref.name}")
toks = data.tokens(ref)
n_tokens = len(toks)
K = data.max_k(ref)

c1, c2 = st.columns([3, 1])
c2.slider("k", 1, K, key=state.widget_key("k", min(10, K), lambda v: isinstance(v, int) and 1 <= v <= K),
          on_change=state.sync, args=("k",))
state.sync("k")
k = state.get("k")

# -- pick a token ---------------------------------------------------------------------------
with c1:
    query = st.text_input("Find a token (part of its text; ␣ or a leading space matches a space)", key="token_query",
                          placeholder="e.g. ␣the, import, (")
token = state.get("token")
if token is None or not 0 <= token < n_tokens:
    token = data.default_token(toks)
if query:
    q = query.replace("␣", " ")
    hits = toks[toks["text"].fillna("").str.contains(q, regex=False) | toks["raw"].fillna("").str.contains(q, regex=False)]
    if hits.empty:
        st.warning("No token contains that text.")
    else:
        exact = hits[hits["text"].str.strip() == q.strip()]
        hits = pd.concat([exact, hits.drop(exact.index)]).head(200)
        options = hits["token"].tolist()
        picked = st.selectbox(f"{len(hits)} match(es)", options, format_func=lambda t: f"{toks.at[t, 'shown']}  (#{t})",
                              index=options.index(token) if token in options else 0, key="token_hits")
        token = int(picked)
b1, b2, _ = st.columns([1, 2, 3])
if b1.button("🎲 Random token", key="random"):
    token = int(np.random.default_rng().integers(n_tokens))
changed = (data.overlap_table(ref, k)["T~O"] - data.overlap_table(ref, k)["T~I"]).to_numpy()
with b2.popover("Most-changed tokens"):
    st.caption(f"Tokens whose neighbourhood in T differs most between the I and the O views "
               f"(overlap@{k} T\\~O minus T\\~I, both extremes).")
    order = np.argsort(changed)
    extremes = np.concatenate([order[:10], order[-10:][::-1]])
    pick = st.radio("Pick", extremes.tolist(), key="changed_pick", index=None,
                    format_func=lambda t: f"{data.escape_markdown(toks.at[t, 'shown'])}  ({changed[t]:+.1f})")
    if pick is not None:
        token = int(pick)
if token != state.get("token"):
    state.put("token", int(token))

row = toks.iloc[token]
st.markdown(f"### {data.escape_markdown(row['shown'])}")
st.caption(f"token #{token} · raw {data.escape_markdown(str(row['raw']))} · tied id {row['tied_id']}, untied id {row['untied_id']}"
           + (f" · corpus count {int(row['freq_tied']):,}" if pd.notna(row["freq_tied"]) else ""))

nb = data.neighbours_of(ref, token, k)
cols = st.columns(3)
for col, m in zip(cols, ("T", "I", "O")):
    sub = nb[nb["matrix"] == m][["rank", "shown", "score", "in"]].rename(
        columns={"shown": "neighbour", "score": "cosine", "in": "also in"})
    col.markdown(f"**{m}** · {MATRIX_NAMES[m]}")
    col.dataframe(sub.style.apply(lambda r: ["background-color: #fff3bf" if r["also in"] else "" for _ in r], axis=1),
                  hide_index=True, width="stretch", height=min(38 + 35 * k, 420))
ov = {pair_label(a, b): len(set(nb[nb.matrix == a].neighbour) & set(nb[nb.matrix == b].neighbour)) / k
      for a, b in MATRIX_PAIRS}
st.caption(f"Shared neighbours are highlighted; 'also in' names the other matrices that list them. This token's "
           f"overlap@{k}: " + ", ".join(f"{data.escape_markdown(p)} {v:.2f}" for p, v in ov.items()))

st.subheader(f"overlap@{k} over the vocabulary")
table = data.overlap_table(ref, k)
mc = st.columns(3)
for col, (a, b) in zip(mc, MATRIX_PAIRS):
    col.metric(f"mean overlap@{k} {pair_label(a, b)}", f"{table[pair_label(a, b)].mean():.3f}")
export.show(charts.overlap_histogram(data.overlap_counts(ref, k), k), table, f"overlap-at-{k}-{ref.name}",
            key="ovhist", spec_key=("ovhist", ref, k))
curve = data.overlap_curve(ref)
paper = (data.summary(ref).get("paper") or {}).get("table5")
export.show(charts.overlap_curve(curve, paper, k), curve, f"overlap-curve-{ref.name}", key="ovcurve",
            spec_key=("ovcurve", ref, k))
