"""Alignment: per-token cosine histograms (Figure 1), best and worst tokens, norm vs frequency."""

import streamlit as st

from explorer import data, export, frame, sections, state
from explorer.render import alignment_charts, alignment_tables, seed_tables
from explorer.words import DISPLAY_COMPARISONS, display_comparison

ref = frame.opened("alignment")
st.markdown("Each token's row in one matrix is mapped onto its row in another and scored by cosine. If the tied "
            "matrix T is *output-like*, **O→T** sits far to the right of **I→T**.")

c1, c2 = st.columns(2)
method = c1.radio("Map", state.METHODS, horizontal=True, format_func=lambda m: state.METHOD_LABEL[m],
                  key=state.widget_key("method", "linear", lambda v: v in state.METHODS),
                  on_change=state.sync, args=("method",),
                  help="identity (raw rows): no map, no centring — the paper's identity column; identity (centred): "
                       "no map, each matrix's mean row subtracted; orthogonal: Procrustes rotation; linear: least "
                       "squares (both on centred rows)")
split = c2.radio("Scored on", state.SPLITS, horizontal=True,
                 key=state.widget_key("split", "held_out", lambda v: v in state.SPLITS),
                 on_change=state.sync, args=("split",),
                 format_func=lambda s: "held-out tokens" if s == "held_out" else "the fitted tokens (in-sample)")

for note in alignment_tables.not_applicable(ref, method, split):
    st.info(f"Not applicable: {note}")
per_token = data.alignment(ref, method, split)
if per_token.empty:
    st.stop()
means = data.alignment_means(ref, method, split)
s_all = data.summary(ref)
seed_tag = " · seed 0" if seed_tables.n_seeds(s_all) > 1 else ""
shown = [c for c in DISPLAY_COMPARISONS if c in means]  # T'->T, the ceiling, where the cache has a second tied run
for col, comp in zip(st.columns(max(len(shown), 1)), shown):
    col.metric(f"mean cosine {display_comparison(comp)}{seed_tag}", f"{means[comp]:.3f}",
               help="a second tied run T' mapped onto T: how alike two runs of T are (the ceiling)"
               if comp.startswith("T'") else None)
metric = seed_tables.SEED_METRICS.get((method, split))
note = seed_tables.one_seed_note(s_all, {display_comparison(c): metric.format(c=c) for c in ("O->T", "I->T")}
                                 if metric else {})
if note:
    st.caption(note)
title = f"Per-token cosine, {state.METHOD_LABEL[method]} map, {split.replace('_', '-')}"
export.show(lambda: (alignment_charts.cosine_histogram(per_token, title=title), per_token),
            f"alignment-{ref.name}-{method}-{split}", key="hist", spec_key=("hist", ref, method, split))

st.subheader("Best- and worst-aligned tokens")
comp = st.selectbox("Comparison", sorted(means, key=DISPLAY_COMPARISONS.index), key="align_comp",
                    format_func=display_comparison)
s_kind = data.summary(ref).kind
has_freq = alignment_tables.has_frequencies(ref)
untrained = data.untrained_tokens(ref, method, split, comp) if has_freq and s_kind == "toylab" else None
include = True
if untrained is not None and len(untrained):
    include = st.checkbox(f"Include the tokens seen {data.UNTRAINED_MAX_FREQ} times or fewer in the corpus",
                          value=False, key="align_rare")
best, worst = data.extremes(ref, method, split, comp, 15,
                            min_freq=None if include else data.UNTRAINED_MAX_FREQ + 1)
b1, b2 = st.columns(2)
b1.markdown("**Best aligned**")
frame.table(best, numbers=("cosine",), where=b1)
b2.markdown("**Worst aligned**")
frame.table(worst, numbers=("cosine",), where=b2)
if untrained is not None and len(untrained):
    which = ("Included" if include else "Left out") + (
        f": the {len(untrained):,} tokens seen 0-{data.UNTRAINED_MAX_FREQ} times in the training corpus "
        f"({int((untrained['freq_tied'].fillna(0) == 0).sum()):,} never). Their rows are barely trained: they "
        f"sit near the initialisation the twins share, so they can align almost perfectly (mean cosine here "
        f"{untrained['cosine'].mean():.3f}, up to {untrained['cosine'].max():.3f}) without any learnt alignment.")
    st.caption(which)

st.subheader("Norm vs frequency (Figure 5)")
corr = data.norm_frequency_correlation(ref)
if corr:
    st.markdown("Per-token L2 norm against corpus frequency. In the paper, T's pattern follows O's, not I's.")
    st.caption("Correlation of norm with log frequency: " + ", ".join(f"{m} {c:+.2f}" for m, c in corr.items()))
    for col, m in zip(st.columns(3), ("T", "I", "O")):  # one panel a column: they stack on a phone
        with col:
            export.show(lambda m=m: (alignment_charts.norm_vs_frequency(data.norms(ref), m), data.norms(ref)),
                        f"norm-vs-frequency-{ref.name}-{m}", key=f"normfreq_{m}", spec_key=("normfreq", ref, m),
                        downloads=False)
    export.download_buttons(lambda: (alignment_charts.norm_vs_frequency(data.norms(ref)), data.norms(ref)),
                            f"norm-vs-frequency-{ref.name}", key="normfreq")
else:
    st.info("No token frequencies in this cache. Add them with `python -m precompute pair ... --text corpus.txt`.")

sections.brought_figures(ref, "alignment")  # the figures analyses add to this page (position against frequency)
