"""Aligned UMAP projections (tying.analysis.umap_fit).

UMAP is slow to compile (numba) and every AlignedUMAP fit compiles its optimiser again, so
one module fixture makes a single aligned run that the quality checks share.
"""

import numpy as np
import pytest

from tying.analysis.umap_fit import aligned_umap

N_PER_CLUSTER, N_CLUSTERS = 40, 5


def clustered(rng, d, n_per=N_PER_CLUSTER, n_clusters=N_CLUSTERS):
    centres = rng.standard_normal((n_clusters, d)) * 4
    labels = np.repeat(np.arange(n_clusters), n_per)
    return (centres[labels] + rng.standard_normal((len(labels), d))).astype(np.float32), labels


@pytest.fixture(scope="module")
def matrices():
    """Three views of 200 tokens: a clustered 80-wide matrix (PCA to 50), the same matrix
    again, and a 30-wide noisy linear image of it (no PCA); and the cluster of each token."""
    rng = np.random.default_rng(0)
    X, labels = clustered(rng, 80)
    Y = (X @ rng.standard_normal((80, 30)) / np.sqrt(80) + 0.1 * rng.standard_normal((len(X), 30)))
    return [X, X.copy(), Y.astype(np.float32)], labels


@pytest.fixture(scope="module")
def views(matrices):
    """The three views, their aligned UMAP (one fit: the slow part) and the clusters."""
    views, labels = matrices
    return views, aligned_umap(views, n_neighbors=15, seed=0), labels


@pytest.mark.slow
def test_returns_finite_2d_per_matrix(views):
    matrices, embeddings, _ = views
    assert len(embeddings) == len(matrices)
    for E in embeddings:
        assert E.shape == (len(matrices[0]), 2)
        assert E.dtype == np.float32
        assert np.isfinite(E).all()


@pytest.mark.slow
def test_trustworthiness_on_clustered_data(views):
    from sklearn.manifold import trustworthiness  # (here: every worker collects this module)

    matrices, embeddings, _ = views
    for X, E in zip(matrices, embeddings):
        assert trustworthiness(X, E, n_neighbors=10, metric="cosine") >= 0.8


@pytest.mark.slow
def test_clusters_stay_separate(views):
    _, embeddings, labels = views
    E = embeddings[0]
    centroids = np.stack([E[labels == c].mean(axis=0) for c in range(N_CLUSTERS)])
    own = np.linalg.norm(E - centroids[labels], axis=1)
    others = np.linalg.norm(E[:, None, :] - centroids[None], axis=2)
    others[np.arange(len(E)), labels] = np.inf
    assert (own < others.min(axis=1)).mean() > 0.95


@pytest.mark.slow
def test_identical_matrices_place_tokens_together(views):
    _, embeddings, _ = views
    A, B = embeddings[0], embeddings[1]
    spread = np.linalg.norm(A - A.mean(axis=0), axis=1).mean()
    moved = np.linalg.norm(A - B, axis=1).mean()
    assert moved < 0.1 * spread


@pytest.mark.slow
def test_tiny_inputs():
    rng = np.random.default_rng(1)
    for n in (1, 2, 3):
        out = aligned_umap([rng.standard_normal((n, 5)), rng.standard_normal((n, 7))])
        assert [E.shape for E in out] == [(n, 2), (n, 2)]
        assert all(np.isfinite(E).all() for E in out)
    single = aligned_umap([rng.standard_normal((6, 5)).astype(np.float32)], n_neighbors=15)
    assert single[0].shape == (6, 2) and np.isfinite(single[0]).all()


def test_rows_must_match():
    with pytest.raises(ValueError, match="same tokens"):
        aligned_umap([np.zeros((5, 3)), np.zeros((6, 3))])
    with pytest.raises(ValueError):
        aligned_umap([])


