"""Gradient-provenance logs of real training runs (CSV, one row per logged step), read and checked.

Used by `precompute grads` and `precompute paper`. The columns default to the paper's
authors' names; an unreadable file, missing columns, no numeric row or negative norms
raise :class:`~tying.errors.UserError` with one line naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tying.errors import UserError, first_line

DEFAULT_COLUMNS = {"step": "step", "input": "embedding_grad_l2_norm", "output": "output_proj_grad_l2_norm"}

EFFECTIVE_SUFFIX = "_effective"


def effective_columns(columns, input_column: str, output_column: str) -> tuple[str, str, str]:
    """(input column, output column, 'effective' | 'plain'): the ``*_effective`` pair when the log has both."""
    cols = set(map(str, columns))
    eff_in, eff_out = input_column + EFFECTIVE_SUFFIX, output_column + EFFECTIVE_SUFFIX
    if eff_in in cols and eff_out in cols:
        return eff_in, eff_out, "effective"
    return input_column, output_column, "plain"


def read_provenance_csv(csv, *, step_column: str = DEFAULT_COLUMNS["step"],
                        input_column: str = DEFAULT_COLUMNS["input"], output_column: str = DEFAULT_COLUMNS["output"],
                        loss_column: str | None = None) -> tuple[pd.DataFrame, dict]:
    """A provenance CSV as train_log rows (step, grad_input_norm, grad_output_norm, ...), checked.

    One row per logged step; ``<column>_effective`` columns (norms after input-gradient
    scaling) are read instead of the plain ones when the log has both.
    Returns (rows, how): ``how`` names the columns read and ``input_norm``
    ('effective' when the ``*_effective`` columns were there, else 'plain').
    """
    p = Path(csv)
    if not p.is_file():
        raise UserError(f"CSV file '{csv}' does not exist")
    try:
        df = pd.read_csv(p)
    except Exception as exc:  # pandas raises many kinds for unreadable files
        raise UserError(f"cannot read '{csv}' as CSV: {first_line(exc)}") from None
    in_col, out_col, kind = effective_columns(df.columns, input_column, output_column)
    wanted = {"step": step_column, "grad_input_norm": in_col, "grad_output_norm": out_col}
    if loss_column:
        wanted["loss"] = loss_column
    missing = [c for c in wanted.values() if c not in df.columns]
    if missing:
        raise UserError(f"'{csv}' has no column(s) {', '.join(missing)}; it has {', '.join(map(str, df.columns))} "
                        f"(name them with --step-column/--input-column/--output-column)")
    out = pd.DataFrame({k: pd.to_numeric(df[c], errors="coerce") for k, c in wanted.items()})
    if out.empty:
        raise UserError(f"'{csv}' has no rows")
    bad = out.isna().any(axis=1) | ~np.isfinite(out.to_numpy(dtype=float)).all(axis=1)
    if bad.all():
        raise UserError(f"'{csv}' has no row with numeric, finite values in {', '.join(wanted.values())}")
    out = out[~bad]
    if (out[["grad_input_norm", "grad_output_norm"]] < 0).any().any():
        raise UserError(f"'{csv}' has negative gradient norms")
    out = out.sort_values("step").drop_duplicates("step", keep="last")
    out["step"] = out["step"].astype(np.int64)
    out["grad_total_norm"] = np.nan  # the two parts' vector sum is not in the log
    if "loss" not in out:
        out["loss"] = np.nan
    return out, {"columns": {k: v for k, v in wanted.items()}, "input_norm": kind}


