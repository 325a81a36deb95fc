"""k-NN graphs, omnibus embedding and spectral distance (tying.analysis.spectral)."""

import numpy as np
import pytest
import scipy.sparse as sp

from tying.analysis import spectral
from tying.analysis.neighbours import knn


@pytest.fixture(scope="module")
def neighbour_ids():
    """Neighbour ids (k=10) of one random matrix, a slightly perturbed copy, and an unrelated one."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 16)).astype(np.float32)
    near = X + 0.1 * rng.standard_normal(X.shape).astype(np.float32)
    other = rng.standard_normal(X.shape).astype(np.float32)
    return {name: knn(M, 10)[0] for name, M in (("x", X), ("near", near), ("other", other))}


def test_knn_graph_weighted_symmetric_zero_diagonal():
    """(A_dir + A_dir^T) / 2: mutual neighbours weigh 1, one-way neighbours 0.5 (Appendix B)."""
    ids = np.array([[1, 2], [0, 2], [1, 0], [0, 1]])
    A = spectral.knn_graph(ids, 5)
    assert sp.issparse(A) and A.shape == (5, 5)
    dense = A.toarray()
    directed = np.zeros((5, 5))
    for i, row in enumerate(ids):
        directed[i, row] = 1
    np.testing.assert_array_equal(dense, (directed + directed.T) / 2)
    # by hand: 0<->1, 0<->2, 1<->2 are mutual; 3->0 and 3->1 are one-way; node 4 is isolated
    assert dense[0, 1] == dense[0, 2] == dense[1, 2] == 1.0
    assert dense[3, 0] == dense[0, 3] == dense[3, 1] == 0.5
    assert (dense == dense.T).all() and (np.diag(dense) == 0).all() and not dense[4].any()


def _reference_distance(A: np.ndarray, B: np.ndarray, c: int, *, norm="spectral", scale=min) -> float:
    """Appendix B written out densely: omnibus, top-c |eigenvalue| ASE, normalised norm of Za - Zb."""
    mid = (A + B) / 2
    M = np.block([[A, mid], [mid, B]])
    vals, vecs = np.linalg.eigh(M)
    top = np.argsort(-np.abs(vals))[:c]
    Z = vecs[:, top] * np.sqrt(np.abs(vals[top]))
    n = len(A)
    Za, Zb = Z[:n], Z[n:]
    size = (lambda X: np.linalg.norm(X, 2)) if norm == "spectral" else (lambda X: np.linalg.norm(X, "fro"))
    return size(Za - Zb) / scale(size(Za), size(Zb))


def test_spectral_distance_of_two_small_graphs_by_hand():
    """Two 4-token k=1 graphs, their weighted adjacency written out by hand.

    a: 0->1, 1->0, 2->1, 3->2  gives a01 = 1 (mutual), a12 = a23 = 0.5
    b: 0->3, 1->0, 2->0, 3->2  gives b03 = b01 = b02 = b23 = 0.5 (all one-way)
    """
    ids_a = np.array([[1], [0], [1], [2]])
    ids_b = np.array([[3], [0], [0], [2]])
    A = np.array([[0, 1, 0, 0], [1, 0, .5, 0], [0, .5, 0, .5], [0, 0, .5, 0]])
    B = np.array([[0, .5, .5, .5], [.5, 0, 0, 0], [.5, 0, 0, .5], [.5, 0, .5, 0]])
    np.testing.assert_array_equal(spectral.knn_graph(ids_a, 4).toarray(), A)
    np.testing.assert_array_equal(spectral.knn_graph(ids_b, 4).toarray(), B)
    for c in (2, 3, 7):
        expected = _reference_distance(A, B, c)
        got = spectral.spectral_distance(ids_a, ids_b, n_components=c)
        assert got == pytest.approx(expected, rel=1e-9), c
    # The test can tell the paper's definition from near variants: the two embeddings differ in
    # norm (min vs max scale) and Za - Zb has rank > 1 (spectral vs Frobenius norm).
    right = _reference_distance(A, B, 3)
    assert right == pytest.approx(0.51866, abs=1e-5)
    for wrong in (_reference_distance(A, B, 3, scale=max), _reference_distance(A, B, 3, norm="fro")):
        assert abs(wrong - right) > 1e-2
    # and the binary max(A, A^T) graph gives another number than the weighted one
    binary_a, binary_b = np.ceil(A), np.ceil(B)
    assert abs(_reference_distance(binary_a, binary_b, 3) - right) > 1e-2


def test_spectral_distance_equals_dense_reference_on_random_graphs():
    """A larger case through the iterative solver (2n > 512) against the dense reference."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 8)).astype(np.float32)
    Y = X + 0.5 * rng.standard_normal(X.shape).astype(np.float32)
    ids_x, ids_y = knn(X, 6)[0], knn(Y, 6)[0]
    A = spectral.knn_graph(ids_x, 300).toarray()
    B = spectral.knn_graph(ids_y, 300).toarray()
    assert 0.5 in A and 1.0 in A  # both one-way and mutual edges occur
    expected = _reference_distance(A, B, 16)
    # the iterative solver runs in float32: within 1e-5 of the float64 reference
    assert spectral.spectral_distance(ids_x, ids_y, n_components=16) == pytest.approx(expected, abs=1e-5)
    assert abs(_reference_distance(A, B, 16, scale=max) - expected) > 1e-4
    assert abs(_reference_distance(A, B, 16, norm="fro") - expected) > 1e-3


