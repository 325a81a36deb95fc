"""k nearest neighbours and overlap@k (tying.analysis.neighbours) against brute force and known answers."""

import numpy as np
import pytest
import torch

from tying.analysis import neighbours as nb

CPU = torch.device("cpu")
BACKENDS = ["faiss", "torch", "symmetric"]


def brute_force(X, k):
    """Reference: full cosine matrix, self masked, stable sort (ties by lower id)."""
    X = X.astype(np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xn = X / np.where(norms > 0, norms, 1.0)
    S = Xn @ Xn.T
    np.fill_diagonal(S, -np.inf)
    ids = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(S, ids, axis=1), S


@pytest.mark.parametrize("backend", BACKENDS)
def test_knn_matches_brute_force(backend):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((700, 24)).astype(np.float32)
    ids, scores = nb.knn(X, 10, backend=backend, device=CPU, block_rows=128)
    ref_ids, ref_scores, _ = brute_force(X, 10)
    assert ids.shape == (700, 10) and ids.dtype == np.int32
    assert scores.shape == (700, 10) and scores.dtype == np.float32
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    assert not (ids == np.arange(700)[:, None]).any()
    assert (np.diff(scores, axis=1) <= 0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_knn_accepts_torch_tensor(backend):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 8)).astype(np.float32)
    ids, _ = nb.knn(torch.from_numpy(X), 5, backend=backend, device=CPU)
    np.testing.assert_array_equal(ids, brute_force(X, 5)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_knn_with_duplicates_and_zero_rows(backend):
    """Many copies of one row: self is still excluded even where it does not rank first;
    zero rows have cosine 0 with everything, so their neighbours are the lowest ids."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 16)).astype(np.float32)
    copies = np.r_[5, 40:70]  # 31 identical rows
    X[copies] = X[5]
    X[[100, 101, 250]] = 0.0
    k = 12
    ids, scores = nb.knn(X, k, backend=backend, device=CPU, block_rows=64)
    ref_ids, ref_scores, S = brute_force(X, k)

    assert not (ids == np.arange(300)[:, None]).any()
    assert all(len(set(row)) == k for row in ids)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    # every returned id really has the returned cosine
    np.testing.assert_allclose(np.take_along_axis(S, ids.astype(np.int64), axis=1), scores, atol=1e-5)
    for c in copies:
        expected = [j for j in copies if j != c][:k]  # ties ordered by id
        np.testing.assert_array_equal(ids[c], expected)
        np.testing.assert_allclose(scores[c], 1.0, atol=1e-5)
    for z in (100, 101, 250):
        np.testing.assert_array_equal(ids[z], np.arange(k + 1)[:k])
        np.testing.assert_array_equal(scores[z], 0.0)


def test_backends_agree():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((500, 32)).astype(np.float32)
    a, sa = nb.knn(X, 8, backend="faiss")
    b, sb = nb.knn(X, 8, backend="torch", device=CPU, block_rows=100)
    c, _ = nb.knn(X, 8, backend="auto", device=CPU)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_allclose(sa, sb, atol=1e-5)


def test_knn_tiny_input_k_is_n_minus_one():
    X = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    for backend in BACKENDS:
        ids, scores = nb.knn(X, 2, backend=backend, device=CPU)
        np.testing.assert_array_equal(ids, [[2, 1], [2, 0], [0, 1]])
        np.testing.assert_allclose(scores[0], [np.sqrt(0.5), 0.0], atol=1e-6)


def test_knn_bad_arguments_raise_user_error():
    X = np.zeros((5, 3), np.float32)
    with pytest.raises(ValueError, match="k must be"):
        nb.knn(X, 5)
    with pytest.raises(ValueError, match="k must be"):
        nb.knn(X, 0)
    with pytest.raises(ValueError, match="backend"):
        nb.knn(X, 2, backend="annoy")


def test_overlap_of_matrix_with_itself_is_one():
    rng = np.random.default_rng(4)
    ids, _ = nb.knn(rng.standard_normal((300, 10)).astype(np.float32), 10)
    ov = nb.overlap_at_k(ids, ids, 10)
    assert ov.dtype == np.float32 and ov.shape == (300,)
    np.testing.assert_array_equal(ov, 1.0)
    np.testing.assert_allclose(nb.overlap_curve(ids, ids, 10), 1.0)


def test_overlap_at_k_known_values():
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = np.array([[3, 9, 1, 2], [0, 9, 10, 5]])
    np.testing.assert_allclose(nb.overlap_at_k(a, b, 4), [0.75, 0.25])
    np.testing.assert_allclose(nb.overlap_at_k(a, b, 3), [2 / 3, 0.0])
    np.testing.assert_allclose(nb.overlap_at_k(a, b, 1), [0.0, 0.0])
    np.testing.assert_allclose(nb.overlap_curve(a, b, 4), [0.0, 0.0, 1 / 3, 0.5])


def test_independent_random_matrices_overlap_near_chance():
    """Unrelated matrices share neighbours at the chance rate k / (n - 1)."""
    rng = np.random.default_rng(5)
    n, k = 400, 10
    a, _ = nb.knn(rng.standard_normal((n, 16)).astype(np.float32), k)
    b, _ = nb.knn(rng.standard_normal((n, 16)).astype(np.float32), k)
    mean = nb.overlap_at_k(a, b, k).mean()
    chance = k / (n - 1)
    # per token the shared count is ~hypergeometric (variance <= k * chance); the mean over
    # n tokens is within a few standard errors of chance
    stderr = np.sqrt(chance * (1 - chance) / k / n)
    assert abs(mean - chance) < 6 * stderr + 0.005


def test_overlap_curve_matches_per_k_means():
    rng = np.random.default_rng(6)
    n, k_max = 257, 20
    a = np.argsort(rng.random((n, 40)), axis=1)[:, :k_max]
    b = np.argsort(rng.random((n, 40)), axis=1)[:, :k_max]
    curve = nb.overlap_curve(a, b, k_max, block_rows=50)
    assert curve.shape == (k_max,)
    expected = [nb.overlap_at_k(a, b, k).mean(dtype=np.float64) for k in range(1, k_max + 1)]
    np.testing.assert_allclose(curve, expected, atol=1e-6)
    np.testing.assert_allclose(nb.overlap_curve(a, b, 7), expected[:7], atol=1e-6)


def test_overlap_arguments_checked():
    a = np.zeros((4, 5), np.int32)
    with pytest.raises(ValueError, match="k must be"):
        nb.overlap_at_k(a, a, 6)
    with pytest.raises(ValueError, match="same tokens"):
        nb.overlap_curve(a, a[:3], 2)


def test_toylab_overlap_context_known_answer():
    """Chance k/(V-1), tokens never seen, the untied input matrix's cosine to its start, and the
    overlap over frequent tokens from stored neighbour lists, on a constructed cache: six tokens,
    k=2, I agrees with T only on the frequent tokens (seen >= 100 times)."""
    import duckdb
    import pandas as pd

    from tying.cache.sentences import overlap_context_text
    from tying.cache.summary import overlap_context

    freq = [0, 0, 150, 200, 5, 100]
    frequent = {t for t, f in enumerate(freq) if f >= 100}
    rows = []
    for t in range(6):
        same = [(t + 1) % 6, (t + 2) % 6]
        other = [(t + 3) % 6, (t + 4) % 6]
        for m, lst in (("T", same), ("O", same), ("I", same if t in frequent else other)):
            rows += [{"matrix": m, "token": t, "rank": r + 1, "neighbour": n, "score": 0.5} for r, n in enumerate(lst)]
    con = duckdb.connect()
    con.register("tokens_df", pd.DataFrame({"token": range(6), "freq_tied": freq}))
    con.register("neighbours_df", pd.DataFrame(rows))
    con.execute("CREATE TABLE tokens AS SELECT * FROM tokens_df")
    con.execute("CREATE TABLE neighbours AS SELECT * FROM neighbours_df")
    s = {"evolution": {"untied/seed0": {"I": {"steps": [0, 250], "cos_init": [1.0, 0.65]}}}}
    c = overlap_context(con, s, k=2, min_count=100)
    assert c["n_tokens"] == 6 and c["chance"] == pytest.approx(2 / 5)
    assert c["unseen"] == 2
    assert c["frequent"]["n_tokens"] == 3
    # over all tokens T~I would be 0.5; over the frequent ones I agrees with T
    assert c["frequent"]["T~I"] == pytest.approx(1.0) and c["frequent"]["T~O"] == pytest.approx(1.0)
    assert c["input_cos_init"] == {"run": "untied/seed0", "step": 250, "I": 0.65}
    text = overlap_context_text(c)
    assert "k/(V-1) = 2/5 = 0.4000" in text and "2 of the 6 tokens never occur" in text
    assert "still 0.65 at step 250" in text and "seen at least 100 times" in text
