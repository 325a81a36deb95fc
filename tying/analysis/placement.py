"""Placing tokens into a map fitted on other tokens, and measuring how well they sit.

AlignedUMAP has no ``transform``, so a token outside the fitted sample is *placed*
(:func:`place`): it goes to the weighted mean of the map positions of its nearest fitted
tokens in the PCA-reduced space (cosine, exact search with FAISS, :func:`nearest_by_cosine`).
:func:`neighbourhood_scores` and :func:`holdout_check` measure how well placed tokens sit.
"""

from __future__ import annotations

import numpy as np

from tying.device import to_numpy

PLACE_K = 10
"""Fitted neighbours a placed token is interpolated from."""

PLACEMENT = f"knn{PLACE_K}-softmax"
"""How the umap stage places the tokens it did not fit, as its hash records it (a cache written
before placement existed reruns the stage and gains every common token)."""

SHARPNESS = 4.0
"""Softmax sharpness of :func:`place`: the k-th neighbour weighs e^-SHARPNESS of the nearest."""

DUPLICATE_COS = 1.0 - 1e-6
"""A token at least this cosine-similar to a fitted token is that token's duplicate and takes its place."""

QUALITY_K = 10
"""The k of the placement's quality measures (trustworthiness@k, nearest drawn neighbour among the k nearest)."""

QUALITY_TOKENS = 2000
"""Tokens (a seeded sample) the quality measures are computed for, placed and fitted apart."""

HOLDOUT_FRACTION = 0.05
"""Share of the fitted tokens placed again as if they were new, to check :func:`place`."""

CHUNK_ROWS = 8192
"""Rows per block of PCA transforms and k-NN searches (bounds memory)."""


def _as_numpy(X) -> np.ndarray:
    return np.asarray(to_numpy(X), dtype=np.float32)


