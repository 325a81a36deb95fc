"""Linear alignment and per-token cosine (tying.analysis.align, align_protocol, align_table) against known answers."""

import numpy as np
import pytest
import torch

from tying.analysis import align, align_protocol, align_table
from tying.errors import NotApplicable

CPU = torch.device("cpu")


def random_rotation(d, rng):
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    return Q * np.sign(np.diag(R))


@pytest.fixture(scope="module")
def rotated_pair():
    """A matrix, and a rotated and shifted copy of it: same geometry, new basis."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 24)).astype(np.float32)
    Y = (X @ random_rotation(24, rng) + 5.0).astype(np.float32)
    return X, Y


def test_centre_gives_zero_column_means():
    rng = np.random.default_rng(1)
    X = (rng.standard_normal((50, 7)) * 3 + np.arange(7) * 100).astype(np.float32)
    C = align.centre(X)
    assert C.dtype == np.float32 and C.shape == X.shape
    np.testing.assert_allclose(C.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(C - C[0], X - X[0], atol=1e-3)  # only a shift per column
    np.testing.assert_allclose(align.centre(torch.from_numpy(X)), C)


def test_procrustes_recovers_rotation_and_is_orthogonal():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 16)).astype(np.float32)
    Q = random_rotation(16, rng)
    W = align.procrustes(X, (X @ Q).astype(np.float32), device=CPU)
    assert W.shape == (16, 16)
    np.testing.assert_allclose(W.T @ W, np.eye(16), atol=1e-5)
    np.testing.assert_allclose(W, Q, atol=1e-4)


def test_procrustes_of_noisy_target_is_still_orthogonal():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 10)).astype(np.float32)
    Y = rng.standard_normal((300, 10)).astype(np.float32)
    W = align.procrustes(X, Y, device=CPU)
    np.testing.assert_allclose(W.T @ W, np.eye(10), atol=1e-5)


def test_least_squares_recovers_invertible_map_across_widths():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 12)).astype(np.float32)
    M = rng.standard_normal((12, 9)).astype(np.float32)
    W = align.least_squares(X, X @ M, device=CPU)
    assert W.shape == (12, 9)
    np.testing.assert_allclose(W, M, atol=1e-3)
    square = rng.standard_normal((12, 12)) + 3 * np.eye(12)
    np.testing.assert_allclose(align.least_squares(X, (X @ square).astype(np.float32), device=CPU),
                               square, atol=1e-3)


def test_least_squares_bounded_blocks_match_direct_solve(monkeypatch):
    """Many small blocks give the same map as one big block (accumulation is exact enough)."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((1000, 8)).astype(np.float32)
    Y = rng.standard_normal((1000, 5)).astype(np.float32)
    direct = np.linalg.lstsq(X.astype(np.float64), Y.astype(np.float64), rcond=None)[0]
    monkeypatch.setattr(align, "BLOCK_ROWS", 37)
    np.testing.assert_allclose(align.least_squares(X, Y, device=CPU), direct, atol=1e-5)


def test_rowwise_cosine_known_values_and_zero_rows():
    A = np.array([[1, 0], [1, 1], [0, 0], [3, 4], [1, 0]], dtype=np.float32)
    B = np.array([[2, 0], [-1, -1], [1, 1], [0, 0], [0, 5]], dtype=np.float32)
    cos = align.rowwise_cosine(A, B, device=CPU)
    assert cos.dtype == np.float32
    np.testing.assert_allclose(cos, [1, -1, 0, 0, 0], atol=1e-6)


@pytest.mark.parametrize("method", ["orthogonal", "linear"])
def test_rotated_copy_aligns_at_cosine_one(rotated_pair, method):
    X, Y = rotated_pair
    in_sample = align.alignment_cosines(X, Y, method, device=CPU)
    assert in_sample.shape == (len(X),)
    np.testing.assert_allclose(in_sample, 1.0, atol=1e-5)
    fit_idx, eval_idx = align_protocol.split_tokens(len(X), 0.25, seed=1)
    held_out = align.alignment_cosines(X, Y, method, fit_idx=fit_idx, eval_idx=eval_idx, device=CPU)
    assert held_out.shape == (len(eval_idx),)
    np.testing.assert_allclose(held_out, 1.0, atol=1e-5)


def test_identity_of_matrix_with_itself_is_one_and_rotation_is_not(rotated_pair):
    X, Y = rotated_pair
    np.testing.assert_allclose(align.alignment_cosines(X, X, "identity", device=CPU), 1.0, atol=1e-6)
    assert abs(align.alignment_cosines(X, Y, "identity", device=CPU).mean()) < 0.3


