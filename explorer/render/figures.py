"""Every figure and table a cache supports, named by the paper's numbering: one registry for
the tour (views/tour.py), the figure pack (``python -m precompute figures``), the app's zip
download and the static site (``python -m precompute site``). The render layer's part of the
analyses' registry (tying/registry.py): a figure names the analyses (stages) it draws, and an
analysis that brings figures of its own keeps them in ``explorer/render/<its name>.py`` as
``FIGURES``, found here by its name (:func:`contributed`).

Each entry builds from a cache with the same chart builders, tables and data readers as the
pages (the ``*_charts`` and ``*_tables`` modules of :mod:`explorer.render`, and
:mod:`~explorer.render.read`), so a slide, a file and a page show one thing. ``build(ref)``
returns ``(chart, data)`` for a figure and ``(None, table)`` for a table. Nothing here draws
on a page: it runs without a Streamlit server (the data readers' caches then live in memory).
"""

from __future__ import annotations

import importlib
import importlib.util

import pandas as pd

from explorer.render import (
    alignment_charts,
    dynamics_charts,
    dynamics_tables,
    lens_charts,
    mechanism,
    paper_tables,
    projection_charts,
    read,
    setup_diagram,
    sweep_charts,
    sweep_tables,
)
from explorer.render.figure import Figure, has, kind
from tying import registry
from tying.cache import reference
from tying.cache.schema import MATRIX_NAMES

# -- builders --------------------------------------------------------------------------------


def alignment_histogram(ref):
    per_token = read.alignment(ref, "linear", "held_out")
    title = "Per-token cosine, linear map, held-out tokens"
    return alignment_charts.cosine_histogram(per_token, title=title), per_token


def table1(ref):
    s = read.summary(ref)
    return None, (paper_tables.paper_table1_all() if s.kind == "published" else paper_tables.table1(s))


def table5(ref):
    s = read.summary(ref)
    return None, (paper_tables.paper_table5_all() if s.kind == "published" else paper_tables.table5(s))


def overlap_curve(ref):
    curve = read.overlap_curve(ref)
    paper = read.summary(ref).paper
    paper = paper.table5 if paper else None
    return alignment_charts.overlap_curve(curve, paper, reference.OVERLAP_K), curve


PROJECTION_SAMPLE = 5000
"""Points per view the projection figure draws (a seeded sample; the site's map draws the same)."""


def highlighted(ref, token: int | None = None) -> pd.DataFrame:
    """The picked token (default: the page's, :func:`read.default_token`) and its nearest neighbours
    in each matrix, with their coordinates and a ``role`` ("picked" or "neighbour")."""
    if token is None:
        token = read.default_token(read.tokens(ref), among=read.projected_tokens(ref))
    coords = read.umap_shown(ref)
    nb = (read.neighbours_of(ref, token, reference.OVERLAP_K) if read.has_rows(ref, "neighbours")
          else pd.DataFrame(columns=["neighbour", "matrix"]))
    parts = []
    for m in projection_charts.PROJECTION_ORDER:
        ids = [token] + nb[nb["matrix"] == m]["neighbour"].tolist()
        sub = coords[(coords["matrix"] == m) & coords["token"].isin(ids)].copy()
        sub["role"] = ["picked" if t == token else "neighbour" for t in sub["token"]]
        parts.append(sub)
    return pd.concat(parts, ignore_index=True)


def projection(ref, token: int | None = None, view_size: int = 300):
    shown = read.umap_sample(ref, PROJECTION_SAMPLE)
    return projection_charts.projection(shown, highlighted(ref, token), view_size=view_size), shown


def norm_frequency(ref):
    norms = read.norms(ref)
    return alignment_charts.norm_vs_frequency(norms), norms


def _tied_runs(log: pd.DataFrame) -> list[str]:
    runs = sorted(log["run"].unique())
    plain = [r for r in runs if not r.startswith("untied") and "scaled" not in r]
    return plain[:1] or runs[:1]


