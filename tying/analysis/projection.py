"""2-D projections of several embedding matrices over the same tokens, aligned across views.

Each matrix (tied, untied input, untied output) is reduced with PCA, then all are embedded
together with AlignedUMAP (cosine metric), whose relations say that row i of one view is
row i of the next. A token therefore sits in a comparable place in every view, and the
views can be shown side by side or animated.
"""

from __future__ import annotations

import warnings

import numpy as np

from tying.loading.device import to_numpy


def _as_numpy(X) -> np.ndarray:
    return np.asarray(to_numpy(X), dtype=np.float32)


def _pca(X: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """X of shape (n, d) reduced to (n, min(dims, n, d)) principal components (float32)."""
    from sklearn.decomposition import PCA

    n, d = X.shape
    if d <= dims:
        return X
    dims = min(dims, n)
    solver = "randomized" if dims < 0.8 * min(n, d) else "full"
    return PCA(n_components=dims, svd_solver=solver, random_state=seed).fit_transform(X).astype(np.float32)


def aligned_umap(matrices: list, *, n_neighbors: int = 15, min_dist: float = 0.1, pca_dims: int = 50,
                 seed: int = 0, n_epochs: int = 200) -> list[np.ndarray]:
    """Aligned 2-D UMAP projections of matrices whose rows are the same tokens.

    matrices: list of arrays, each of shape (n_tokens, d_i) (widths may differ). Each is
    reduced to ``pca_dims`` principal components when wider, then all are embedded by
    AlignedUMAP with the cosine metric and identity relations between consecutive views.
    ``n_neighbors`` is capped at n_tokens - 1. ``n_epochs`` optimisation epochs (umap's own
    default is 500 below 10,000 points; 200 keeps small vocabularies quick at little cost in
    quality). Seeded: repeatable on one machine.

    Returns a list of float32 arrays of shape (n_tokens, 2), one per matrix. A token that
    UMAP leaves disconnected is placed at the centre of its view, so every value is finite;
    fewer than 4 tokens (too few for UMAP) are placed on a line, the same in every view.
    """
    if len(matrices) == 0:
        raise ValueError("aligned UMAP needs at least one matrix")
    views = [_as_numpy(X) for X in matrices]
    for i, X in enumerate(views):
        if X.ndim != 2:
            raise ValueError(f"matrix {i} must be 2-dimensional (tokens x width), got shape {X.shape}")
    n = views[0].shape[0]
    if any(X.shape[0] != n for X in views):
        raise ValueError(f"all matrices must have the same tokens (rows), got {[X.shape[0] for X in views]}")
    if n < 4:
        # Too few points for a neighbour graph: a line through the tokens, the same in every view.
        return [np.column_stack([np.arange(n, dtype=np.float32), np.zeros(n, np.float32)]) for _ in views]
    n_neighbors = max(2, min(int(n_neighbors), n - 1))
    views = [_pca(X, pca_dims, seed) for X in views]

    import umap  # imported here: slow to import (numba)

    with warnings.catch_warnings():
        # umap warns that a fixed random_state disables parallelism, and about tiny inputs;
        # a neighbour graph with several components is expected (umap lays them out apart).
        warnings.filterwarnings("ignore", category=UserWarning, module=r"umap\.")
        warnings.filterwarnings("ignore", message="Graph is not fully connected", category=UserWarning)
        warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
        if len(views) == 1:
            reducer = umap.UMAP(n_neighbors=n_neighbors, min_dist=min_dist, metric="cosine",
                                random_state=seed, init="spectral", n_epochs=n_epochs)
            embeddings = [reducer.fit_transform(views[0])]
        else:
            identity = {i: i for i in range(n)}
            reducer = umap.AlignedUMAP(n_neighbors=n_neighbors, min_dist=min_dist, metric="cosine",
                                       random_state=seed, n_epochs=n_epochs)
            reducer.fit(views, relations=[identity] * (len(views) - 1))
            embeddings = list(reducer.embeddings_)
    return [_fill_missing(np.asarray(E, dtype=np.float32)) for E in embeddings]


def _fill_missing(E: np.ndarray) -> np.ndarray:
    """Rows of E (n, 2) that are not finite moved to the centre of the finite rows."""
    bad = ~np.isfinite(E).all(axis=1)
    if bad.any():
        E = E.copy()
        E[bad] = E[~bad].mean(axis=0) if (~bad).any() else 0.0
    return E
