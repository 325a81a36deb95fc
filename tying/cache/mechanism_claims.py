"""The mechanism lab's claims (`precompute mechanism`): why T turns output-like.

Each claim reads the lab's runs (``Summary.mechanism``, one row per arm and seed) and is decided by
the engine of the paper's claims (:func:`tying.cache.verdicts.decide`, per-seed values oriented so
that positive is the claim's direction) on both readings of T's output bias: the in-sample
linear map's O→T minus I→T (the paper's protocol) and overlap@10 T~O minus T~I. The two parts
are combined (:func:`tying.cache.verdicts.combine`): the claim holds only where both readings
hold, and no claim is made where either interval includes zero.

* ``mechanism_size``: per seed, the baseline's bias minus the size-balanced arm's (positive: the
  arm lowers the bias);
* ``mechanism_reach``: the same for the reach-matched arm;
* ``mechanism_optimizer``: the SGD arm's bias itself (positive: the bias survives SGD).

Each line says how much of the baseline's bias an arm removes and whether what remains is still
clear of zero: "lowers" is what is decided; "removes" is said only where the remainder's interval
includes zero, and never as a verdict (an interval that includes zero shows no bias, it does not
show the absence of one).
"""

from __future__ import annotations

import pandas as pd

from tying.analysis import mechanism as M
from tying.cache.claim_types import Claim
from tying.cache.summary_types import SHARED_START, Summary
from tying.cache.verdicts import NO_DATA, combine, decide

IDS = ("mechanism_size", "mechanism_reach", "mechanism_optimizer")

STATEMENTS = {
    "mechanism_size": "Why, size: removing the size difference (the output-side gradient rescaled to the input "
                      "side's norm) lowers T's output bias.",
    "mechanism_reach": "Why, reach: removing the reach difference (the output-side gradient kept to the rows of the "
                       "batch's tokens) lowers T's output bias.",
    "mechanism_optimizer": "Why, the optimiser: T's output bias survives plain SGD (it is not AdamW's "
                           "per-coordinate normalisation).",
}

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


def _remains(n: int, lo: float, hi: float) -> str:
    if n < 2:
        return "one seed: no interval"
    if lo > 0:
        return "still clear of zero: lowered, not removed"
    if hi < 0:
        return "below zero: reversed"
    return "its interval includes zero: no bias is left that these seeds can tell from none"


def _arm_claim(s: Summary, key: str, arm: str) -> Claim:
    st = STATEMENTS[key]
    runs = runs_of(s)
    have = set(runs["arm"])
    if "baseline" not in have or arm not in have:
        return Claim(key, st, NO_DATA, note=NEEDS_NOTE if s.kind != "mechanism" else
                     f"This cache has no {'baseline' if 'baseline' not in have else M.ARMS[arm].label} runs: "
                     f"`python -m precompute mechanism --arms baseline,{arm}` trains them.", needs="mechanism")
    parts, verdicts = [], []
    for measure, label in M.MEASURES.items():
        diffs = M.paired(runs, "baseline", arm, measure)
        d = decide(list(diffs.values()))
        verdicts.append(d.verdict)
        parts.append(f"{label}: {d.verdict} ({d.text})")
    base = M.interval(runs.loc[runs["arm"] == "baseline", "bias"])
    left = M.interval(runs.loc[runs["arm"] == arm, "bias"])
    by_seed = runs[runs["arm"] == "baseline"].set_index("seed")["bias"]
    removed = M.interval([d / by_seed[k] for k, d in M.paired(runs, "baseline", arm).items() if by_seed[k] > 0])
    ours = (f"{scale_line(s)}: T's bias (O→T minus I→T) baseline {_fmt(*base)} → {M.ARMS[arm].label} {_fmt(*left)}, "
            f"{_fmt(*removed, pct=True)} of it removed (mean [95% interval] over {left[0]} seeds); what remains: "
            f"{_remains(left[0], left[2], left[3])}")
    return Claim(key, st, combine(verdicts), ours,
                 note=f"{M.ARMS[arm].label}: {M.ARMS[arm].about}. Decided per seed on the baseline's bias minus the "
                      "arm's (positive: the arm lowers it), on both readings, combined: " + "; ".join(parts) + ".",
                 needs="mechanism", n_runs=d.n)


def mechanism_size(s: Summary) -> Claim:
    return _arm_claim(s, "mechanism_size", "size")


def mechanism_reach(s: Summary) -> Claim:
    return _arm_claim(s, "mechanism_reach", "reach")


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
    lr = sgd["lr"].iloc[0]
    loss = runs.groupby("arm")["eval_loss"].mean()
    trained = (f"; SGD's eval loss {loss['sgd']:.2f} nats against AdamW's {loss['baseline']:.2f}"
               + (": a less-trained model" if loss["sgd"] > loss["baseline"] + 0.1 else "")
               if "baseline" in loss and pd.notna(loss.get("sgd")) else "")
    ours = (f"{scale_line(s)}: T's bias (O→T minus I→T) with SGD {_fmt(*got)} (peak rate {lr:g}) against AdamW's "
            f"{_fmt(*base)} (mean [95% interval] over {got[0]} seeds){trained}")
    return Claim(key, st, combine(verdicts), ours,
                 note=f"SGD: {M.ARMS['sgd'].about}. Decided per seed on the SGD arm's bias itself (positive: T is "
                      "still output-like), on both readings, combined: " + "; ".join(parts) + ".", needs="mechanism",
                 n_runs=d.n)


CLAIMS = {"mechanism_size": mechanism_size, "mechanism_reach": mechanism_reach,
          "mechanism_optimizer": mechanism_optimizer}