def test_knn_graph_drops_self_and_checks_ids():
    A = spectral.knn_graph(np.array([[0, 1], [1, 0]]), 2)
    np.testing.assert_array_equal(A.toarray(), [[0, 1], [1, 0]])
    A = spectral.knn_graph(np.array([[1, 1], [1, 1]]), 2)  # a repeated id counts once; 1 -> 1 is self
    np.testing.assert_array_equal(A.toarray(), [[0, 0.5], [0.5, 0]])
    with pytest.raises(ValueError):
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
    assert spectral.spectral_distance(other, x, n_components=32) == pytest.approx(d_other, abs=1e-5)  # float32


def test_distance_on_tiny_input_uses_capped_components():
    ids = np.array([[1], [2], [0], [1]])
    assert spectral.spectral_distance(ids, ids, n_components=128) < 1e-6
    assert spectral.spectral_distance(ids, np.array([[3], [0], [3], [2]]), n_components=128) > 0.01


def test_mismatched_tokens_raise():
    with pytest.raises(ValueError):
        spectral.spectral_distance(np.zeros((4, 2), int), np.zeros((5, 2), int))


def test_float32_solver_keeps_the_float64_distance():
    """Above 512 nodes the omnibus embedding runs ARPACK in float32: the distance stays within
    1e-3 of float64's on the same graphs (clustered points, 1,200 tokens, k=20)."""
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((30, 16))
    label = rng.integers(0, 30, 1200)
    a = centres[label] + 0.6 * rng.standard_normal((1200, 16))
    b = a + 0.5 * rng.standard_normal((1200, 16))
    ids_a, ids_b = knn(a.astype(np.float32), 20)[0], knn(b.astype(np.float32), 20)[0]
    A, B = spectral.knn_graph(ids_a, 1200), spectral.knn_graph(ids_b, 1200)
    Z64 = spectral.adjacency_spectral_embedding(spectral.omnibus(A, B), 32)  # the float64 solver
    Z32 = spectral.adjacency_spectral_embedding(spectral.omnibus(A, B), 32, dtype=np.float32)
    assert Z32.shape == Z64.shape == (2400, 32)

    def distance(Z):
        za, zb = Z[:1200], Z[1200:]
        return spectral._spectral_norm(za - zb) / min(spectral._spectral_norm(za), spectral._spectral_norm(zb))

    assert 0.05 < distance(Z64) < 2  # a real distance, not 0
    assert abs(distance(Z32) - distance(Z64)) < 1e-3
    assert spectral.spectral_distance(ids_a, ids_b, n_components=32) == pytest.approx(distance(Z32), abs=1e-12)
