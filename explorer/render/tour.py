"""The tour: the paper's argument, one step per screen (views/tour.py, and the static site).

Each :class:`Step` names the claim it tests (:mod:`tying.cache.claims`), the figure that shows
it (:data:`explorer.render.figures.BY_NAME`), one sentence on how to read that figure, and the detail
page that shows more. :func:`source_for` picks, among the caches at hand, the one that holds a
step's data: the picked cache when it has it, else the shipped cache of the kind the step
needs (the toy lab, the authors' published measurements, the sweep or the mechanism lab).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd

from explorer.render import figures, identity, read
from explorer.render.tour_notes import NOTES, Notes
from tying.cache import claims as claims_mod
from tying.cache import summary_types
from tying.cache.reference import OVERLAP_K
from tying.cache.summary_types import Summary
from tying.cache.verdicts import NO_DATA


@dataclass(frozen=True)
class Step:
    number: int  # 1-based, the ?step= of the URL
    slug: str
    title: str
    claim: str | None  # a key of tying.cache.claims.CLAIMS (None: the set-up)
    figure: str | None  # a name in explorer.render.figures.BY_NAME (None: the set-up diagram)
    read: str  # how to read the chart, one sentence
    page: str  # the detail page's URL path
    needs: str  # the cache kind that holds the step's data: toylab, published, sweep or mechanism
    also: tuple[str, ...] = ()  # more claims the step's figure answers, each shown as one line under the verdict

    @property
    def notes(self) -> Notes:
        """The speaker notes (:data:`explorer.render.tour_notes.NOTES`)."""
        return NOTES[self.slug]


STEPS: tuple[Step, ...] = (
    Step(1, "setup", "The set-up: one matrix or two", None, None,
         "Top: an untied model reads tokens through I and predicts them through O. Bottom: a tied model uses one "
         "matrix T for both, so T receives both gradients: a sparse one from the input (only the rows of tokens "
         "in the batch) and a dense one from the output (every row, every step).", "home", "toylab"),
    Step(2, "alignment", "Claim: T resembles O, not I", "alignment", "figure1-alignment",
         "Each bar counts tokens by how well their row in one matrix maps onto their row in another: further "
         "right is more alike; O→T (vermillion) far right of I→T (blue) means T is output-like.", "alignment",
         "toylab"),
    Step(3, "neighbours", "Neighbours agree with O", "overlap", "overlap-curve",
         "Each line is the share of a token's k nearest neighbours two matrices have in common, averaged over "
         "tokens: the T~O line above the T~I line means T's neighbourhoods are O's.", "neighbours", "toylab"),
    Step(4, "map", "The aligned map of T, I and O", "map", "projection-umap",
         "The three matrices mapped jointly to 2-D so one token sits in comparable places; the labelled diamond is "
         f"one token, the dots its {OVERLAP_K} nearest neighbours: in T they gather as in O, not as in I.",
         "projection", "toylab"),
    Step(5, "gradient", "Why: output-side gradients dominate early", "gradient", "figure4-output-share",
         "The line is the output side's share of the gradient reaching the tied matrix at each step (the mean over "
         "seeds, the band their range); above the dashed one-half line the output side dominates. The shaded "
         "early steps are the ones the verdict averages.", "dynamics", "toylab"),
    Step(6, "why", "Why: the gradient's size, its reach, or AdamW?", "mechanism_size", "figure-mechanism-effects",
         "Each row: the tied twin trained again with one difference removed. Each dot: how far that moved T from "
         "the baseline's (mean over seeds, whisker 95%), toward I (cyan) or away from O (violet), linear map "
         "(circle) or overlap@10 (diamond). Grey: what a rerun alone moves; only a whisker clear of it counts.", "mechanism", "mechanism",
         also=("mechanism_update", "mechanism_reach", "mechanism_optimizer")),
    Step(7, "scaling", "A causal test: scale the input-side gradient", "scaling", "figure-scaling",
         "Each point is the tied matrix's mean cosine to untied I or O after training with the input-side "
         "gradient multiplied by the factor on the x-axis: towards I up, towards O down.", "dynamics", "toylab"),
    Step(8, "lens", "A consequence: early layers are harder to read", "lens", "figure-lens-kl",
         "Each line is the KL between the final prediction and what a tuned lens reads from one layer: higher at "
         "the early layers for the tied model means its first layers are further from its output space.", "lens",
         "toylab"),
    Step(9, "published", "Real models: the authors' measurements", "published", "figure3-evolution",
         "Each line is a matrix's mean per-token cosine to its own start over released checkpoints: O ("
         "vermillion) falls faster and further than I (blue) in every model.", "dynamics", "published"),
    Step(10, "sweep-bias", "Beyond the paper: T output-like at every width?", "sweep_bias", "sweep-bias",
         "Each point is a bias at one width, the mean over seeds, whiskers 95% intervals: O→T minus I→T and T~O "
         "minus T~I. Above zero T is output-like; only intervals clear of zero support a claim.", "sweep", "sweep"),
    Step(11, "sweep-gap", "Beyond the paper: does untying pay off?", "sweep_gap", "sweep-loss-gap",
         "Each point is a loss gap at one width, the mean over seeds, whiskers 95% intervals: untied minus tied, "
         "and untied minus a tied model with as many parameters; shaded, how far a gap moves when one arm's "
         "learning rate moves one step. Below zero the untied model is ahead; only intervals clear of zero "
         "support a claim.", "sweep", "sweep"),
)
BY_SLUG = {s.slug: s for s in STEPS}


def step_at(number: int) -> Step:
    return STEPS[number - 1]


def all_claims(s: Summary) -> dict[str, claims_mod.Claim]:
    """:func:`tying.cache.claims.claims` of a summary, once per summary object (every page run of
    the Overview, the Sweep and the Tour reads them)."""
    return identity.once(s, ("claims",), claims_mod.claims)


def one_claim(key: str, s: Summary) -> claims_mod.Claim:
    """The claim ``key`` as its rule states it for ``s`` (no one-model rewording), once per summary object."""
    return identity.once(s, ("claim", key), claims_mod.CLAIMS[key])


def holds_data(step: Step, ref: read.CacheRef) -> bool:
    """Whether ``ref`` holds what ``step`` shows: its claim has numbers and its figure is available."""
    s = read.summary(ref)
    if step.claim is not None and one_claim(step.claim, s).verdict == NO_DATA:
        return False
    if step.figure is not None:
        return any(f.name == step.figure for f in figures.available(ref))
    return True


def source_for(step: Step, refs: Sequence[read.CacheRef], picked: read.CacheRef | None = None) -> read.CacheRef | None:
    """The cache that holds ``step``'s data: ``picked`` if it does, else the first of ``refs`` that does
    (the set-up step needs no data: it takes ``picked`` or the first)."""
    ordered = ([picked] if picked is not None else []) + [r for r in refs if r != picked]
    if step.claim is None and step.figure is None:
        return ordered[0] if ordered else None
    for r in ordered:
        try:
            if holds_data(step, r):
                return r
        except Exception:  # an unreadable cache holds nothing
            continue
    return None


def claim_for(step: Step, ref: read.CacheRef) -> claims_mod.Claim | None:
    return None if step.claim is None else one_claim(step.claim, read.summary(ref))


# a tour chart's plot height and the map's panel size (presentation mode draws both 1.5x): with the
# claim, the verdict and the way on, one slide at 1920x1080 (explorer/render/slide.py), no scrolling
SLIDE_PLOT_HEIGHT = 225
SLIDE_VIEW_SIZE = 230


def fit_height(chart, frame_data, height: int = SLIDE_PLOT_HEIGHT):
    """``(chart, data)`` with a single or layered chart's plot height set to ``height`` (a
    concatenated chart keeps its own views' sizes)."""
    if isinstance(chart, (alt.Chart, alt.LayerChart)):
        chart = chart.properties(height=height)
    return chart, frame_data


