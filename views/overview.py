"""Overview: the set-up and the tour first, then the pair's headline numbers beside the paper's,
and what the pair is."""


import streamlit as st

from explorer import data, export, frame, phone, sections, state
from explorer.render import paper_tables, provenance, seed_tables, setup_diagram, style
from explorer.words import (
    MATRIX_PAIRS,
    PaperReference,
    coverage_text,
    match_text,
    overlap_context_text,
    pair_label,
    reference,
    share_beside_paper,
    spectral_scope,
)

# T, I and O and the paper's claim, beside the set-up diagram (it draws the two gradients); no bare
# strings here: Streamlit's magic would show them on the page
INTRO = ("A tied model has one embedding matrix, **T**, that both reads the tokens and predicts them; an untied "
         "model has two, its input matrix **I** and its output matrix **O**. The paper claims that T ends up "
         "resembling O, not I: the output side's gradient reaches every row of T at every step, the input side's "
         "only the rows of the tokens in the batch.")
START_KEY = "start_tour"
# the tour's link drawn as a large button in the theme's accent (.streamlit/config.toml): white on slate, 6.8:1
START_CSS = f"""
.st-key-{START_KEY} a {{background: #4E5D6C; border-radius: 0.5rem; padding: 0.75rem 1.25rem;
  justify-content: center; gap: 0.4em;}}
.st-key-{START_KEY} a:hover {{background: #3B4752;}}
.st-key-{START_KEY} a, .st-key-{START_KEY} a * {{color: #ffffff !important; font-size: SIZE !important;
  font-weight: 600; line-height: 1.3;}}
"""
CLAIMS_HEADING = "The paper's claims, checked on these models"
SETUP_PRESENTATION_PX = 250  # the set-up diagram's plot height in presentation mode (300 elsewhere)

ref = frame.opened("overview")
s = data.summary(ref)
paper = s.paper or PaperReference()
big = bool(state.get("presentation"))

# the first screen, for a class: the set-up as a picture, T, I and O in one sentence, the tour's door. The
# diagram beside them; in presentation mode (its text grown for a slide) across the page and lower, they under it,
# so that a verdict still shows on a 1920x1080 screen's first view
if big:
    picture, (words, door) = st.container(), st.columns([3, 1], gap="large", vertical_alignment="center")
else:
    picture, words = st.columns([3, 2], gap="large", vertical_alignment="center")
    door = words
with picture:
    export.show(lambda: (setup_diagram.setup_diagram(big).properties(height=SETUP_PRESENTATION_PX) if big
                         else setup_diagram.setup_diagram(), setup_diagram.GRADIENTS), "setup",
                key="overview_setup", spec_key=("overview-setup",), downloads=False)
    phone.one_setup()  # a phone: the diagram in two columns (explorer/phone.py)
with words:
    st.markdown(INTRO)
with door, st.container(key=START_KEY):
    st.page_link("views/tour.py", label="Start the tour", icon=":material/school:", width="stretch",
                 query_params=state.carried(), help="The paper's argument in steps, one screen each")
st.html(f"<style>{START_CSS.replace('SIZE', '2.1rem' if big else '1.5rem')}</style>")  # presentation: 1.4x
kinds = {"pair": "a tied/untied model pair",
         "toylab": "the toy lab: tied and untied twins trained from scratch by `python -m precompute demo`",
         "evolution": "embedding evolution over checkpoints", "provenance": "an imported gradient-provenance log",
         "published": "the paper's published real-model measurements: the authors' released data (Apache-2.0) and "
                      "the paper's tables, quoted, not recomputed here",
         "sweep": "a width sweep of tied and untied twins: its bias and loss gap are on the Sweep page",
         "model": "one tied model and no untied twin: its neighbours, its map and its lenses (Neighbours, Projection "
                  "and Lens pages); the claims that set it beside an untied twin have no data here"}
st.subheader(CLAIMS_HEADING)
if not sections.verdicts(s, presentation=big):
    st.caption("None of the paper's claims can be checked on these results directly"
               + (": the width sweep is on the Sweep page." if s.kind == "sweep" else "."))
st.caption(f"The numbers on this page come from {kinds.get(s.kind, s.kind)}.")  # under the verdicts: their source

