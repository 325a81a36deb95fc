"""Tables the pages show beside the paper's numbers, built from a cache's summary (pure functions).

Each returns a DataFrame whose columns say what the numbers are: this cache's values, and
the paper's under a label that names the paper's pair ("paper (olmo)" when a toy-lab cache
is set beside it).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from tying.analysis.share import step_share
from tying.analysis.sweep import PLOTTED, chosen_rates, crossing, lr_sensitivity

# the Lens page's convergence lines: below the data layer, which caches them; re-exported with the page tables
from tying.cache import reference, summary
from tying.cache.schema import (
    MATRIX_PAIRS,
    METHOD_LABELS,
    TABLE1_COMPARISONS,
    TABLE1_METHODS,
    display_comparison,
    pair_label,
)


def paper_label(s: dict[str, Any]) -> str:
    """The label of the paper's figures beside this cache's (empty when the summary has none)."""
    paper = s.get("paper") or {}
    return summary.paper_label(paper) if paper else ""


def fit_height(df: pd.DataFrame, row_px: int = 35) -> int:
    """A st.dataframe height that shows every row (header included) without an inner scroll bar."""
    return row_px * (len(df) + 1) + 3


def _quoted(x: float | None) -> str:
    """A paper's figure as text: three decimals, or a dash where the paper has no such number."""
    return "—" if x is None else f"{x:.3f}"


SEED_METRICS = {("linear", "held_out"): "{c} linear held-out", ("linear", "in_sample"): "{c} linear in-sample",
                ("identity", "in_sample"): "{c} identity", ("identity_raw", "in_sample"): "{c} identity (raw rows)"}
"""The per-seed metric (seed_metrics) of a map and split, ``{c}`` the comparison ("O->T")."""


def seed_stat(s: dict[str, Any], metric: str) -> tuple[float, float, int] | None:
    """(mean, sample std, seeds) of one per-seed metric of a toy lab with more than one seed, else None."""
    v = (s.get("seeds") or {}).get(metric)
    if not v or v.get("n", 0) < 2 or v.get("mean") is None:
        return None
    return v["mean"], v.get("std") or 0.0, v["n"]


def seed_text(stat: tuple[float, float, int] | None) -> str | None:
    """'0.865 ± 0.009' (mean ± sample std over seeds), or None."""
    return None if stat is None else f"{stat[0]:.3f} ± {stat[1]:.3f}"


def n_seeds(s: dict[str, Any]) -> int:
    """The seeds a toy lab's per-seed table holds (1 when it holds none)."""
    return max([v.get("n", 1) for v in (s.get("seeds") or {}).values()] or [1])


def one_seed_note(s: dict[str, Any], shown: dict[str, str]) -> str | None:
    """Where a page shows seed 0's twins of a several-seed toy lab: one sentence naming the seed and
    giving the mean over seeds beside it (the figure the Overview and the tour show). ``shown``:
    label -> per-seed metric; None when the cache has one seed or none of the metrics."""
    parts = [f"{label} {seed_text(seed_stat(s, m))}" for label, m in shown.items() if seed_stat(s, m)]
    if not parts:
        return None
    return (f"These are seed 0's twins (the pair the per-token views show). Mean ± sample std over the "
            f"{n_seeds(s)} seeds, the figure the Overview and the tour show: " + ", ".join(parts) + ".")


def table1(s: dict[str, Any]) -> pd.DataFrame:
    """Table 1, one row per comparison and map: in-sample, held-out, and the paper's value (as
    text). A several-seed toy lab's rows are seed 0's twins; the mean ± std over its seeds follows
    as text where the seeds were measured with that map and split."""
    paper = (s.get("paper") or {}).get("table1") or {}
    label = paper_label(s)
    seeded = n_seeds(s) > 1
    tag = " (seed 0)" if seeded else ""
    rows = []
    for comp in TABLE1_COMPARISONS:
        for meth in TABLE1_METHODS:
            cell = (s.get("alignment") or {}).get(comp, {}).get(meth)
            if cell is None:
                continue
            row = {"comparison": display_comparison(comp), "map": METHOD_LABELS[meth],
                   f"in-sample{tag}": cell.get("in_sample"), f"held-out{tag}": cell.get("held_out")}
            if seeded:
                for split, name in (("in_sample", "in-sample"), ("held_out", "held-out")):
                    key = SEED_METRICS.get((meth, split))
                    row[f"{name}, mean ± std of {n_seeds(s)} seeds"] = (
                        seed_text(seed_stat(s, key.format(c=comp))) if key else None) or ""
            if paper:
                row[label] = _quoted(paper.get(comp, {}).get(meth))
            rows.append(row)
    return pd.DataFrame(rows)


