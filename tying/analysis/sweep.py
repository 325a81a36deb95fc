"""The width sweep's pure parts: the grid, shards, per-cell spread and the crossing point.

A sweep trains tied and untied twins (the toy lab's code path) in every cell of a grid of
widths (``d_model``), vocabulary sizes and seeds, and asks where, if anywhere, untying
starts to pay off: where the loss gap (untied minus tied eval loss) changes sign.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tying.errors import UserError

# the per-cell numbers (columns of the sweep table and keys of `summary --json`'s rows)
METRICS = ("linear_o_t", "linear_i_t", "overlap_t_o", "overlap_t_i", "output_share_early",
           "output_share_early_proxy", "eval_loss_tied", "eval_loss_untied", "params_tied", "params_untied",
           "embedding_share_tied", "embedding_share_untied")


@dataclass(frozen=True)
class Cell:
    d_model: int
    vocab_size: int
    seed: int

    @property
    def stage(self) -> str:
        """The cell's entry in the cache's stages table."""
        return f"sweep:d{self.d_model}:v{self.vocab_size}:s{self.seed}"


def parse_ints(text: str, what: str) -> list[int]:
    """'32,64,128' -> [32, 64, 128]; one-line errors for empty lists, junk, non-positive or repeated values."""
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or all(not p for p in parts):
        raise UserError(f"{what}: give at least one value (e.g. 32,64)")
    values = []
    for p in parts:
        if not p.lstrip("-").isdigit():
            raise UserError(f"{what}: '{p}' is not a whole number")
        values.append(int(p))
    if any(v < 1 for v in values):
        raise UserError(f"{what}: every value must be positive, got {','.join(map(str, values))}")
    dup = sorted({v for v in values if values.count(v) > 1})
    if dup:
        raise UserError(f"{what}: {','.join(map(str, dup))} given more than once")
    return values


def check_grid(widths: Sequence[int], vocab_sizes: Sequence[int], seeds: int, n_heads: int) -> None:
    """A grid every cell of which can be trained; UserError naming the first problem."""
    if not widths or not vocab_sizes:
        raise UserError("the grid is empty: give at least one width and one vocabulary size")
    bad = [w for w in widths if w % n_heads]
    if bad:
        raise UserError(f"--d-model {','.join(map(str, bad))} not divisible by --n-heads {n_heads}")
    small = [v for v in vocab_sizes if v <= 256]
    if small:
        raise UserError(f"--vocab-size must exceed the 256 byte tokens, got {','.join(map(str, small))}")
    if seeds < 1:
        raise UserError(f"--seeds must be at least 1, got {seeds}")


def grid(widths: Sequence[int], vocab_sizes: Sequence[int], seeds: int) -> list[Cell]:
    """Every cell, in a fixed order (vocabulary, width, seed): the order shards are cut from."""
    return [Cell(int(w), int(v), s) for v in sorted(vocab_sizes) for w in sorted(widths) for s in range(seeds)]


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """'2/8' -> (2, 8): shard 2 of 8, counted from 0 (a job array's index); None for no sharding."""
    if text is None:
        return None
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise UserError(f"--shard wants i/n (e.g. 0/4), got '{text}'") from None
    if n < 1 or not 0 <= i < n:
        raise UserError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard_cells(cells: Sequence[Cell], shard: tuple[int, int] | None) -> list[Cell]:
    """The cells one shard trains: every n-th cell from the i-th (cells alternate in cost, so
    shards even out). Over all i they cover the grid exactly once."""
    if shard is None:
        return list(cells)
    i, n = shard
    return [c for k, c in enumerate(cells) if k % n == i]


def cell_cost(cell: Cell, n_layers: int) -> float:
    """A rough relative cost of training one cell's twins (parameters touched per step)."""
    d, v = cell.d_model, cell.vocab_size
    return 2 * (12 * n_layers * d * d + 2 * v * d)


PLOTTED = ("bias_linear", "bias_overlap", "loss_gap")


def by_cell(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and count over seeds per (d_model, vocab_size), with the two biases
    (linear O->T minus I->T; overlap T~O minus T~I) and the loss gap (untied minus tied)
    computed per seed first, and the 95% half-width of each of those three means
    (``<col>_half``; inf with one seed)."""
    d = rows.assign(bias_linear=rows["linear_o_t"] - rows["linear_i_t"],
                    bias_overlap=rows["overlap_t_o"] - rows["overlap_t_i"],
                    loss_gap=rows["eval_loss_untied"] - rows["eval_loss_tied"])
    cols = ["bias_linear", "bias_overlap", "loss_gap", *METRICS]
    g = d.groupby(["vocab_size", "d_model"], sort=True)[cols]
    mean, std, n = g.mean(), g.std(ddof=1), g.size()
    out = mean.join(std.add_suffix("_std")).assign(n=n).reset_index()
    for col in PLOTTED:
        out[f"{col}_half"] = [half_width(s, int(k)) for s, k in zip(out[f"{col}_std"], out["n"])]
    return out


T_95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def half_width(std: float, n: int) -> float:
    """Half-width of a 95% t-interval of a mean over ``n`` seeds (inf with one seed)."""
    if n < 2 or std is None or not np.isfinite(std):
        return math.inf
    return T_95.get(n - 1, 1.96) * std / math.sqrt(n)


def crossing(x: Sequence[float], mean: Sequence[float], half: Sequence[float], *, log_x: bool = True) -> dict:
    """Where a mean curve changes sign, if its spread lets one name it.

    ``x`` increasing (widths or embedding shares), ``mean`` the loss gap at each, ``half``
    the half-width of its interval. A crossing is named between neighbours i, i+1 whose
    intervals both exclude 0 on opposite sides; its position is the linear interpolation
    of the means (in log x for widths). Returns {"x": value or None, "between": (x_i, x_i+1)
    or None, "why": a sentence}.
    """
    x, m, h = (np.asarray(a, dtype=float) for a in (x, mean, half))
    if len(x) < 2:
        return {"x": None, "between": None, "why": "one point: no crossing can be read off"}
    sure = np.where(m - h > 0, 1, np.where(m + h < 0, -1, 0))
    for i in range(len(x) - 1):
        if sure[i] != 0 and sure[i + 1] == -sure[i]:
            a, b = (np.log2(x[i]), np.log2(x[i + 1])) if log_x else (x[i], x[i + 1])
            t = m[i] / (m[i] - m[i + 1])
            pos = a + t * (b - a)
            return {"x": float(2 ** pos if log_x else pos), "between": (float(x[i]), float(x[i + 1])),
                    "why": "the gap changes sign and both neighbours' intervals exclude zero"}
    signs = np.sign(m)
    unsure = int((sure == 0).sum())
    if (signs > 0).all() or (signs < 0).all():
        side = "positive" if signs[0] > 0 else "negative"
        verdict = "untying never pays off" if signs[0] > 0 else "untying pays off"
        if unsure == 0:
            why = f"the gap is {side} at every point, every interval excluding zero: {verdict} in this range"
        else:
            why = (f"the mean gap is {side} at every point ({verdict} on average), but at {unsure} of {len(x)} "
                   "points the interval over seeds includes zero")
    else:
        why = "the mean gap changes sign, but the spread over seeds does not let one name where"
    return {"x": None, "between": None, "why": why}
