"""The mechanism lab's pure parts: its arms, and what each arm's runs say with intervals over seeds.

Why does the tied matrix T turn output-like? The output side's gradient differs from the input
side's in **size** (it is larger) and in **reach** (the softmax sends it to every row at every
step; the input lookup only to the rows of tokens in the batch), and AdamW normalises every
coordinate. The lab (`precompute mechanism`) trains tied twins that remove one difference at a
time (:data:`ARMS`) and measures T's **output bias** against the untied twin of the same seed:
``bias`` = O->T minus I->T, the in-sample linear map's mean cosine (the paper's protocol), and
``bias_overlap`` = overlap@10 T~O minus T~I.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tying.analysis.sweep import t_interval
from tying.errors import UserError


@dataclass(frozen=True)
class Arm:
    name: str
    label: str  # how the page, the claims and the figures name it
    about: str  # what it changes, one line
    size: bool = False  # the output side rescaled to the input side's norm
    reach: bool = False  # the output side masked to the rows of the batch's input tokens
    optimizer: str = "adamw"
    input_grad_scale: float = 1.0
    rerun: bool = False  # the baseline recipe from another start and batch order (the null arm)
    update: bool = False  # the output side's AdamW update rescaled to the input side's (UpdateBalance)


ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("baseline", "baseline", "the tied twin as in the demo (AdamW)"),
    Arm("null", "null (rerun)", "the baseline recipe from another start and batch order: what a rerun alone changes, "
        "the yardstick every arm's effect is read against", rerun=True),
    Arm("size", "size balanced (gradient)", "the output-side gradient rescaled to the input side's norm at every step, "
        "before AdamW normalises each coordinate (reach kept)", size=True),
    Arm("size_update", "size balanced (update)", "separate AdamW moments for the input-side and output-side parts of "
        "T's gradient, the output side's update rescaled to the input side's norm at every step (reach kept)",
        update=True),
    Arm("reach", "reach matched", "the output-side gradient masked to the rows of the batch's input tokens (size on "
        "those rows kept)", reach=True),
    Arm("both", "size and reach", "masked to the batch's rows, then rescaled to the input side's norm", size=True,
        reach=True),
    Arm("sgd", "SGD", "the baseline trained with SGD and momentum 0.9 (no per-coordinate normalisation), its "
        "learning rate chosen on the validation split, for --sgd-steps, measured against untied twins trained "
        "by SGD alike", optimizer="sgd"),
    Arm("input_x5", "input x5", "the demo's reference arm: the input-side gradient multiplied by 5 (Table 2)",
        input_grad_scale=5.0),
)}
"""Every arm, in the page's order."""

UNTIED = "untied"
"""The run every AdamW arm of a seed is measured against (the untied twin, trained once per seed)."""

UNTIED_SGD = "untied_sgd"
"""The untied twin trained by SGD (the SGD arm's rate and steps), the SGD arm's twin."""


def by_sgd(run: str) -> bool:
    """Whether a run (an arm or an untied twin) is trained by SGD: the SGD arm and its twin."""
    return run == UNTIED_SGD or (run in ARMS and ARMS[run].optimizer == "sgd")


def twin_of(arm: str) -> str:
    """The untied run an arm is measured against: the SGD twin for the SGD arm, else the AdamW one."""
    return UNTIED_SGD if by_sgd(arm) else UNTIED

RUN_COLUMNS = ("arm", "seed", "optimizer", "lr", "steps", "linear_o_t_in", "linear_i_t_in", "bias",
               "linear_o_t", "linear_i_t", "overlap_t_o", "overlap_t_i", "bias_overlap", "output_share_early",
               "output_share_early_proxy", "output_share_applied_early", "cos_start_tied", "cos_start_input_untied",
               "eval_loss", "seconds", "identity_raw_o_t", "unigram_loss", "update_norm_gap")
"""One row per run (arm and seed) of the ``mechanism`` table; the untied twin's rows carry its
loss and how far its I moved, the measures against itself left empty."""

CURVE_COLUMNS = ("arm", "seed", "step", "linear_o_t_in", "linear_i_t_in", "bias")
"""The bias over training: T at a snapshot against the untied twin's I and O at the same step."""

MEASURES = {"bias": "O→T minus I→T (linear, in-sample)", "bias_overlap": "overlap@10 T~O minus T~I"}
"""The two readings of T's output bias, the page's and the claims'."""


def parse_arms(names) -> list[str]:
    """Arm names (a list, or a comma-separated string) in :data:`ARMS`' order; UserError naming an
    unknown one."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in ARMS]
    if unknown:
        raise UserError(f"--arms: unknown arm {unknown[0]!r}; choose from {', '.join(ARMS)}")
    if not names:
        raise UserError(f"--arms: give at least one arm ({', '.join(ARMS)})")
    return [a for a in ARMS if a in set(names)]


def interval(values) -> tuple[int, float, float, float]:
    """(n, mean, lo, hi): the 95% t-interval of the mean of the finite ``values`` (lo = hi = nan
    with fewer than two)."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return 0, float("nan"), float("nan"), float("nan")
    if len(x) == 1:
        return 1, float(x[0]), float("nan"), float("nan")
    return (len(x), *t_interval(x))


