"""k-NN graphs, omnibus embedding and spectral distance (tying.spectral)."""

import numpy as np
import pytest
import scipy.sparse as sp

from tying import spectral
from tying.errors import UserError
from tying.neighbours import knn


@pytest.fixture(scope="module")
def neighbour_ids():
    """Neighbour ids (k=10) of one random matrix, a slightly perturbed copy, and an unrelated one."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 16)).astype(np.float32)
    near = X + 0.1 * rng.standard_normal(X.shape).astype(np.float32)
    other = rng.standard_normal(X.shape).astype(np.float32)
    return {name: knn(M, 10)[0] for name, M in (("x", X), ("near", near), ("other", other))}


def test_knn_graph_symmetric_binary_zero_diagonal():
    ids = np.array([[1, 2], [0, 2], [1, 0], [0, 1]])
    A = spectral.knn_graph(ids, 5)
    assert sp.issparse(A) and A.shape == (5, 5)
    dense = A.toarray()
    expected = np.zeros((5, 5))
    for i, row in enumerate(ids):
        expected[i, row] = expected[row, i] = 1
    np.testing.assert_array_equal(dense, expected)
    assert (dense == dense.T).all() and (np.diag(dense) == 0).all()
    assert set(np.unique(dense)) <= {0.0, 1.0}


def test_knn_graph_drops_self_and_checks_ids():
    A = spectral.knn_graph(np.array([[0, 1], [1, 0]]), 2)
    np.testing.assert_array_equal(A.toarray(), [[0, 1], [1, 0]])
    with pytest.raises(UserError):
        spectral.knn_graph(np.array([[5]]), 3)


def test_omnibus_blocks():
    A = sp.csr_matrix(np.array([[0, 1], [1, 0]], float))
    B = sp.csr_matrix(np.array([[0, 0], [0, 0]], float))
    M = spectral.omnibus(A, B).toarray()
    np.testing.assert_array_equal(M, [[0, 1, 0, 0.5], [1, 0, 0.5, 0], [0, 0.5, 0, 0], [0.5, 0, 0, 0]])


def test_ase_reconstructs_low_rank_matrix():
    """For a symmetric matrix of rank r, Z diag(sign s) Z^T over the top r components is M."""
    rng = np.random.default_rng(1)
    U = np.linalg.qr(rng.standard_normal((600, 3)))[0]
    s = np.array([5.0, -3.0, 2.0])
    M = (U * s) @ U.T
    Z = spectral.adjacency_spectral_embedding(sp.csr_matrix(M), 3)  # 600 > dense cut-off: eigsh path
    assert Z.shape == (600, 3)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=0) ** 2, [5, 3, 2], rtol=1e-8)
    signs = np.sign([5.0, -3.0, 2.0])
    np.testing.assert_allclose((Z * signs) @ Z.T, M, atol=1e-8)
    small = spectral.adjacency_spectral_embedding(M[:6, :6], 50)  # capped at n - 1
    assert small.shape == (6, 5)


def test_distance_to_itself_is_zero(neighbour_ids):
    ids = neighbour_ids["x"]
    assert spectral.spectral_distance(ids, ids, n_components=32) < 1e-6


def test_distance_orders_similarity_and_is_symmetric(neighbour_ids):
    x, near, other = neighbour_ids["x"], neighbour_ids["near"], neighbour_ids["other"]
    d_near = spectral.spectral_distance(x, near, n_components=32)
    d_other = spectral.spectral_distance(x, other, n_components=32)
    assert d_other > 0.1
    assert d_near < d_other
    assert spectral.spectral_distance(other, x, n_components=32) == pytest.approx(d_other, rel=1e-6)


def test_distance_on_tiny_input_uses_capped_components():
    ids = np.array([[1], [2], [0], [1]])
    assert spectral.spectral_distance(ids, ids, n_components=128) < 1e-6
    assert spectral.spectral_distance(ids, np.array([[3], [0], [3], [2]]), n_components=128) > 0.01


def test_mismatched_tokens_raise():
    with pytest.raises(UserError):
        spectral.spectral_distance(np.zeros((4, 2), int), np.zeros((5, 2), int))
