"""Fitting the aligned map: several embedding matrices over the same tokens, each reduced with
PCA, then embedded together by AlignedUMAP (cosine metric) so that a token sits in a
comparable place in every view (:func:`aligned_umap`).

The fit is what :func:`tying.analysis.projection.project` runs on its sample of tokens; umap's
own fit is made leaner while it runs (:func:`_lean_aligned_umap`): graphs only for the per-view
UMAPs, spectral starts found from the top of the spectrum, the layout's epoch compiled once a process;
and umap's numba kernels are compiled once an install rather than once a process (:func:`_kernels_on_disk`).
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from contextlib import contextmanager

import numpy as np

EPOCHS = 100
"""UMAP optimisation epochs, the umap stage's default (on an OLMo-shaped pair, 20,000 tokens
fitted: 270 s at 100 against 339 s at 200, trustworthiness@10 0.938 against 0.943; 200 is
umap-learn's own default for large inputs)."""

def _as_numpy(X) -> np.ndarray:
    if "torch" in sys.modules:  # a tensor only where torch is loaded (not imported here: about 2 s)
        from tying.device import to_numpy

        X = to_numpy(X)
    return np.asarray(X, dtype=np.float32)


def _pca(X: np.ndarray, dims: int, seed: int) -> np.ndarray:
    """X of shape (n, d) reduced to (n, min(dims, n, d)) principal components (float32)."""
    return pca_fit(X, dims, seed)[0]


def pca_fit(X: np.ndarray, dims: int, seed: int) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
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
                 seed: int = 0, n_epochs: int = EPOCHS) -> list[np.ndarray]:
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
    views = check_views(matrices)
    if views[0].shape[0] < 4:
        return line_layout(views)
    return embed([_pca(X, pca_dims, seed) for X in views], n_neighbors=n_neighbors, min_dist=min_dist, seed=seed,
                  n_epochs=n_epochs)


def check_views(matrices: list) -> list[np.ndarray]:
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


def line_layout(views: list[np.ndarray]) -> list[np.ndarray]:
    """Too few points for a neighbour graph: a line through the tokens, the same in every view."""
    n = views[0].shape[0]
    return [np.column_stack([np.arange(n, dtype=np.float32), np.zeros(n, np.float32)]) for _ in views]


def embed(views: list[np.ndarray], *, n_neighbors: int, min_dist: float, seed: int, n_epochs: int) -> list[np.ndarray]:
    """AlignedUMAP (or UMAP for one view) of already reduced views of at least 4 rows."""
    n = views[0].shape[0]
    n_neighbors = max(2, min(int(n_neighbors), n - 1))

    import umap  # imported here: slow to import (numba)

    _kernels_on_disk()
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

    *One compiled epoch.* umap's aligned layout makes its epoch function anew with ``numba.njit`` at
    every fit, which numba then compiles again (:class:`_KeptEpochJit`).

    Where umap lacks what is replaced (another version), that part is left as it is; this is the
    one place umap-learn is patched, and tests/test_projection.py
    (``test_what_the_lean_fit_replaces_is_still_there_in_umap_learn``) fails when umap-learn renames,
    stops looking up, or changes the arguments of what it replaces.
    """
    import umap
    import umap.aligned_umap as aligned
    import umap.layouts as layouts
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
    epoch = getattr(layouts, "_optimize_layout_aligned_euclidean_single_epoch", None)
    if epoch is not None and getattr(layouts, "numba", None) is not None:
        swaps.append((layouts, "numba", _KeptEpochJit(layouts.numba, epoch)))
    before = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, replacement in swaps:
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in before:
            setattr(module, name, original)


ALIGNED_EPOCH_OPTIONS = {"fastmath": True, "parallel": True}
"""The options ``optimize_layout_aligned_euclidean`` (umap-learn 0.5.12, as AlignedUMAP calls it) makes its
epoch with: the variant kept in numba's disk cache (:func:`_kernels_on_disk`)."""

_KEPT_EPOCHS: dict = {}
"""The aligned layout's epoch as numba compiled it, by (function, njit options): kept for the process."""


class _KeptEpochJit:
    """``numba`` as ``umap.layouts`` sees it while AlignedUMAP fits, but for its ``njit`` of the aligned
    layout's epoch, made once a process. ``optimize_layout_aligned_euclidean`` (umap-learn 0.5) calls
    ``numba.njit(_optimize_layout_aligned_euclidean_single_epoch, ...)`` at every fit: a new dispatcher,
    which numba compiled anew (2 to 3 s of a core each fit; the same signature, five times over the
    tests' five fits; umap's single-view layout keeps its compiled epoch at module level). The same
    function with the same options now gets the same dispatcher, so the code compiled the first
    time; every other name and call passes through to numba."""

    def __init__(self, numba_module, epoch: Callable):
        self._numba, self._epoch = numba_module, epoch

    def __getattr__(self, name: str):
        return getattr(self._numba, name)

    def njit(self, *args, **kwargs):
        if len(args) != 1 or args[0] is not self._epoch:
            return self._numba.njit(*args, **kwargs)
        key = (self._epoch, tuple(sorted(kwargs.items())))
        try:
            kept = _KEPT_EPOCHS.get(key)
        except TypeError:  # an option numba takes that cannot be a key: made as umap makes it
            return self._numba.njit(*args, **kwargs)
        if kept is None:
            # numba's disk cache files a function's code by signature, not by options: one variant kept
            # on disk, the one AlignedUMAP (0.5.12) makes
            cache = kwargs == ALIGNED_EPOCH_OPTIONS and _kernels_on_disk()
            kept = _KEPT_EPOCHS[key] = self._numba.njit(*args, **({**kwargs, "cache": True} if cache else kwargs))
        return kept


UNCACHED_KERNELS = (("umap.utils", "fast_knn_indices"), ("umap.distances", "cosine"),
                    ("umap.umap_", "smooth_knn_dist"), ("umap.umap_", "compute_membership_strengths"),
                    ("umap.aligned_umap", "build_neighborhood_similarities"), ("umap.aligned_umap", "procrustes_align"),
                    ("umap.layouts", "_nb_optimize_layout_euclidean_single_epoch"))
"""The numba kernels of umap-learn (0.5) that a fit here compiles and umap-learn does not keep on disk
(``cache=True``): each is compiled at its first call in every process, about 19 s of a core together."""

@functools.cache
def _kernels_on_disk() -> bool:
    """Numba's disk cache switched on, once a process, for :data:`UNCACHED_KERNELS`, as ``cache=True`` would
    have: the first fit on an install compiles them and saves them beside umap's sources (or in
    ``NUMBA_CACHE_DIR``), and every later process loads them (a 300-token aligned fit in a new process:
    20.6 s, then 1.9 s). Returns whether numba found a folder to write them in. A kernel umap-learn no
    longer has (or a module it moved) is left out. Of the single-view epoch's two variants the serial one
    is cached (a seeded fit's): numba files a function's compiled code by its signature, not its options."""
    import importlib

    switched = False
    for module, name in UNCACHED_KERNELS:
        try:
            getattr(importlib.import_module(module), name).enable_caching()
        except (ImportError, AttributeError, RuntimeError, OSError):  # gone, or nowhere numba may write
            continue
        switched = True
    return switched


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