def table5(s: dict[str, Any]) -> pd.DataFrame:
    """overlap@10 per matrix pair with the paper's value (Table 5); a several-seed toy lab's
    figure is seed 0's, with the mean ± std over its seeds beside it."""
    paper = (s.get("paper") or {}).get("table5") or {}
    label = paper_label(s)
    seeded = n_seeds(s) > 1
    rows = []
    for a, b in MATRIX_PAIRS:
        p = pair_label(a, b)
        row = {"matrices": p, "overlap@10" + (" (seed 0)" if seeded else ""): (s.get("overlap_at_10") or {}).get(p)}
        if seeded:
            row[f"mean ± std of {n_seeds(s)} seeds"] = seed_text(seed_stat(s, f"overlap@10 {p}")) or ""
        if paper:
            row[label] = paper.get(p)
        rows.append(row)
    return pd.DataFrame(rows)


def arrows(text: str) -> str:
    """A summary's ASCII arrow as the pages write it: 'O->T' -> 'O→T'."""
    return str(text).replace("->", "→")


SEED_METRIC_LABELS = {"output share early": "output share early (exact input)",
                      "output share overall": "output share overall (exact input)"}
"""The toy lab's seed metrics whose stored names do not say their input side (the exact norm)."""


def run_words(text: str) -> str:
    """A run's stored name in words: 'tied_scaled_x5' reads 'tied (input gradient x5)'."""
    return re.sub(r"tied_scaled_x(\d+(?:\.\d+)?)", r"tied (input gradient ×\1)", text)


def seeds(s: dict[str, Any]) -> pd.DataFrame:
    """Headline numbers over seeds: mean, sample std (blank with one seed), number of seeds."""
    rows = [{"metric": run_words(arrows(SEED_METRIC_LABELS.get(m, m))), "mean": v["mean"], "std": v["std"] if v["n"] > 1 else None, "seeds": v["n"]}
            for m, v in (s.get("seeds") or {}).items()]
    out = pd.DataFrame(rows, columns=["metric", "mean", "std", "seeds"])
    if len(out) and (out["seeds"] <= 1).all():  # one seed: no spread to show, no column of blanks
        out = out.drop(columns="std")
    return out


def directions(s: dict[str, Any]) -> pd.DataFrame:
    """Whether each of the paper's directions holds, seed by seed."""
    rows = []
    for claim, d in (s.get("directions") or {}).items():
        row = {"the paper's direction": arrows(claim)}
        row |= {f"seed {seed}": "holds" if ok else "fails" for seed, ok in zip(d["seeds"], d["holds"])}
        rows.append(row)
    return pd.DataFrame(rows)


INPUT_SIDE_NAMES = {"exact": "exact", "proxy": "authors' proxy", "effective": "authors' proxy",
                    "plain": "authors' proxy, unscaled"}
"""How the share table names a run's input-side norm (runs.input_norm): an imported log of the
authors' holds their proxy (its ``*_effective`` column, after any input scaling, or the plain one)."""
OUTPUT_SHARE_HELP = {
    "early share": "mean over the early logged steps of output / (input + output), with the input side named "
                   "in 'input side': with the authors' proxy, the paper's quantity",
    "overall share": "the same mean over all logged steps",
    "input side": "the input-side norm of the two shares before it: the authors' proxy (the gradient w.r.t. the "
                  "embedding output over all positions, what their log holds) when the run logged it, else exact",
    "early, exact": "early share with the exact input norm (as scattered into the matrix's rows): a second "
                    "figure, not the paper's quantity",
    "overall, exact": "overall share with the exact input norm",
    "early = steps ≤": "the last step counted as early",
    "early, Σ ratio": "ratio of summed norms over the early steps, Σ output / Σ (input + output), same input side "
                      "as the share",
    "overall, Σ ratio": "ratio of summed norms over all logged steps",
}