# -- the example token ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def example_token(ref: read.CacheRef, k: int = 10, min_count: int = 100, shortlist: int = 40) -> int | None:
    """A token whose neighbours show the claim to a room, on the neighbours step and the map step
    alike (the app and the static site call this one function).

    Candidates: frequent word-like tokens (seen at least ``min_count`` times where the cache has
    corpus counts; letters, 3+ characters), the ``shortlist`` whose overlap@k T~O most exceeds
    T~I. Among them, where the cache has a map, the token whose own neighbours sit closest
    around it in T's and O's views and farthest in I's (the mean distance from the token to its
    k neighbours in each view, over the view's spread): "in T they gather as in O, not as in I"
    is then visible. Without a map, the largest overlap gap (the most frequent of the ties).
    None without neighbour lists."""
    if not read.has_rows(ref, "neighbours"):
        return None
    toks = read.tokens(ref)
    table = read.overlap_table(ref, min(k, read.max_k(ref)))
    gap = (table["T~O"] - table["T~I"]).to_numpy()
    ok = read.word_like(toks)  # the pages' default token is a word by the same rule
    freq = toks["freq_tied"]
    if freq.notna().any() and (ok & freq.fillna(0).ge(min_count)).any():
        ok &= freq.fillna(0).ge(min_count)
    if not ok.any():
        ok = pd.Series(True, index=toks.index)
    cand = pd.DataFrame({"token": toks["token"], "gap": gap[toks["token"].to_numpy()],
                         "freq": freq.fillna(0).to_numpy()})[ok.to_numpy()]
    cand = cand.sort_values(["gap", "freq"], ascending=False)
    if not read.has_rows(ref, "umap"):
        return int(cand["token"].iloc[0])
    coords = read.umap(ref)
    spread = {}
    for m in ("T", "I", "O"):
        view = coords[coords["matrix"] == m].set_index("token")[["x", "y"]]
        scale = float(np.sqrt(view.var().sum())) or 1.0
        ids = read.neighbour_ids(ref, m)[:, :k]
        dist = []
        for t in cand["token"].head(shortlist):
            nb = [n for n in ids[t] if n in view.index]
            if t not in view.index or not nb:
                dist.append(np.nan)
                continue
            d = view.loc[nb].to_numpy() - view.loc[t].to_numpy()
            dist.append(float(np.sqrt((d ** 2).sum(axis=1)).mean()) / scale)
        spread[m] = np.asarray(dist)
    score = spread["I"] - np.maximum(spread["T"], spread["O"])
    if np.isnan(score).all():
        return int(cand["token"].iloc[0])
    return int(cand["token"].head(shortlist).iloc[int(np.nanargmax(score))])


