"""Overview: the pair's headline numbers beside the paper's, and what the pair is."""

import json

import pandas as pd
import streamlit as st

from explorer import data, frame
from tying.schema import MATRIX_PAIRS, TABLE1_COMPARISONS, TABLE1_METHODS, pair_label

ref = frame.current()
s = data.summary(ref)
paper = s.get("paper") or {}
st.title(f"Overview · {ref.name}")
kinds = {"pair": "a tied/untied model pair", "toylab": "the toy lab: tied and untied twins trained here",
         "evolution": "embedding evolution over checkpoints", "provenance": "an imported gradient-provenance log"}
st.caption(f"This cache holds {kinds.get(s.get('kind'), s.get('kind'))}.")

models = s.get("models") or {}
if models:
    st.subheader("The models")
    rows = []
    for role in ("tied", "untied"):
        m = models.get(role)
        if not m:
            continue
        rows.append({"role": role, "model": m["source"], "revision": m.get("revision") or "",
                     "commit": (m.get("commit_sha") or "")[:12], "type": m.get("model_type"),
                     "tied in weights": "yes" if m.get("tied_in_weights") else "no", "d": m.get("d_model"),
                     "vocab": m.get("n_vocab"), "parameters": f"{m.get('n_params', 0):,}",
                     "embedding share": f"{m.get('embedding_share', 0):.1%}"})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    v = s.get("vocabulary") or {}
    if v:
        st.caption(f"Common tokens: {v.get('n_common'):,} — {v.get('coverage_tied', 0):.1%} of the tied vocabulary, "
                   f"{v.get('coverage_untied', 0):.1%} of the untied one"
                   + (" (identical tokenizers)." if v.get("identical") else " (token strings both vocabularies contain)."))

if s.get("alignment"):
    st.subheader("Alignment (Table 1)")
    st.markdown("Mean per-token cosine after centring and mapping the source matrix onto the target. "
                "**The paper's claim: O→T is high, I→T is low** — the tied matrix resembles the untied *output* matrix.")
    rows = []
    for comp in TABLE1_COMPARISONS:
        row = {"comparison": comp.replace("->", "→")}
        for meth in TABLE1_METHODS:
            cell = s["alignment"].get(comp, {}).get(meth, {})
            row[f"{meth}"] = cell.get("in_sample")
            row[f"{meth} (held-out)"] = cell.get("held_out")
            if paper.get("table1"):
                row[f"{meth} (paper)"] = paper["table1"].get(comp, {}).get(meth)
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.3f") for c in rows[0] if c != "comparison"})
    st.caption("In-sample: the map is fitted and scored on the same tokens (as the paper does). Held-out: fitted on "
               "80% of tokens, scored on the rest — the honest number. n/a: orthogonal and identity maps need equal widths.")

if s.get("overlap_at_10"):
    st.subheader("Neighbour overlap (Table 5)")
    st.markdown("Share of each token's 10 nearest neighbours (cosine) that two matrices have in common, averaged "
                "over tokens. **Claim: T~O above T~I.**")
    cols = st.columns(3)
    for col, (a, b) in zip(cols, MATRIX_PAIRS):
        p = pair_label(a, b)
        ref_val = (paper.get("table5") or {}).get(p)
        col.metric(f"overlap@10 {p}", f"{s['overlap_at_10'].get(p) or 0:.3f}",
                   help=f"paper: {ref_val:.3f}" if ref_val is not None else None)
        if ref_val is not None:
            col.caption(f"paper: {ref_val:.3f}")

if s.get("spectral"):
    sp = s.get("spectral_params", {})
    st.subheader("Spectral distance")
    st.markdown(f"Distance between the k-NN graphs (k={sp.get('graph_k')}) of two matrices on "
                f"{sp.get('n_tokens'):,} tokens (omnibus embedding, {sp.get('n_components')} components). Lower = more similar.")
    cols = st.columns(3)
    for col, (a, b) in zip(cols, MATRIX_PAIRS):
        p = pair_label(a, b)
        col.metric(f"spectral {p}", f"{s['spectral'].get(p) or 0:.3f}")

lens = s.get("lens") or {}
if lens.get("gap"):
    st.subheader("Layerwise KL (tuned lens)")
    g = lens["gap"]
    st.markdown(f"Tuned-lens KL of the first hidden states (bits): tied **{g['tied']:.2f}**, untied "
                f"**{g['untied']:.2f}**. **Claim: early layers of tied models show higher KL.**")

prov = s.get("gradient_provenance") or {}
if prov:
    st.subheader("Gradient provenance")
    first = next((r for r in prov if not r.startswith("untied")), next(iter(prov)))
    p = prov[first]
    st.markdown(f"Output side's share of the gradient reaching the embedding matrix ({first}): "
                f"**{(p['early'] or 0):.1%}** over the first {p['early_steps']} steps, **{(p['overall'] or 0):.1%}** "
                f"over all {p['steps']}. The paper: ~70% over the first 1,000 steps of OLMo-1B.")

with st.expander("Provenance: how this cache was built"):
    meta = data.query(ref, "SELECT key, value FROM meta ORDER BY key")
    st.dataframe(meta, hide_index=True, width="stretch")
    stages = pd.DataFrame([{"stage": k, "seconds": v["seconds"], "finished": v["finished_at"],
                            "parameters": json.dumps(v["params"])} for k, v in (s.get("stages") or {}).items()])
    st.dataframe(stages, hide_index=True, width="stretch")
