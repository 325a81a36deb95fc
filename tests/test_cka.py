"""Linear CKA of T, I and O (tying.analysis.cka): known answers, a brute-force check, the
pair command end to end, and its page and figure through the registry."""

import json

import numpy as np
import pytest

from precompute.cli import main
from tests.stage_lists import MATRICES_ONLY
from tying.analysis.cka import cka_frame, linear_cka


def _brute(X, Y, debiased):
    """CKA from the n x n Gram matrices, as the papers write it (no centring of the rows)."""
    K, L = X @ X.T, Y @ Y.T
    n = len(K)
    if not debiased:
        H = np.eye(n) - 1.0 / n
        hsic = lambda A, B: np.trace(A @ H @ B @ H)
    else:
        def hsic(A, B):
            A, B = A.copy(), B.copy()
            np.fill_diagonal(A, 0)
            np.fill_diagonal(B, 0)
            one = np.ones(n)
            return (np.trace(A @ B) + (one @ A @ one) * (one @ B @ one) / ((n - 1) * (n - 2))
                    - 2.0 / (n - 2) * one @ A @ B @ one)
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


@pytest.mark.parametrize("debiased", [True, False])
def test_a_rotated_and_scaled_copy_scores_one(debiased):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 24)) + 3.0  # an offset too: CKA centres the columns
    Q, _ = np.linalg.qr(rng.standard_normal((24, 24)))
    assert linear_cka(X, -2.5 * X @ Q, debiased=debiased) == pytest.approx(1.0, abs=1e-9)
    wider = np.hstack([X @ Q, np.zeros((400, 8))])  # a wider matrix holding the same rows: still 1
    assert linear_cka(X, wider, debiased=debiased) == pytest.approx(1.0, abs=1e-9)


def test_independent_matrices_score_near_zero_debiased_and_above_it_plain():
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((2000, 64)), rng.standard_normal((2000, 64))
    assert abs(linear_cka(X, Y)) < 0.02
    assert linear_cka(X, Y, debiased=False) > 0.02  # the plain estimator's upward bias at this width


@pytest.mark.parametrize("debiased", [True, False])
def test_agrees_with_the_gram_matrix_formula(debiased):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 12))
    Y = X[:, :5] @ rng.standard_normal((5, 20)) + 0.7 * rng.standard_normal((300, 20))
    assert linear_cka(X, Y, debiased=debiased) == pytest.approx(_brute(X, Y, debiased), rel=1e-9)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="same rows"):
        linear_cka(np.ones((10, 3)), np.ones((11, 3)))


def test_the_table_has_every_pair_in_the_schema_order():
    rng = np.random.default_rng(3)
    T = rng.standard_normal((200, 8))
    df = cka_frame({"T": T, "I": rng.standard_normal((200, 8)), "O": T @ np.linalg.qr(rng.standard_normal((8, 8)))[0]})
    assert list(df["pair"]) == ["T~I", "T~O", "I~O"]
    assert df.set_index("pair").loc["T~O", "cka"] == pytest.approx(1.0)
    assert (df["n_tokens"] == 200).all()


@pytest.mark.slow
def test_pair_writes_cka_and_summary_reads_it(mirror_pair, tmp_path, capsys):
    """Untied output := the tied matrix: CKA T~O is 1; the untied input is random: T~I near 0."""
    tied, mirror = mirror_pair
    argv = ["pair", "--tied", tied, "--untied", mirror, "--cache-dir", tmp_path, "--name", "m",
            "--skip", f"alignment,neighbours,spectral,{MATRICES_ONLY}"]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "m.duckdb"), "--json"]) == 0
    cka = json.loads(capsys.readouterr().out)["cka"]
    assert cka["T~O"]["cka"] == pytest.approx(1.0, abs=1e-6)
    assert abs(cka["T~I"]["cka"]) < 0.2


def test_the_page_and_the_figure_come_from_the_registry(tmp_path):
    """The synthetic cache gains the cka table through the registry (O = T + noise: T~O above
    T~I); the figure registry and the app's pages carry it with no list of their own."""
    from explorer.render import figures, pages, read
    from precompute.fixtures import build_synthetic_cache

    ref = read.CacheRef.of(build_synthetic_cache(tmp_path))
    s = read.summary(ref)
    assert s.analysis("cka")["T~O"]["cka"] > s.analysis("cka")["T~I"]["cka"]
    assert "figure-cka" in [f.name for f in figures.available(ref)]
    chart, df = figures.BY_NAME["figure-cka"].build(ref)
    assert len(df) == 3 and chart.to_dict()["layer"]
    assert "cka" in [p.path for p in pages.PAGES]