def output_shares(s: dict[str, Any], runs: list[str] | None = None) -> pd.DataFrame:
    """Output share per run beside the paper's: the mean of per-step ratios with the authors' input
    proxy when the run logged it (summary.share_beside_paper), the exact-input share as a labelled
    second figure, and the ratio of sums.

    Column names are short (the table fits a laptop's width); ``OUTPUT_SHARE_HELP`` says what
    each means. The exact-input columns are left out when no run has an exact figure (an
    imported log of the authors' holds only their proxy).
    """
    prov = s.get("gradient_provenance") or {}
    rows = []
    for run in runs if runs is not None else list(prov):
        p = prov.get(run)
        if p is None:
            continue
        b = p.get("beside_paper") or summary.share_beside_paper(p)
        ros = b.get("ratio_of_sums") or {}
        exact = (p.get("input_norm") or "exact") == "exact"
        rows.append({"run": run, "early share": b["early"], "overall share": b["overall"],
                     "input side": INPUT_SIDE_NAMES.get(b["input"], b["input"]),
                     "early, exact": p["early"] if exact else None, "overall, exact": p["overall"] if exact else None,
                     "early = steps ≤": p["early_steps"], "logged steps": p["logged_steps"],
                     "early, Σ ratio": ros.get("early"), "overall, Σ ratio": ros.get("overall")})
    ref = (s.get("paper") or {}).get("output_share")
    # the paper's row, unless a run here already is the authors' published log (the same numbers twice)
    published_here = ref and any(abs((r["early share"] or 0) - ref["early"]) < 5e-5
                                 and r["logged steps"] == ref["steps"] for r in rows)
    if ref and rows and not published_here:
        rows.append({"run": "paper: OLMo-1B tied", "early share": ref["early"],
                     "overall share": ref["overall"], "input side": INPUT_SIDE_NAMES["proxy"],
                     "early, exact": None, "overall, exact": None,
                     "early = steps ≤": ref["early_steps"], "logged steps": ref["steps"],
                     "early, Σ ratio": ref["ratio_of_sums"]["early"],
                     "overall, Σ ratio": ref["ratio_of_sums"]["overall"]})
    out = pd.DataFrame(rows)
    if len(out) and out["early, exact"].isna().all():
        out = out.drop(columns=["early, exact", "overall, exact"])
    return out


INPUT_SIDES = {
    "exact": "exact: the input-side gradient as scattered into the matrix's rows",
    "proxy": "authors' proxy: the gradient w.r.t. the embedding output, over all positions",
}


def provenance_view(log: pd.DataFrame, input_side: str) -> pd.DataFrame:
    """Per-step norms and share with the chosen input-side figure (``exact`` or ``proxy``)."""
    if input_side not in INPUT_SIDES:
        raise ValueError(f"input side must be one of {', '.join(INPUT_SIDES)}, got {input_side!r}")
    if input_side == "exact":
        return log
    out = log[log["grad_input_proxy_norm"].notna()].copy()
    out["grad_input_norm"] = out["grad_input_proxy_norm"]
    out["output_share"] = step_share(out["grad_input_norm"], out["grad_output_norm"])
    return out


def published_sources(s: dict[str, Any]) -> pd.DataFrame:
    """Where each published figure comes from: file, the authors' repository and commit, or the paper's table."""
    rows = []
    for src in s.get("sources") or []:
        if src.get("file"):
            rows.append({"figure": src.get("figure"), "data": src["file"].rsplit("/", 1)[-1],
                         "source": f"{src['repository']} @ {src['commit'][:12]}, {src.get('path') or ''}",
                         "license": src.get("license")})
        else:
            rows.append({"figure": src.get("figure"), "data": "quoted from the paper", "source": src.get("source"),
                         "license": ""})
    return pd.DataFrame(rows, columns=["figure", "data", "source", "license"])


