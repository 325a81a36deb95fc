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

# per-cell numbers of the sweep's second protocol (issue 20); a cache written before it lacks them
EXTRA_METRICS = ("params_tied_matched", "n_layers_matched", "eval_loss_tied_matched", "unigram_loss", "bigram_loss",
                 "bigram_beta", "tokens_seen", "epochs", "lr_tied", "lr_untied", "lr_tied_matched")

# per-cell numbers of the third protocol (issue 29): the matched arm's shape, the in-sample linear
# map (the paper's protocol), how far the untied input matrix moved, the bigram's training tokens
THIRD_METRICS = ("d_ff", "d_ff_matched", "linear_o_t_in", "linear_i_t_in", "cos_start_input_untied",
                 "bigram_train_tokens")

# per-cell numbers of the fourth protocol (issue 48): the raw-row cosine of T with O (1: T and O
# share coordinates; near 0 for independent twins), every arm's training FLOPs per token
FOURTH_METRICS = ("identity_raw_o_t", "flops_tied", "flops_untied", "flops_tied_matched")

MATCH_TOLERANCE = 0.02
"""How far the parameter-matched tied model's count may be from the untied twin's (relative)."""


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


def llama_params(vocab_size: int, d_model: int, n_layers: int, *, d_ff: int | None = None, tied: bool = True) -> int:
    """Parameters of the toy lab's Llama (:func:`tying.toylab.model.toy_config`): per block the
    four attention projections (4 d^2, no biases, as many key/value heads as heads), the SwiGLU
    (3 d d_ff) and two RMSNorm weights (2 d); a final norm (d); one V x d matrix, two untied."""
    d, f = int(d_model), int(d_ff or 4 * d_model)
    return (1 if tied else 2) * vocab_size * d + n_layers * (4 * d * d + 3 * d * f + 2 * d) + d


def train_flops_per_token(vocab_size: int, d_model: int, n_layers: int, context: int, *, d_ff: int | None = None) -> int:
    """Floating-point operations of one training step per token of the toy lab's Llama: three
    times the forward pass's matrix products (the backward pass computes two products per forward
    one). Forward, per token: 2 FLOPs per weight of every projection (4 d^2 attention, 3 d d_ff
    SwiGLU per block) and of the unembedding (V d; the input lookup is free, so tied and untied
    twins cost the same), and 4 ``context`` d per block for the attention scores and their
    weighted sum over the full window (what the kernels compute before the causal mask)."""
    d, f = int(d_model), int(d_ff or 4 * d_model)
    forward = 2 * (n_layers * (4 * d * d + 3 * d * f) + vocab_size * d) + 4 * n_layers * int(context) * d
    return 3 * forward


def matched_d_ff(vocab_size: int, d_model: int, n_layers: int) -> int:
    """Feed-forward width of the parameter-matched tied model: the tied model with the twins'
    depth, width and V x d matrix whose SwiGLU layers are widened until its parameter count
    comes nearest the untied twin's.

    Wider feed-forward layers rather than more blocks (the second protocol's deeper model):
    at a few hundred steps a deeper model trains worse than the twins for reasons of depth
    alone, so its gap measured depth, not parameters. Widening keeps the depth, the residual
    width and the tied matrix (V x d) of the twins. Each extra unit of d_ff adds 3 d
    parameters per block and the untied twin's extra matrix is V d, so d_ff grows by about
    V / (3 L) at every width; the nearest integer misses by at most 1.5 d L parameters.
    """
    base = 4 * int(d_model)
    target = llama_params(vocab_size, d_model, n_layers, tied=False)
    guess = base + round(vocab_size / (3 * n_layers))
    return min(range(max(1, guess - 2), guess + 3),
               key=lambda f: abs(llama_params(vocab_size, d_model, n_layers, d_ff=f) - target))


def match_error(vocab_size: int, d_model: int, n_layers: int) -> float:
    """Relative distance of the matched tied model's parameter count from the untied twin's."""
    target = llama_params(vocab_size, d_model, n_layers, tied=False)
    got = llama_params(vocab_size, d_model, n_layers, d_ff=matched_d_ff(vocab_size, d_model, n_layers))
    return abs(got - target) / target


def budget_steps(tokens: float, batch_size: int, context: int) -> int:
    """Optimiser steps that read ``tokens`` training tokens (at least 2)."""
    return max(2, int(math.ceil(tokens / (batch_size * context))))


# -- baselines on the evaluation windows ------------------------------------------------------------

