"""The width sweep's claims (`precompute sweep`): does T stay output-like as the twins widen, and does
untying pay off against a tied model with as many parameters?

Both are decided per width on the per-seed values (:func:`tying.cache.verdicts.decide`, the paper's
direction positive) and combined over widths. The gap claim reads each width against its
**learning-rate band** too (:func:`tying.analysis.sweep.lr_sensitivity`: how far the probes' gap
moves when one arm's rate moves one step of the grid, either arm, either way): where the gap
moved by the band could change sign, that width reads "no claim", whatever its interval over
seeds says, because the gap is then no larger than what the choice of a learning rate does.
Widths where an arm of the gap is still above the smoothed bigram are named: undertrained, not
past bigram statistics, and no crossing width is named from them (the Sweep page's crossings).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from tying.analysis.sweep import lr_sensitivity
from tying.cache.claim_types import Claim
from tying.cache.summary_types import SHARED_START, Summary
from tying.cache.verdicts import NO_CLAIM, NO_DATA, combine, decide

IDS = ("sweep_bias", "sweep_gap")

STATEMENTS = {
    "sweep_bias": "Beyond the paper: the tied matrix stays output-like at every width.",
    "sweep_gap": "Beyond the paper: untying pays off at every width, against a tied model with as many parameters.",
}


def sweep_size(s: Summary) -> str:
    """'toy sweep (0.14M-4.20M parameters, 0.33M training tokens per arm)'."""
    rows = s.sweep or []
    if not rows:
        return "toy sweep"
    lo, hi = min(r["params_tied"] for r in rows), max(r["params_untied"] for r in rows)
    seen = sorted({r.get("tokens_seen") for r in rows if r.get("tokens_seen")})
    tok = f", {seen[-1] / 1e6:.2f}M training tokens per arm" if seen else ""
    return f"toy sweep ({lo / 1e6:.2f}M-{hi / 1e6:.2f}M parameters{tok})"


def _line(s: Summary, text: str) -> str:
    scale = sweep_size(s)
    scale = f"{scale[:-1]}, shared start)" if scale.endswith(")") and s.twins == SHARED_START else scale
    return f"{scale}: {text}"


def _rows(s: Summary) -> list[dict]:
    return sorted(s.sweep or [], key=lambda r: (r["vocab_size"], r["d_model"], r["seed"]))


def _by_width(rows: list[dict], value: Callable[[dict], float | None]) -> dict[tuple[int, int], list[float]]:
    out: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        v = value(r)
        if v is not None:
            out.setdefault((r["vocab_size"], r["d_model"]), []).append(v)
    return out


def _width_label(key: tuple[int, int], vocabs: int) -> str:
    return f"d={key[1]}" + (f" V={key[0]:,}" if vocabs > 1 else "")


def point_means(rows: list[dict]) -> list[dict]:
    """Per (vocab_size, d_model): the mean over seeds of every numeric column of the sweep's rows."""
    if not rows:
        return []
    return pd.DataFrame(rows).groupby(["vocab_size", "d_model"], as_index=False).mean(numeric_only=True).to_dict(
        "records")


def undertrained_widths(cells, arms=("eval_loss_untied", "eval_loss_tied_matched")) -> list[tuple[int, int]]:
    """The (vocab_size, d_model) grid points (``cells``: a sweep's per-point means, as
    :func:`point_means` or the summary's ``sweep_cells`` give them) where an arm of ``arms`` (those of a gap) has a
    mean eval loss above the smoothed bigram's on the same windows: a model not yet past bigram
    statistics. The claim's note and the Sweep page's crossings read the same list."""
    return [(int(c["vocab_size"]), int(c["d_model"])) for c in cells
            if pd.notna(c.get("bigram_loss")) and any(pd.notna(c.get(a)) and c[a] > c["bigram_loss"] for a in arms)]


def gap_bands(s: Summary, arm: str) -> dict[tuple[int, int], dict]:
    """Per (vocab_size, d_model): the learning-rate band of the gap untied minus ``arm``
    (:func:`lr_sensitivity`: {"gap", "low", "high"}), where the cache holds probes."""
    probes = pd.DataFrame(s.sweep_probes or [])
    if not len(probes):
        return {}
    out = {}
    for (v, d), g in probes.groupby(["vocab_size", "d_model"]):
        band = lr_sensitivity(g, "untied", arm)
        if band is not None:
            out[(int(v), int(d))] = band
    return out


