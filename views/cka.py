"""CKA: how alike T, I and O are as whole matrices (linear CKA, debiased)."""

import streamlit as st

from explorer import data, export, frame
from explorer.render import cka

ref = frame.opened("cka")
st.markdown("Linear CKA compares two matrices as wholes: the token-by-token similarity structure of one against the "
            "other's, blind to rotations and overall scale. **1** means the same up to a rotation and a scale, "
            "**0** unrelated. If the tied matrix T is *output-like*, **T~O** sits above **T~I**.")
df = data.table(ref, "cka")
values = dict(zip(df["pair"], df["cka"]))
cols = st.columns(3)
for col, pair in zip(cols, cka.ORDER):
    if pair in values:
        col.metric(f"CKA {pair}", f"{values[pair]:.3f}")
export.show(lambda: (cka.cka_bars(df), df), "cka", key="cka", spec_key=("cka", ref))
st.caption(f"Over {int(df['n_tokens'].iloc[0]):,} common tokens. Debiased estimator (unbiased HSIC, Song et al. "
           "2012): near 0 for unrelated matrices; the plain estimator (dark ticks) sits above it when the width is "
           "not small against the vocabulary.")
