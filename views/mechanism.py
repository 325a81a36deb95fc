"""Why? The mechanism lab: is it the output-side gradient's size, its reach, or AdamW?"""

import html

import streamlit as st

from explorer import data, export, frame, sections, words
from explorer.render import mechanism, tour

ref = frame.opened("mechanism", frame.current_of("mechanism"))
s = data.summary(ref)
cfg = s.mechanism_settings or {}
st.markdown("The paper explains T's output bias by the output-side gradient dominating what reaches the tied matrix. "
            "But the output side differs from the input side in two ways at once: its **size** (it is larger) and "
            "its **reach** (the softmax sends it to every row of T at every step; the input lookup reaches only the "
            "rows of the tokens in the batch). And AdamW normalises every coordinate, which changes what a larger "
            "gradient does. Here the demo's tied twin is trained again with one difference removed at a time, from "
            "the same initialisation and batches, and measured against an untied twin of the same seed. A **null** "
            "arm trains the unchanged recipe from another start and batch order: what a rerun alone changes, the "
            "yardstick every arm is read against.")
rows = mechanism.runs(s)
seeds = rows.groupby("arm")["seed"].nunique()
n_seeds = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}-{seeds.max()}"
st.caption(f"{len(rows)} runs: {len(seeds)} arms x {n_seeds} seeds; d={cfg.get('d_model', '?')}, {cfg.get('n_layers', '?')} layers, vocabulary "
           f"{cfg.get('vocab_size', 0):,}, {cfg.get('steps', '?')} steps of "
           f"{(cfg.get('batch_size') or 0) * (cfg.get('context') or 0):,} tokens on {cfg.get('corpus', '?')}"
           f"{words.twins_text(s)}. "
           "Means over seeds; whiskers: 95% t-intervals of the mean. Where an interval includes zero, no claim is "
           "made.")

verdicts = tour.all_claims(s)  # once per summary
for key in mechanism.CLAIM_IDS:
    c = verdicts[key]
    st.html(f"<div style='line-height:1.45;margin-top:0.4rem'>{sections.verdict_badge(c.verdict)} "
            f"<b>{html.escape(c.statement)}</b><br>{html.escape(c.ours)}</div>")
    st.caption(data.escape_markdown(c.note, entities=False))

st.subheader("Toward I, or away from O?")
st.markdown("T's output bias (O→T minus I→T) falls two ways: T comes **closer to I** (I→T rises) or T **leaves O** "
            "(O→T falls). Only the first is T turning input-like. For each arm, both changes against the baseline's T "
            "of the same seed, on the linear map and on overlap@10: dot the mean over seeds, whisker its 95% "
            "interval; grey, the most a rerun of the baseline changed. An effect counts where its whisker clears the "
            "grey band.")
export.show(lambda: mechanism.effects_figure(ref), f"mechanism-effects-{ref.name}", key="mechanism_effects",
            spec_key=("mechanism-effects", ref))
frame.table(mechanism.effects_table(s), pin=1)
st.caption("An asterisk marks an effect beyond what a rerun changes (the last row). T·O raw-row cosine: the mean cosine of row i of the arm's T with row i of "
           "its twin's O, no map (near 1 only where the two share their start).")

st.subheader("T's output bias, arm by arm")
st.markdown("Each row is an arm; each dot the mean bias over seeds, its whisker the 95% interval: **O→T minus I→T** "
            "(linear map fitted and scored on every token, the paper's protocol) and **overlap@10 T\\~O minus T\\~I**. "
            "Above zero, T is output-like. Dotted: the baseline's bias; an arm left of it lowers the bias (the chart above says whether T came closer to I or only left O).")
export.show(lambda: mechanism.bias_figure(ref), f"mechanism-bias-{ref.name}", key="mechanism_bias",
            spec_key=("mechanism-bias", ref))

st.subheader("When does the bias appear?")
st.markdown("T at each snapshot against the untied twin's I and O at the same step, mean over seeds (at step 0 the "
            "twin's O is a copy of its I, so the bias is zero).")
export.show(lambda: mechanism.curves_figure(ref), f"mechanism-curves-{ref.name}", key="mechanism_curves",
            spec_key=("mechanism-curves", ref))

st.subheader("Every arm")
frame.table(mechanism.arm_table(s), pin=1)
st.caption(mechanism.untied_line(s) + " Output share early, as applied: the output side's share of the gradient "
           "norm reaching T over the first 10% of steps after the surgery (the size-balanced arms: one half by "
           "construction).")
if s.mechanism_probes:
    st.caption("The SGD arm's learning rate, chosen on the validation split (seed 0's probes, last 5% of the "
               "training tokens): " + ", ".join(f"{p['loss']:.3f} nats at {p['lr']:g}" for p in s.mechanism_probes)
               + ".")
st.info(f"What this lab cannot show: it is one toy size on one corpus ({words.scale_line(s)}); "
        "a surgery changes the training itself, so an arm that moves T also trains a different model "
        "(its eval loss is in the table); and the reach mask keeps AdamW's momentum, which moves a row for a "
        "while after its token was last seen, as it does for the input side.")
