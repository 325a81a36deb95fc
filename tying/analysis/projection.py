"""2-D projections of several embedding matrices over the same tokens, aligned across views.

Each matrix (tied, untied input, untied output) is reduced with PCA, then all are embedded
together with AlignedUMAP (cosine metric), whose relations say that row i of one view is
row i of the next. A token therefore sits in a comparable place in every view, and the
views can be shown side by side or animated.

A large vocabulary is fitted on a sample (:func:`project`): every other token is then
*placed* into the same aligned coordinates by :func:`place`, from its nearest fitted tokens
in the PCA-reduced space (cosine, exact search with FAISS). AlignedUMAP has no ``transform``
(umap-learn 0.5 offers ``fit``, ``fit_transform`` and ``update``, which adds a whole new
view); the per-view ``mappers_`` it keeps do have one, but into each mapper's own, unaligned
layout, and umap's transform runs a nearest-neighbour search and optimisation epochs per
call. Interpolating from the fitted neighbours is one exact k-NN search per matrix (seconds
for 50,000 tokens on 2 cores), deterministic, and keeps each view aligned because the fitted
tokens it reads from already are. :func:`neighbourhood_scores` and :func:`holdout_check`
measure how well placed tokens sit.

The fit itself is :mod:`tying.analysis.umap_fit`, placing and measuring
:mod:`tying.analysis.placement`; this module runs them in turn over a whole vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tying.analysis.placement import (
    CHUNK_ROWS,
    HOLDOUT_FRACTION,
    PLACE_K,
    QUALITY_K,
    QUALITY_TOKENS,
    SHARPNESS,
    holdout_check,
    neighbourhood_scores,
    place,
)
from tying.analysis.umap_fit import EPOCHS, check_views, embed, line_layout, pca_fit


@dataclass
class Projection:
    """What :func:`project` returns: ``coords`` one float32 (n, 2) array per matrix (every row),
    ``placed`` a bool (n,) array (True: placed by :func:`place`, False: fitted by UMAP), and
    ``quality`` (see :func:`project`)."""

    coords: list[np.ndarray]
    placed: np.ndarray
    quality: dict = field(default_factory=dict)


def project(matrices: list, fit_rows=None, *, n_neighbors: int = 15, min_dist: float = 0.1, pca_dims: int = 50,
            seed: int = 0, n_epochs: int = EPOCHS, k: int = PLACE_K, quality_k: int = QUALITY_K,
            quality_tokens: int = QUALITY_TOKENS, holdout: float = HOLDOUT_FRACTION,
            progress: Callable[[str], None] | None = None) -> Projection:
    """Aligned 2-D maps of every row of ``matrices``: AlignedUMAP fitted on ``fit_rows`` (default:
    all rows), every other row placed into the same coordinates by :func:`place`.

    Each matrix is reduced by a PCA fitted on its fitted rows (as :func:`aligned_umap` does),
    which then reduces the other rows too (:func:`reduce_fitted`); placing and the quality
    measures work in that reduced space (:func:`complete_projection`, which documents
    ``quality``). Fewer than 4 fitted rows (too few for UMAP) are laid on a line as
    :func:`aligned_umap` does, and then nothing may be left to place.
    """
    say = progress or (lambda message: None)
    views = check_views(matrices)
    n = views[0].shape[0]
    fit = np.arange(n) if fit_rows is None else np.unique(np.asarray(fit_rows, dtype=np.int64))
    if len(fit) == 0 or fit[0] < 0 or fit[-1] >= n:
        raise ValueError(f"fit_rows must be indices of the {n} rows, at least one")
    if len(fit) < 4:
        if len(fit) < n:
            raise ValueError(f"fitting {len(fit)} rows is too few to place the other {n - len(fit)} by (at least 4)")
        return Projection(line_layout(views), np.zeros(n, dtype=bool), {})
    reduced_fit, transforms = reduce_fitted(views, fit, pca_dims=pca_dims, seed=seed)
    say(f"fitting AlignedUMAP on {len(fit):,} tokens")
    fitted = embed(reduced_fit, n_neighbors=n_neighbors, min_dist=min_dist, seed=seed, n_epochs=n_epochs)
    return complete_projection(views, fit, reduced_fit, transforms, fitted, k=k, quality_k=quality_k,
                               quality_tokens=quality_tokens, holdout=holdout, seed=seed, progress=progress)


def reduce_fitted(views: list[np.ndarray], fit: np.ndarray, *, pca_dims: int = 50, seed: int = 0
                  ) -> tuple[list[np.ndarray], list[Callable[[np.ndarray], np.ndarray]]]:
    """Per view: its ``fit`` rows reduced by a PCA fitted on them (as :func:`aligned_umap` reduces
    a matrix), and the function that reduces a block of its other rows the same way."""
    reduced, transforms = [], []
    for X in views:
        r, t = pca_fit(X[fit], pca_dims, seed)
        reduced.append(r)
        transforms.append(t)
    return reduced, transforms


def complete_projection(views: list[np.ndarray], fit: np.ndarray, reduced_fit: list[np.ndarray],
                        transforms: list[Callable[[np.ndarray], np.ndarray]], fitted: list[np.ndarray], *,
                        k: int = PLACE_K, quality_k: int = QUALITY_K, quality_tokens: int = QUALITY_TOKENS,
                        holdout: float = HOLDOUT_FRACTION, seed: int = 0,
                        progress: Callable[[str], None] | None = None) -> Projection:
    """Everything after the fit: the rows of ``views`` outside ``fit`` (sorted indices) reduced
    by ``transforms`` and placed by :func:`place` from the fitted rows (``reduced_fit``, their
    map ``fitted``), then the placement measured.

    ``quality`` holds, per view "0", "1", ... in order:

    * ``placed``: :func:`neighbourhood_scores` (trustworthiness@quality_k, nn_share) of a seeded
      sample of at most ``quality_tokens`` placed rows, neighbours sought among all rows;
      None when nothing was placed;
    * ``fitted``: the same for a sample of fitted rows (what UMAP itself achieves);
    * ``holdout``: :func:`holdout_check` with ``holdout`` of the fitted rows;

    and ``settings`` (k, quality_k, quality_tokens, holdout, the weighting) and ``seconds``,
    the time this took.
    """
    import time

    say = progress or (lambda message: None)
    t0 = time.perf_counter()
    n = views[0].shape[0]
    rest = np.setdiff1d(np.arange(n), fit)
    placed = np.zeros(n, dtype=bool)
    placed[rest] = True
    rng = np.random.default_rng(seed)
    sample_placed = np.sort(rng.choice(rest, size=min(len(rest), quality_tokens), replace=False)) if len(rest) else rest
    sample_fitted = np.sort(rng.choice(fit, size=min(len(fit), quality_tokens), replace=False))
    measurable = 1 <= quality_k < n - 1
    coords, quality = [], {}
    for i, (X, r, transform, xy_fit) in enumerate(zip(views, reduced_fit, transforms, fitted)):
        xy = np.empty((n, 2), dtype=np.float32)
        xy[fit] = xy_fit
        reduced = np.empty((n, r.shape[1]), dtype=np.float32)
        reduced[fit] = r
        if len(rest):
            say(f"placing {len(rest):,} tokens in view {i + 1} of {len(views)}")
            for first in range(0, len(rest), CHUNK_ROWS):  # in blocks: no copy of all the rows at once
                block = rest[first:first + CHUNK_ROWS]
                reduced[block] = transform(X[block])
            xy[rest] = place(r, xy_fit, reduced[rest], k=k)
        coords.append(xy)
        say(f"measuring the placement in view {i + 1} of {len(views)}")
        quality[str(i)] = {
            "placed": neighbourhood_scores(reduced, xy, sample_placed, quality_k) if len(rest) and measurable else None,
            "fitted": neighbourhood_scores(reduced, xy, sample_fitted, quality_k) if measurable else None,
            "holdout": holdout_check(r, xy_fit, fraction=holdout, k=k, seed=seed),
        }
    quality["settings"] = {"k": int(k), "quality_k": int(quality_k), "quality_tokens": int(quality_tokens),
                           "holdout": float(holdout), "weights": f"softmax, k-th neighbour e^-{SHARPNESS:g}"}
    quality["seconds"] = time.perf_counter() - t0
    return Projection(coords, placed, quality)
