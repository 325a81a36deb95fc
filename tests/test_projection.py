"""Aligned UMAP projections (tying.analysis.projection).

UMAP is slow to compile (numba) and every AlignedUMAP fit compiles its optimiser again, so
one module fixture makes a single aligned run that the quality checks share.
"""

import numpy as np
import pytest
from sklearn.manifold import trustworthiness

from tying.analysis.projection import aligned_umap

N_PER_CLUSTER, N_CLUSTERS = 40, 5


def clustered(rng, d, n_per=N_PER_CLUSTER, n_clusters=N_CLUSTERS):
    centres = rng.standard_normal((n_clusters, d)) * 4
    labels = np.repeat(np.arange(n_clusters), n_per)
    return (centres[labels] + rng.standard_normal((len(labels), d))).astype(np.float32), labels


@pytest.fixture(scope="module")
def views():
    """Three views of 200 tokens: a clustered 80-wide matrix (PCA to 50), the same matrix
    again, and a 30-wide noisy linear image of it (no PCA)."""
    rng = np.random.default_rng(0)
    X, labels = clustered(rng, 80)
    Y = (X @ rng.standard_normal((80, 30)) / np.sqrt(80) + 0.1 * rng.standard_normal((len(X), 30)))
    matrices = [X, X.copy(), Y.astype(np.float32)]
    return matrices, aligned_umap(matrices, n_neighbors=15, seed=0), labels


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
