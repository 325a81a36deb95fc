"""Lens: layerwise KL (tuned and logit lens) for both models, and prediction trajectories."""

import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame, state
from tying import reference

ref = frame.current()
frame.require(ref, "lens_kl", "lens results", "python -m precompute lens ...")
st.title(f"Lens · {ref.name}")
st.markdown("How far is each hidden state from the model's final prediction? The **tuned lens** learns an affine "
            "translator per layer before the model's own final norm and unembedding; the **logit lens** uses none. "
            "KL(final ‖ lens) in bits. The paper: early layers of tied models have higher KL.")

kl = data.table(ref, "lens_kl").sort_values(["model", "lens", "layer"])
s = data.summary(ref)
preset = (s.get("paper") or {}).get("preset")
paper = None
if preset and preset in reference.TUNED_LENS_KL:
    paper = pd.DataFrame([{"model": m, "layer": i, "kl_mean": v}
                          for m, series in reference.TUNED_LENS_KL[preset].items() for i, v in enumerate(series)])
export.show(charts.kl_curves(kl, paper), kl, f"lens-kl-{ref.name}", key="kl", spec_key=("kl", ref))
gap = (s.get("lens") or {}).get("gap")
if gap:
    st.caption(f"Mean tuned-lens KL over the first {gap['layers']} hidden states: tied {gap['tied']:.2f} bits, "
               f"untied {gap['untied']:.2f} bits." + (" Triangles: the paper's OLMo values." if paper is not None else ""))

curve = data.table(ref, "lens_curve")
if len(curve):
    with st.expander("Tuned-lens training curves"):
        export.show(charts.lens_training_curve(curve), curve, f"lens-training-{ref.name}", key="curve")

traj = data.table(ref, "lens_trajectory")
if len(traj):
    st.subheader("Prediction trajectory")
    c1, c2, c3 = st.columns(3)
    model = c1.radio("Model", sorted(traj["model"].unique()), horizontal=True, key="traj_model")
    lens = c2.radio("Lens", ["tuned", "logit"], horizontal=True, key="traj_lens")
    samples = sorted(traj["sample"].unique())
    sample = c3.selectbox("Sample text", samples, key="traj_sample", format_func=lambda i: f"sample {i + 1}")
    t = traj[(traj["model"] == model) & (traj["lens"] == lens) & (traj["sample"] == sample)].copy()
    t["token"] = t["token"].map(data.visible_token)
    t["prediction"] = t["prediction"].map(data.visible_token)
    text = "".join(t[(t["layer"] == t["layer"].min()) & (t["rank"] == 1)].sort_values("position")["token"])
    st.caption("Input: " + data.escape_markdown(text))
    st.caption("Each cell: the top-1 prediction of that hidden state at that position (colour: its probability).")
    export.show(charts.trajectory(t), t, f"trajectory-{ref.name}-{model}-{lens}", key="traj")
    layers = sorted(t["layer"].unique())
    layer = st.select_slider("Top-k at hidden state", layers,
                             key=state.widget_key("layer", layers[-1], lambda v: v in layers),
                             on_change=state.sync, args=("layer",))
    state.sync("layer")
    top = t[t["layer"] == state.get("layer")].pivot_table(index="rank", columns="position", values="prediction",
                                                          aggfunc="first")
    st.dataframe(top, width="stretch")
