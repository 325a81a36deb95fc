"""The toy lab's regime table: what T is compared with, shared start beside independent twins beside
the ceiling (a second tied run T'), each number the mean and 95% interval over the seeds of the
cache's per-seed table (``seed_metrics``). The docs' generated blocks and the Overview read it, so
no sentence types these numbers by hand."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tying.analysis.sweep import t_interval
from tying.cache.summary_types import SHARED_START, Summary

SHARED = " (shared start)"
"""The suffix of the shared-start control's per-seed metrics ("O->T linear in-sample (shared start)")."""


@dataclass(frozen=True)
class Row:
    label: str
    other: str  # the matrix set against T: "O" or "T'"
    suffix: str  # the per-seed metrics' suffix
    with_input: bool  # whether I->T and T~I are read too (an untied twin) or not (the ceiling)


ROWS = (
    Row("O, shared start (control)", "O", SHARED, True),
    Row("O, independent (paper's regime)", "O", "", True),
    Row("T', second tied run (ceiling)", "T'", "", False),
)

COLUMNS = (
    ("→T linear in-sample", "{x}->T linear in-sample"),
    ("I→T linear in-sample", "I->T linear in-sample"),
    ("→T linear held-out", "{x}->T linear held-out"),
    ("I→T linear held-out", "I->T linear held-out"),
    ("→T raw rows", "{x}->T identity (raw rows)"),
    ("overlap@10 with T", "overlap@10 T~{x}"),
    ("overlap@10 T~I", "overlap@10 T~I"),
    ("CKA with T", "CKA T~{x}"),
    ("spectral distance to T", "spectral T~{x}"),
)
"""(header, per-seed metric): ``{x}`` is the row's matrix (O or T'), set against T; the I columns are the
untied twin's input matrix (none for the ceiling)."""

BRIEF = ("→T linear in-sample", "I→T linear in-sample", "→T raw rows", "overlap@10 with T", "CKA with T")
"""The columns a page shows (the docs' table has them all)."""


def interval(s: Summary, metric: str) -> tuple[float, float, float, int] | None:
    """(mean, lo, hi, seeds) of a per-seed metric (lo = hi = mean with one seed); None where absent."""
    values = [v for v in ((s.seed_values or {}).get(metric) or {}).values() if v is not None]
    if not values:
        return None
    if len(values) == 1:
        return values[0], values[0], values[0], 1
    mean, lo, hi = t_interval(values)
    return mean, lo, hi, len(values)


def regime_table(s: Summary, columns=None) -> list[dict[str, str]]:
    """One dict per row of :data:`ROWS` the cache has: {"what T is compared with": label, header:
    "0.534 [0.520, 0.548]"} ('-' where the row has no such number), for the headers ``columns``
    (default: every one of :data:`COLUMNS`)."""
    out = []
    rows = ROWS
    if s.twins == SHARED_START:  # the cache's own twins shared the start: its plain metrics are the control's
        rows = (Row(ROWS[0].label, "O", "", True), ROWS[2])
    for row in rows:
        first = interval(s, COLUMNS[0][1].format(x=row.other) + row.suffix)
        if first is None:
            continue
        cells = {"what T is compared with": row.label}
        for header, metric in COLUMNS:
            if columns is not None and header not in columns:
                continue
            if "{x}" not in metric and not row.with_input:
                cells[header] = "-"
                continue
            got = interval(s, metric.format(x=row.other) + row.suffix)
            text = "-" if got is None else f"{got[0]:.3f}" + (f" [{got[1]:.3f}, {got[2]:.3f}]" if got[3] > 1 else "")
            cells[header] = text
        out.append(cells)
    return out


def seeds(s: Summary) -> int:
    """How many seeds the regime table is over."""
    got = interval(s, "O->T linear in-sample")
    return got[3] if got else 0


def ceiling_mean(s: Summary, metric: str, over) -> float | None:
    """The mean over the seeds ``over`` of the ceiling's per-seed ``metric`` (T' against T), None unless
    every one of those seeds has it."""
    c = {int(k): v for k, v in ((s.seed_values or {}).get(metric) or {}).items() if v is not None}
    return float(np.mean([c[k] for k in over])) if over and all(k in c for k in over) else None


def against(names: tuple[str, str], values: tuple[float, float], ceiling: float | None, ceiling_name: str,
             fmt: str = ".3f") -> str:
    """'O→T 0.534, 95% of the ceiling T'→T 0.562; I→T 0.292, 52%' (or 'O→T 0.534 vs I→T 0.292'
    without a ceiling): two numbers read against how alike two runs of T are."""
    (a, b), (x, y) = names, values
    if not ceiling:
        return f"{a} {x:{fmt}} vs {b} {y:{fmt}}"
    return f"{a} {x:{fmt}}, {x / ceiling:.0%} of the ceiling {ceiling_name} {ceiling:{fmt}}; {b} {y:{fmt}}, {y / ceiling:.0%}"


CEILING_NOTE = "The ceiling: T', a second tied run from another start, as alike as two runs of T are."
