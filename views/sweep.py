"""Sweep: when does untying pay off? The bias and the loss gap of matched twins against width."""

import altair as alt
import streamlit as st

from explorer import charts, data, export, frame, state, tables

ref = frame.current_sweep()
s = data.summary(ref)
cells = s["sweep_cells"]
cfg = s.get("sweep_settings") or {}
st.title(f"Sweep · {ref.name}")
st.markdown("The paper leaves open **when untying pays off**. Here tied and untied twins (same architecture, initial "
            "weights, batches and held-out text) are trained at several widths: does the tied matrix stay "
            "output-like, and where, if anywhere, does the untied twin reach a lower loss? The untied twin has "
            "V x d more parameters than the tied one (at equal FLOPs per token), so a third arm, a deeper tied "
            "model with the untied twin's parameter count, tells extra parameters from untying.")
seeds = max(c["n"] for c in cells)
rows = s["sweep"]
budget = (f"{min(r['tokens_seen'] for r in rows):,}-{max(r['tokens_seen'] for r in rows):,} tokens per arm"
          if rows and rows[0].get("tokens_seen") is not None else
          f"{cfg.get('steps', '?')} steps x {(cfg.get('batch_size') or 0) * (cfg.get('context') or 0):,} tokens")
st.caption(f"{len(rows)} runs: widths {', '.join(str(w) for w in sorted({c['d_model'] for c in cells}))}"
           f"; vocabulary {', '.join(f'{v:,}' for v in sorted({c['vocab_size'] for c in cells}))}; {seeds} seed(s) "
           f"per cell; {cfg.get('n_layers', '?')} layers, {budget} on {cfg.get('corpus', '?')}. "
           "Means over seeds; whiskers: 95% t-intervals of the mean over seeds. Every claim on this page follows "
           "from those intervals: where an interval includes zero, no claim is made and the page says so.")
x = st.radio("Against", list(charts.SWEEP_X), horizontal=True, on_change=state.sync, args=("axis",),
             key=state.widget_key("axis", next(iter(charts.SWEEP_X)), charts.SWEEP_X.__contains__),
             format_func=lambda v: "width" if v == "d_model" else "embedding share (tied)")
points = tables.sweep_points(cells)
matched = "loss_gap_matched" in points and points["loss_gap_matched"].notna().any()
crossings, sentences = tables.sweep_crossings(points, x)
if matched:
    _, more = tables.sweep_crossings(points, x, "loss_gap_matched", "the parameter-matched tied model")
    sentences += more

st.subheader("Does the tied matrix stay output-like?")
st.markdown("Positive: T is closer to the untied **output** matrix than to the input matrix (the paper's bias).")
export.show(lambda: (charts.sweep_lines(points, tables.SWEEP_SERIES["bias"], x=x, y_title="bias (mean over seeds)"),
                     points), f"sweep-bias-{ref.name}-{x}", key="sweep_bias", spec_key=("sweep-bias", ref, x))

st.subheader("Does untying pay off?")
st.markdown("Loss gap = untied minus tied eval loss on the same held-out text. **Below zero, the untied twin is "
            "ahead.**" + (" Beside it, the gap against the parameter-matched (deeper) tied model: below zero there, "
                          "untying beats spending the same parameters on depth." if matched else ""))
export.show(lambda: (charts.sweep_lines(points, tables.sweep_series(points, "gaps"), x=x, y_title="loss gap (nats)",
                                        crossings=crossings), points),
            f"sweep-loss-gap-{ref.name}-{x}", key="sweep_gap", spec_key=("sweep-gap", ref, x, matched))
for line in sentences:
    st.markdown(line)
st.caption("A crossing is named only between neighbouring points whose intervals both exclude zero on opposite "
           "sides; it is placed by linear interpolation (in log width). Toy models trained on one CPU: what holds "
           "here is what these rows show, at these sizes and budgets.")
if not matched:
    st.info("This cache was written before the sweep trained a parameter-matched tied model and the unigram and "
            "bigram baselines: only the plain gap is drawn. `python -m precompute sweep --force` rebuilds it with "
            "them.")

baselines = "bigram_loss" in points and points["bigram_loss"].notna().any()
if baselines:
    st.subheader("Are the models past bigram statistics?")
    st.markdown("Eval loss of each arm on the same windows, with the unigram (add-one) and the smoothed bigram "
                "(interpolated with the unigram) fitted on the training tokens as reference lines.")
    refs = points.groupby("vocab_size", as_index=False)[["unigram_loss", "bigram_loss"]].mean().melt(
        "vocab_size", var_name="baseline", value_name="loss")
    refs["label"] = refs["baseline"].str.replace("_loss", "") + " " + refs["loss"].map("{:.2f}".format)

    def loss_chart():
        lines = charts.sweep_lines(points, tables.sweep_series(points, "losses"), x=x, y_title="eval loss (nats)")
        rule = alt.Chart(refs).mark_rule(color="#888", strokeDash=[2, 2]).encode(y="loss:Q", tooltip=["label:N"])
        text = alt.Chart(refs).mark_text(align="left", dy=-6, color="#666").encode(
            y="loss:Q", x=alt.value(4), text="label:N")
        return alt.layer(*lines.layer, rule, text).properties(width="container", height=300)

    export.show(lambda: (loss_chart(), points), f"sweep-losses-{ref.name}-{x}", key="sweep_losses",
                spec_key=("sweep-losses", ref, x))
    behind = tables.sweep_behind_bigram(points)
    st.markdown("Not yet past bigram statistics (mean eval loss above the bigram's): " + "; ".join(behind) + "."
                if behind else "Every arm's mean eval loss is below the bigram's at every width.")

st.subheader("Every cell")
st.caption("Table cells: mean ± sample standard deviation over seeds (the spread of the seeds, not the 95% interval "
           "of the mean that the charts and the sentences use). — : not in this cache.")
st.markdown("**Bias**: does the tied matrix stay output-like? (Output share early: the output side's share of the "
            "gradient over the first 10% of steps, with the authors' input proxy, the paper's quantity, and with the "
            "exact input norm, a second figure.)")
frame.table(tables.sweep_table(cells, "bias"), pin=2)  # vocabulary and width stay in view on a phone
st.markdown("**Loss**: does untying pay off?")
frame.table(tables.sweep_table(cells, "loss"), pin=2)
st.markdown("**Budget**: every arm's parameters, the tokens each arm read and its learning rate")
frame.table(tables.sweep_table(cells, "budget"), pin=2)