def test_uncentred_identity_on_a_constructed_pair():
    """identity_raw is the cosine of the raw rows: a common offset is kept, not removed.

    Rows x_i = (1, 0) + e_i and y_i = (1, 0) - e_i with e_i = (0, +-1): raw cosine of each
    pair is (1 - 1) / (sqrt 2 * sqrt 2) = 0; after centring the rows are e_i and -e_i: -1.
    """
    e = np.array([[0.0, 1.0], [0.0, -1.0]] * 50, np.float32)
    X, Y = e + [1.0, 0.0], -e + [1.0, 0.0]
    np.testing.assert_allclose(align.alignment_cosines(X, Y, "identity_raw", device=CPU), 0.0, atol=1e-6)
    np.testing.assert_allclose(align.alignment_cosines(X, Y, "identity", device=CPU), -1.0, atol=1e-6)
    # a shifted copy: 1 after centring, the raw cosine of x and x + c otherwise
    rng = np.random.default_rng(11)
    Z = rng.standard_normal((300, 5)).astype(np.float32)
    shift = np.full(5, 3.0, np.float32)
    raw = (Z * (Z + shift)).sum(1) / (np.linalg.norm(Z, axis=1) * np.linalg.norm(Z + shift, axis=1))
    np.testing.assert_allclose(align.alignment_cosines(Z, Z + shift, "identity_raw", device=CPU), raw, atol=1e-5)
    rows = {(r["comparison"], r["method"], r["split"]): r for r in
            align_table.run_alignment({"I": Z, "O": Z + shift}, device=CPU)}
    np.testing.assert_allclose(rows[("I->O", "identity_raw", "in_sample")]["cosine"], raw, atol=1e-5)
    held = rows[("I->O", "identity_raw", "held_out")]
    np.testing.assert_allclose(held["cosine"], raw[held["token_idx"]], atol=1e-5)
    assert rows[("I->O", "identity", "in_sample")]["mean"] == pytest.approx(1.0, abs=1e-5)


def test_held_out_scores_never_see_the_held_out_rows():
    """Unrelated random matrices with few more rows than columns: a map fitted on the fit rows
    over-fits them (high in-sample cosine) and scores ~0 on held-out rows. Fitting on every row
    (leaking the held-out ones) would score them high, so this catches the leak."""
    rng = np.random.default_rng(12)
    n, d = 400, 150
    I, T = rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((n, d)).astype(np.float32)
    rows = {(r["comparison"], r["method"], r["split"]): r for r in
            align_table.run_alignment({"I": I, "T": T}, held_out_fraction=0.2, seed=0, device=CPU)}
    for method in ("linear", "orthogonal"):
        inside, held = rows[("I->T", method, "in_sample")], rows[("I->T", method, "held_out")]
        assert inside["mean"] > 0.3, method
        assert abs(held["mean"]) < 0.05, method
    fit, ev = align_protocol.split_tokens(n, 0.2, seed=0)
    direct = align.alignment_cosines(I, T, "linear", fit_idx=fit, eval_idx=ev, device=CPU)
    np.testing.assert_allclose(rows[("I->T", "linear", "held_out")]["cosine"], direct, atol=1e-5)
    leaked = align.alignment_cosines(I, T, "linear", fit_idx=None, eval_idx=ev, device=CPU)
    assert leaked.mean() > 0.3  # what a leak would look like


def test_centring_removes_a_common_offset():
    """Identity after centring ignores a constant shift of every row."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((200, 6)).astype(np.float32)
    np.testing.assert_allclose(align.alignment_cosines(X, X + 50.0, "identity", device=CPU), 1.0, atol=1e-4)


def test_centring_uses_the_fit_rows_mean():
    """Held-out rows are centred with the fit rows' mean, not their own."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((100, 4)).astype(np.float32)
    fit_idx, eval_idx = np.arange(50), np.arange(50, 100)
    got = align.alignment_cosines(X, X, "identity", fit_idx=fit_idx, eval_idx=eval_idx, device=CPU)
    np.testing.assert_allclose(got, 1.0, atol=1e-6)
    Y = X.copy()
    Y[:, 0] += 10.0  # a shift of every row: centring removes it whatever rows give the mean
    got = align.alignment_cosines(X, Y, "identity", fit_idx=fit_idx, eval_idx=eval_idx, device=CPU)
    np.testing.assert_allclose(got, 1.0, atol=1e-4)


def test_different_widths_orthogonal_and_identity_not_applicable_linear_works():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 10)).astype(np.float32)
    Y = (X @ rng.standard_normal((10, 6))).astype(np.float32)
    with pytest.raises(NotApplicable, match=r"orthogonal map needs equal widths \(d_src=10, d_tgt=6\)"):
        align.procrustes(X, Y)
    with pytest.raises(NotApplicable, match="orthogonal map needs equal widths"):
        align.alignment_cosines(X, Y, "orthogonal")
    with pytest.raises(NotApplicable, match="identity map needs equal widths"):
        align.alignment_cosines(X, Y, "identity")
    np.testing.assert_allclose(align.alignment_cosines(X, Y, "linear", device=CPU), 1.0, atol=1e-5)


