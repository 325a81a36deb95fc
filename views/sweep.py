"""Sweep: when does untying pay off? The bias and the loss gap of matched twins against width."""

import html

import altair as alt
import streamlit as st

from explorer import data, export, frame, sections, state, words
from explorer.render import sweep_charts, sweep_tables, tour

ref = frame.opened("sweep", frame.current_sweep())
s = data.summary(ref)
cells = s.sweep_cells
cfg = s.sweep_settings or {}
st.markdown("The paper leaves open **when untying pays off**. Here tied and untied twins (same architecture, initial "
            "weights, batches and held-out text) are trained at several widths: does the tied matrix stay "
            "output-like, and where, if anywhere, does the untied twin reach a lower loss? The untied twin has "
            "V x d more parameters than the tied one (at equal FLOPs per token), so a third arm, a tied model with "
            "the untied twin's parameter count, tells extra parameters from untying"
            + (": it keeps the twins' depth, width and V x d matrix and widens its feed-forward layers."
               if s.sweep and s.sweep[0].get("d_ff_matched") is not None else
               " (in this cache, written before issue 29, a deeper tied model: its gap also measures what extra "
               "depth does in a short run)."))
seeds = max(c["n"] for c in cells)
rows = s.sweep
seen = sorted({int(r["tokens_seen"]) for r in rows if r.get("tokens_seen") is not None})
budget = ((f"{seen[0]:,}" if len(seen) == 1 else f"{seen[0]:,}-{seen[-1]:,}") + " tokens per arm"
          if rows and rows[0].get("tokens_seen") is not None else
          f"{cfg.get('steps', '?')} steps x {(cfg.get('batch_size') or 0) * (cfg.get('context') or 0):,} tokens")
st.caption(f"{len(rows)} runs: widths {', '.join(str(w) for w in sorted({c['d_model'] for c in cells}))}"
           f"; vocabulary {', '.join(f'{v:,}' for v in sorted({c['vocab_size'] for c in cells}))}; {seeds} seed(s) "
           f"per cell; {cfg.get('n_layers', '?')} layers, {budget} on {cfg.get('corpus', '?')}"
           f"{words.twins_text(s)}. "
           "Means over seeds; whiskers: 95% t-intervals of the mean over seeds. Every claim on this page follows "
           "from those intervals: where an interval includes zero, no claim is made and the page says so.")
x = st.radio("Against", list(sweep_charts.SWEEP_X), horizontal=True, on_change=state.sync, args=("axis",),
             key=state.widget_key("axis", next(iter(sweep_charts.SWEEP_X)), sweep_charts.SWEEP_X.__contains__),
             format_func=lambda v: "width" if v == "d_model" else "embedding share (tied)")
view = sweep_tables.sweep_view(ref)  # computed once per cache, read-only
points = view.points
matched = "loss_gap_matched" in points and points["loss_gap_matched"].notna().any()
crossings, sentences = sweep_tables.sweep_crossings_of(ref, x)

verdicts = tour.all_claims(s)  # once per summary


def verdict_line(key: str) -> None:
    c = verdicts[key]
    st.html(f"<div style='line-height:1.45'>{sections.verdict_badge(c.verdict)} {html.escape(c.ours)}</div>")
    st.caption(data.escape_markdown(c.note, entities=False))


st.subheader("Does the tied matrix stay output-like?")
st.markdown("Positive: T is closer to the untied **output** matrix than to the input matrix (the paper's bias). "
            "The verdict is decided on the linear bias drawn here, per width, from its 95% interval.")
verdict_line("sweep_bias")
export.show(lambda: (sweep_charts.sweep_lines(points, sweep_tables.sweep_bias_series(points), x=x,
                                              y_title="bias (mean over seeds)"), points),
            f"sweep-bias-{ref.name}-{x}", key="sweep_bias", spec_key=("sweep-bias", ref, x))
if view.input_moved:
    st.caption("How far the untied input matrix I moved from the initialisation it shares with T and O (mean "
               "per-token cosine to its start; 1 = not moved): " + view.input_moved
               + ". Where I is still near its start, T being closer to O than to I says little about I.")

gap_series, bands = view.gap_series, view.bands
st.subheader("Does untying pay off?")
st.markdown("Loss gap = untied minus tied eval loss on the same held-out text. **Below zero, the untied twin is "
            "ahead.**" + (" Beside it, the gap against the parameter-matched tied model: below zero there, the "
                          "untied twin is ahead of a tied model with as many parameters." if matched else ""))
