"""Training dynamics: gradient provenance (Figure 4), embedding evolution (Figure 3), scaling (Table 2)."""

import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame

ref = frame.current()
frame.require(ref, "runs", "training dynamics", "python -m precompute demo (or evolution / grads)")
st.title(f"Training dynamics · {ref.name}")
s = data.summary(ref)
runs = data.table(ref, "runs")

log = data.table(ref, "train_log")
if len(log):
    st.subheader("Gradient provenance (Figure 4)")
    st.markdown("L2 norm of the gradient reaching the embedding matrix through the **input lookup** and through the "
                "**output projection** (`dlogits^T h`), per step. Every output row gets a gradient every step; an "
                "input row only when its token occurs in the batch.")
    tied_runs = runs[~runs["variant"].isin(["untied"])]["run"].tolist()
    default = [r for r in tied_runs if r.startswith("tied/") or runs.set_index("run").at[r, "variant"] == "imported"]
    chosen = st.multiselect("Runs", sorted(log["run"].unique()), default=default[:2] or tied_runs[:1], key="prov_runs")
    sub = log[log["run"].isin(chosen)]
    if len(sub):
        export.show(charts.gradient_norms(sub), sub, f"gradient-norms-{ref.name}", key="norms")
        export.show(charts.output_share(sub), sub, f"output-share-{ref.name}", key="share")
        prov = s.get("gradient_provenance") or {}
        rows = [{"run": r, "early share": prov[r]["early"], "overall share": prov[r]["overall"],
                 "early steps": prov[r]["early_steps"], "steps": prov[r]["steps"]} for r in chosen if r in prov]
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                     column_config={"early share": st.column_config.NumberColumn(format="%.3f"),
                                    "overall share": st.column_config.NumberColumn(format="%.3f")})
        st.caption("Share = sum of output-side norms / (input + output), over the first 10% of steps ('early') and "
                   "over all. The paper: 70.3% over steps 1-1,000 of an OLMo-1B tied run, 64% over 10,000.")

evo = data.table(ref, "evolution")
if len(evo):
    st.subheader("Embedding evolution (Figure 3)")
    st.markdown("Mean per-token cosine of each matrix to its initial value: in untied models O moves much more and "
                "much faster than I; the tied T moves like O.")
    which = st.radio("Compare to", ["initial", "previous checkpoint"], horizontal=True, key="evo_ref")
    col = "cos_init" if which == "initial" else "cos_prev"
    runs_e = sorted(evo["run"].unique())
    pick = st.multiselect("Runs", runs_e, default=[r for r in runs_e if r.endswith("seed0") and not r.startswith("tied_scaled")] or runs_e[:2],
                          key="evo_runs")
    e = evo[evo["run"].isin(pick)]
    export.show(charts.evolution(e, col), e, f"evolution-{ref.name}", key="evo")

sc = data.table(ref, "scaling")
if len(sc):
    st.subheader("Input-gradient scaling (Table 2)")
    st.markdown("The tied matrix trained with its input-side gradient multiplied by a factor, compared with the "
                "untied twin's I and O. Scaling the input side moves the tied matrix towards I.")
    method = st.radio("Map", sorted(sc["method"].unique()), horizontal=True, key="scal_method")
    g = (sc[sc["method"] == method].groupby(["input_grad_scale", "target"])["mean_cosine"]
         .agg(["mean", "std", "count"]).reset_index())
    export.show(charts.scaling(g), g, f"scaling-{ref.name}", key="scaling")
    st.caption("Bars: mean over seeds; whiskers: ± one standard deviation (when there are several seeds). "
               "The paper (OLMo-1B, 10k steps): no scaling 0.216 / 0.384, x5 0.222 / 0.369 (I / O).")

seeds = s.get("seeds") or {}
if seeds:
    st.subheader("Across seeds")
    st.dataframe(pd.DataFrame([{"metric": m, "mean": v["mean"], "std": v["std"], "seeds": v["n"]}
                               for m, v in seeds.items()]), hide_index=True, width="stretch",
                 column_config={"mean": st.column_config.NumberColumn(format="%.3f"),
                                "std": st.column_config.NumberColumn(format="%.3f")})
