"""The Dynamics page's tables, from a cache's summary and logs (pure functions): the output
side's share per run beside the paper's, the per-step log with the chosen input-side norm,
and several runs' evolution and share set on one axis (the fraction of each run's steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from explorer.render import identity, read
from tying.analysis.share import step_share
from tying.cache import reference, summary
from tying.cache.summary_types import Summary

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


@identity.per_object  # once per summary and runs: the page asks each run
def output_shares(s: Summary, runs: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Output share per run beside the paper's: the mean of per-step ratios with the authors' input
    proxy when the run logged it (summary.share_beside_paper), the exact-input share as a labelled
    second figure, and the ratio of sums.

    Column names are short (the table fits a laptop's width); ``OUTPUT_SHARE_HELP`` says what
    each means. The exact-input columns are left out when no run has an exact figure (an
    imported log of the authors' holds only their proxy).
    """
    prov = s.gradient_provenance or {}
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
    ref = s.paper.output_share if s.paper else None
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


@dataclass(frozen=True)
class RunChoices:
    """What the Dynamics page offers to pick for one cache (once per cache, read-only): the
    runs with a gradient log and those picked at first (seed 0's tied run, an imported log),
    whether the log holds the authors' input proxy, the runs with an embedding evolution and
    those picked at first, and the maps the scaling table holds."""

    logged: tuple[str, ...]
    log_default: tuple[str, ...]
    has_proxy: bool
    evolved: tuple[str, ...]
    evo_default: tuple[str, ...]
    scaling_methods: tuple[str, ...]


@read.memo(16)
def run_choices(ref: read.CacheRef) -> RunChoices:
    runs, log, evo = read.table(ref, "runs"), read.table(ref, "train_log"), read.table(ref, "evolution")
    variant = dict(zip(runs["run"], runs["variant"]))
    tied = [r for r, v in variant.items() if v != "untied"]
    default = [r for r in tied if r.startswith("tied/") or variant[r] == "imported"]
    evolved = sorted(evo["run"].unique()) if len(evo) else []
    sc = read.table(ref, "scaling")
    return RunChoices(tuple(sorted(log["run"].unique())) if len(log) else (), tuple(default[:2] or tied[:1]),
                      bool(len(log) and log["grad_input_proxy_norm"].notna().any()), tuple(evolved),
                      tuple([r for r in evolved if r.endswith("seed0") and not r.startswith("tied_scaled")]
                            or evolved[:4]),
                      tuple(sc["method"].unique()) if len(sc) else ())
