"""Per-token traits as the views read them (the token_traits stage, :mod:`tying.analysis.token_traits`):
each token's count and log10 count, T's position between I and O, T's row norm and the
under-trained flag, with what the counts were taken on and the flag's rule; and Spearman's rho of
log count against position over the toy lab's seeds. Read-only, memoised with :mod:`read`'s LRU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.render import read
from tying.analysis.sweep import t_interval
from tying.analysis.token_traits import POSITION_RHO
from tying.cache.store import stage_params

COLOURS: dict[str, str] = {
    "matrix": "matrix (T, I, O)",
    "log_count": "corpus frequency (log10 count)",
    "norm": "row norm",
    "position": "T's position between I and O",
    "under_trained": "under-trained",
}
"""What a map may be coloured by (``colour=`` in the URL): key -> legend title."""


@dataclass(frozen=True)
class TraitsAbout:
    """What the cache's token_traits stage recorded: the text counted (None: no counts), the
    under-trained rule and how many tokens it flags, rho over the tokens of this cache's pair."""

    counts: str | None
    rule: str
    n_under_trained: int
    rho: float
    rho_tokens: int
    has_position: bool


def has_traits(ref: read.CacheRef) -> bool:
    return read.has_rows(ref, "token_traits")


@read.memo(16)
def token_traits(ref: read.CacheRef) -> pd.DataFrame:
    """Every common token: token, shown, count, log_count, position, under_trained, norm (T's row).
    Read-only."""
    df = read.query(ref, "SELECT * FROM token_traits ORDER BY token")
    norm = read.norms(ref)
    t_norm = norm[norm["matrix"] == "T"][["token", "norm"]]
    return df.merge(read.tokens(ref)[["token", "shown"]], on="token", how="left").merge(t_norm, on="token", how="left")


@read.memo(16)
def traits_about(ref: read.CacheRef) -> TraitsAbout:
    ran = stage_params(read.summary(ref).stages, "token_traits").get("ran") or {}
    rho = ran.get("rho")
    df = token_traits(ref)
    return TraitsAbout(ran.get("counts"), ran.get("under_trained") or "", int(ran.get("n_under_trained") or 0),
                       math.nan if rho is None else float(rho), int(ran.get("rho_tokens") or 0),
                       bool(df["position"].notna().any()))


@dataclass(frozen=True)
class SeedRho:
    """Spearman's rho of log count against position per seed, their mean and 95% t-interval
    (NaN bounds with one seed)."""

    per_seed: dict[int, float]
    mean: float
    lo: float
    hi: float

    @property
    def n(self) -> int:
        return len(self.per_seed)

    @property
    def decided(self) -> bool:
        """The interval excludes 0 (a sign the seeds agree on); False with one seed."""
        return self.n > 1 and not (self.lo <= 0 <= self.hi)


def seed_rho(ref: read.CacheRef) -> SeedRho | None:
    """:class:`SeedRho` of a toy lab's seeds; None when the cache has no per-seed rho."""
    values = {int(k): float(v) for k, v in ((read.summary(ref).seed_values or {}).get(POSITION_RHO) or {}).items()
              if v is not None and np.isfinite(v)}
    if not values:
        return None
    if len(values) == 1:
        v = next(iter(values.values()))
        return SeedRho(values, v, math.nan, math.nan)
    mean, lo, hi = t_interval(list(values.values()))
    return SeedRho(values, float(mean), float(lo), float(hi))