def paper_table1_all() -> pd.DataFrame:
    """The paper's Table 1 for every pair it reports: identity (raw rows), orthogonal, linear."""
    rows = [{"pair": preset, "comparison": display_comparison(comp), "identity (raw rows)": cells.get("identity_raw"),
             "orthogonal": cells.get("orthogonal"), "linear": cells.get("linear"),
             "rows paired by": "token id" if reference.TABLE1_MATCH.get(preset) == "ids" else "token string"}
            for preset, table in reference.TABLE1.items() for comp, cells in table.items()]
    return pd.DataFrame(rows)


def paper_table5_all() -> pd.DataFrame:
    """The paper's Table 5 (overlap@10) for every pair."""
    return pd.DataFrame([{"pair": preset} | cells for preset, cells in reference.TABLE5.items()])


def paper_scaling() -> pd.DataFrame:
    """The paper's Tables 2 (10k steps) and 6 (1k steps): tied OLMo-1B vs untied OLMo-1B-0724, I and O."""
    return pd.DataFrame([{"table": table, "steps": steps, "method": reference.TABLE2_METHOD,
                          "input-gradient factor": f"x{scale:g}",
                          "cosine to untied I": row["I"], "cosine to untied O": row["O"]}
                         for table, steps, cells in (("Table 2", "10k", reference.TABLE2),
                                                     ("Table 6", "1k", reference.TABLE6))
                         for scale, row in cells.items()])


SCALING_METHOD_LABELS = {
    reference.TABLE2_METHOD: "Procrustes, in-sample (the paper's)",
    "identity (raw rows)": "identity, raw rows",
    "identity": "identity, centred",
    "linear held-out": "linear, held-out",
}


def scaling_methods(methods) -> list[str]:
    """A cache's Table-2 methods, the paper's (orthogonal Procrustes, in-sample) first."""
    return sorted(methods, key=lambda m: (m != reference.TABLE2_METHOD, m))


def scaling_method_label(method: str) -> str:
    return SCALING_METHOD_LABELS.get(method, method)


def scaling_caption(method: str) -> str:
    """What the chosen Table-2 map is, and the paper's numbers beside it only when it is the paper's map."""
    cells = ", ".join(f"x{f:g} {c['I']:.3f} / {c['O']:.3f}" for f, c in reference.TABLE2.items())
    paper = (f"The paper (OLMo-1B tied trained 10k steps against untied OLMo-1B-0724 at step 10k, I / O; "
             f"{reference.TABLE2_METHOD_LABEL}): {cells}.")
    if method == reference.TABLE2_METHOD:
        return f"Map: {reference.TABLE2_METHOD_LABEL}, the paper's method. {paper}"
    return (f"Map: {scaling_method_label(method)}, an extra, not the paper's method: compare the paper's numbers "
            f"with the 'Procrustes, in-sample' map. {paper}")


def lens_text_note(s: dict[str, Any]) -> str:
    """The text the authors' lenses saw against this cache's, where the paper's KL is shown or quoted."""
    params = ((s.get("stages") or {}).get("lens") or {}).get("params") or {}
    text = f"Text: the authors' tuned lenses were {reference.LENS_TEXT}."
    if params.get("text"):
        budget = params.get("budget") or {}
        train = budget.get("train_tokens") or params.get("train_tokens")
        text += f" This cache's lenses were trained and evaluated on {params['text']}"
        if train:
            text += f" ({train:,} training tokens, {params.get('eval_tokens') or 0:,} evaluation tokens)"
        text += (": another text and budget, so the absolute KL is not comparable with theirs, only its pattern "
                 "across layers and between tied and untied.")
    return text


def released_fraction_note(last_steps: dict[str, int]) -> str:
    """What 'fraction' means on the side-by-side charts: of the steps each run released or logged
    (its last = 1), not of its full training. ``last_steps``: {'cache: run': last step}."""
    parts = []
    for label, last in last_steps.items():
        run = label.split(": ", 1)[-1]
        total = reference.TOTAL_TRAINING_STEPS.get(run)
        parts.append(f"{run}: the first {last:,} of its {total:,} training steps" if total
                     else f"{run}: steps up to {last:,}")
    return ("The fraction is of the steps each run released or logged (its last = 1), not of its full training: "
            + "; ".join(parts) + ".")


