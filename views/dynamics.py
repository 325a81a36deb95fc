"""Training dynamics: gradient provenance (Figure 4), embedding evolution (Figure 3), scaling (Table 2)."""

from pathlib import Path

import streamlit as st

from explorer import data, export, frame, sections, state
from explorer.render import dynamics_charts, dynamics_tables, paper_tables
from explorer.words import PaperReference, reference

ref = frame.opened("dynamics")
s = data.summary(ref)
choices = dynamics_tables.run_choices(ref)  # once per cache

log = data.table(ref, "train_log")
paper = s.paper or PaperReference()
if s.scale:
    st.caption("Scale: " + s.scale["line"] + ".")
if len(log):
    st.subheader("Gradient provenance (Figure 4)")
    st.markdown("L2 norm of the gradient reaching the embedding matrix through the **input lookup** and through the "
                "**output projection** (`dlogits^T h`), per step. Every output row gets a gradient every step; an "
                "input row only when its token occurs in the batch.")
    logged = choices.logged
    chosen = st.multiselect("Runs", logged, on_change=state.sync, args=("runs",),
                            key=state.widget_key("runs", list(choices.log_default), lambda v: set(v) <= set(logged)))
    side = "exact"
    if choices.has_proxy:
        side = st.radio("Input side", list(dynamics_tables.INPUT_SIDES), horizontal=True, key="prov_side",
                        format_func=lambda k: dynamics_tables.INPUT_SIDES[k])
    st.caption("Exact: the input-side gradient summed into the rows of the tokens in the batch — what the matrix "
               "receives. Authors' proxy: the norm of the gradient w.r.t. the embedding layer's output over all "
               "positions, before repeated tokens are summed — the figure the paper's authors logged.")
    prov_key = (ref, tuple(chosen), side)

    def provenance():
        return dynamics_tables.provenance_view(log[log["run"].isin(chosen)], side)

    def share_figure():
        sub = provenance()
        window = max(10, int(sub.groupby("run").size().max()) // 100) if len(sub) else 10  # ~1% of a long run
        return dynamics_charts.output_share(sub, window=window), sub

    if chosen:
        export.show(lambda: (dynamics_charts.gradient_norms(provenance()), provenance()), f"gradient-norms-{ref.name}",
                    key="norms", spec_key=("norms",) + prov_key)
        export.show(share_figure, f"output-share-{ref.name}", key="share", spec_key=("share",) + prov_key)
        shares = dynamics_tables.output_shares(s, tuple(chosen))
        frame.table(shares, numbers=[c for c in shares.columns if "share" in c or "ratio" in c or "exact" in c],
                    help=dynamics_tables.OUTPUT_SHARE_HELP)
        st.caption("Share, the paper's quantity: the mean over logged steps of output / (input + output) with the "
                   "authors' input proxy (what their log holds), over the logged steps ≤ N ('early') and over all "
                   "of them ('overall'); N = 1,000 for an imported log, the first 10% of steps for a toy-lab run. "
                   "'Exact': the same mean with the exact input norm (what the matrix receives), a second figure, "
                   "not the paper's. Σ ratio, the ratio of summed norms, weighs steps by their size: another "
                   "number, shown only for comparison.")

evo = data.table(ref, "evolution")
if len(evo):
    st.subheader("Embedding evolution (Figure 3)")
    st.markdown("Mean per-token cosine of each matrix to its initial value: in untied models O moves much more and "
                "much faster than I; the tied T moves like O.")
    which = st.radio("Compare to", ["initial", "previous checkpoint"], horizontal=True, key="evo_ref")
    col = "cos_init" if which == "initial" else "cos_prev"
    runs_e = choices.evolved
    pick = st.multiselect("Runs", runs_e, on_change=state.sync, args=("evo_runs",),
                          key=state.widget_key("evo_runs", list(choices.evo_default), lambda v: set(v) <= set(runs_e)))
    if pick:
        export.show(lambda: (dynamics_charts.evolution(evo[evo["run"].isin(pick)], col), evo[evo["run"].isin(pick)]),
                    f"evolution-{ref.name}", key="evo", spec_key=("evo", ref, tuple(pick), col))
    ev_ref = paper.evolution
    if ev_ref:
        st.caption(f"The paper ({ev_ref['model']}, untied, real pretraining): cosine to step 0 at step "
                   f"{ev_ref['step']:,} is {ev_ref['I']:.3f} for I and {ev_ref['O']:.3f} for O.")

sc = data.table(ref, "scaling")
if len(sc) and (sc["method"] == "paper").all():
    st.subheader("Input-gradient scaling (the paper's Tables 2 and 6)")
    st.markdown("OLMo-1B trained tied with its input-side gradient multiplied by a factor, compared with untied "
                f"OLMo-1B-0724 at the same step (quoted from the paper): mean per-token cosine after "
                f"{reference.TABLE2_METHOD_LABEL}.")
    frame.table(paper_tables.paper_scaling(), numbers=("cosine to untied I", "cosine to untied O"))
elif len(sc):
    st.subheader("Input-gradient scaling (Table 2)")
    st.markdown("The tied matrix trained with its input-side gradient multiplied by a factor, compared with the "
                "untied twin's I and O. Scaling the input side moves the tied matrix towards I.")
    methods = paper_tables.scaling_methods(choices.scaling_methods)
    method = st.radio("Map", methods, horizontal=True, key="scal_method", format_func=paper_tables.scaling_method_label)

    def scaling_figure():
        g = (sc[sc["method"] == method].groupby(["input_grad_scale", "target"])["mean_cosine"]
             .agg(["mean", "std", "count"]).reset_index())
        return dynamics_charts.scaling(g), g

    export.show(scaling_figure, f"scaling-{ref.name}", key="scaling", spec_key=("scaling", ref, method))
    st.caption("Bars: mean over seeds; whiskers: ± one standard deviation (when there are several seeds). "
               + paper_tables.scaling_caption(method))

seeds = s.seeds or {}
if seeds:
    sections.across_seeds(s)

# -- side by side with another cache (the toy lab beside the paper's real runs) -------------------
others = [c for c in data.caches(str(data.cache_dir())) if c.name != ref.name and c.error is None]
if others and (len(evo) or len(log)):
    st.subheader("Side by side with another cache")
    st.markdown("The same curves of two caches in one view — say the toy lab beside the paper's real OLMo runs — "
                "with steps as a fraction of each run's released steps (or on a log scale), so a few hundred toy steps and ten "
                "thousand real ones can be read together.")
    c1, c2 = st.columns(2)
    names = [c.name for c in others]
    other_name = c1.selectbox("Compare with", names, index=names.index("paper") if "paper" in names and
                              ref.name != "paper" else 0, key="side_other")
    x = c2.radio("Steps", ["fraction", "log"], horizontal=True, key="side_x",
                 format_func=lambda v: "as a fraction of the released steps" if v == "fraction" else "log scale")
    other_ref = data.CacheRef.of(Path(next(c.path for c in others if c.name == other_name)))
    sources = {ref.name: ref, other_name: other_ref}
    evo_runs = {f"{name}: {run}": g for name, r in sources.items() for run, g in data.per_run(r, "evolution").items()}
    log_runs = {f"{name}: {run}": g for name, r in sources.items() for run, g in data.per_run(r, "train_log").items()}

    def defaults(options):
        keep = [o for o in options if o.endswith(("untied/seed0", "tied/seed0")) or "OLMo-1B" in o]
        return [o for o in keep if "scaled" not in o] or options[:2]

    def compared(label, runs, default, combine, draw, stem, key):
        """A run picker and the chosen runs of both caches in one exportable chart."""
        chosen = st.multiselect(label, sorted(runs), default=default, key=key)
        if chosen:
            def build():
                both = combine({k: runs[k] for k in chosen})
                return draw(both, x), both

            export.show(build, f"{stem}-{ref.name}-vs-{other_name}", key=f"{key}_chart",
                        spec_key=(key, ref, other_ref, tuple(chosen), x))
            if x == "fraction":
                st.caption(dynamics_tables.released_fraction_note({k: int(runs[k]["step"].max()) for k in chosen}))
        return chosen

    if evo_runs:
        compared("Embedding evolution runs", evo_runs, defaults(sorted(evo_runs)),
                 dynamics_tables.evolution_by_fraction, dynamics_charts.evolution_compared, "evolution", "side_evo")
    if log_runs and compared("Gradient provenance runs", log_runs,
                             [o for o in defaults(sorted(log_runs)) if "untied" not in o],
                             dynamics_tables.share_by_fraction, dynamics_charts.share_compared, "output-share",
                             "side_log"):
        st.caption("Rolling mean over 2% of each run's logged steps. Output share per step as each log holds it "
                   "(a toy-lab run: exact input norm; the authors' log: their input proxy); early in training the "
                   "output side dominates in both.")
