"""Neighbours: a token's top-k in T, I and O side by side, and overlap@k over the vocabulary."""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import data, export, frame, phone, state
from explorer import words as summary_text
from explorer.render import alignment_charts, neighbour_tables, seed_tables
from explorer.words import MATRIX_NAMES, OVERLAP_K, pair_label

ref = frame.opened("neighbours")
toks = data.tokens(ref)
n_tokens = len(toks)
K = data.max_k(ref)

c1, c2 = st.columns([3, 1])
k = c2.slider("k", 1, K, key=state.widget_key("k", min(OVERLAP_K, K), lambda v: 1 <= v <= K, f"k runs from 1 to {K} here"),
              on_change=state.sync, args=("k",))

# -- pick a token ---------------------------------------------------------------------------
# Every way of picking (search, its matches, the dice, the most-changed list) is a callback that
# sets the token once; nothing re-applies an old choice on a later run. A pick from the dice or
# the list clears the search, so its matches cannot take the token back.


def choose(t: int, clear_search: bool = False) -> None:
    state.put(token=int(t))
    if clear_search:
        st.session_state["token_query"] = ""


def on_search() -> None:
    hits = data.find_tokens(ref, st.session_state.get("token_query", ""))
    if len(hits):
        choose(hits[0])


token = state.get("token")
if token is not None and not 0 <= token < n_tokens:
    state.reject("token", f"this cache has tokens 0-{n_tokens - 1}")
    token = None
if token is None:
    token = data.default_token(toks)
with c1:
    query = st.text_input("Find a token (part of its text; ␣ or a leading space matches a space)", key="token_query",
                          placeholder="e.g. ␣the, import, (", on_change=on_search)
if query:
    hits = data.find_tokens(ref, query)
    if not len(hits):
        st.warning("No token contains that text.")
    else:
        options = list(hits)
        if st.session_state.get("token_hits") != token:
            st.session_state["token_hits"] = token if token in options else None
        st.selectbox(f"{len(options)} match(es)" + (" (the first 200)" if len(options) == 200 else ""), options,
                     format_func=lambda t: f"{toks.at[t, 'shown']}  (#{t})", key="token_hits", placeholder="pick a match",
                     on_change=lambda: st.session_state["token_hits"] is not None and choose(st.session_state["token_hits"]))
pairs = data.matrix_pairs(ref)
b1, b2, _ = st.columns([1, 2, 3])
b1.button("Random token", key="random", icon=":material/casino:", on_click=lambda: choose(np.random.default_rng().integers(n_tokens), True))
if pairs:
    changed = data.most_changed(ref, k)
    with b2.popover("Most-changed tokens"):
        st.caption(f"Tokens whose neighbourhood in T differs most between the I and the O views "
                   f"(overlap@{k} T\\~O minus T\\~I, both extremes).")
        st.radio("Pick", list(changed), key="changed_pick", index=None,
                 format_func=lambda t: f"{data.escape_markdown(toks.at[t, 'shown'])}  ({changed[t]:+.1f})",
                 on_change=lambda: st.session_state["changed_pick"] is not None and choose(st.session_state["changed_pick"], True))

row = toks.iloc[token]
st.markdown(f"### {data.escape_markdown(row['shown'])}")
st.caption(f"token #{token} · raw {data.escape_markdown(str(row['raw']), entities=False)} · tied id {row['tied_id']}"
           + (f", untied id {row['untied_id']}" if pd.notna(row["untied_id"]) else "")
           + (f" · corpus count {int(row['freq_tied']):,}" if pd.notna(row["freq_tied"]) else ""))

lists, ov = neighbour_tables.token_lists(ref, token, k)  # once per cache, token and k
with st.container(key="nb_lists"):  # a phone gets T, I and O side by side in one table instead (explorer/phone.py)
    cols = st.columns(3)
phone.lists_side_by_side(lists)
for col, (m, sub) in zip(cols, lists.items()):
    col.markdown(f"**{m}** · {MATRIX_NAMES[m]}")
    frame.table(sub, numbers=("cosine",), height=min(38 + 35 * k, 420), where=col)
if not pairs:  # one tied model: its neighbours, and nothing to compare them with
    cols[1].info(summary_text.ONE_MODEL_NOTE)
    st.stop()
st.caption(f"'also in' names the other matrices that list the same neighbour. This token's "
           f"overlap@{k}: " + ", ".join(f"{data.escape_markdown(p)} {v:.2f}" for p, v in ov.items()))

st.subheader(f"overlap@{k} over the vocabulary")
n_tok, means = neighbour_tables.overlap_means(ref, k)  # once per cache and k
mc = st.columns(3)
seed_tag = " · seed 0" if seed_tables.n_seeds(data.summary(ref)) > 1 else ""
for col, (a, b) in zip(mc, pairs):
    col.metric(f"mean overlap@{k} {pair_label(a, b)}{seed_tag}", f"{means[pair_label(a, b)]:.3f}")
if k == 10:
    note = seed_tables.one_seed_note(data.summary(ref), {f"overlap@10 {pair_label(a, b)}":
                                                         f"overlap@10 {pair_label(a, b)}" for a, b in pairs})
    if note:
        st.caption(data.escape_markdown(note, entities=False))
context = data.summary(ref).overlap_context
if context:
    # the toy lab: why its overlaps sit far below the paper's, and a second figure over frequent tokens
    n_sub, sub_means = neighbour_tables.overlap_means(ref, k, context["min_count"])
    if n_sub:
        fc = st.columns(3)
        for col, (a, b) in zip(fc, pairs):
            col.metric(f"overlap@{k} {pair_label(a, b)}, tokens seen ≥ {context['min_count']}",
                       f"{sub_means[pair_label(a, b)]:.3f}")
    at_k = context | {"k": k, "chance": k / max(n_tok - 1, 1), "n_tokens": n_tok, "frequent": None}
    st.caption(data.escape_markdown(  # the text names T~I and T~O: escaped, no strikethrough
        summary_text.overlap_context_text(at_k)
        + (f" The second row: the {n_sub:,} tokens seen at least {context['min_count']} times in the "
           f"corpus, each with its stored top-{k} among all tokens — a second figure, not the paper's "
           "quantity." if n_sub else ""), entities=False))
export.show(lambda: (alignment_charts.overlap_histogram(data.overlap_counts(ref, k), k), data.overlap_table(ref, k)),
            f"overlap-at-{k}-{ref.name}", key="ovhist", spec_key=("ovhist", ref, k))
paper = data.summary(ref).paper
paper = paper.table5 if paper else None
export.show(lambda: (alignment_charts.overlap_curve(data.overlap_curve(ref), paper, k), data.overlap_curve(ref)),
            f"overlap-curve-{ref.name}", key="ovcurve", spec_key=("ovcurve", ref, k))
