"""The paper's tables beside a cache's, built from its summary (pure functions): Table 1
(alignment), Table 5 (overlap@10), Tables 2 and 6 (input-gradient scaling), and where each
published figure comes from.

Each returns a DataFrame whose columns say what the numbers are: this cache's values, and
the paper's under a label that names the paper's pair ("paper (olmo)" when a toy-lab cache
is set beside it). A several-seed toy lab's figures are seed 0's, with the mean ± std over
its seeds beside them (:mod:`~explorer.render.seed_tables`).
"""

from __future__ import annotations

import pandas as pd

from explorer.render import identity
from explorer.render.seed_tables import SEED_METRICS, n_seeds, seed_stat, seed_text
from tying.cache import reference, sentences
from tying.cache.schema import (
    CEILING_PAIRS,
    MATRIX_PAIRS,
    METHOD_LABELS,
    TABLE1_COMPARISONS,
    TABLE1_METHODS,
    display_comparison,
    pair_label,
)
from tying.cache.summary_types import Summary


def paper_label(s: Summary) -> str:
    """The label of the paper's figures beside this cache's (empty when the summary has none)."""
    return sentences.paper_label(s.paper) if s.paper is not None else ""


def _quoted(x: float | None) -> str:
    """A paper's figure as text: three decimals, or a dash where the paper has no such number."""
    return "—" if x is None else f"{x:.3f}"


@identity.per_object
def table1(s: Summary) -> pd.DataFrame:
    """Table 1, one row per comparison and map: in-sample, held-out, and the paper's value (as
    text). A several-seed toy lab's rows are seed 0's twins; the mean ± std over its seeds follows
    as text where the seeds were measured with that map and split."""
    paper = (s.paper.table1 if s.paper else None) or {}
    label = paper_label(s)
    seeded = n_seeds(s) > 1
    tag = " (seed 0)" if seeded else ""
    rows = []
    for comp in TABLE1_COMPARISONS:
        for meth in TABLE1_METHODS:
            cell = s.alignment.get(comp, {}).get(meth)
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


@identity.per_object
def table5(s: Summary) -> pd.DataFrame:
    """overlap@10 per matrix pair with the paper's value (Table 5); a several-seed toy lab's
    figure is seed 0's, with the mean ± std over its seeds beside it."""
    paper = (s.paper.table5 if s.paper else None) or {}
    label = paper_label(s)
    seeded = n_seeds(s) > 1
    rows = []
    for a, b in MATRIX_PAIRS + CEILING_PAIRS:
        p = pair_label(a, b)
        if (a, b) in CEILING_PAIRS and p not in s.overlap_at_10:
            continue
        row = {"matrices": p, "overlap@10" + (" (seed 0)" if seeded else ""): s.overlap_at_10.get(p)}
        if seeded:
            row[f"mean ± std of {n_seeds(s)} seeds"] = seed_text(seed_stat(s, f"overlap@10 {p}")) or ""
        if paper:
            row[label] = paper.get(p)
        rows.append(row)
    return pd.DataFrame(rows)


@identity.per_object
def regime(s: Summary) -> pd.DataFrame:
    """A toy lab's regime table (:func:`tying.cache.regime.regime_table`): empty for other caches
    and for one trained before the ceiling."""
    from tying.cache.regime import BRIEF, regime_table

    short = {"what T is compared with": "T against", "→T linear in-sample": "→T linear", "I→T linear in-sample":
             "I→T linear", "overlap@10 with T": "overlap@10", "CKA with T": "CKA"}
    return pd.DataFrame(regime_table(s, BRIEF)).rename(columns=short)


@identity.per_object
def published_sources(s: Summary) -> pd.DataFrame:
    """Where each published figure comes from: file, the authors' repository and commit, or the paper's table."""
    rows = []
    for src in s.sources or []:
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