def window_pairs(tokens: np.ndarray, context: int, max_windows: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(previous token, target) of every prediction the eval loss scores on ``tokens``: the
    windows of :func:`tying.toylab.train.evaluate_loss` (first ``max_windows`` windows of
    ``context + 1`` at stride ``context``) have targets ``tokens[1 : n * context + 1]`` and each
    target's previous token lies in its window."""
    n = min(max_windows, (len(tokens) - 1) // context)
    t = np.asarray(tokens[: n * context + 1], dtype=np.int64) if n > 0 else np.zeros(0, np.int64)
    return t[:-1], t[1:]


def unigram_probs(train: np.ndarray, vocab_size: int, k: float = 1.0) -> np.ndarray:
    """Add-k (Laplace for k = 1) unigram probabilities from the training tokens: (c(b) + k) / (N + k V)."""
    counts = np.bincount(np.asarray(train, dtype=np.int64), minlength=vocab_size).astype(float)
    return (counts + k) / (counts.sum() + k * vocab_size)


def unigram_loss(train: np.ndarray, targets: np.ndarray, vocab_size: int, k: float = 1.0) -> float:
    """Mean nats per target of the add-k unigram model fitted on ``train``."""
    p = unigram_probs(train, vocab_size, k)
    return float(-np.log(p[np.asarray(targets, dtype=np.int64)]).mean())


def bigram_loss(train: np.ndarray, prev: np.ndarray, targets: np.ndarray, vocab_size: int, beta: float,
                k: float = 1.0) -> float:
    """Mean nats per target of a bigram model fitted on ``train``, interpolated with the add-k
    unigram by a Dirichlet prior of strength ``beta``:
    p(b | a) = (c(a, b) + beta p_uni(b)) / (c(a) + beta), with c(a, b) the count of a followed by
    b and c(a) the count of a followed by anything, both in ``train``. An unseen ``a`` falls back
    to the unigram; ``beta`` -> 0 is the bare bigram, -> inf the unigram."""
    train = np.asarray(train, dtype=np.int64)
    prev, targets = np.asarray(prev, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    p_uni = unigram_probs(train, vocab_size, k)
    pair = train[:-1] * vocab_size + train[1:]
    keys, counts = np.unique(pair, return_counts=True)
    want = prev * vocab_size + targets
    pos = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
    c_ab = np.where((len(keys) > 0) & (keys[pos] == want), counts[pos], 0) if len(keys) else np.zeros(len(want))
    c_a = np.bincount(train[:-1], minlength=vocab_size).astype(float)[prev]
    return float(-np.log((c_ab + beta * p_uni[targets]) / (c_a + beta)).mean())


BETAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
"""The prior strengths :func:`fit_beta` tries."""


def fit_beta(train: np.ndarray, prev: np.ndarray, targets: np.ndarray, vocab_size: int) -> float:
    """The :data:`BETAS` value with the lowest bigram loss on (prev, targets): validation pairs,
    never the evaluation windows."""
    return min(BETAS, key=lambda b: bigram_loss(train, prev, targets, vocab_size, b))


PLOTTED = ("bias_linear", "bias_linear_in", "bias_overlap", "loss_gap", "loss_gap_matched", "eval_loss_tied", "eval_loss_untied",
           "eval_loss_tied_matched")


def by_cell(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample std and count over seeds per (d_model, vocab_size), with the two biases
    (linear O->T minus I->T, held-out and, from the third protocol, in-sample ``bias_linear_in``;
    overlap T~O minus T~I) and the loss gap (untied minus tied) computed per seed first, and the 95% half-width of each :data:`PLOTTED` mean
    (``<col>_half``; inf with one seed). With the second protocol's columns also the gap
    against the parameter-matched tied model (``loss_gap_matched``: untied minus matched
    tied); columns a cache lacks are left out."""
    d = rows.assign(bias_linear=rows["linear_o_t"] - rows["linear_i_t"],
                    bias_overlap=rows["overlap_t_o"] - rows["overlap_t_i"],
                    loss_gap=rows["eval_loss_untied"] - rows["eval_loss_tied"])
    if "eval_loss_tied_matched" in d:
        d["loss_gap_matched"] = d["eval_loss_untied"] - d["eval_loss_tied_matched"]
    if "linear_o_t_in" in d:
        d["bias_linear_in"] = d["linear_o_t_in"] - d["linear_i_t_in"]
    cols = [c for c in ("bias_linear", "bias_linear_in", "bias_overlap", "loss_gap", "loss_gap_matched", *METRICS,
                        *EXTRA_METRICS, *THIRD_METRICS, *FOURTH_METRICS) if c in d]
    d = d.assign(**{c: pd.to_numeric(d[c], errors="coerce").astype(float) for c in cols})  # NULL counts: NaN
    g = d.groupby(["vocab_size", "d_model"], sort=True)[cols]
    mean, std, n = g.mean(), g.std(ddof=1), g.size()
    out = mean.join(std.add_suffix("_std")).assign(n=n).reset_index()
    for col in (c for c in PLOTTED if c in out):
        out[f"{col}_half"] = [half_width(s, int(k)) for s, k in zip(out[f"{col}_std"], out["n"])]
    return out


def t_quantile(n: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t with ``n - 1`` degrees of freedom (the
    multiplier of std / sqrt(n) in a t-interval of a mean over ``n`` values), for every n >= 2."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, int(n) - 1))


def half_width(std: float, n: int) -> float:
    """Half-width of a 95% t-interval of a mean over ``n`` seeds (inf with one seed)."""
    if n < 2 or std is None or not np.isfinite(std):
        return math.inf
    return t_quantile(n) * std / math.sqrt(n)


def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, lo, hi): the 95% t-interval of the mean of ``values`` (at least two)."""
    x = np.asarray(values, dtype=float)
    mean, half = float(x.mean()), half_width(float(x.std(ddof=1)), len(x))
    return mean, mean - half, mean + half


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
            sure_side = f"; at the other {len(x) - unsure} it is {side} ({verdict} there)" if unsure < len(x) else ""
            why = (f"at {unsure} of {len(x)} points the 95% interval over seeds includes zero, so no claim is made "
                   f"there{sure_side}")
    else:
        why = "the mean gap changes sign, but the spread over seeds does not let one name where"
    return {"x": None, "between": None, "why": why}


# -- the learning-rate probes ----------------------------------------------------------------------

PROBE_COLUMNS = ("d_model", "vocab_size", "arm", "lr", "seed", "steps", "loss")
"""Columns of the ``lr_probe`` table: one row per probe run (validation loss in nats)."""


def chosen_rates(probes: pd.DataFrame) -> dict[str, float]:
    """Each arm's rate: the probe minimum (mean over the probe seeds), a finite loss only; an arm
    whose every probe diverged gets the grid's smallest rate."""
    out = {}
    for arm, g in probes.groupby("arm", sort=False):
        mean = g.groupby("lr")["loss"].mean()
        ok = mean[np.isfinite(mean)]
        out[str(arm)] = float(ok.idxmin()) if len(ok) else float(mean.index.min())
    return out


def _neighbours(rates: Sequence[float], rate: float) -> list[float]:
    """The grid rates next to ``rate`` (one below, one above where the grid has them)."""
    r = sorted(rates)
    i = r.index(rate)
    return [r[j] for j in (i - 1, i + 1) if 0 <= j < len(r)]


def lr_sensitivity(probes: pd.DataFrame, a: str = "untied", b: str = "tied") -> dict | None:
    """How the probes' loss gap (arm ``a`` minus arm ``b``) moves when one arm's rate moves one
    step of the grid from its chosen rate, the other's kept.

    ``probes``: the ``lr_probe`` rows of one cell (d_model, vocab_size). Returns {"gap": the probe
    gap at the chosen rates, "low"/"high": the smallest and largest probe gap over the chosen
    pair and each one-step move, as shifts from "gap" (low <= 0 <= high)}, or None when an arm
    has no probes or one rate only. Added to a cell's mean gap it gives the page's sensitivity
    band: how much the gap depends on the rate choice, in the probes' units (shorter runs)."""
    if probes is None or not len(probes):
        return None
    by = {arm: g.groupby("lr")["loss"].mean() for arm, g in probes.groupby("arm")}
    if a not in by or b not in by or len(by[a]) < 2 or len(by[b]) < 2:
        return None
    chosen = chosen_rates(probes)
    la, lb = chosen[a], chosen[b]
    gap = float(by[a][la] - by[b][lb])
    moves = [float(by[a][x] - by[b][lb]) for x in _neighbours(list(by[a].index), la)]
    moves += [float(by[a][la] - by[b][y]) for y in _neighbours(list(by[b].index), lb)]
    moves = [m for m in moves if np.isfinite(m)]
    return {"gap": gap, "low": min([gap, *moves]) - gap, "high": max([gap, *moves]) - gap}
