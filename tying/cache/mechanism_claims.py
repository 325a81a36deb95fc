"""The mechanism lab's claims (`precompute mechanism`): why T turns output-like.

Each arm changes one thing in the baseline's training of T (the same seed's start and batches);
the null arm trains the baseline recipe again from another start and batch order. Against the
baseline's T of the same seed every arm has two effects (:data:`tying.analysis.mechanism.DIRECTIONS`):
*toward I* (I→T rises) and *away from O* (O→T falls), each on two readings (the in-sample linear
map, the paper's protocol, and overlap@10), each a mean [95% interval] over seeds read against
the null arm's band (the largest change a rerun alone made: :func:`tying.analysis.mechanism.null_band`).

* ``mechanism_size``, ``mechanism_update``, ``mechanism_reach``: a reading **holds** where T moves
  toward I beyond the band; it **fails** where T moves away from I beyond it; it is **mixed** where
  only O→T falls beyond it ("T left O without coming closer to I"); else **no claim**. The two
  readings are combined (:func:`tying.cache.verdicts.combine`).
* ``mechanism_optimizer``: the SGD arm's bias (O→T minus I→T against twins trained by SGD) itself,
  decided per seed on both readings; **no claim (undertrained)** unless SGD got as far below the
  unigram as AdamW did.

Each line also says what remains of T's bias, "lowered" only where the arm lowered it beyond the
null band (an interval that includes zero shows no bias, it does not show the absence of one).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tying.analysis import mechanism as M
from tying.cache.claim_types import Claim
from tying.cache.summary_types import SHARED_START, Summary
from tying.cache.verdicts import FAILS, HOLDS, MIXED, NO_CLAIM, NO_DATA, combine, decide

IDS = ("mechanism_size", "mechanism_update", "mechanism_reach", "mechanism_optimizer")

ARM_OF = {"mechanism_size": "size", "mechanism_update": "size_update", "mechanism_reach": "reach"}

STATEMENTS = {
    "mechanism_size": "Why, size: an output-side gradient balanced to the input side's norm moves T toward I.",
    "mechanism_update": "Why, size in the update: a balanced AdamW update moves T toward I.",
    "mechanism_reach": "Why, reach: an output-side gradient kept to the batch's rows moves T toward I.",
    "mechanism_optimizer": "Why, the optimiser: T's output bias survives plain SGD.",
}
"""Each arm's claim: "moves T toward I" means I→T rises beyond what a rerun alone changes."""

NEEDS_NOTE = "The mechanism lab's runs are in the mechanism cache (`python -m precompute mechanism`)."


def runs_of(s: Summary) -> pd.DataFrame:
    """The lab's runs as a frame (empty without any)."""
    return pd.DataFrame(s.mechanism or [], columns=list(M.RUN_COLUMNS))


def scale_line(s: Summary) -> str:
    """'toy mechanism lab (1.57M parameters, 0.26M training tokens per run)': what every mechanism
    line comes from, at what scale (as every toy line beside the paper's says)."""
    from tying.analysis.sweep import llama_params

    c = s.mechanism_settings or {}
    try:
        n = llama_params(c["vocab_size"], c["d_model"], c["n_layers"], tied=True)
        tokens = c["steps"] * c["batch_size"] * c["context"]
    except (KeyError, TypeError):
        return "toy mechanism lab"
    shared = f", {SHARED_START}" if s.twins == SHARED_START else ""
    return f"toy mechanism lab ({n / 1e6:.2f}M parameters, {tokens / 1e6:.2f}M training tokens per run{shared})"


def _fmt(n: int, mean: float, lo: float, hi: float, pct: bool = False) -> str:
    f = (lambda v: f"{v:.0%}") if pct else (lambda v: f"{v:+.3f}")
    return f"{f(mean)} [{f(lo)}, {f(hi)}]" if n > 1 else f"{f(mean)} (one seed)"


def _remains(n: int, lo: float, hi: float, lowered: bool) -> str:
    """What an interval of an arm's remaining bias says; "lowered" only when the arm lowered it."""
    if n < 2:
        return "one seed: no interval"
    if lo > 0:
        return ("lowered, " if lowered else "") + "still clear of zero"
    if hi < 0:
        return "reversed: below zero"
    return "its interval includes zero: no bias these seeds can tell from none"


def reading_verdict(toward: int, away: int) -> str:
    """One reading's verdict from whether T moved toward I (``toward``) and away from O (``away``)
    beyond the null band (+1, -1 or 0 each: :func:`tying.analysis.mechanism.beyond`)."""
    if toward > 0:
        return HOLDS
    if toward < 0:
        return FAILS
    return MIXED if away > 0 else NO_CLAIM


