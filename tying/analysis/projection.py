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
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from tying.loading.device import to_numpy

PLACE_K = 10
"""Fitted neighbours a placed token is interpolated from."""

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

_CHUNK_ROWS = 8192  # rows per block of PCA transforms and k-NN searches (bounds memory)


def _as_numpy(X) -> np.ndarray:
    return np.asarray(to_numpy(X), dtype=np.float32)


def _pca(X: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """X of shape (n, d) reduced to (n, min(dims, n, d)) principal components (float32)."""
    return _pca_fit(X, dims, seed)[0]


def _pca_fit(X: np.ndarray, dims: int, seed: int) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """(X reduced as :func:`_pca` does, a function reducing a block of other rows of its width the same way)."""
    from sklearn.decomposition import PCA

    n, d = X.shape
    if d <= dims:
        return X, lambda Y: np.asarray(Y, dtype=np.float32)
    dims = min(dims, n)
    solver = "randomized" if dims < 0.8 * min(n, d) else "full"
    pca = PCA(n_components=dims, svd_solver=solver, random_state=seed)
    reduced = pca.fit_transform(X).astype(np.float32)

    return reduced, lambda Y: pca.transform(np.asarray(Y, dtype=np.float32)).astype(np.float32)


def aligned_umap(matrices: list, *, n_neighbors: int = 15, min_dist: float = 0.1, pca_dims: int = 50,
                 seed: int = 0, n_epochs: int = 200) -> list[np.ndarray]:
    """Aligned 2-D UMAP projections of matrices whose rows are the same tokens.

    matrices: list of arrays, each of shape (n_tokens, d_i) (widths may differ). Each is
    reduced to ``pca_dims`` principal components when wider, then all are embedded by
    AlignedUMAP with the cosine metric and identity relations between consecutive views.
    ``n_neighbors`` is capped at n_tokens - 1. ``n_epochs`` optimisation epochs (umap's own
    default is 500 below 10,000 points; 200 keeps small vocabularies quick at little cost in
    quality). Seeded, yet not repeatable with several views: the neighbour graphs and the
    starting layout are fixed by the seed, but umap-learn's aligned optimiser (0.5.12: numba,
    ``parallel=True``, reseeding numpy's generator inside) gives other coordinates on each fit,
    even in one process on one thread; one view (plain UMAP) is repeatable.

    Returns a list of float32 arrays of shape (n_tokens, 2), one per matrix. A token that
    UMAP leaves disconnected is placed at the centre of its view, so every value is finite;
    fewer than 4 tokens (too few for UMAP) are placed on a line, the same in every view.
    """
    views = _check_views(matrices)
    if views[0].shape[0] < 4:
        return _line(views)
    return _embed([_pca(X, pca_dims, seed) for X in views], n_neighbors=n_neighbors, min_dist=min_dist, seed=seed,
                  n_epochs=n_epochs)


def _check_views(matrices: list) -> list[np.ndarray]:
    if len(matrices) == 0:
        raise ValueError("aligned UMAP needs at least one matrix")
    views = [_as_numpy(X) for X in matrices]
    for i, X in enumerate(views):
        if X.ndim != 2:
            raise ValueError(f"matrix {i} must be 2-dimensional (tokens x width), got shape {X.shape}")
    n = views[0].shape[0]
    if any(X.shape[0] != n for X in views):
        raise ValueError(f"all matrices must have the same tokens (rows), got {[X.shape[0] for X in views]}")
    return views


def _line(views: list[np.ndarray]) -> list[np.ndarray]:
    """Too few points for a neighbour graph: a line through the tokens, the same in every view."""
    n = views[0].shape[0]
    return [np.column_stack([np.arange(n, dtype=np.float32), np.zeros(n, np.float32)]) for _ in views]


def _embed(views: list[np.ndarray], *, n_neighbors: int, min_dist: float, seed: int, n_epochs: int) -> list[np.ndarray]:
    """AlignedUMAP (or UMAP for one view) of already reduced views of at least 4 rows."""
    n = views[0].shape[0]
    n_neighbors = max(2, min(int(n_neighbors), n - 1))

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
            with _lean_aligned_umap():
                reducer.fit(views, relations=[identity] * (len(views) - 1))
            embeddings = list(reducer.embeddings_)
    return [_fill_missing(np.asarray(E, dtype=np.float32)) for E in embeddings]


@contextmanager
def _lean_aligned_umap():
    """While AlignedUMAP fits: its per-view UMAPs stop at their graphs, and spectral starts are
    found from the top of the spectrum. The graphs are the same; the starts are the same
    eigenvectors, up to their signs and the solver's tolerance.

    *Graphs only.* ``AlignedUMAP.fit`` (umap-learn 0.5) fits one whole ``UMAP`` per view,
    layout included (a spectral start and every optimisation epoch), keeps only each one's
    graph, and then lays all views out again, together, from fresh spectral starts. Those
    per-view layouts are thrown away: UMAP's ``transform_mode="graph"`` (umap-learn >= 0.5.4)
    is UMAP itself stopping after the graph. Each UMAP seeds its own generator from
    ``random_state``, and the weak edges a layout would have zeroed in the graph it shares are
    zeroed here too, so the graphs the aligned layout starts from are the same, bit for bit
    (``tests/test_projection.py``; the aligned layout itself differs from one fit to the next
    either way, see :func:`aligned_umap`).

    *Spectral starts* (:func:`_spectral_start`): the same eigenvectors, found at the end of
    the spectrum where ARPACK converges (on a 400-point strip umap's own solve missed the
    second one, which the dense decomposition and this one agree on).

    Where umap lacks what is replaced (another version), that part is left as it is.
    """
    import umap
    import umap.aligned_umap as aligned
    import umap.spectral as spectral

    swaps = []
    base = getattr(aligned, "UMAP", None)
    if base is umap.UMAP and "transform_mode" in umap.UMAP().get_params():
        class GraphOnly(base):
            def __init__(self, **kwargs):
                super().__init__(transform_mode="graph", **kwargs)

            def fit(self, *args, **kwargs):
                super().fit(*args, **kwargs)
                # the layout it skips would have zeroed, in the graph it shares, the edges too weak
                # to be sampled in n_epochs (umap's simplicial_set_embedding): the aligned layout's
                # spectral start reads those weights
                epochs = self.n_epochs
                if epochs is not None and epochs > 10 and self.graph_.nnz:
                    data = self.graph_.data
                    data[data < data.max() / float(epochs)] = 0.0
                return self

        swaps.append((aligned, "UMAP", GraphOnly))
    if callable(getattr(spectral, "_spectral_layout", None)):
        swaps.append((spectral, "_spectral_layout", _spectral_start(spectral._spectral_layout)))
    before = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, replacement in swaps:
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in before:
            setattr(module, name, original)


def _spectral_start(umaps_own: Callable) -> Callable:
    """umap's spectral layout of a connected graph, computed from the other end of the spectrum.

    umap-learn starts a layout from the eigenvectors of the normalised Laplacian
    L = I - D^-1/2 A D^-1/2 with the smallest eigenvalues after the zero one, which it asks
    ARPACK for directly (``eigsh(L, which="SM")``, tolerance 1e-4). Where those eigenvalues are
    tiny and close, ARPACK crawls: on the 20,000 fitted tokens of a Qwen3-shaped untied input
    matrix (bench/bench_pair_stages.py), eigenvalues 1.5e-5 and 2.6e-4, it ran for more than
    30 minutes. They are the eigenvectors of 2I - L = I + D^-1/2 A D^-1/2 with the largest
    eigenvalues, which ARPACK finds in 0.6 s on that graph. A graph of several components goes
    to umap's own layout (which lays each component out with this function again); a small
    one, or a failed solve, too.
    """
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import ArpackError, eigsh

    def start(data, graph, dim, random_state, **kwargs):
        import scipy.sparse as sp

        def own():
            return umaps_own(data=data, graph=graph, dim=dim, random_state=random_state, **kwargs)

        n = graph.shape[0]
        if n <= 3 * (dim + 1) or connected_components(graph)[0] > 1:
            return own()
        degree = np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
        if not (degree > 0).all():
            return own()
        scale = sp.diags(1.0 / np.sqrt(degree))
        top = sp.identity(n, dtype=np.float64, format="csr") + scale @ graph.astype(np.float64) @ scale
        try:
            values, vectors = eigsh(top, dim + 1, which="LA", tol=kwargs.get("tol") or 1e-4, v0=np.ones(n))
        except ArpackError:
            return own()
        return vectors[:, np.argsort(-values)[1:dim + 1]]

    return start


def _fill_missing(E: np.ndarray) -> np.ndarray:
    """Rows of E (n, 2) that are not finite moved to the centre of the finite rows."""
    bad = ~np.isfinite(E).all(axis=1)
    if bad.any():
        E = E.copy()
        E[bad] = E[~bad].mean(axis=0) if (~bad).any() else 0.0
    return E


# -- placing tokens into a fitted map ---------------------------------------------------------


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
    for first in range(0, len(queries), _CHUNK_ROWS):
        Q = _unit(queries[first:first + _CHUNK_ROWS])
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


# -- the whole projection: fit a sample, place the rest, measure ----------------------------------


@dataclass
class Projection:
    """What :func:`project` returns: ``coords`` one float32 (n, 2) array per matrix (every row),
    ``placed`` a bool (n,) array (True: placed by :func:`place`, False: fitted by UMAP), and
    ``quality`` (see :func:`project`)."""

    coords: list[np.ndarray]
    placed: np.ndarray
    quality: dict = field(default_factory=dict)


def project(matrices: list, fit_rows=None, *, n_neighbors: int = 15, min_dist: float = 0.1, pca_dims: int = 50,
            seed: int = 0, n_epochs: int = 200, k: int = PLACE_K, quality_k: int = QUALITY_K,
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
    views = _check_views(matrices)
    n = views[0].shape[0]
    fit = np.arange(n) if fit_rows is None else np.unique(np.asarray(fit_rows, dtype=np.int64))
    if len(fit) == 0 or fit[0] < 0 or fit[-1] >= n:
        raise ValueError(f"fit_rows must be indices of the {n} rows, at least one")
    if len(fit) < 4:
        if len(fit) < n:
            raise ValueError(f"fitting {len(fit)} rows is too few to place the other {n - len(fit)} by (at least 4)")
        return Projection(_line(views), np.zeros(n, dtype=bool), {})
    reduced_fit, transforms = reduce_fitted(views, fit, pca_dims=pca_dims, seed=seed)
    say(f"fitting AlignedUMAP on {len(fit):,} tokens")
    fitted = _embed(reduced_fit, n_neighbors=n_neighbors, min_dist=min_dist, seed=seed, n_epochs=n_epochs)
    return complete_projection(views, fit, reduced_fit, transforms, fitted, k=k, quality_k=quality_k,
                               quality_tokens=quality_tokens, holdout=holdout, seed=seed, progress=progress)


def reduce_fitted(views: list[np.ndarray], fit: np.ndarray, *, pca_dims: int = 50, seed: int = 0
                  ) -> tuple[list[np.ndarray], list[Callable[[np.ndarray], np.ndarray]]]:
    """Per view: its ``fit`` rows reduced by a PCA fitted on them (as :func:`aligned_umap` reduces
    a matrix), and the function that reduces a block of its other rows the same way."""
    reduced, transforms = [], []
    for X in views:
        r, t = _pca_fit(X[fit], pca_dims, seed)
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
            for first in range(0, len(rest), _CHUNK_ROWS):  # in blocks: no copy of all the rows at once
                block = rest[first:first + _CHUNK_ROWS]
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
