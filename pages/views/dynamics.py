"""Training dynamics: gradient provenance (Figure 4), embedding evolution (Figure 3), scaling (Table 2)."""

import pandas as pd
import streamlit as st

from explorer import charts, data, export, frame, tables

ref = frame.current()
frame.require(ref, "runs", "training dynamics", "python -m precompute demo (or evolution / grads)")
st.title(f"Training dynamics · {ref.name}")
s = data.summary(ref)
runs = data.table(ref, "runs")

log = data.table(ref, "train_log")
paper = s.get("paper") or {}
if s.get("scale"):
    st.caption("Scale: " + s["scale"]["line"] + ".")
if len(log):
    st.subheader("Gradient provenance (Figure 4)")
    st.markdown("L2 norm of the gradient reaching the embedding matrix through the **input lookup** and through the "
                "**output projection** (`dlogits^T h`), per step. Every output row gets a gradient every step; an "
                "input row only when its token occurs in the batch.")
    tied_runs = runs[~runs["variant"].isin(["untied"])]["run"].tolist()
    default = [r for r in tied_runs if r.startswith("tied/") or runs.set_index("run").at[r, "variant"] == "imported"]
    chosen = st.multiselect("Runs", sorted(log["run"].unique()), default=default[:2] or tied_runs[:1], key="prov_runs")
    has_proxy = bool(log["grad_input_proxy_norm"].notna().any())
    side = "exact"
    if has_proxy:
        side = st.radio("Input side", list(tables.INPUT_SIDES), horizontal=True, key="prov_side",
                        format_func=lambda k: tables.INPUT_SIDES[k])
    st.caption("Exact: the input-side gradient summed into the rows of the tokens in the batch — what the matrix "
               "receives. Authors' proxy: the norm of the gradient w.r.t. the embedding layer's output over all "
               "positions, before repeated tokens are summed — the figure the paper's authors logged.")
    sub = tables.provenance_view(log[log["run"].isin(chosen)], side)
    if len(sub):
        export.show(charts.gradient_norms(sub), sub, f"gradient-norms-{ref.name}", key="norms")
        export.show(charts.output_share(sub), sub, f"output-share-{ref.name}", key="share")
        shares = tables.output_shares(s, chosen)
        st.dataframe(shares, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(format="%.3f") for c in shares.columns
                                    if "share" in c or "ratio" in c or "proxy" in c})
        st.caption("Share, the paper's quantity: the mean over logged steps of output / (input + output), over the "
                   "logged steps ≤ N ('early') and over all of them ('overall'); N = 1,000 for an imported log, the "
                   "first 10% of steps for a toy-lab run. The ratio of summed norms weighs steps by their size: "
                   "another number, shown only for comparison.")

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
    ev_ref = paper.get("evolution")
    if ev_ref:
        st.caption(f"The paper ({ev_ref['model']}, untied, real pretraining): cosine to step 0 at step "
                   f"{ev_ref['step']:,} is {ev_ref['I']:.3f} for I and {ev_ref['O']:.3f} for O.")

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
               "The paper (OLMo-1B tied trained 10k steps against untied OLMo-1B-0724 at step 10k, I / O): no "
               "scaling 0.216 / 0.384, x5 0.222 / 0.369.")

seeds = s.get("seeds") or {}
if seeds:
    st.subheader("Across seeds")
    per_seed = tables.seeds(s)
    st.dataframe(per_seed, hide_index=True, width="stretch", height=tables.fit_height(per_seed),
                 column_config={"mean": st.column_config.NumberColumn(format="%.3f"),
                                "std": st.column_config.NumberColumn(format="%.3f")})
    d = tables.directions(s)
    if len(d):
        st.dataframe(d, hide_index=True, width="stretch")
