"""The verdicts of the paper's claims, and the rules that decide them.

Every verdict is decided on the quantity its line shows, by :func:`decide`, from per-run
differences oriented so that a positive value is the paper's direction (one run per seed of a
toy lab, per seed of a sweep cell, per released model):

- ``holds``: the 95% t-interval of the mean difference lies above zero and every run agrees;
- ``mixed``: the interval lies clear of zero but some runs go the other way (the line says how
  many): the seeds disagree beyond their spread; the published claim, decided model by model
  (released models are not repeats of one run), is mixed when some models go each way;
- ``does not hold``: the interval lies below zero and every run agrees;
- ``no claim``: the interval includes zero: the runs disagree within their spread, or the
  difference is too small for them to tell; or there is one run, and so no interval (one run
  cannot tell a difference from the spread between runs, however large it looks);
- ``no data``: the cache does not hold the measurement;
- ``reported``: the numbers are the paper's own printed values (the published cache), shown
  for reference: they are not evidence, so nothing is decided.

A claim made of several parts (the scaling claim's two moves, the sweep's widths) combines
its parts' verdicts with :func:`combine`: one verdict when they agree, "mixed" when some hold
and some do not, "no claim" when a part cannot be decided (a claim "at every width" cannot be
made while one width is undecided).

:mod:`tying.cache.claims` computes each claim's numbers and asks :func:`decide` (and
:func:`combine`) for its verdict; every view draws a verdict with :data:`VERDICT_STYLE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tying.analysis.sweep import t_interval

HOLDS, MIXED, FAILS, NO_CLAIM, NO_DATA, REPORTED = ("holds", "mixed", "does not hold", "no claim", "no data",
                                                    "reported")
VERDICTS = (HOLDS, MIXED, FAILS, NO_CLAIM, NO_DATA, REPORTED)

VERDICT_STYLE = {  # colour and sign: the sign carries the verdict for readers who do not tell the colours apart
    HOLDS: ("#1a7f37", "✓"), MIXED: ("#9a6700", "~"), FAILS: ("#cf222e", "✗"), NO_CLAIM: ("#57606a", "–"),
    NO_DATA: ("#57606a", "–"), REPORTED: ("#6639ba", "§"),
}
"""How every view draws a verdict (the app's badges, the tour, the static site)."""


# -- deciding ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """A verdict from per-run differences (positive: the paper's direction)."""

    verdict: str
    n: int = 0
    mean: float = math.nan
    lo: float = math.nan  # the 95% t-interval of the mean (nan with one run)
    hi: float = math.nan
    agree: int = 0  # runs whose difference is positive

    @property
    def text(self) -> str:
        """How the verdict was reached, one clause: '95% interval +0.31 to +0.40 over 3 seeds'."""
        if self.n == 0:
            return "no runs"
        if self.n == 1:
            return f"one run ({self.mean:+.3f}): no interval"
        base = f"95% interval {self.lo:+.3f} to {self.hi:+.3f} over {self.n} runs"
        if self.verdict == MIXED:
            return base + f"; {self.n - self.agree if self.mean > 0 else self.agree} of {self.n} go the other way"
        return base


def decide(diffs: Sequence[float | None]) -> Decision:
    """The verdict of per-run differences, each positive when that run goes the paper's way
    (module docstring): no claim while the 95% t-interval of their mean includes zero; holds or
    does not hold when it excludes zero and every run agrees; mixed when it excludes zero and
    some run disagrees. One run: no claim (no interval). None and NaN are left out."""
    d = [float(v) for v in diffs if v is not None and np.isfinite(v)]
    if not d:
        return Decision(NO_DATA)
    agree = sum(v > 0 for v in d)
    if len(d) == 1:
        return Decision(NO_CLAIM, 1, d[0], math.nan, math.nan, agree)
    mean, lo, hi = t_interval(d)
    if lo <= 0 <= hi:
        verdict = NO_CLAIM
    elif agree in (0, len(d)):
        verdict = HOLDS if mean > 0 else FAILS
    else:
        verdict = MIXED
    return Decision(verdict, len(d), mean, lo, hi, agree)


def combine(verdicts: Sequence[str]) -> str:
    """One verdict for a claim made of parts: theirs when they agree; mixed when some hold and
    some do not (or a part is mixed); no claim when a part cannot be decided; no data parts are
    left out (all of them: no data)."""
    v = [x for x in verdicts if x != NO_DATA]
    if not v:
        return NO_DATA
    if len(set(v)) == 1:
        return v[0]
    if MIXED in v or (HOLDS in v and FAILS in v):
        return MIXED
    return NO_CLAIM