def _arm_claim(s: Summary, key: str) -> Claim:
    arm, st = ARM_OF[key], STATEMENTS[key]
    runs = runs_of(s)
    have = set(runs["arm"])
    if "baseline" not in have or arm not in have:
        return Claim(key, st, NO_DATA, note=NEEDS_NOTE if s.kind != "mechanism" else
                     f"This cache has no {'baseline' if 'baseline' not in have else M.ARMS[arm].label} runs: "
                     f"`python -m precompute mechanism --arms baseline,null,{arm}` trains them.", needs="mechanism")
    eff = M.effects(runs)
    eff = eff[eff["arm"] == arm].set_index(["reading", "direction"])
    verdicts, parts, left_o = [], [], []
    for reading, (_, _, name) in M.READINGS.items():
        v = reading_verdict(eff.loc[(reading, "toward_i"), "beyond"], eff.loc[(reading, "away_from_o"), "beyond"])
        verdicts.append(v)
        parts.append(f"{name}: {v}")
        if v == MIXED:
            left_o.append(reading)
    show = lambda r, d: (f"{eff.loc[(r, d), 'mean']:+.3f} [{eff.loc[(r, d), 'lo']:+.3f}, {eff.loc[(r, d), 'hi']:+.3f}]"
                         if eff.loc[(r, d), "n"] > 1 else f"{eff.loc[(r, d), 'mean']:+.3f} (one seed)")
    bands = [eff.loc[(r, d), "band"] for d in M.DIRECTIONS for r in M.READINGS]
    effects = (f"toward I {show('linear', 'toward_i')} linear, {show('overlap', 'toward_i')} overlap; away from O "
               f"{show('linear', 'away_from_o')}, {show('overlap', 'away_from_o')}; "
               + ("a rerun " + ", ".join(f"±{b:.3f}" for b in bands) if all(np.isfinite(bands)) else "no null arm"))
    n = int(eff["n"].min())
    base = M.interval(runs.loc[runs["arm"] == "baseline", "bias"])
    left = M.interval(runs.loc[runs["arm"] == arm, "bias"])
    lowered_by = M.interval(M.paired(runs, "baseline", arm, "bias").values())
    band = M.rerun_spread(runs, "bias")
    lowered = lowered_by[0] > 1 and lowered_by[2] > (band if np.isfinite(band) else 0.0)
    moved = (". T left O without coming closer to I (" + ", ".join(left_o) + ")") if left_o else ""
    ours = (f"{scale_line(s)}: {effects}{moved}. Bias {base[1]:+.3f} → {left[1]:+.3f}, "
            f"{_remains(left[0], left[2], left[3], lowered)} ({n} seeds)")
    return Claim(key, st, combine(verdicts), ours,
                 note=f"{M.ARMS[arm].label}: {M.ARMS[arm].about}. Per reading, " + "; ".join(parts) + ": holds where "
                      "I→T rises beyond the null arm's band (the largest change a rerun of the baseline made over the "
                      "seeds, '±' in the line, in the order of the effects), mixed where only O→T falls beyond it, fails where I→T falls beyond it; both "
                      f"readings combined. The bias (O→T minus I→T, linear) baseline {_fmt(*base)}, "
                      f"{M.ARMS[arm].label} {_fmt(*left)}; effects and biases are means [95% interval] over seeds.",
                 needs="mechanism", n_runs=n)


def mechanism_size(s: Summary) -> Claim:
    return _arm_claim(s, "mechanism_size")


def mechanism_update(s: Summary) -> Claim:
    return _arm_claim(s, "mechanism_update")


def mechanism_reach(s: Summary) -> Claim:
    return _arm_claim(s, "mechanism_reach")


def undertrained(runs: pd.DataFrame) -> str | None:
    """Why the SGD arm cannot be read (its margin below the unigram short of AdamW's), or None
    when it got as far; None too where the cache records no unigram (the first protocol)."""
    if "unigram_loss" not in runs or runs["unigram_loss"].isna().all():
        return None
    margin = (runs["unigram_loss"] - runs["eval_loss"]).groupby(runs["arm"]).mean()
    loss = runs.groupby("arm")["eval_loss"].mean()
    if "sgd" not in margin or "baseline" not in margin or margin["sgd"] >= margin["baseline"]:
        return None
    return (f"undertrained: SGD's eval loss {loss['sgd']:.2f} nats is {margin['sgd']:.2f} below the unigram's "
            f"{runs['unigram_loss'].mean():.2f}, AdamW's {loss['baseline']:.2f} is {margin['baseline']:.2f} below it")


def mechanism_optimizer(s: Summary) -> Claim:
    key, st = "mechanism_optimizer", STATEMENTS["mechanism_optimizer"]
    runs = runs_of(s)
    if "sgd" not in set(runs["arm"]):
        return Claim(key, st, NO_DATA, note=NEEDS_NOTE if s.kind != "mechanism" else
                     "This cache has no SGD runs: `python -m precompute mechanism --arms baseline,sgd` trains them.",
                     needs="mechanism")
    sgd = runs[runs["arm"] == "sgd"]
    parts, verdicts = [], []
    for measure, label in M.MEASURES.items():
        d = decide(sgd[measure].tolist())
        verdicts.append(d.verdict)
        parts.append(f"{label}: {d.verdict} ({d.text})")
    got = M.interval(sgd["bias"])
    base = M.interval(runs.loc[runs["arm"] == "baseline", "bias"])
    lr, steps = sgd["lr"].iloc[0], int(sgd["steps"].iloc[0])
    twins = M.UNTIED_SGD in set(runs["arm"])
    ours = (f"{scale_line(s)}: T's bias (O→T minus I→T) with SGD {_fmt(*got)} (peak rate {lr:g}, {steps} steps, "
            f"against {'twins trained by SGD' if twins else 'the AdamW twins'}) beside AdamW's {_fmt(*base)} (mean "
            f"[95% interval] over {got[0]} seeds)")
    verdict = combine(verdicts)
    why = undertrained(runs)
    if why is not None:
        verdict, ours = NO_CLAIM, ours + f"; no claim ({why})"
    elif not twins:
        verdict, ours = NO_CLAIM, ours + "; no claim (its T is scored against twins trained by AdamW)"
    return Claim(key, st, verdict, ours,
                 note=f"SGD: {M.ARMS['sgd'].about}. Decided per seed on the SGD arm's bias itself (positive: T is "
                      "still output-like), on both readings, combined: " + "; ".join(parts) + ". No claim unless SGD "
                      "got at least as far below the unigram as AdamW did.", needs="mechanism", n_runs=d.n)


CLAIMS = {"mechanism_size": mechanism_size, "mechanism_update": mechanism_update, "mechanism_reach": mechanism_reach,
          "mechanism_optimizer": mechanism_optimizer}