@pytest.mark.slow
def test_graph_only_views_build_stock_aligned_umap_graphs(matrices):
    """The per-view UMAPs stop after their graphs (_lean_aligned_umap): each view's graph,
    weak edges zeroed included, is the one umap-learn's own AlignedUMAP.fit builds, bit for bit;
    no per-view layout is made; the stock class is back in place afterwards."""
    import contextlib

    import umap
    import umap.aligned_umap

    from tying.analysis.umap_fit import _kernels_on_disk, _lean_aligned_umap, _pca

    reduced = [_pca(v, 10, 0) for v in matrices[0]]
    identity = {i: i for i in range(len(reduced[0]))}
    _kernels_on_disk()  # the stock fit's kernels kept on disk as a lean fit's are (the once-an-install test)
    fits = []
    for context in (contextlib.nullcontext(), _lean_aligned_umap()):
        reducer = umap.AlignedUMAP(n_neighbors=10, min_dist=0.1, metric="cosine", random_state=0, n_epochs=30)
        with context:
            reducer.fit(reduced, relations=[identity] * (len(reduced) - 1))
        fits.append(reducer)
        assert umap.aligned_umap.UMAP is umap.UMAP
    stock, ours = fits
    zeroed = 0
    for theirs, mine in zip(stock.mappers_, ours.mappers_):
        assert hasattr(theirs, "embedding_") and not hasattr(mine, "embedding_")
        for part in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(mine.graph_, part), getattr(theirs.graph_, part))
        zeroed += int((mine.graph_.data == 0).sum())
    assert zeroed > 0  # the weak edges were there to zero: the check above saw them
    for E in ours.embeddings_:
        assert E.shape == (len(reduced[0]), 2) and np.isfinite(E).all()


def test_spectral_start_finds_the_laplacians_eigenvectors():
    """_spectral_start (the largest eigenvectors of I + D^-1/2 A D^-1/2) spans the plane of the
    normalised Laplacian's two smallest nontrivial eigenvectors, as a dense eigendecomposition
    finds them, on a connected graph; a disconnected graph is handed to umap's own
    multi-component layout; the swap is undone after the fit."""
    import scipy.sparse as sp
    import umap.spectral
    from sklearn.neighbors import kneighbors_graph

    from tying.analysis.umap_fit import _lean_aligned_umap, _spectral_start

    rng = np.random.default_rng(3)
    points = rng.uniform(0, 1, size=(400, 2)) * [3.0, 1.0]  # a strip: eigenvalues 2.1e-3, 8.3e-3, 1.6e-2
    A = kneighbors_graph(points, 10, mode="distance")
    A.data = np.exp(-(A.data / A.data.mean()) ** 2)
    A = sp.csr_matrix(A.maximum(A.T))
    scale = np.diag(1 / np.sqrt(np.asarray(A.sum(axis=0)).ravel()))
    _, exact = np.linalg.eigh(np.eye(400) - scale @ A.toarray() @ scale)
    own = umap.spectral._spectral_layout
    ours = _spectral_start(own)(None, A, 2, np.random.RandomState(0))
    assert ours.shape == (400, 2)
    q, _ = np.linalg.qr(ours)
    assert np.linalg.svd(q.T @ exact[:, 1:3], compute_uv=False).min() > 0.9999
    # the first coordinate runs along the strip's long side, as the Fiedler vector does
    assert abs(np.corrcoef(ours[:, 0], points[:, 0])[0, 1]) > 0.9

    calls = []

    def recording(**kwargs):
        calls.append(kwargs["graph"].shape[0])
        return own(**kwargs)

    two = sp.block_diag([A, A]).tocsr()
    out = _spectral_start(recording)(None, two, 2, np.random.RandomState(0))
    assert calls == [800] and out.shape == (800, 2) and np.isfinite(out).all()
    with _lean_aligned_umap():
        assert umap.spectral._spectral_layout is not own
    assert umap.spectral._spectral_layout is own


def test_what_the_lean_fit_replaces_is_still_there_in_umap_learn():
    """tying.analysis.umap_fit._lean_aligned_umap, the one place umap-learn is patched, swaps three
    module globals while AlignedUMAP fits: ``umap.aligned_umap.UMAP`` (the per-view UMAP its fit
    builds by that name), ``umap.spectral._spectral_layout`` (the solver ``spectral_layout`` calls
    by that name) and ``umap.layouts.numba`` (whose ``njit`` makes the aligned layout's epoch at
    each fit); and _kernels_on_disk switches numba's disk cache on for the kernels of UNCACHED_KERNELS.
    Where umap-learn renames one, stops looking it up there, or changes its arguments, the patch would
    quietly do nothing (it leaves a missing part as it is): this test fails first."""
    import inspect

    import umap
    import umap.aligned_umap as aligned
    import umap.spectral as spectral

    assert aligned.UMAP is umap.UMAP
    assert "UMAP(" in inspect.getsource(aligned.AlignedUMAP.fit)  # the name the swap replaces, looked up at fit
    assert "transform_mode" in umap.UMAP().get_params()  # GraphOnly stops each view's UMAP at its graph
    assert "_spectral_layout(" in inspect.getsource(spectral.spectral_layout)
    assert list(inspect.signature(spectral._spectral_layout).parameters)[:4] == ["data", "graph", "dim", "random_state"]
    # the epoch made by numba.njit at every fit, from umap.layouts' global numba (_KeptEpochJit keeps one)
    import numba
    import umap.layouts as layouts

    assert layouts.numba is numba and callable(layouts._optimize_layout_aligned_euclidean_single_epoch)
    assert "optimize_layout_aligned_euclidean(" in inspect.getsource(aligned.AlignedUMAP.fit)
    assert "numba.njit(\n        _optimize_layout_aligned_euclidean_single_epoch" in inspect.getsource(
        layouts.optimize_layout_aligned_euclidean)
    # the kernels whose compiled code _kernels_on_disk keeps: still numba dispatchers, by those names
    import importlib

    from tying.analysis.umap_fit import UNCACHED_KERNELS

    for module, name in UNCACHED_KERNELS:
        assert callable(getattr(getattr(importlib.import_module(module), name), "enable_caching", None)), name