def test_zero_rows_score_zero_not_nan():
    rng = np.random.default_rng(9)
    Z = rng.standard_normal((20, 5)).astype(np.float32)
    X = np.concatenate([Z, -Z, np.zeros((2, 5), np.float32)])  # column mean exactly zero
    for method in align_protocol.METHODS:
        cos = align.alignment_cosines(X, X, method, device=CPU)
        assert np.isfinite(cos).all()
        np.testing.assert_array_equal(cos[-2:], 0.0)
        np.testing.assert_allclose(cos[:-2], 1.0, atol=1e-5)


def test_torch_inputs_accepted(rotated_pair):
    X, Y = rotated_pair
    got = align.alignment_cosines(torch.from_numpy(X), torch.from_numpy(Y), "orthogonal",
                                  fit_idx=np.arange(400), eval_idx=np.arange(400, 600), device=CPU)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, 1.0, atol=1e-5)


def test_split_tokens_is_deterministic_disjoint_and_complete():
    fit, ev = align_protocol.split_tokens(1000, 0.2, seed=3)
    fit2, ev2 = align_protocol.split_tokens(1000, 0.2, seed=3)
    np.testing.assert_array_equal(fit, fit2)
    np.testing.assert_array_equal(ev, ev2)
    assert len(ev) == 200 and len(fit) == 800
    assert np.intersect1d(fit, ev).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([fit, ev])), np.arange(1000))
    assert not np.array_equal(ev, align_protocol.split_tokens(1000, 0.2, seed=4)[1])
    with pytest.raises(ValueError):
        align_protocol.split_tokens(10, 1.5)
    with pytest.raises(ValueError):
        align_protocol.split_tokens(1, 0.2)


def test_unknown_method_and_mismatched_rows_are_user_errors():
    X = np.zeros((10, 3), np.float32)
    with pytest.raises(ValueError, match="unknown alignment method"):
        align.alignment_cosines(X, X, "affine")
    with pytest.raises(ValueError, match="same tokens"):
        align.alignment_cosines(X, X[:5], "linear")


def test_constants():
    assert align_protocol.METHODS == ("identity_raw", "identity", "orthogonal", "linear")
    assert [align_protocol.comparison_label(a, b) for a, b in align_protocol.COMPARISONS] == ["I->O", "O->T", "I->T",
                                                                                             "T'->T"]


def test_run_alignment_rows_and_values():
    rng = np.random.default_rng(10)
    I = rng.standard_normal((400, 16)).astype(np.float32)
    O = (I @ random_rotation(16, rng)).astype(np.float32)
    T = (O @ rng.standard_normal((16, 8))).astype(np.float32)  # narrower: only linear applies
    steps = []
    rows = align_table.run_alignment({"I": I, "O": O, "T": T}, held_out_fraction=0.25, seed=0, device=CPU,
                               progress=steps.append)
    # one step for the pass that computes every fit's products, then one per row
    assert len(rows) == 3 * 4 * 2 and len(steps) == 1 + len(rows) and "one pass" in steps[0]
    by_key = {(r["comparison"], r["method"], r["split"]): r for r in rows}
    assert set(k[0] for k in by_key) == {"I->O", "O->T", "I->T"}
    for comparison in ("I->O", "O->T", "I->T"):
        for split in ("in_sample", "held_out"):
            r = by_key[(comparison, "linear", split)]
            assert r["applicable"]
            np.testing.assert_allclose(r["cosine"], 1.0, atol=1e-4)
            assert r["cosine"].dtype == np.float32
            assert len(r["cosine"]) == len(r["token_idx"])
            assert abs(r["mean"] - 1.0) < 1e-4 and r["std"] < 1e-4
    assert len(by_key[("I->O", "identity", "in_sample")]["token_idx"]) == 400
    assert len(by_key[("I->O", "identity", "held_out")]["token_idx"]) == 100
    assert by_key[("I->O", "orthogonal", "held_out")]["mean"] > 0.9999
    for method in ("identity_raw", "identity", "orthogonal"):
        r = by_key[("O->T", method, "held_out")]
        assert not r["applicable"] and "needs equal widths" in r["note"]
        assert r["cosine"].size == 0 and np.isnan(r["mean"]) and np.isnan(r["std"])
        assert len(r["token_idx"]) == 100
    # held-out rows are the seeded split
    np.testing.assert_array_equal(by_key[("I->T", "linear", "held_out")]["token_idx"],
                                  align_protocol.split_tokens(400, 0.25, seed=0)[1])


def test_run_alignment_needs_two_matrices_with_the_same_rows():
    X = np.zeros((10, 3), np.float32)
    with pytest.raises(ValueError, match="no comparison"):
        align_table.run_alignment({"I": X})
    with pytest.raises(ValueError, match="same tokens"):
        align_table.run_alignment({"I": X, "O": X[:5]})