regime = paper_tables.regime(s)
if not regime.empty:
    st.subheader("What T is compared with: shared start, independent twins, the ceiling")
    st.markdown("The paper compares independently trained models. Twins that share their start and batches share "
                "coordinates too, which inflates how alike T and O look; a second independent tied run T' is the "
                "ceiling, how alike two runs of T are. **Read O→T against T'→T, not against 1.**")
    frame.table(regime, height=style.fit_height(regime))
    st.caption("Mean [95% interval] over the seeds; raw rows: no map at all. Held-out maps and spectral distances: "
               "docs/training.md.")

if s.kind == "published":
    st.subheader("Alignment (the paper's Table 1)")
    st.markdown("Mean per-token cosine; identity on raw rows, orthogonal and linear maps fitted and scored on the "
                "same centred rows. **Claim: O→T is high, I→T is low.**")
    t1 = paper_tables.paper_table1_all()
    frame.table(t1, numbers=("identity (raw rows)", "orthogonal", "linear"), height=style.fit_height(t1))
    st.subheader("Neighbour overlap (the paper's Table 5)")
    st.markdown("overlap@10 by matrix pair. **Claim: T\\~O above T\\~I** (GPT-Neo/Pythia, with different tokenizers "
                "and data, is the exception the paper discusses).")
    frame.table(paper_tables.paper_table5_all(), numbers=("T~I", "T~O", "I~O"))
    st.subheader("Input-gradient scaling (the paper's Tables 2 and 6)")
    st.markdown("OLMo-1B trained tied with its input-side gradient multiplied by a factor, compared with untied "
                "OLMo-1B-0724 at the same step: mean per-token cosine after "
                f"{reference.TABLE2_METHOD_LABEL}. Scaling moves the tied matrix slightly towards I and away "
                "from O.")
    sc = paper_tables.paper_scaling()
    frame.table(sc, numbers=("cosine to untied I", "cosine to untied O"), height=style.fit_height(sc))
label = paper_tables.paper_label(s)
if s.scale:
    st.info("**Scale.** " + s.scale["line"] + ". The toy lab shows the mechanism, not the paper's magnitudes.")


def spread(metric: str) -> str:
    stat = seed_tables.seed_stat(s, metric)
    return f" Over {stat[2]} seeds: {stat[0]:.3f} ± {stat[1]:.3f} (mean ± sample std)." if stat else ""


if s.alignment:
    st.subheader("Alignment (Table 1)")
    st.markdown("Mean per-token cosine after mapping the source matrix onto the target. "
                "**The paper's claim: O→T is high, I→T is low** — the tied matrix resembles the untied *output* matrix.")
    t1 = paper_tables.table1(s)
    frame.table(t1, numbers=tuple(t1.columns[2:4]), height=style.fit_height(t1))
    note = ("In-sample: the map is fitted and scored on the same tokens (as the paper does). Held-out: fitted on "
            "80% of tokens, scored on the rest — the honest number. Identity (raw rows) is the paper's identity "
            "column; identity (centred) subtracts each matrix's mean row first. n/a: identity and orthogonal maps "
            "need equal widths.")
    if label:
        note += f" {label.capitalize()}: the paper's in-sample value."
        if paper.table1 is not None:
            note += f" {match_text(s).capitalize()}."
    st.caption(note + spread("O->T linear held-out").replace("Over", " O→T linear held-out over"))

if s.overlap_at_10:
    st.subheader("Neighbour overlap (Table 5)")
    st.markdown("Share of each token's 10 nearest neighbours (cosine) that two matrices have in common, averaged "
                r"over tokens. **Claim: T\~O above T\~I.**")
    cols = st.columns(3)
    for col, (a, b) in zip(cols, MATRIX_PAIRS):
        p = pair_label(a, b)
        ref_val = (paper.table5 or {}).get(p)
        stat = seed_tables.seed_stat(s, f"overlap@10 {p}")
        seed0 = s.overlap_at_10.get(p) or 0
        # a several-seed toy lab: the mean over seeds (the claims' and the tour's figure), seed 0's beside it
        col.metric(f"overlap@10 {p}" + (f" · mean of {stat[2]} seeds" if stat else ""),
                   f"{stat[0] if stat else seed0:.3f}", help=f"{label}: {ref_val:.3f}" if ref_val is not None else None)
        caption = f"{label}: {ref_val:.3f}." if ref_val is not None else ""
        caption += f" ± {stat[1]:.3f} (sample std); seed 0's twins: {seed0:.3f}." if stat else ""
        if caption:
            col.caption(caption.strip())
    if label and (s.vocabulary or {}).get("match") == "ids":
        st.caption("Rows are paired by token id here; the paper's k-NN overlap used the common token strings.")
    if s.overlap_context:
        st.caption(data.escape_markdown(overlap_context_text(s.overlap_context), entities=False))  # T~I: no strikethrough