@pytest.mark.slow
def test_a_second_aligned_fit_compiles_no_epoch_again(monkeypatch):
    """umap-learn makes the aligned layout's epoch with numba.njit at every fit, and numba compiled
    it again each time (2 to 3 s of a core): under _lean_aligned_umap the second fit in a process
    makes no epoch and compiles none; it uses the one the first made. Counted at numba.njit (a new
    dispatcher would now load its code from numba's disk cache, with no compile event to see) and
    in numba's own compile events."""
    import numba
    import umap.layouts as layouts
    from numba.core import event

    from tying.analysis.umap_fit import embed

    made = []
    njit = numba.njit

    def counting_njit(*args, **kwargs):
        made.extend(a for a in args[:1] if a is layouts._optimize_layout_aligned_euclidean_single_epoch)
        return njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", counting_njit)
    rng = np.random.default_rng(3)
    views = [rng.standard_normal((60, 8)).astype(np.float32) for _ in range(2)]

    def fit() -> tuple[int, int]:
        """(epochs made, epochs compiled) in one fit."""
        before = len(made)
        with event.install_recorder("numba:compile") as rec:
            maps = embed(views, n_neighbors=8, min_dist=0.1, seed=0, n_epochs=15)
        assert [m.shape for m in maps] == [(60, 2), (60, 2)] and all(np.isfinite(m).all() for m in maps)
        return len(made) - before, sum(getattr(ev.data.get("dispatcher"), "py_func", None)
                                       is layouts._optimize_layout_aligned_euclidean_single_epoch
                                       for _, ev in rec.buffer if ev.is_start)

    assert fit()[0] <= 1  # made here, unless an earlier fit of this process made it
    assert fit() == (0, 0)
    assert layouts.numba is __import__("numba")  # given back after the fit


def compiled_by_a_small_fit() -> list[str]:
    """The numba functions (module.qualname) compiled during the warm-up's fits (tests/umap_warmup.py's
    ``small_fits``), not during ``import umap`` (which compiles the kernels umap-learn types in advance,
    tau_rand's, anew)."""
    import umap  # noqa: F401
    from numba.core import event

    from tests.umap_warmup import small_fits

    with event.install_recorder("numba:compile") as rec:
        small_fits()
    funcs = [getattr(ev.data.get("dispatcher"), "py_func", None) for _, ev in rec.buffer if ev.is_start]
    return sorted({f"{f.__module__}.{f.__qualname__}" for f in funcs if f is not None})


@pytest.mark.slow
def test_umaps_kernels_compile_once_an_install_not_once_a_process():
    """umap-learn compiles most of its numba kernels without numba's disk cache, so every process
    that fitted compiled them again (about 19 s of a core; the pair stage's UMAP in every run).
    _kernels_on_disk keeps them on disk: after this process has fitted (aligned and single views),
    a new process's fits compile none of umap's kernels, only numba's own typed-list helpers. (This
    process compiled them with the cache on, or loaded them: its fits all go through umap_fit, the
    stock one of test_graph_only_views_build_stock_aligned_umap_graphs after _kernels_on_disk too.)"""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tying.analysis.umap_fit import _kernels_on_disk

    assert _kernels_on_disk() is True  # numba found a folder to keep them in (site-packages or NUMBA_CACHE_DIR)
    compiled_by_a_small_fit()  # compiles here whatever this process has not compiled yet, and keeps it
    root = Path(__file__).resolve().parent.parent
    probe = "import json; from tests.test_projection import compiled_by_a_small_fit as f; print(json.dumps(f()))"
    run = subprocess.run([sys.executable, "-c", probe], cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    second = json.loads(run.stdout.strip().splitlines()[-1])
    assert not [name for name in second if name.startswith("umap.")], second
    assert all(name.startswith("numba.") for name in second), second