def evolution_by_fraction(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Evolution rows of several sources in one frame, with each run's step as a fraction of its last.

    ``frames``: {source label: evolution rows (step, matrix, cos_init) of one run}.
    """
    out = []
    for source, e in frames.items():
        if not len(e):
            continue
        last = max(int(e["step"].max()), 1)
        out.append(e[["step", "matrix", "cos_init"]].assign(source=source, fraction=e["step"] / last))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["step", "matrix", "cos_init", "source", "fraction"])


def share_by_fraction(frames: dict[str, pd.DataFrame], window_fraction: float = 0.02) -> pd.DataFrame:
    """Rolling output share of several runs, the window a fixed share of each run's logged steps.

    ``frames``: {source label: train_log rows (step, output_share) of one run}. A window of 2%
    of the run makes a 250-step toy run and a 10,010-step real run equally smooth.
    """
    out = []
    for source, log in frames.items():
        if not len(log):
            continue
        d = log.sort_values("step")
        window = max(1, int(round(window_fraction * len(d))))
        last = max(int(d["step"].max()), 1)
        out.append(pd.DataFrame({"source": source, "step": d["step"].to_numpy(),
                                 "fraction": d["step"].to_numpy() / last,
                                 "share": d["output_share"].rolling(window, min_periods=1).mean().to_numpy()}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(
        columns=["source", "step", "fraction", "share"])


SWEEP_SERIES = {"bias": {"bias_linear_in": "O→T minus I→T (linear, in-sample)",
                         "bias_linear": "O→T minus I→T (linear, held-out)",
                         "bias_overlap": "T~O minus T~I (overlap@10)"},
                "loss": {"loss_gap": "untied minus tied eval loss"},
                "gaps": {"loss_gap": "untied minus tied eval loss",
                         "loss_gap_matched": "untied minus parameter-matched tied"},
                "losses": {"eval_loss_tied": "tied", "eval_loss_untied": "untied",
                           "eval_loss_tied_matched": "tied, parameter-matched"}}
"""The sweep page's series per chart (column -> legend label); a column a cache lacks (one
written before the parameter-matched arm) is left out: :func:`sweep_series`."""


def sweep_bias_series(points: pd.DataFrame) -> dict[str, str]:
    """The bias chart's series: the linear bias the sweep_bias verdict is decided on (in-sample,
    the paper's protocol; held-out for a cache without it) and the overlap bias."""
    have = sweep_series(points, "bias")
    if "bias_linear_in" in have:
        have.pop("bias_linear")
    return have


def sweep_lr_bands(points: pd.DataFrame, probes: pd.DataFrame, series: dict[str, str]) -> pd.DataFrame:
    """The learning-rate sensitivity of each plotted loss gap: per grid point the mean gap plus the
    shift of the probes' gap when one arm's rate moves one step of the grid
    (:func:`tying.analysis.sweep.lr_sensitivity`). Columns vocab_size, d_model, series (the label),
    lo, hi; empty without probes."""
    arms = {"loss_gap": "tied", "loss_gap_matched": "tied_matched"}
    rows = []
    if probes is None or not len(probes):
        return pd.DataFrame(rows, columns=["vocab_size", "d_model", "series", "lo", "hi"])
    for _, p in points.iterrows():
        cell = probes[(probes["d_model"] == p["d_model"]) & (probes["vocab_size"] == p["vocab_size"])]
        for col, label in series.items():
            band = lr_sensitivity(cell, "untied", arms.get(col, "tied"))
            if band is not None and pd.notna(p.get(col)):
                rows.append({"vocab_size": p["vocab_size"], "d_model": p["d_model"], "series": label,
                             "lo": p[col] + band["low"], "hi": p[col] + band["high"]})
    return pd.DataFrame(rows, columns=["vocab_size", "d_model", "series", "lo", "hi"])


def lr_probe_table(probes: pd.DataFrame) -> pd.DataFrame:
    """The stored learning-rate probes as a table: a row per width and arm, a column per rate
    (validation loss, nats), the chosen (lowest) one marked with an asterisk."""
    if probes is None or not len(probes):
        return pd.DataFrame()
    rows = []
    for (v, d, arm), g in probes.groupby(["vocab_size", "d_model", "arm"], sort=True):
        chosen = chosen_rates(g)[arm]
        row = {"vocabulary": int(v), "d_model": int(d), "arm": SWEEP_ARM_NAMES.get(arm, arm),
               "probe steps": int(g["steps"].max())}
        for lr, loss in g.groupby("lr")["loss"].mean().items():
            row[f"lr {lr:g}"] = f"{loss:.3f}" + (" *" if lr == chosen else "")
        rows.append(row)
    return pd.DataFrame(rows)