def output_share(ref):
    log = read.table(ref, "train_log")
    side = "proxy" if log["grad_input_proxy_norm"].notna().any() else "exact"
    runs = sorted(log["run"].unique())
    seeds = [r for r in runs if r.startswith("tied/seed")]
    if len(seeds) > 1:  # the toy lab's seeds: their mean with the seeds' range, the verdict's early steps shaded
        sub = dynamics_tables.provenance_view(log[log["run"].isin(seeds)], side)
        prov = (read.summary(ref).gradient_provenance or {}).get(seeds[0]) or {}
        return dynamics_charts.output_share_band(sub, window=10, early_steps=prov.get("early_steps")), sub
    sub = dynamics_tables.provenance_view(log[log["run"].isin(_tied_runs(log))], side)
    window = max(10, int(sub.groupby("run").size().max()) // 100) if len(sub) else 10
    return dynamics_charts.output_share(sub, window=window), sub


def evolution(ref):
    evo = read.table(ref, "evolution")
    runs = sorted(evo["run"].unique())
    pick = [r for r in runs if r.endswith("seed0") and not r.startswith("tied_scaled")] or runs[:4]
    sub = evo[evo["run"].isin(pick)]
    return dynamics_charts.evolution(sub, "cos_init"), sub


def scaling(ref):
    sc = read.table(ref, "scaling")
    method = paper_tables.scaling_methods(sc["method"].unique())[0]
    g = (sc[sc["method"] == method].groupby(["input_grad_scale", "target"])["mean_cosine"]
         .agg(["mean", "std", "count"]).reset_index())
    return dynamics_charts.scaling(g), g


def table2(ref):
    s = read.summary(ref)
    if s.kind == "published":
        return None, paper_tables.paper_scaling()
    sc = read.table(ref, "scaling")
    method = paper_tables.scaling_methods(sc["method"].unique())[0]
    g = (sc[sc["method"] == method].groupby(["input_grad_scale", "target"])["mean_cosine"]
         .agg(["mean", "std", "count"]).reset_index())
    wide = g.pivot(index="input_grad_scale", columns="target", values="mean").reset_index()
    wide.columns.name = None
    wide = wide.rename(columns={"input_grad_scale": "input gradient x", "I": "cosine to untied I",
                                "O": "cosine to untied O"})
    wide.insert(1, "map", paper_tables.scaling_method_label(method))
    wide["seeds"] = g.groupby("input_grad_scale")["count"].max().to_numpy()
    paper = {f: reference.TABLE2.get(f) for f in wide["input gradient x"]}
    wide["paper I"] = [p["I"] if p else None for p in paper.values()]
    wide["paper O"] = [p["O"] if p else None for p in paper.values()]
    return None, wide


def lens_kl(ref):
    kl = read.table(ref, "lens_kl").sort_values(["model", "lens", "layer"])
    return lens_charts.kl_curves(kl, None), kl


def sweep_gap(ref):
    s = read.summary(ref)
    points = sweep_tables.sweep_points(s.sweep_cells)
    crossings, _ = sweep_tables.sweep_crossings(points, "d_model")
    series = sweep_tables.sweep_series(points, "gaps")
    probes = read.table(ref, "lr_probe") if read.has_rows(ref, "lr_probe") else None
    return sweep_charts.sweep_lines(points, series, x="d_model", y_title="loss gap (nats)", crossings=crossings,
                              bands=sweep_tables.sweep_lr_bands(points, probes, series)), points


def sweep_bias(ref):
    points = sweep_tables.sweep_points(read.summary(ref).sweep_cells)
    return sweep_charts.sweep_lines(points, sweep_tables.sweep_bias_series(points), x="d_model",
                                    y_title="bias (mean over seeds)"), points


def sweep_table(ref):
    return None, sweep_tables.sweep_table(read.summary(ref).sweep_cells)


def spectral_table(ref):
    df = read.table(ref, "spectral")
    keep = ["pair", "distance", "graph_k", "n_components", "n_tokens", "n_common", "sampled"]
    return None, df[[c for c in keep if c in df.columns]]


def setup(ref):
    return setup_diagram.setup_diagram(), setup_diagram.GRADIENTS


FIGURES: tuple[Figure, ...] = (
    Figure("figure-setup", "The set-up: one matrix or two",
           "An untied model reads tokens through I and predicts them through O; a tied model uses one matrix T for "
           "both, so T receives both gradients: a sparse one from the input lookup (only the rows of tokens in the "
           "batch) and a dense one from the output projection (every row, every step).", setup,
           lambda ref, s: s.kind not in ("sweep", "mechanism"), stages=("setup",)),  # no stage: cache and commit only
    Figure("figure1-alignment", "Figure 1. Per-token alignment",
           "Histogram of each token's cosine after a linear map from one matrix onto another, scored on held-out "
           "tokens. O→T sits far to the right of I→T: the tied matrix is output-like.",
           alignment_histogram, has("alignment"), stages=("alignment",)),
    Figure("table1", "Table 1. Mean per-token cosine",
           "Mean cosine after mapping the source matrix onto the target, per map and split. The paper's claim: "
           "O→T high, I→T low.", table1, lambda ref, s: bool(s.alignment) or s.kind == "published", stages=("alignment",)),
    Figure("table5", "Table 5. Neighbour overlap@10",
           "Share of each token's 10 nearest neighbours (cosine) two matrices have in common, averaged over tokens. "
           "The paper's claim: T~O above T~I.", table5,
           lambda ref, s: bool(s.overlap_at_10) or s.kind == "published", stages=("neighbours",)),
    Figure("table-spectral", "Spectral distance of the k-NN graphs",
           "Spectral distance between the weighted k-nearest-neighbour graphs of two matrices (Appendix B): 0 for "
           "graphs with the same spectrum; lower means more alike neighbourhoods. The paper's claim: T~O below T~I.",
           spectral_table, has("spectral"), stages=("spectral",)),
    Figure("overlap-curve", "Neighbour overlap against k",
           "Mean overlap@k for each pair of matrices as k grows; the paper's overlap@10 marked where it has one.",
           overlap_curve, has("overlap_curve"), stages=("neighbours",)),
    Figure("projection-umap", "Aligned UMAP of T, I and O",
           "The three matrices mapped jointly to 2-D so a token sits in comparable places; the labelled diamond is one "
           "token, the dots its 10 nearest neighbours in each matrix.",
           projection, lambda ref, s: len(read.matrices(ref, "umap")) > 1, stages=("umap",)),
    Figure("projection-umap-tied", "UMAP of the tied matrix T",
           "One tied model's matrix mapped to 2-D (no untied twin to align it with): tokens whose rows point the same "
           "way sit together; the labelled diamond is one token, the dots its 10 nearest neighbours.",
           projection, lambda ref, s: read.matrices(ref, "umap") == ("T",), stages=("umap",)),
    Figure("figure5-norm-frequency", "Figure 5. Norm against frequency",
           "Each token's L2 norm against its corpus frequency, per matrix: T's pattern follows O's.",
           norm_frequency, lambda ref, s: bool(read.norm_frequency_correlation(ref)), stages=("load",)),
    Figure("figure4-output-share", "Figure 4. Output share of the gradient",
           "Share of the gradient reaching the tied matrix that comes through the output projection, per step "
           "(smoothed; for a several-seed toy lab the mean over seeds, the band their range, the early steps the "
           "verdict averages shaded); above one half the output side dominates.", output_share, has("train_log"), stages=("training",)),
    Figure("figure3-evolution", "Figure 3. Embedding evolution",
           "Mean per-token cosine of each matrix to its initial value over training: O moves more and faster than "
           "I, and the tied T moves like O.", evolution, has("evolution"), stages=("training",)),
    Figure("table2", "Table 2. Input-gradient scaling",
           "The tied matrix trained with its input-side gradient multiplied by a factor, compared with the untied "
           "I and O: mean per-token cosine.", table2, has("scaling"), stages=("training",)),
    Figure("figure-scaling", "Input-gradient scaling",
           "Cosine of the tied matrix to untied I and O against the input-gradient factor, mean over seeds.",
           scaling, lambda ref, s: read.has_rows(ref, "scaling") and s.kind != "published", stages=("training",)),
    Figure("figure-lens-kl", "Layerwise tuned-lens KL",
           "KL(final ‖ lens) in bits at each hidden state, tied against untied: higher in early layers means "
           "harder to read.", lens_kl, has("lens_kl"), stages=("lens",)),
    Figure("sweep-loss-gap", "Untied minus tied loss against width (sweep)",
           "Loss gap per width with 95% intervals over seeds; below zero the untied twin is ahead. Beside it the "
           "gap against a tied model with the untied twin's parameter count; shaded: the gap's learning-rate "
           "sensitivity.", sweep_gap, kind("sweep"), stages=("sweep",)),
    Figure("sweep-bias", "Output-likeness against width (sweep)",
           "Bias (O→T minus I→T alignment, and overlap) per width: positive means the tied matrix stays "
           "output-like.", sweep_bias, kind("sweep"), stages=("sweep",)),
    Figure("table-sweep", "Every sweep cell", "Every cell of the width sweep: mean ± sample std over seeds.",
           sweep_table, kind("sweep"), stages=("sweep",)),
)
FIGURES += mechanism.FIGURES


def contributed() -> tuple[Figure, ...]:
    """The figures the registry's analyses bring in modules of their own: ``FIGURES`` of
    ``explorer.render.<analysis name>``, where there is such a module, in the registry's order."""
    out: list[Figure] = []
    for analysis in registry.ANALYSES:
        module = f"{__package__}.{analysis.name}"
        if importlib.util.find_spec(module) is not None:
            out += importlib.import_module(module).FIGURES
    return tuple(out)


FIGURES += contributed()
"""The figures above, the mechanism lab's, then those the analyses bring (:func:`contributed`)."""
BY_NAME = {f.name: f for f in FIGURES}
BY_ANALYSIS = {a.name: tuple(f for f in FIGURES if a.name in f.stages) for a in registry.ANALYSES}
"""The figures that draw each analysis's tables (by the stages they name)."""


def drawn_on(ref: read.CacheRef, page: str) -> list[Figure]:
    """The figures analyses brought for ``page`` (their ``page``) that this cache has the data for."""
    return [f for f in available(ref) if f.page == page]


def available(ref: read.CacheRef) -> list[Figure]:
    """The figures and tables this cache has the data for, in the registry's order."""
    s = read.summary(ref)
    out = []
    for f in FIGURES:
        try:
            if f.available(ref, s):
                out.append(f)
        except Exception:  # a table the cache lacks reads as "not available"
            continue
    return out


def matrix_legend() -> str:
    return "; ".join(f"{m} = {name}" for m, name in MATRIX_NAMES.items())