def _sweep_claim(s: Summary, key: str, per_width: dict, what: str, note: str, paper_sign: int = 1,
                 bands: dict | None = None) -> Claim:
    """A sweep claim: per width the values ``per_width`` (one per seed) as the line shows them, each
    width decided on ``paper_sign`` x value (the paper's direction positive), a width whose band
    (``bands``) lets the mean change sign read "no claim" (the band is named where it changes the
    verdict: the Sweep page shades it at every width); combined over widths."""
    st = STATEMENTS[key]
    if not per_width:
        return Claim(key, st, NO_DATA, note="The width sweep is in the sweep cache.", needs="sweep")
    vocabs = len({v for v, _ in per_width})
    parts, verdicts, n = [], [], set()
    for w, x in per_width.items():
        d = decide([paper_sign * v for v in x])
        mean = float(np.mean(x))
        lo, hi = sorted((paper_sign * d.lo, paper_sign * d.hi)) if d.n > 1 else (math.nan, math.nan)
        interval = f" [{lo:+.2f}, {hi:+.2f}]" if d.n > 1 else ""
        verdict, why = d.verdict, ""
        band = (bands or {}).get(w)
        if band is not None:
            moved = (mean + band["low"], mean + band["high"])
            if moved[0] <= 0 <= moved[1] and verdict != NO_CLAIM:  # said only where it changes the verdict
                verdict, why = NO_CLAIM, f", a rate step {moved[0]:+.2f} to {moved[1]:+.2f} flips it:"
        parts.append(f"{_width_label(w, vocabs)} {mean:+.2f}{interval}{why} {verdict}")
        verdicts.append(verdict)
        n.add(d.n)
    seeds = f"{min(n)} seeds" if len(n) == 1 else f"{min(n)}-{max(n)} seeds"
    return Claim(key, st, combine(verdicts), _line(s, f"{what}, mean [95% interval] over {seeds}: " + "; ".join(parts)),
                 note=note, n_runs=min(n))


def sweep_bias(s: Summary) -> Claim:
    rows = _rows(s)
    in_sample = bool(rows) and all(r.get("linear_o_t_in") is not None for r in rows)
    if in_sample:
        per = _by_width(rows, lambda r: r["linear_o_t_in"] - r["linear_i_t_in"])
        what = "O→T minus I→T (linear, in-sample)"
    else:
        per = _by_width(rows, lambda r: None if r.get("linear_o_t") is None else r["linear_o_t"] - r["linear_i_t"])
        what = "O→T minus I→T (linear, held-out: this cache has no in-sample map)"
    moved_i = [r["cos_start_input_untied"] for r in rows if r.get("cos_start_input_untied") is not None]
    still = (f" The untied I's mean cosine to its start: {min(moved_i):.2f}-{max(moved_i):.2f} (1: not moved)."
             if moved_i else " This cache does not record how far I moved from its start.")
    return _sweep_claim(s, "sweep_bias", per, what, "Positive: T output-like. A verdict per width from the 95% "
                        "t-interval over seeds; the claim holds where it holds at every width." + still)


def sweep_gap(s: Summary) -> Claim:
    rows = _rows(s)
    matched = bool(rows) and all(r.get("eval_loss_tied_matched") is not None for r in rows)
    arm = "eval_loss_tied_matched" if matched else "eval_loss_tied"
    per = _by_width(rows, lambda r: None if r.get(arm) is None else r["eval_loss_untied"] - r[arm])
    widened = bool(rows) and rows[0].get("d_ff_matched") is not None
    what = ("untied minus parameter-matched tied eval loss" if matched else
            "untied minus tied eval loss (this cache has no parameter-matched arm)")
    how = (" Matched: the twins' depth and width, wider feed-forward layers." if widened else
           " The matched model here is deeper than the twins (a cache written before issue 29): its gap also "
           "measures what depth does in a short run." if matched else "")
    note = "Negative: untying pays off. A verdict per width from the 95% t-interval over seeds." + how
    slow = undertrained_widths(point_means(rows), ("eval_loss_untied", arm))
    if slow:
        vocabs = len({v for v, _ in per})
        where = ("at every width" if len(slow) == len(per) else
                 "at " + ", ".join(_width_label(w, vocabs) for w in slow))
        note += f" Undertrained {where} (an arm above the smoothed bigram): no crossing named there."
    bands = gap_bands(s, "tied_matched" if matched else "tied")
    return _sweep_claim(s, "sweep_gap", per, what, note, paper_sign=-1, bands=bands)


CLAIMS = {"sweep_bias": sweep_bias, "sweep_gap": sweep_gap}