if s.spectral:
    sp = s.spectral_params
    st.subheader("Spectral distance")
    which = spectral_scope(sp)
    st.markdown(f"Distance between the weighted k-NN graphs (k={sp.get('graph_k')}; mutual neighbours weigh 1, "
                f"one-way 0.5) of two matrices on {which} (omnibus embedding, {sp.get('n_components')} components). "
                "Lower = more similar.")
    cols = st.columns(3)
    for col, (a, b) in zip(cols, MATRIX_PAIRS):
        p = pair_label(a, b)
        col.metric(f"spectral {p}" + (" (sampled)" if sp.get("sampled") else ""), f"{s.spectral.get(p) or 0:.3f}")

lens = s.analysis("lens") or {}
if lens.get("gap"):
    st.subheader("Layerwise KL (tuned lens)")
    g = lens["gap"]
    text = (f"Tuned-lens KL of the first {g['layers']} hidden states (bits): tied **{g['tied']:.2f}**, untied "
            f"**{g['untied']:.2f}**. **Claim: early layers of tied models show higher KL.**")
    paper_kl = paper.tuned_lens_kl
    if paper_kl:
        n = g["layers"]
        text += (f" {label.capitalize()}, OLMo: tied {sum(paper_kl['tied'][:n]) / n:.2f}, untied "
                 f"{sum(paper_kl['untied'][:n]) / n:.2f} (the authors' layer indexing: see the Lens page).")
    st.markdown(text)

prov = s.gradient_provenance or {}
if prov:
    st.subheader("Gradient provenance (Figure 4)")
    first = next((r for r in prov if not r.startswith("untied")), next(iter(prov)))
    p = prov[first]
    b = p.get("beside_paper") or share_beside_paper(p)
    side = ("with the authors' input proxy (the gradient w.r.t. the embedding output, what their log holds)"
            if b["like_paper"] else f"with the {b['input']} input norm (this run logged no proxy)")
    text = (f"Output side's share of the gradient reaching the embedding matrix ({data.escape_markdown(first)}): the "
            f"mean over logged steps of output / (input + output) {side}: **{(b['early'] or 0):.1%}** over "
            f"steps ≤ {p['early_steps']:,}, **{(b['overall'] or 0):.1%}** over all {p['logged_steps']:,} logged "
            "steps.")
    if b["input"] != "exact" and (p.get("input_norm") or "exact") == "exact":
        text += (f" With the exact input norm (what the matrix receives; a second figure, not the paper's): "
                 f"{(p['early'] or 0):.1%} early, {(p['overall'] or 0):.1%} overall.")
    paper_share = paper.output_share
    if paper_share:
        text += (f" {label.capitalize()}: **{paper_share['early']:.1%}** over steps 1-{paper_share['early_steps']:,} "
                 f"and **{paper_share['overall']:.1%}** over all {paper_share['steps']:,} steps of an OLMo-1B tied run.")
    seed_metric = "output share early (proxy input)" if b["input"] == "proxy" else "output share early"
    st.markdown(text + spread(seed_metric).replace("Over", " Early share over"))

if seed_tables.n_seeds(s) > 1:
    sections.across_seeds(s, "Each seed trains its own twins (same settings, other initial weights and batches). "
                             "Mean and sample standard deviation over seeds, and whether each of the paper's "
                             "directions holds in every seed.")

models = s.models
if models:
    st.subheader("The models")
    frame.table(provenance.models_table(s))  # once per summary
    v = s.vocabulary or {}
    if v:
        st.caption(coverage_text(v).capitalize() + ("." if s.kind == "model" else " (identical tokenizers)."
                   if v.get("identical") else " (token strings both vocabularies contain)."))

if s.kind == "published":
    st.subheader("Sources")
    src = paper_tables.published_sources(s)
    frame.table(src, height=style.fit_height(src))
    st.caption("Figures 3, 4, 8 and 9 are drawn from the authors' released files (Training dynamics page); the tables "
               "below and the layerwise KL (Lens page) are the paper's printed numbers.")

# lazy: its tables are drawn when it opens (opening reruns the page), not on every run
with st.expander("Provenance: how this cache was built", key="provenance_open", on_change="rerun") as box:
    if box.open:
        meta, stages = provenance.build_tables(ref)  # once per cache
        frame.table(meta)
        frame.table(stages, numbers=("seconds",))