def per_arm(runs: pd.DataFrame, measure: str = "bias") -> pd.DataFrame:
    """Per arm (in :data:`ARMS`' order): the mean of ``measure`` over seeds and its 95% interval
    (columns arm, label, n, mean, lo, hi)."""
    rows = []
    for name, arm in ARMS.items():
        g = runs[runs["arm"] == name]
        if len(g) == 0 or measure not in g:
            continue
        n, mean, lo, hi = interval(g[measure].tolist())
        rows.append({"arm": name, "label": arm.label, "n": n, "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=["arm", "label", "n", "mean", "lo", "hi"])


def paired(runs: pd.DataFrame, a: str, b: str, measure: str = "bias") -> dict[int, float]:
    """{seed: measure of arm ``a`` minus arm ``b``} over the seeds both have (plain arrays: the
    effects call this eight times an arm, and a frame indexed per call cost 3 ms each)."""
    arm, seed = runs["arm"].to_numpy(), runs["seed"].to_numpy()
    value = runs[measure].to_numpy(dtype=float)
    x = dict(zip(seed[arm == a].tolist(), value[arm == a].tolist()))
    y = dict(zip(seed[arm == b].tolist(), value[arm == b].tolist()))
    return {int(s): x[s] - y[s] for s in sorted(x.keys() & y.keys()) if np.isfinite(x[s]) and np.isfinite(y[s])}


def mean_curves(curves: pd.DataFrame) -> pd.DataFrame:
    """The bias over training per arm: mean over seeds and 95% interval at every snapshot step
    (columns arm, label, step, n, mean, lo, hi)."""
    rows = []
    for (name, step), g in curves.groupby(["arm", "step"], sort=False):
        n, mean, lo, hi = interval(g["bias"].tolist())
        rows.append({"arm": name, "label": ARMS[name].label if name in ARMS else name, "step": int(step), "n": n,
                     "mean": mean, "lo": lo, "hi": hi})
    out = pd.DataFrame(rows, columns=["arm", "label", "step", "n", "mean", "lo", "hi"])
    order = {a: i for i, a in enumerate(ARMS)}
    return out.sort_values(["arm", "step"], key=lambda c: c.map(order) if c.name == "arm" else c, ignore_index=True)


# -- each arm's effect against the baseline, read against the null arm ------------------------------

READINGS = {"linear": ("linear_i_t_in", "linear_o_t_in", "linear map, in-sample"),
            "overlap": ("overlap_t_i", "overlap_t_o", "overlap@10")}
"""The two readings of where T lies: (its I-side column, its O-side column, the reading's name)."""

DIRECTIONS = {"toward_i": "toward I", "away_from_o": "away from O"}
"""An arm's two effects, each a paired difference against the baseline's T of the same seed:
*toward I* = the arm's I->T minus the baseline's; *away from O* = the baseline's O->T minus the
arm's. Positive: the arm moved T toward input-like structure, or away from output-like structure.
A bias (O->T minus I->T) can fall by either; only the first is T "turning input-like"."""

EFFECT_COLUMNS = ("arm", "label", "reading", "direction", "n", "mean", "lo", "hi", "band", "beyond")


def effect_values(runs: pd.DataFrame, arm: str, reading: str, direction: str) -> dict[int, float]:
    """{seed: the arm's effect} (:data:`DIRECTIONS`) on ``reading`` over the seeds the arm and the
    baseline both have."""
    i_col, o_col, _ = READINGS[reading]
    if direction == "toward_i":
        return paired(runs, arm, "baseline", i_col)
    return paired(runs, "baseline", arm, o_col)


def rerun_spread(runs: pd.DataFrame, column: str) -> float:
    """What a rerun alone changes in ``column``: the largest |null arm minus baseline| over the
    seeds both have (nan without null runs)."""
    x = [abs(v) for v in paired(runs, "null", "baseline", column).values()]
    return max(x) if x else float("nan")


def null_band(runs: pd.DataFrame, reading: str, direction: str) -> float:
    """The null arm's band for an effect: what a rerun alone changes in the column the effect reads
    (:func:`rerun_spread`). An arm's effect counts only where its interval lies beyond it."""
    i_col, o_col, _ = READINGS[reading]
    return rerun_spread(runs, i_col if direction == "toward_i" else o_col)


def beyond(lo: float, hi: float, band: float) -> int:
    """+1 where the interval [lo, hi] lies above ``band``, -1 below ``-band``, else 0; a band of nan
    (no null arm) counts as 0: the interval alone decides."""
    b = 0.0 if not np.isfinite(band) else band
    if np.isfinite(lo) and lo > b:
        return 1
    if np.isfinite(hi) and hi < -b:
        return -1
    return 0


def effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Every arm's effects (:data:`EFFECT_COLUMNS`): per arm measured against the baseline's twin
    (every AdamW arm but the baseline, the null arm included), reading and direction: the mean
    [95% interval] over seeds, the null arm's band and whether the interval lies beyond it."""
    rows = []
    for name, arm in ARMS.items():
        if name == "baseline" or arm.optimizer != "adamw" or name not in set(runs["arm"]):
            continue
        for reading in READINGS:
            for direction in DIRECTIONS:
                n, mean, lo, hi = interval(effect_values(runs, name, reading, direction).values())
                band = null_band(runs, reading, direction)
                rows.append({"arm": name, "label": arm.label, "reading": reading, "direction": direction, "n": n,
                             "mean": mean, "lo": lo, "hi": hi, "band": band, "beyond": beyond(lo, hi, band)})
    return pd.DataFrame(rows, columns=list(EFFECT_COLUMNS))
