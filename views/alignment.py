"""Alignment: per-token cosine histograms (Figure 1), best and worst tokens, norm vs frequency."""

import numpy as np
import streamlit as st

from explorer import charts, data, export, frame, state
from tying.schema import DISPLAY_COMPARISONS, display_comparison

ref = frame.current()
frame.require(ref, "alignment", "alignment results", "python -m precompute pair ... (without --skip alignment)")
st.title(f"Alignment · {ref.name}")
st.markdown("Each token's row in one matrix is mapped onto its row in another and scored by cosine. If the tied "
            "matrix T is *output-like*, **O→T** sits far to the right of **I→T**.")

summ = data.alignment_summary(ref)
c1, c2 = st.columns(2)
c1.radio("Map", state.METHODS, horizontal=True, key=state.widget_key("method", "linear", lambda v: v in state.METHODS),
         on_change=state.sync, args=("method",), format_func=lambda m: state.METHOD_LABEL[m],
         help="identity (raw rows): no map, no centring — the paper's identity column; identity (centred): no map, "
              "each matrix's mean row subtracted; orthogonal: Procrustes rotation; linear: least squares (both on "
              "centred rows)")
state.sync("method")
c2.radio("Scored on", state.SPLITS, horizontal=True, key=state.widget_key("split", "held_out", lambda v: v in state.SPLITS),
         on_change=state.sync, args=("split",), format_func=lambda s: "held-out tokens" if s == "held_out" else "the fitted tokens (in-sample)")
state.sync("split")
method, split = state.get("method"), state.get("split")

na = summ[(summ["method"] == method) & (summ["split"] == split) & (~summ["applicable"])]
for note in na["note"]:
    st.info(f"Not applicable: {note}")
per_token = data.alignment(ref, method, split)
if per_token.empty:
    st.stop()
means = per_token.groupby("comparison")["cosine"].mean()
cols = st.columns(3)
for col, comp in zip(cols, DISPLAY_COMPARISONS):
    if comp in means:
        col.metric(f"mean cosine {comp.replace('->', '→')}", f"{means[comp]:.3f}")
export.show(charts.cosine_histogram(per_token, title=f"Per-token cosine, {state.METHOD_LABEL[method]} map, {split.replace('_', '-')}"),
            per_token, f"alignment-{ref.name}-{method}-{split}", key="hist", spec_key=("hist", ref, method, split))

st.subheader("Best- and worst-aligned tokens")
toks = data.tokens(ref)
comp = st.selectbox("Comparison", sorted(per_token["comparison"].unique(), key=DISPLAY_COMPARISONS.index),
                    key="align_comp", format_func=display_comparison)
sub = per_token[per_token["comparison"] == comp].merge(toks[["token", "shown", "freq_tied"]], on="token")
n_show = 15
best = sub.nlargest(n_show, "cosine")[["token", "shown", "cosine", "freq_tied"]]
worst = sub.nsmallest(n_show, "cosine")[["token", "shown", "cosine", "freq_tied"]]
b1, b2 = st.columns(2)
b1.markdown("**Best aligned**")
b1.dataframe(best.rename(columns={"shown": "token text", "freq_tied": "frequency"}), hide_index=True,
             width="stretch")
b2.markdown("**Worst aligned**")
b2.dataframe(worst.rename(columns={"shown": "token text", "freq_tied": "frequency"}), hide_index=True,
             width="stretch")

st.subheader("Norm vs frequency (Figure 5)")
nf = data.norms(ref)
if nf["freq"].notna().any() and (nf["freq"].fillna(0) > 0).any():
    st.markdown("Per-token L2 norm against corpus frequency. In the paper, T's pattern follows O's, not I's.")
    corr = {m: float(np.corrcoef(np.log(g["freq"][g["freq"] > 0]), g["norm"][g["freq"] > 0])[0, 1])
            for m, g in nf.groupby("matrix") if (g["freq"] > 0).sum() > 2}
    st.caption("Correlation of norm with log frequency: " + ", ".join(f"{m} {c:+.2f}" for m, c in corr.items()))
    export.show(charts.norm_vs_frequency(nf), nf, f"norm-vs-frequency-{ref.name}", key="normfreq",
                spec_key=("normfreq", ref))
else:
    st.info("No token frequencies in this cache. Add them with `python -m precompute pair ... --text corpus.txt`.")
