"""A toy lab's figures over its seeds, from a cache's summary (pure functions): each per-seed
metric's mean, sample std and number of seeds, the headline numbers as a table, whether
each of the paper's directions holds seed by seed, and the note a page showing seed 0's
twins gives.
"""

from __future__ import annotations

import re

import pandas as pd

from explorer.render import identity
from tying.cache.summary_types import Summary

SEED_METRICS = {("linear", "held_out"): "{c} linear held-out", ("linear", "in_sample"): "{c} linear in-sample",
                ("identity", "in_sample"): "{c} identity", ("identity_raw", "in_sample"): "{c} identity (raw rows)"}
"""The per-seed metric (seed_metrics) of a map and split, ``{c}`` the comparison ("O->T")."""


def seed_stat(s: Summary, metric: str) -> tuple[float, float, int] | None:
    """(mean, sample std, seeds) of one per-seed metric of a toy lab with more than one seed, else None."""
    v = (s.seeds or {}).get(metric)
    if not v or v.get("n", 0) < 2 or v.get("mean") is None:
        return None
    return v["mean"], v.get("std") or 0.0, v["n"]


def seed_text(stat: tuple[float, float, int] | None) -> str | None:
    """'0.865 ± 0.009' (mean ± sample std over seeds), or None."""
    return None if stat is None else f"{stat[0]:.3f} ± {stat[1]:.3f}"


def n_seeds(s: Summary) -> int:
    """The seeds a toy lab's per-seed table holds (1 when it holds none)."""
    return max([v.get("n", 1) for v in (s.seeds or {}).values()] or [1])


def one_seed_note(s: Summary, shown: dict[str, str]) -> str | None:
    """Where a page shows seed 0's twins of a several-seed toy lab: one sentence naming the seed and
    giving the mean over seeds beside it (the figure the Overview and the tour show). ``shown``:
    label -> per-seed metric; None when the cache has one seed or none of the metrics."""
    parts = [f"{label} {seed_text(seed_stat(s, m))}" for label, m in shown.items() if seed_stat(s, m)]
    if not parts:
        return None
    return (f"These are seed 0's twins (the pair the per-token views show). Mean ± sample std over the "
            f"{n_seeds(s)} seeds, the figure the Overview and the tour show: " + ", ".join(parts) + ".")


def arrows(text: str) -> str:
    """A summary's ASCII arrow as the pages write it: 'O->T' -> 'O→T'."""
    return str(text).replace("->", "→")


SEED_METRIC_LABELS = {"output share early": "output share early (exact input)",
                      "output share overall": "output share overall (exact input)"}
"""The toy lab's seed metrics whose stored names do not say their input side (the exact norm)."""


def run_words(text: str) -> str:
    """A run's stored name in words: 'tied_scaled_x5' reads 'tied (input gradient x5)'."""
    return re.sub(r"tied_scaled_x(\d+(?:\.\d+)?)", r"tied (input gradient ×\1)", text)


@identity.per_object
def seeds(s: Summary) -> pd.DataFrame:
    """Headline numbers over seeds: mean, sample std (blank with one seed), number of seeds."""
    rows = [{"metric": run_words(arrows(SEED_METRIC_LABELS.get(m, m))), "mean": v["mean"], "std": v["std"] if v["n"] > 1 else None, "seeds": v["n"]}
            for m, v in (s.seeds or {}).items()]
    out = pd.DataFrame(rows, columns=["metric", "mean", "std", "seeds"])
    if len(out) and (out["seeds"] <= 1).all():  # one seed: no spread to show, no column of blanks
        out = out.drop(columns="std")
    return out


@identity.per_object
def directions(s: Summary) -> pd.DataFrame:
    """Whether each of the paper's directions holds, seed by seed."""
    rows = []
    for claim, d in (s.directions or {}).items():
        row = {"the paper's direction": arrows(claim)}
        row |= {f"seed {seed}": "holds" if ok else "fails" for seed, ok in zip(d["seeds"], d["holds"])}
        rows.append(row)
    return pd.DataFrame(rows)
