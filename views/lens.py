"""Lens: layerwise KL (tuned and logit lens) for both models, and prediction trajectories."""

import pandas as pd
import streamlit as st

from explorer import data, export, follow, frame, live, sections, state
from explorer.render import lens_charts, lens_follow, lens_tables, style
from explorer.words import UserError, first_line, reference

ref = frame.opened("lens")
st.markdown("How far is each hidden state from the model's final prediction? The **tuned lens** learns an affine "
            "translator per layer before the model's own final norm and unembedding; the **logit lens** uses none. "
            "KL(final ‖ lens) in bits. The paper: early layers of tied models have higher KL.")

s = data.summary(ref)
preset = s.paper.preset if s.paper else None
paper = None
label = lens_charts.PAPER_LENS_LABEL
shift = False
beside_toylab = bool(s.paper and s.paper.beside_toylab)
published = s.kind == "published"
if preset and preset in reference.TUNED_LENS_KL and not beside_toylab and not published:
    paper = pd.DataFrame([{"model": m, "layer": i, "kl_mean": v}
                          for m, series in reference.TUNED_LENS_KL[preset].items() for i, v in enumerate(series)])
    shift = st.checkbox("Shift the paper's points one hidden state left", key="lens_paper_shift",
                        help="Draw the paper's value for hidden state l at l − 1, the translator the authors "
                             "applied to it; their value for the input embedding (l = 0) is then left out.")
    if shift:
        paper = paper.assign(layer=paper["layer"] - 1)
        paper = paper[paper["layer"] >= 0]
        label = "paper, shifted to l − 1 (authors' indexing, see note)"
# the axis spans the tuned lens (the paper's quantity) unless asked: the logit lens's KL at the
# input embedding (bits, not tenths) would flatten the tuned curves to the bottom edge
has_logit = lens_tables.has_logit_lens(ref)
y_axis = st.radio("KL axis", list(lens_charts.KL_AXES) if has_logit else ["tuned", "symlog"], horizontal=True,
                  key="lens_y", format_func=lambda v: lens_charts.KL_AXES[v] if has_logit or v != "tuned" else "linear")


def kl_figure():
    kl = data.table(ref, "lens_kl").sort_values(["model", "lens", "layer"])
    return lens_charts.kl_curves(kl, paper, paper_label=label, y_axis=y_axis), kl


export.show(kl_figure, f"lens-kl-{ref.name}", key="kl", spec_key=("kl", ref, shift, y_axis))
if paper is not None:
    st.caption("Note: the paper's points (triangles) come from the authors' evaluation, which applied translator "
               "max(0, l − 1) to hidden state l and read the already-normed last hidden state, so their curve is "
               "shifted by one hidden state against a by-the-book tuned lens like this one (hence their non-zero "
               f"last point: {reference.TUNED_LENS_LAST[preset]['tied']:.2f} bits tied, "
               f"{reference.TUNED_LENS_LAST[preset]['untied']:.2f} untied).")
if published:
    st.caption("These curves are the paper's published per-layer tuned-lens KL of OLMo-1B (tied) and OLMo-1B-0724 "
               "(untied), quoted from the paper, not recomputed. " + reference.LENS_INDEXING_NOTE[0].upper()
               + reference.LENS_INDEXING_NOTE[1:] + ".")
if beside_toylab and preset in reference.TUNED_LENS_KL:
    ref_kl = reference.TUNED_LENS_KL[preset]
    st.caption(f"The paper's OLMo curve (16 layers) is not drawn over these {data.lens_layers(ref)}-layer toy models. "
               f"For scale: its tuned-lens KL at the input embedding and the first block is {ref_kl['tied'][0]:.2f} and "
               f"{ref_kl['tied'][1]:.2f} bits tied, {ref_kl['untied'][0]:.2f} and {ref_kl['untied'][1]:.2f} untied "
               f"(the authors' layer indexing). " + (s.scale["line"][:1].upper() + s.scale["line"][1:] + "."
                                               if s.scale else ""))
if paper is not None or published or beside_toylab:
    st.caption(lens_tables.lens_text_note(s))
if s.kind == "model":  # one real model, briefly lensed here: its KL is an upper bound
    for note in lens_tables.budget_notes(s):
        st.caption(note)
gap = (s.analysis("lens") or {}).get("gap")
if gap:
    st.caption(f"Mean tuned-lens KL over the first {gap['layers']} hidden states: tied {gap['tied']:.2f} bits, "
               f"untied {gap['untied']:.2f} bits.")
sections.brought_figures(ref, "lens")  # the figures analyses add to this page (self-prediction)

if data.has_rows(ref, "lens_curve"):
    with st.expander("Tuned-lens training curves", key="lens_curves_open", on_change="rerun") as box:
        if box.open:  # lazy: drawn when it opens (opening reruns the page), not on every run
            log_y = st.checkbox("Log scale", key="lens_curve_log")
            curve = data.table(ref, "lens_curve")
            models = sorted(curve["model"].unique())
            for col, m in zip(st.columns(len(models)), models):  # a panel a column: they stack on a phone
                with col:
                    export.show(lambda m=m: (lens_charts.lens_training_curve(curve, log_y=log_y, model=m), curve),
                                f"lens-training-{ref.name}-{m}", key=f"curve_{m}", spec_key=("lens-curve", ref, log_y, m),
                                downloads=False)
            export.download_buttons(lambda: (lens_charts.lens_training_curve(curve, log_y=log_y), curve),
                                    f"lens-training-{ref.name}", key="curve")
            st.caption("Rolling mean over steps; the last hidden state's translator is not trained (KL ~ 0).")
    for line in data.lens_convergence(ref):
        st.markdown(line)