def _unit(X: np.ndarray) -> np.ndarray:
    """Rows of X scaled to length 1 (float32, C-contiguous); an all-zero row stays zero."""
    X = np.asarray(X, dtype=np.float32)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(X / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def nearest_by_cosine(base: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(cosines, indices), each (n_queries, k): the k rows of ``base`` most cosine-similar to each
    query, nearest first. Exact (FAISS ``IndexFlatIP`` on unit rows), in blocks of queries."""
    import faiss  # deferred: heavy import

    B = _unit(base)
    k = int(min(k, len(B)))
    index = faiss.IndexFlatIP(B.shape[1])
    index.add(B)
    sims = np.empty((len(queries), k), dtype=np.float32)
    ids = np.empty((len(queries), k), dtype=np.int64)
    for first in range(0, len(queries), CHUNK_ROWS):
        Q = _unit(queries[first:first + CHUNK_ROWS])
        sims[first:first + len(Q)], ids[first:first + len(Q)] = index.search(Q, k)
    return sims, ids


def place(fitted_X, fitted_xy, new_X, k: int = PLACE_K) -> np.ndarray:
    """2-D positions for new rows in a map fitted on other rows: each new row goes to the weighted
    mean of the map positions of its ``k`` most cosine-similar fitted rows.

    fitted_X: (n_fit, d) the fitted rows in the space the map was fitted from (here PCA-reduced
    rows; the map's metric is cosine, so is the search); fitted_xy: (n_fit, 2) their map
    positions; new_X: (n_new, d) rows to place. Weights are a softmax of the cosines whose
    temperature is set per row by the spread of its neighbours' cosines,
    w_j = exp(SHARPNESS * (cos_j - cos_1) / (cos_1 - cos_k)), so the nearest weighs 1 and the
    k-th e^-4 whatever the scale of the cosines (held-out fitted tokens of the demo's
    matrices land nearer their fitted place than with equal weights or 1/(1 - cos)). A row
    with a duplicate among the fitted rows (cosine >= 1 - 1e-6) takes the duplicate's
    position (the mean of them if several); an all-zero row, which has no direction, goes to
    the centre of the fitted map. Pure: no state, deterministic.

    Returns float32 (n_new, 2).
    """
    fitted_X = _as_numpy(fitted_X)
    fitted_xy = np.asarray(fitted_xy, dtype=np.float64)
    new_X = _as_numpy(new_X)
    if fitted_X.ndim != 2 or new_X.ndim != 2 or fitted_X.shape[1] != new_X.shape[1]:
        raise ValueError(f"fitted and new rows must be 2-dimensional of one width, got {fitted_X.shape} "
                         f"and {new_X.shape}")
    if fitted_xy.shape != (len(fitted_X), 2):
        raise ValueError(f"fitted_xy must be ({len(fitted_X)}, 2), got {fitted_xy.shape}")
    if len(fitted_X) == 0:
        raise ValueError("no fitted rows to place new rows by")
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if len(new_X) == 0:
        return np.zeros((0, 2), dtype=np.float32)
    sims, ids = nearest_by_cosine(fitted_X, new_X, int(k))
    sims = sims.astype(np.float64)
    spread = sims[:, :1] - sims[:, -1:]
    scaled = np.divide(sims - sims[:, :1], spread, out=np.zeros_like(sims), where=spread > 0)
    weights = np.exp(SHARPNESS * scaled)
    duplicate = sims[:, 0] >= DUPLICATE_COS
    weights[duplicate] = (sims[duplicate] >= DUPLICATE_COS).astype(np.float64)
    xy = np.einsum("nk,nkc->nc", weights, fitted_xy[ids]) / weights.sum(axis=1, keepdims=True)
    zero = ~np.any(new_X != 0, axis=1)
    xy[zero] = fitted_xy.mean(axis=0)
    return xy.astype(np.float32)


# -- how well placed tokens sit ----------------------------------------------------------------


def neighbourhood_scores(X, xy, queries, k: int = QUALITY_K) -> dict[str, float]:
    """How well the map ``xy`` keeps the neighbourhoods of the rows ``queries`` of ``X``.

    X: (n, d) rows in the original space (cosine), xy: (n, 2) their map positions (Euclidean),
    queries: indices of the rows to score (a sample; neighbours are sought among all n rows,
    the query itself excluded). Returns

    * ``trustworthiness``: sklearn's trustworthiness at ``k`` restricted to the queries: each
      query's k nearest drawn neighbours are penalised by how far past k they rank among its
      neighbours in the original space, normalised as sklearn does (with the query count for
      the point count of the sum); with every row a query it is
      ``sklearn.manifold.trustworthiness(X, xy, n_neighbors=k, metric="cosine")``;
    * ``nn_share``: the share of queries whose nearest drawn neighbour is among their k nearest
      in the original space.
    """
    from scipy.spatial import cKDTree

    U = _unit(_as_numpy(X))
    xy = np.asarray(xy, dtype=np.float64)
    queries = np.asarray(queries, dtype=np.int64)
    n, m = len(U), len(queries)
    k = int(k)
    if not 1 <= k < n - 1 or m == 0:
        raise ValueError(f"need 1 <= k < n - 1 and some queries, got k={k}, n={n}, {m} queries")
    drawn = cKDTree(xy).query(xy[queries], k + 1)[1]
    # the query itself (first unless positions repeat) moved to the end, then cut off
    order = np.argsort(drawn == queries[:, None], axis=1, kind="stable")
    drawn = np.take_along_axis(drawn, order, axis=1)[:, :k]
    penalty, hits = 0.0, 0
    rows = np.arange(min(m, 256))
    for first in range(0, m, 256):
        q = queries[first:first + 256]
        r = rows[:len(q)]
        sims = U[q] @ U.T
        sims[r, q] = -np.inf
        near = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        theirs = sims[r[:, None], drawn[first:first + len(q)]]  # (b, k) cosines of the drawn neighbours
        ranks = 1 + (sims[:, None, :] > theirs[:, :, None]).sum(axis=2)
        penalty += float(np.maximum(ranks - k, 0).sum())
        hits += int((near == drawn[first:first + len(q), :1]).any(axis=1).sum())
    trust = 1.0 - penalty * 2.0 / (m * k * (2.0 * n - 3.0 * k - 1.0))
    return {"trustworthiness": trust, "nn_share": hits / m}


def map_extent(xy) -> float:
    """The diagonal of the box holding the middle 98% of the map's points (per axis): its scale."""
    xy = np.asarray(xy, dtype=np.float64)
    return float(np.linalg.norm(np.percentile(xy, 99, axis=0) - np.percentile(xy, 1, axis=0)))


def holdout_check(fitted_X, fitted_xy, *, fraction: float = HOLDOUT_FRACTION, k: int = PLACE_K,
                  seed: int = 0) -> dict[str, float] | None:
    """:func:`place` checked on fitted rows: a seeded ``fraction`` of them is placed again from
    the others, as if new, and compared with where the fit put them.

    Returns {"tokens": held-out count, "median_error": median distance between placed and
    fitted position over :func:`map_extent` of the map, "in_neighbourhood": share placed no
    farther from their fitted position than its k-th nearest other fitted token}; None when
    there are too few fitted rows (fewer than k + 2 left after holding out).
    """
    fitted_X = _as_numpy(fitted_X)
    fitted_xy = np.asarray(fitted_xy, dtype=np.float64)
    n = len(fitted_X)
    held_n = int(round(n * fraction))
    if held_n < 1 or n - held_n < int(k) + 2:
        return None
    rng = np.random.default_rng(seed)
    held = np.sort(rng.choice(n, size=held_n, replace=False))
    keep = np.setdiff1d(np.arange(n), held)
    placed = place(fitted_X[keep], fitted_xy[keep], fitted_X[held], k=k).astype(np.float64)
    error = np.linalg.norm(placed - fitted_xy[held], axis=1)
    from scipy.spatial import cKDTree

    radius = cKDTree(fitted_xy[keep]).query(fitted_xy[held], int(k))[0][:, -1]
    extent = map_extent(fitted_xy) or 1.0
    return {"tokens": held_n, "median_error": float(np.median(error) / extent),
            "in_neighbourhood": float((error <= radius).mean())}