def step_figure(step: Step, ref: read.CacheRef, view_size: int = SLIDE_VIEW_SIZE):
    """A step's ``(chart, data)`` sized for a slide: its figure from the registry at the slide's
    plot height (:func:`fit_height`), the map's three panels at ``view_size`` with the example
    token marked and labelled (:func:`example_token`). The app, the static site and the handout draw the same."""
    if step.figure == "projection-umap":
        return figures.projection(ref, token=example_token(ref), view_size=view_size)
    return fit_height(*figures.BY_NAME[step.figure].build(ref))


def neighbour_lists(ref: read.CacheRef, token: int, n: int = 5) -> dict[str, list[str]]:
    """The token's ``n`` nearest neighbours in T, I and O, as shown text."""
    nb = read.neighbours_of(ref, token, n)
    return {m: nb[nb["matrix"] == m].sort_values("rank")["shown"].tolist() for m in ("T", "I", "O")}


# -- the lens step's real example ---------------------------------------------------------------


def real_example(refs: Sequence[read.CacheRef]) -> read.CacheRef | None:
    """The first cache of one real tied model (kind ``model``, e.g. SmolLM2-135M) that traced an
    example text through its layers (its lens_trajectory's sample 0), None when there is none."""
    for r in refs:
        try:
            if read.summary(r).kind == "model" and read.has_rows(r, "lens_trajectory"):
                return r
        except Exception:  # an unreadable cache holds nothing
            continue
    return None


def answer_through_layers(ref: read.CacheRef, sample: int = 0) -> tuple[str, str, pd.DataFrame]:
    """``(text, answer, frame)`` of one traced text of the tied model: the text, the model's own
    prediction after it (the last hidden state's top-1 at the last position, as shown) and, per
    hidden state and lens, the probability that lens gives the answer there (``prob``; 0 where
    the answer is not among the top-k the cache stores) and the lens's own top-1 (``top1``)."""
    traj = read.table(ref, "lens_trajectory")
    t = read.visible_trajectory(traj[(traj["model"] == "tied") & (traj["sample"] == sample)])
    text = read.trajectory_text(t[t["lens"] == t["lens"].iloc[0]])
    end = t[t["position"] == t["position"].max()]
    final = end[(end["layer"] == end["layer"].max()) & (end["rank"] == 1)]
    answer = str(final["prediction"].iloc[0])
    rows = []
    for (lens, layer), g in end.groupby(["lens", "layer"]):
        hit = g[g["prediction"] == answer]
        top = g.sort_values("rank").iloc[0]
        rows.append({"lens": f"{lens} lens", "layer": int(layer), "prob": float(hit["prob"].iloc[0]) if len(hit)
                     else 0.0, "top1": str(top["prediction"]), "top1_prob": float(top["prob"])})
    return text, answer, pd.DataFrame(rows)


def guesses(frame: pd.DataFrame) -> pd.DataFrame:
    """Each lens's top-1 guess (rows: tuned lens, logit lens) at five hidden states from the
    input embedding to the last (columns: 0, a third, two thirds, five sixths and all of the
    depth), from :func:`answer_through_layers`'s frame: a slide's worth of the trajectory."""
    last = int(frame["layer"].max())
    picks = sorted({0, round(last / 3), round(2 * last / 3), round(5 * last / 6), last})
    wide = frame[frame["layer"].isin(picks)].pivot(index="lens", columns="layer", values="top1")
    return wide.reindex([x for x in ("tuned lens", "logit lens") if x in wide.index])


model_label = summary_types.model_label  # the model as every page names it
