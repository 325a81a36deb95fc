"""The sentences the text summary, the pages and the figure pack say about a cache, written
once: its coverage, its map, its matching, its spectral scope, the toy lab's overlap context,
a value with its spread, and what a page of one tied model says where a pair's comparison
would be. Pure functions of a summary's parts (:mod:`tying.cache.summary`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tying.cache.reference import OVERLAP_K
from tying.cache.summary_types import INDEPENDENT, SHARED_START, PaperReference, Summary


def overlap_context_text(c: dict[str, Any]) -> str:
    """One paragraph: why the toy lab's overlap@k is far below the paper's (chance, unseen tokens,
    an input matrix still near its start), with the frequent-token overlap as a second figure."""
    k = c.get("k", OVERLAP_K)
    parts = []
    if c.get("chance") is not None:
        parts.append(f"chance overlap is k/(V-1) = {k}/{c['n_tokens'] - 1:,} = {c['chance']:.4f}")
    if c.get("unseen") is not None:
        parts.append(f"{c['unseen']:,} of the {c['n_tokens']:,} tokens never occur in the corpus, so their input "
                     "rows are still the initialisation")
    ev = c.get("input_cos_init")
    if ev and ev.get("I") is not None:
        parts.append(f"the untied input matrix's cosine to its start is still {ev['I']:.2f} at step {ev['step']:,}, "
                     "so much of its neighbour structure is the random initialisation's")
    text = ("The toy lab's overlaps sit far below the paper's because the twins are barely trained: "
            + "; ".join(parts) + "." if parts else "")
    fr = c.get("frequent") or {}
    if any(p in fr for p in ("T~I", "T~O", "I~O")):
        text += (f" Over the {fr['n_tokens']:,} tokens seen at least {c['min_count']} times (a second figure, not "
                 f"the paper's quantity): overlap@{k} " + ", ".join(
                     f"{p} {fr[p]:.3f}" for p in ("T~I", "T~O", "I~O") if p in fr) + ".")
    return text


def plus_minus(mean: float | None, std: float | None, n: int, digits: int = 3, missing: str = "n/a") -> str:
    """"0.123 ± 0.004": a mean over ``n`` seeds with its sample std (the mean alone with one seed)."""
    if mean is None:
        return missing
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if n > 1 and std is not None else "")


def paper_label(paper: PaperReference | None) -> str:
    """How the paper's figures are labelled beside this cache's: "paper", or "paper (olmo)" beside the toy lab."""
    return f"paper ({paper.preset})" if paper is not None and paper.beside_toylab else "paper"


# -- sentences the text summary and the Overview page both say (written once) --------------------

ONE_MODEL_NOTE = ("One tied model and no untied twin: its matrix T alone. Setting T beside an untied model's input "
                  "matrix I and output matrix O needs a pair trained alike (`python -m precompute pair --tied A "
                  "--untied B`); the toy lab's twins show it.")
"""What a page of a one-model cache says where a pair's comparison would be."""


def coverage_text(vocabulary: dict[str, Any]) -> str:
    """'4,096 common tokens: 100.0% of the tied vocabulary, 100.0% of the untied one' (one tied
    model: '49,152 tokens: the tied model's whole vocabulary')."""
    if vocabulary.get("coverage_untied") is None:
        return f"{vocabulary.get('n_common') or 0:,} tokens: the tied model's whole vocabulary (no untied twin)"
    return (f"{vocabulary.get('n_common') or 0:,} common tokens: {vocabulary.get('coverage_tied', 0):.1%} of the tied "
            f"vocabulary, {vocabulary.get('coverage_untied', 0):.1%} of the untied one")


def projection_text(umap: dict[str, Any]) -> str:
    """One line for the Projection page's caption: how many tokens were fitted and placed, and how
    well the placed ones sit (means over T, I and O) from a summary's "umap" (:func:`umap_summary`).

    '12,000 tokens fitted by AlignedUMAP, 38,304 placed from their 10 nearest fitted tokens
    (trustworthiness@10 0.93, fitted 0.95; nearest drawn neighbour among the 10 nearest in the
    original space for 71%, fitted 78%)'.
    """
    fitted, placed = umap.get("n_fitted") or 0, umap.get("n_placed") or 0
    common, placement = umap.get("n_common"), umap.get("placement") or {}
    settings = placement.get("settings") or {}
    k, qk = settings.get("k", 10), settings.get("quality_k", 10)
    fitter = "UMAP" if umap.get("views") == 1 else "AlignedUMAP"  # one tied model: one map
    text = f"{fitted:,} tokens fitted by {fitter}"
    if placed:
        text += f", {placed:,} placed from their {k} nearest fitted tokens"
        trust, share = _mean_of(placement, "placed", "trustworthiness"), _mean_of(placement, "placed", "nn_share")
        trust_fit, share_fit = (_mean_of(placement, "fitted", "trustworthiness"),
                                _mean_of(placement, "fitted", "nn_share"))
        if trust is not None and share is not None:
            text += (f" (trustworthiness@{qk} {trust:.2f}" + (f", fitted {trust_fit:.2f}" if trust_fit is not None
                                                               else "")
                     + f"; nearest drawn neighbour among the {qk} nearest in the original space for {share:.0%}"
                     + (f", fitted {share_fit:.0%}" if share_fit is not None else "") + ")")
    elif common and fitted >= common:
        text = f"all {fitted:,} {'common ' if fitter != 'UMAP' else ''}tokens fitted by {fitter} (none placed)"
    if common and fitted + placed < common:
        text += (f"; the other {common - fitted - placed:,} common tokens are not on the map (a cache written "
                 "before placement: rerun the umap stage)")
    return text


def match_text(s: Summary) -> str:
    """How rows were paired, and how the paper's Table 1 paired them when that differs."""
    match = (s.vocabulary or {}).get("match", "strings")
    paper = s.paper or PaperReference()
    text = f"rows paired by token {match[:-1]}"
    paper_match = paper.table1_match
    if paper.table1 is not None:
        text += (f"; the paper's Table 1 for this pair paired them by token {paper_match[:-1]} (rebuild with "
                 f"--match {paper_match} for the like-for-like number)" if paper_match != match
                 else ", as in the paper's Table 1")
    return text


def spectral_scope(spectral_params: dict[str, Any]) -> str:
    """Which tokens the spectral distance saw: all common tokens, or a seeded sample (which the paper does not)."""
    sp = spectral_params
    if sp.get("sampled"):
        return (f"a seeded sample of {sp.get('n_tokens') or 0:,} of the {sp.get('n_common') or 0:,} common tokens "
                "(the paper uses all of them)")
    return f"all {sp.get('n_tokens') or 0:,} common tokens"


def _mean_of(placement: dict[str, Any], part: str, measure: str) -> float | None:
    """The mean over the matrices T, I and O of ``placement[matrix][part][measure]`` (None if none has it)."""
    values = [((placement.get(m) or {}).get(part) or {}).get(measure) for m in ("T", "I", "O")]
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def twins_text(s) -> str:
    """How a trained cache's twins were started, as a clause to end a page's line: shared start (the
    control, not the paper's regime) or independent; '' for a cache not trained here."""
    if s.twins == SHARED_START:
        return ("; shared start: each untied twin began from its tied twin's initial weights and read the same "
                "batches (the control, not the paper's independently trained regime)")
    if s.twins == INDEPENDENT:
        return "; independent twins: each model its own initial weights and batch order"
    return ""
