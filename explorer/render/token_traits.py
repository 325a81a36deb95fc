"""Per-token traits as the views read them (the token_traits stage, :mod:`tying.analysis.token_traits`):
each token's count and log10 count, T's position between I and O, T's row norm and the
under-trained flag, with what the counts were taken on and the flag's rule; Spearman's rho of
log count against position over the toy lab's seeds; and the figure the analysis brings to the
Alignment page (position against log count, with rho and its verdict read from the cache).
Read-only, memoised with :mod:`read`'s LRU.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from explorer.render import read
from explorer.render.figure import Figure
from explorer.render.style import NEUTRAL, PALETTE
from tying.analysis.sweep import t_interval
from tying.analysis.token_traits import POSITION_RHO
from tying.cache.store import stage_params
from tying.cache.verdicts import NO_CLAIM, decide

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


# -- the figure: position against log count ---------------------------------------------------------

BINS = 12
"""Equal-width bins of log10 count for the median line of the position-frequency scatter."""

MECHANISM = ("The paper's mechanism read per token: a rare token gets little input-side gradient, so its T "
             "should sit nearer O (a negative rho).")


def binned_median(df: pd.DataFrame, bins: int = BINS) -> pd.DataFrame:
    """Median position per equal-width bin of log10 count (bins with at least 5 tokens): columns
    log_count (the bin's middle), position (its median), n."""
    d = df.dropna(subset=["log_count", "position"])
    if d.empty:
        return pd.DataFrame({"log_count": [], "position": [], "n": []})
    edges = np.linspace(d["log_count"].min(), d["log_count"].max() + 1e-9, bins + 1)
    which = np.clip(np.digitize(d["log_count"], edges) - 1, 0, bins - 1)
    g = d.groupby(which)["position"].agg(["median", "size"])
    g = g[g["size"] >= 5]
    mids = (edges[:-1] + edges[1:]) / 2
    return pd.DataFrame({"log_count": mids[g.index], "position": g["median"].to_numpy(), "n": g["size"].to_numpy()})


def reading(ref: read.CacheRef) -> tuple[str, str]:
    """(rho as a line, its verdict on :data:`MECHANISM`), every number from the cache: over the toy
    lab's seeds with a 95% t-interval, else over this cache's tokens (one run: no claim)."""
    sr = seed_rho(ref)
    about = traits_about(ref)
    if sr is None or sr.n < 2:
        rho = sr.mean if sr is not None else about.rho
        return f"Spearman's rho {rho:+.2f}, {strength(rho)} ({about.rho_tokens:,} tokens, one run)", NO_CLAIM
    verdict = decide([-v for v in sr.per_seed.values()]).verdict
    return (f"Spearman's rho {sr.mean:+.2f}, {strength(sr.mean)} (95% interval {sr.lo:+.2f} to {sr.hi:+.2f}, "
            f"{sr.n} seeds)", verdict)


def strength(rho: float) -> str:
    """A rank correlation's size in words (|rho| under 0.1 negligible, 0.3 weak, 0.5 moderate, else strong)."""
    a = abs(rho)
    return "negligible" if a < 0.1 else "weak" if a < 0.3 else "moderate" if a < 0.5 else "strong"


def position_frequency_chart(df: pd.DataFrame, title: str) -> alt.LayerChart:
    """Every token seen at least once: log10 count (x) against T's position between I and O (y),
    faint points, the binned median as a line, a rule at 0 (T as near O as I)."""
    d = df.dropna(subset=["log_count", "position"])[["token", "shown", "count", "log_count", "position"]]
    top = float(d["count"].max()) if len(d) else 10.0
    x = alt.X("count:Q", title="corpus frequency (count, log scale)",
              scale=alt.Scale(type="log", domain=[1, top], nice=False), axis=alt.Axis(format="~s"))
    y = alt.Y("position:Q", title="T's position: cos to O − cos to I")
    points = alt.Chart(d).mark_circle(size=14, opacity=0.4, color=PALETTE["T"], aria=False).encode(
        x=x, y=y, tooltip=[alt.Tooltip("shown:N", title="token"), alt.Tooltip("count:Q", format=","),
                           alt.Tooltip("position:Q", format="+.3f")])
    zero = alt.Chart(pd.DataFrame({"position": [0.0]})).mark_rule(color=NEUTRAL, strokeDash=[4, 4]).encode(y="position:Q")
    med = binned_median(d)
    line = alt.Chart(med.assign(count=10 ** med["log_count"])).mark_line(
        color="#000000", strokeWidth=2.5, point=alt.OverlayMarkDef(color="#000000", size=40)).encode(
        x="count:Q", y="position:Q",
        tooltip=[alt.Tooltip("count:Q", format=",.0f", title="bin (middle, count)"),
                 alt.Tooltip("position:Q", format="+.3f", title="median position"), alt.Tooltip("n:Q", title="tokens")])
    return alt.layer(points, zero, line).properties(width="container", height=320,
                                                   title=alt.TitleParams(textwrap.wrap(title, 44), anchor="start"))


def figure(ref: read.CacheRef):
    df = token_traits(ref)
    line, verdict = reading(ref)
    return position_frequency_chart(df, f"{line}: {verdict}"), df[["token", "shown", "count", "log_count", "position",
                                                                   "under_trained"]]


FIGURES = (
    Figure("figure-position-frequency", "T's position between I and O against frequency",
           "Each token seen at least once (a token never seen has no log count and is left out): how often it "
           "occurs in the counted text against where its tied row T sits between the untied twin's I and O (its "
           "cosine to O minus its cosine to I, linear map fitted on every token; above 0: nearer O). Black: the "
           "median per bin. " + MECHANISM + " The title gives Spearman's rho (its size in words) and, over seeds, "
           "whether that direction holds: every seed negative with a 95% interval clear of 0 holds; every seed "
           "positive, clear of 0, does not hold; one run makes no claim. Over seeds, seed 0 is drawn.",
           figure, lambda ref, s: has_traits(ref) and traits_about(ref).has_position, stages=("token_traits",),
           page="alignment"),
)