verdict_line("sweep_gap")
export.show(lambda: (sweep_charts.sweep_lines(points, gap_series, x=x, y_title="loss gap (nats)", crossings=crossings,
                                              bands=bands), points),
            f"sweep-loss-gap-{ref.name}-{x}", key="sweep_gap", spec_key=("sweep-gap", ref, x, matched, len(bands)))
if len(bands):
    st.caption("Shaded: the learning-rate sensitivity of each gap: how far the probes' gap moves when one arm's rate "
               "moves one step of the grid from its chosen rate (the probes are seed 0's shorter runs, so this is a "
               "size, not an interval).")
for line in sentences:
    st.markdown(line)
st.caption("A crossing is named only between neighbouring points whose intervals both exclude zero on opposite "
           "sides; it is placed by linear interpolation (in log width). Toy models trained on one CPU: what holds "
           "here is what these rows show, at these sizes and budgets.")
if not matched:
    st.info("This cache was written before the sweep trained a parameter-matched tied model and the unigram and "
            "bigram baselines: only the plain gap is drawn. `python -m precompute sweep --force` rebuilds it with "
            "them.")

refs = view.baselines
if len(refs):
    st.subheader("Are the models past bigram statistics?")
    st.markdown("Eval loss of each arm on the same windows, with the unigram (add-one) and the smoothed bigram "
                "(interpolated with the unigram) fitted on the training tokens as reference lines.")

    def loss_chart():
        # zoomed to the arms' losses and the bigram line (the question asked here); the unigram's
        # value, far above, is in the caption below
        bigram = refs[refs["baseline"] == "bigram_loss"]
        lines = sweep_charts.sweep_lines(points, sweep_tables.sweep_series(points, "losses"), x=x,
                                         y_title="eval loss (nats)", y_include=list(bigram["loss"]), zero=False)
        y = alt.Y("loss:Q", scale=alt.Scale(zero=False))
        rule = alt.Chart(bigram).mark_rule(color="#888", strokeDash=[2, 2]).encode(y=y, tooltip=["label:N"])
        text = alt.Chart(bigram).mark_text(align="left", dy=-6, color="#666").encode(y=y, x=alt.value(4), text="label:N")
        return alt.layer(*lines.layer, rule, text).properties(width="container", height=300)

    export.show(lambda: (loss_chart(), points), f"sweep-losses-{ref.name}-{x}", key="sweep_losses",
                spec_key=("sweep-losses", ref, x))
    unigram = refs[refs["baseline"] == "unigram_loss"]
    st.caption("The chart is zoomed to the arms and the bigram line; the unigram baseline: "
               + ", ".join(f"{u.loss:.2f} nats (V={int(u.vocab_size):,})" for u in unigram.itertuples()) + ".")
    fitted = [r.get("bigram_train_tokens") for r in rows if r.get("bigram_train_tokens")]
    if fitted:
        seen = max(r["tokens_seen"] for r in rows)
        st.caption(f"The baselines are fitted on all {max(fitted):,} training tokens, {max(fitted) / seen:.2f}x the "
                   f"{seen:,} each arm read: more text than the models saw, so a model above the bigram line is "
                   "behind a baseline that read more.")
    behind = view.behind
    st.markdown("Not yet past bigram statistics (mean eval loss above the bigram's): " + "; ".join(behind) + "."
                if behind else "Every arm's mean eval loss is below the bigram's at every width.")

st.subheader("Every cell")
st.caption("Table cells: mean ± sample standard deviation over seeds (the spread of the seeds, not the 95% interval "
           "of the mean that the charts and the sentences use). — : not in this cache.")
st.markdown("**Bias**: does the tied matrix stay output-like? (The linear map fitted and scored on every token, the "
            "paper's protocol; I cosine to start: how far the untied input matrix moved from its initialisation; "
            "output share early: the output side's share of the gradient over the first 10% of steps, with the "
            "authors' input proxy, the paper's quantity.)")
frame.table(view.tables["bias"], pin=2)  # vocabulary and width stay in view on a phone
st.markdown("**Loss**: does untying pay off?")
frame.table(view.tables["loss"], pin=2)
st.markdown("**Budget**: every arm's parameters, feed-forward width and learning rate")
frame.table(view.tables["budget"], pin=2)
st.markdown("**Second figures**: the linear map fitted on 80% of the tokens and scored on the rest, the output "
            "share with the exact input norm, and the tokens each arm read")
frame.table(view.tables["second"], pin=2)
if view.probe_table is not None:
    st.markdown("**Learning-rate probes**: each arm's validation loss (nats) after a probe run of seed 0 at every rate "
                "of the grid; * the chosen rate, the probe minimum. The probes train on the training tokens less "
                "their last 5% and score that 5% (the validation split); the evaluation windows lie after it.")
    frame.table(view.probe_table, pin=3)
