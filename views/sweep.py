"""Sweep: when does untying pay off? The bias and the loss gap of matched twins against width."""

import streamlit as st

from explorer import charts, data, export, frame, state, tables

ref = frame.current_sweep()
s = data.summary(ref)
cells = s["sweep_cells"]
cfg = s.get("sweep_settings") or {}
st.title(f"Sweep · {ref.name}")
st.markdown("The paper leaves open **when untying pays off**. Here tied and untied twins (same architecture, initial "
            "weights, batches and held-out text) are trained at several widths: does the tied matrix stay "
            "output-like, and where, if anywhere, does the untied twin reach a lower loss?")
seeds = max(c["n"] for c in cells)
st.caption(f"{len(s['sweep'])} runs of twins: widths {', '.join(str(w) for w in sorted({c['d_model'] for c in cells}))}"
           f"; vocabulary {', '.join(f'{v:,}' for v in sorted({c['vocab_size'] for c in cells}))}; {seeds} seed(s) "
           f"per cell; {cfg.get('n_layers', '?')} layers, {cfg.get('steps', '?')} steps x "
           f"{(cfg.get('batch_size') or 0) * (cfg.get('context') or 0):,} tokens on {cfg.get('corpus', '?')}. "
           "Means over seeds; whiskers: 95% t-intervals over seeds.")
x = st.radio("Against", list(charts.SWEEP_X), horizontal=True, on_change=state.sync, args=("axis",),
             key=state.widget_key("axis", next(iter(charts.SWEEP_X)), charts.SWEEP_X.__contains__),
             format_func=lambda v: "width" if v == "d_model" else "embedding share (tied)")
points = tables.sweep_points(cells)
crossings, sentences = tables.sweep_crossings(points, x)

st.subheader("Does the tied matrix stay output-like?")
st.markdown("Positive: T is closer to the untied **output** matrix than to the input matrix (the paper's bias).")
export.show(lambda: (charts.sweep_lines(points, tables.SWEEP_SERIES["bias"], x=x, y_title="bias (mean over seeds)"),
                     points), f"sweep-bias-{ref.name}-{x}", key="sweep_bias", spec_key=("sweep-bias", ref, x))

st.subheader("Does untying pay off?")
st.markdown("Loss gap = untied minus tied eval loss on the same held-out text. **Below zero, untying pays off.**")
export.show(lambda: (charts.sweep_lines(points, tables.SWEEP_SERIES["loss"], x=x, y_title="loss gap (nats)",
                                        crossings=crossings), points),
            f"sweep-loss-gap-{ref.name}-{x}", key="sweep_gap", spec_key=("sweep-gap", ref, x))
for line in sentences:
    st.markdown(line)
st.caption("A crossing is named only between neighbouring points whose intervals both exclude zero on opposite "
           "sides; it is placed by linear interpolation (in log width). Toy models trained for a few hundred steps "
           "on one CPU: the direction, not the size, is what transfers.")

st.subheader("Every cell")
st.markdown("**Bias**: does the tied matrix stay output-like?")
frame.table(tables.sweep_table(cells, "bias"), pin=2)  # vocabulary and width stay in view on a phone
st.markdown("**Loss**: does untying pay off?")
frame.table(tables.sweep_table(cells, "loss"), pin=2)