SWEEP_ARM_NAMES = {"tied": "tied", "untied": "untied", "tied_matched": "parameter-matched tied"}

SWEEP_ARMS = {"eval_loss_tied": "tied", "eval_loss_untied": "untied", "eval_loss_tied_matched": "parameter-matched tied"}


def sweep_series(points: pd.DataFrame, chart: str) -> dict[str, str]:
    """The series of ``SWEEP_SERIES[chart]`` whose columns the points have."""
    return {c: label for c, label in SWEEP_SERIES[chart].items() if c in points and points[c].notna().any()}


def sweep_points(cells: list[dict[str, Any]]) -> pd.DataFrame:
    """A sweep summary's grid points; a half-width the summary leaves null (one seed) is inf:
    no whisker, and no interval that excludes zero."""

    d = pd.DataFrame(cells)
    for col in PLOTTED:
        if f"{col}_half" in d:
            d[f"{col}_half"] = d[f"{col}_half"].astype(float).fillna(float("inf"))
    return d


def sweep_crossings(points: pd.DataFrame, x: str, gap: str = "loss_gap",
                    against: str = "tied") -> tuple[pd.DataFrame, list[str]]:
    """Where a loss gap (``gap``: untied minus ``against``) changes sign, per vocabulary size: the
    named crossings (vocab_size, x, label) and one sentence per vocabulary that claims only what
    the 95% intervals allow."""

    rows, lines = [], []
    if gap not in points:
        return pd.DataFrame(rows, columns=["vocab_size", "x", "label"]), lines
    for v, g in points.groupby("vocab_size", sort=True):
        g = g.sort_values(x)
        c = crossing(g[x], g[gap], g[f"{gap}_half"], log_x=(x == "d_model"))
        where = "width" if x == "d_model" else "embedding share"
        head = f"Vocabulary {int(v):,}" + ("" if against == "tied" else f", untied against {against}")
        if c["x"] is not None:
            lo, hi = c["between"]
            shown = f"{c['x']:.0f}" if x == "d_model" else f"{c['x']:.1%}"
            span = (f"{lo:.0f} and {hi:.0f}" if x == "d_model" else f"{lo:.1%} and {hi:.1%}")
            rows.append({"vocab_size": int(v), "x": c["x"], "label": f"≈ {shown}"})
            falls = float(g.loc[g[x] == lo, gap].iloc[0]) > 0  # positive (tied ahead) below the crossing
            if x == "d_model":
                what = f"untying starts to pay off at a {where}" if falls else f"untying stops paying off at a {where}"
            else:
                what = f"untying pays off {'above' if falls else 'below'} an {where}"
            lines.append(f"{head}: {what} of about {shown} (between {span}; {c['why']}).")
        else:
            lines.append(f"{head}: no crossing named — {c['why']}.")
    return pd.DataFrame(rows, columns=["vocab_size", "x", "label"]), lines


def sweep_behind_bigram(points: pd.DataFrame) -> list[str]:
    """The arms whose mean eval loss is above the smoothed bigram's on the same windows, one
    "d=32 (tied, untied)" per width: not yet past bigram statistics. Empty without baselines."""
    if "bigram_loss" not in points or points["bigram_loss"].isna().all():
        return []
    out = []
    for _, r in points.sort_values(["vocab_size", "d_model"]).iterrows():
        behind = [name for col, name in SWEEP_ARMS.items() if col in r and pd.notna(r[col])
                  and r[col] > r["bigram_loss"]]
        if behind:
            out.append(f"V={int(r['vocab_size']):,} d={int(r['d_model'])} ({', '.join(behind)})")
    return out