own_text_possible = bool(live.models_here(ref)) and s.kind != "published"
install = None if own_text_possible else live.install_command(ref)
if data.has_rows(ref, "lens_trajectory") or own_text_possible:
    st.subheader("Prediction trajectory")
    choices = data.trajectory_choices(ref) if data.has_rows(ref, "lens_trajectory") else {"models": [], "samples": []}
    sources = (["sample"] if choices["samples"] else []) + (["own"] if own_text_possible else [])
    source = st.radio("Text", sources, horizontal=True, key="traj_source",
                      format_func=lambda v: "a sample text" if v == "sample" else "your own text")
    c1, c2, c3 = st.columns(3)
    lens = c2.radio("Lens", ["tuned", "logit"], horizontal=True, key="traj_lens")
    t, spec_key, both, pinned = None, None, None, None
    if install:
        st.caption(f"Your own text runs this model here once it is installed: `{install}`")
    if source == "own":
        with st.form("own_text", border=False):
            typed = st.text_area("Your text (the " + ("tied model runs" if s.kind == "model" else
                                                      "tied and untied models run") + " on it here, on the CPU)",
                                 key="traj_typed", max_chars=live.MAX_CHARS, height=90,
                                 placeholder="e.g. import numpy as np")
            if st.form_submit_button("Trace the predictions"):
                st.session_state["traj_own_text"] = typed
        own = st.session_state.get("traj_own_text")
        if not own:
            live.warm(ref)  # the models load while the visitor types
        else:
            try:
                job = live.submit(ref, own, follow.raw_pins())  # a text traced lately is answered at once
                if not job.done():  # what the worker is doing (loading, each lens read) and its share done
                    roles = list(live.models_here(ref))
                    with st.status(live.waiting_line(job, roles), expanded=True) as status:
                        bar = st.progress(job.progress())
                        while not job.wait(0.25):
                            status.update(label=live.waiting_line(job, roles))
                            bar.progress(job.progress())
                        status.update(label="Traced your text" if job.ok else "Could not trace your text",
                                      state="complete" if job.ok else "error", expanded=False)
                rows, used = job.result()
                pinned = job.pinned()
            except UserError as exc:
                st.error(f"Cannot trace this text: {first_line(exc)}")
                rows = None
            if rows is not None:
                model = c1.radio("Model", sorted(rows["model"].unique()), horizontal=True, key="traj_model")
                t = rows[(rows["model"] == model) & (rows["lens"] == lens)]
                if t.empty:  # no translator fits this model: the logit lens only
                    command = data.build_command(ref)
                    st.info("No tuned-lens translator of this cache fits this model here; showing the logit lens."
                            + (f" The cache's own command trains one: `{command}`" if command else ""))
                    lens = "logit"
                    t = rows[(rows["model"] == model) & (rows["lens"] == "logit")]
                both, spec_key = rows, ("traj-own", ref, own, model, lens)
    elif source == "sample":
        models, samples = choices["models"], choices["samples"]
        model = c1.radio("Model", models, horizontal=True, on_change=state.sync, args=("model",),
                         key=state.widget_key("model", models[0], models.__contains__))
        def opening(i: int) -> str:  # a sample's first words name it
            words = lens_tables.sample_text(ref, model, lens, i).replace("␣", " ").strip()
            return f"{i + 1}: {words[:36]}…" if len(words) > 36 else f"{i + 1}: {words}"

        sample = c3.selectbox("Sample text", samples, format_func=opening,
                              key=state.widget_key("sample", samples[0], samples.__contains__),
                              on_change=state.sync, args=("sample",))
        t = data.trajectory(ref, model, lens, sample)
        both = lens_tables.sample_rows(ref, sample)
        spec_key = ("traj", ref, model, lens, sample)
    if t is not None and len(t):
        st.caption("Input: " + data.escape_markdown(data.trajectory_text(t), entities=False))
        st.caption("Each cell: the top-1 prediction of that hidden state at that position (colour: its "
                   "probability). Click a cell to follow it below.")
        followed = follow.followed(t)
        grid_key = follow.grid_key(spec_key, followed)  # a new key per followed cell: every click is new
        export.show(lambda: (lens_charts.trajectory(t, pick=lens_follow.CELL, picked=followed), t),
                    f"trajectory-{ref.name}-{model}-{lens}", key=grid_key, spec_key=spec_key + followed,
                    on_select=lambda: follow.on_cell(grid_key), selection_mode=lens_follow.CELL)
        follow.section(ref, t, both, lens, model_label="the model" if s.kind == "model" else f"the {model} model",
                       pinned=pinned, spec_key=spec_key)
        with st.expander("Every input token's top 10 at this hidden state"):
            layer = st.session_state.get("w_layer", int(t["layer"].max()))
            # a row per input token: as narrow as k (a stored sample's once per cache)
            top = lens_tables.top_k(t, layer) if source == "own" else lens_tables.sample_top_k(ref, model, lens,
                                                                                               sample, layer)
            frame.table(top, height=style.fit_height(top))