SWEEP_TABLE_PARTS = {
    "bias": ["vocabulary", "d_model", "seeds", "embedding share (tied)", "O→T linear in-sample",
             "I→T linear in-sample", "T~O overlap", "T~I overlap", "I cosine to start", "output share early (proxy)"],
    "loss": ["vocabulary", "d_model", "seeds", "eval loss tied", "eval loss untied", "eval loss matched",
             "bigram", "loss gap", "gap vs matched"],
    "budget": ["vocabulary", "d_model", "parameters (tied)", "parameters (untied)", "parameters (matched)",
               "d_ff (twins / matched)", "lr tied", "lr untied", "lr matched"],
    "second": ["vocabulary", "d_model", "O→T linear", "I→T linear", "output share early (exact)", "tokens seen",
               "epochs"],
}
"""The sweep's cell table in parts, each narrow enough for a laptop's width: the bias side
(the in-sample map the verdict reads, overlap, how far I moved), the loss side, the budget
(every arm's parameter count, feed-forward width and learning rate) and the second figures
(the held-out map, the exact-norm share, the tokens each arm read), each with the cell's
vocabulary and width. Text cells read mean ± sample std
over seeds (the spread of the seeds, not the 95% interval of the mean)."""


def sweep_table(cells: list[dict[str, Any]], part: str | None = None) -> pd.DataFrame:
    """One row per grid point: mean ± sample std over seeds, as text ("—" where a cache lacks the
    column); ``part``: the columns of ``SWEEP_TABLE_PARTS[part]`` only (None: every column)."""
    def pm(c, col):
        return summary.plus_minus(c.get(col), c.get(f"{col}_std"), c["n"], missing="—")

    def num(c, col, fmt):
        v = c.get(col)
        return "—" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, fmt)

    out = pd.DataFrame([{"vocabulary": c["vocab_size"], "d_model": c["d_model"], "seeds": c["n"],
                         "parameters (tied)": num(c, "params_tied", ",.0f"),
                         "parameters (untied)": num(c, "params_untied", ",.0f"),
                         "parameters (matched)": num(c, "params_tied_matched", ",.0f"),
                         "embedding share (tied)": f"{c['embedding_share_tied']:.1%}",
                         "O→T linear": pm(c, "linear_o_t"), "I→T linear": pm(c, "linear_i_t"),
                         "O→T linear in-sample": pm(c, "linear_o_t_in"), "I→T linear in-sample": pm(c, "linear_i_t_in"),
                         "I cosine to start": pm(c, "cos_start_input_untied"),
                         "d_ff (twins / matched)": f"{num(c, 'd_ff', '.0f')} / {num(c, 'd_ff_matched', '.0f')}",
                         "T~O overlap": pm(c, "overlap_t_o"), "T~I overlap": pm(c, "overlap_t_i"),
                         "output share early (proxy)": pm(c, "output_share_early_proxy"),  # the paper's
                         "output share early (exact)": pm(c, "output_share_early"),
                         "eval loss tied": pm(c, "eval_loss_tied"), "eval loss untied": pm(c, "eval_loss_untied"),
                         "eval loss matched": pm(c, "eval_loss_tied_matched"), "bigram": num(c, "bigram_loss", ".3f"),
                         "loss gap": pm(c, "loss_gap"), "gap vs matched": pm(c, "loss_gap_matched"),
                         "tokens seen": num(c, "tokens_seen", ",.0f"), "epochs": num(c, "epochs", ".2f"),
                         "lr tied": num(c, "lr_tied", "g"), "lr untied": num(c, "lr_untied", "g"),
                         "lr matched": num(c, "lr_tied_matched", "g")} for c in cells])
    return out if part is None else out[SWEEP_TABLE_PARTS[part]]


def top_k(t: pd.DataFrame, layer: int) -> pd.DataFrame:
    """A trajectory's top-k predictions at one hidden state: a row per input position, headed by
    its number and (visible) token, e.g. '3: path', and a column per rank ('top 1', 'top 2', ...):
    as many rows as the text has tokens, so the table is as narrow as k, whatever the text."""
    at = t[t["layer"] == layer]
    tokens = at.drop_duplicates("position").set_index("position")["token"]
    wide = at.pivot_table(index="position", columns="rank", values="prediction", aggfunc="first")
    wide.columns = [f"top {r}" for r in wide.columns]
    wide.index = [f"{p}: {tokens.get(p, '')}" for p in wide.index]
    return wide.rename_axis("input token").reset_index()
