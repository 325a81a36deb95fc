"""Per-token traits (tying.analysis.token_traits, the token_traits stage, explorer.render.traits):
known answers for the log count, T's position between I and O, the under-trained flags and
Spearman's rho, and the stage end to end on tiny models and the synthetic cache."""

import math

import numpy as np
import pytest

from tying.analysis import token_traits as traits
from tying.analysis.twins import positions


def test_a_token_seen_n_times_gets_log10_n_and_a_never_seen_one_none():
    out = traits.log_count([1, 10, 1000, 0, 37])
    np.testing.assert_allclose(out[[0, 1, 2, 4]], [0.0, 1.0, 3.0, math.log10(37)])
    assert np.isnan(out[3])


def _cos(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _linear_cosine(src, tgt):
    """Brute force: least squares on centred rows, then the per-token cosine to the centred target."""
    s, t = src - src.mean(0), tgt - tgt.mean(0)
    W = np.linalg.lstsq(s, t, rcond=None)[0]
    return _cos(s @ W, t)


def test_position_is_cosine_to_o_minus_to_i_after_the_linear_map():
    rng = np.random.default_rng(0)
    T = rng.standard_normal((300, 16))
    O = T @ np.linalg.qr(rng.standard_normal((16, 16)))[0]  # a rotation of T: maps back at cosine 1
    I = rng.standard_normal((300, 16))
    pos = positions(T.astype(np.float32), I.astype(np.float32), O.astype(np.float32))
    cos_i = _linear_cosine(I, T)
    np.testing.assert_allclose(pos, 1.0 - cos_i, atol=1e-4)
    # T = I exactly and O unrelated: the position is the cosine to O minus 1, never above 0
    pos2 = positions(T, T, I)
    np.testing.assert_allclose(pos2, _linear_cosine(I, T) - 1.0, atol=1e-4)
    assert (pos2 <= 1e-6).all()
    with pytest.raises(ValueError):
        traits.position(np.zeros(3), np.zeros(4))


def test_under_trained_by_count_is_fewer_than_min_count():
    flags = traits.under_trained_by_count([0, 1, traits.MIN_COUNT - 1, traits.MIN_COUNT, 1000])
    assert flags.tolist() == [True, True, True, False, False]


def test_geometry_heuristic_finds_rows_that_stayed_at_their_start():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((2000, 32)) * rng.uniform(0.8, 1.2, (2000, 1))
    stuck = rng.choice(2000, 15, replace=False)
    M[stuck] = M.mean(0) + 1e-3 * rng.standard_normal((15, 32))  # barely left the common start
    flags = traits.under_trained_by_geometry(M)
    assert flags[stuck].all()
    assert flags.sum() - 15 <= 0.005 * 2000  # random rows: at most 0.5% flagged beside them
    with pytest.raises(ValueError):
        traits.under_trained_by_geometry(np.zeros((2, 4)))


def test_spearman_agrees_with_pearson_on_ranks_and_leaves_unseen_tokens_out():
    rng = np.random.default_rng(2)
    logc = rng.standard_normal(200)
    pos = 0.5 * logc + rng.standard_normal(200)
    logc[:7] = np.nan  # never seen: left out
    rho, n = traits.spearman(logc, pos)
    ok = ~np.isnan(logc)
    ranks = lambda x: np.argsort(np.argsort(x))
    assert n == 193
    assert rho == pytest.approx(np.corrcoef(ranks(logc[ok]), ranks(pos[ok]))[0, 1], abs=1e-12)
    assert traits.spearman(np.arange(10.0), np.arange(10.0))[0] == pytest.approx(1.0)
    assert np.isnan(traits.spearman([1.0, 2.0], [3.0, 4.0])[0])


def test_synthetic_cache_counts_log_counts_and_flags_from_its_corpus(synthetic_caches):
    from explorer.render import read
    from explorer.render import token_traits as rtraits
    from tying.cache.store import open_cache, query_df

    con = open_cache(synthetic_caches / "synthetic.duckdb")
    try:
        tt = query_df(con, "SELECT * FROM token_traits ORDER BY token")
        toks = query_df(con, "SELECT token, freq_tied FROM tokens ORDER BY token")
        summ = query_df(con, "SELECT comparison, mean FROM alignment_summary WHERE method = 'linear' "
                             "AND split = 'in_sample'").set_index("comparison")["mean"]
    finally:
        con.close()
    np.testing.assert_array_equal(tt["count"].to_numpy(), toks["freq_tied"].to_numpy())
    seen = toks["freq_tied"] > 0
    np.testing.assert_allclose(tt["log_count"][seen], np.log10(toks["freq_tied"][seen]))
    assert tt["log_count"][~seen].isna().all() and (~seen).sum() == 2
    assert tt["under_trained"].tolist() == (toks["freq_tied"] < traits.MIN_COUNT).tolist()
    assert tt["under_trained"].sum() == 10
    # the mean position is the headline's gap, O->T minus I->T (linear, in-sample)
    assert tt["position"].mean() == pytest.approx(summ["O->T"] - summ["I->T"], abs=1e-5)
    ref = read.CacheRef.of(synthetic_caches / "synthetic.duckdb")
    about = rtraits.traits_about(ref)
    assert about.rule == traits.COUNT_RULE and about.n_under_trained == 10 and about.has_position
    assert about.rho == pytest.approx(traits.spearman(tt["log_count"], tt["position"])[0], abs=1e-4)
    df = rtraits.token_traits(ref)
    assert {"shown", "norm"} <= set(df.columns) and len(df) == len(tt)
    sr = rtraits.seed_rho(ref)
    assert sr.n == 3 and sr.mean == pytest.approx(-0.03) and sr.lo < sr.mean < sr.hi


def test_pair_counts_its_text_and_without_one_flags_by_geometry(tiny_model, tmp_path, capsys):
    from precompute.cli import main
    from precompute.stages import token_frequencies
    from tests.stage_lists import MATRICES_ONLY
    from tying.cache.store import open_cache, query_df
    from tying.loading.weights import load_model_matrices

    tied, untied = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\n" * 30 + "a dog ran\n", encoding="utf-8")
    fast = ["--skip", MATRICES_ONLY, "--spectral-components", "16", "--neighbours-k", "20", "--cache-dir", str(tmp_path)]
    assert main(["pair", "--tied", str(tied), "--untied", str(untied), "--name", "t", "--text", str(text), *fast]) == 0
    assert main(["pair", "--tied", str(tied), "--name", "one", *fast]) == 0
    capsys.readouterr()
    con = open_cache(tmp_path / "t.duckdb")
    try:
        tt = query_df(con, "SELECT * FROM token_traits ORDER BY token")
        ran = query_df(con, "SELECT params FROM stages WHERE stage = 'token_traits'").iloc[0, 0]
    finally:
        con.close()
    expected = token_frequencies(str(tied), str(text), len(tt))
    np.testing.assert_array_equal(tt["count"].to_numpy(), expected)
    assert expected.sum() > 0 and '"counts": "text.txt"' in ran
    # a text given to `pair` is not known to be what the models trained on: the geometry heuristic
    T = load_model_matrices(str(tied)).input
    assert tt["under_trained"].tolist() == traits.under_trained_by_geometry(T).tolist()
    assert "heuristic" in ran and tt["position"].notna().all()
    con = open_cache(tmp_path / "one.duckdb")
    try:
        one = query_df(con, "SELECT * FROM token_traits")
    finally:
        con.close()
    assert one["count"].isna().all() and one["position"].isna().all()  # no text (lens skipped), no twin


def test_binned_median_is_the_median_of_each_bin():
    import pandas as pd

    from explorer.render.token_traits import binned_median

    logc = np.repeat([0.0, 1.0, 2.0], 6).astype(float)
    pos = np.array([1, 2, 3, 4, 5, 6, -1, -1, -1, 0, 0, 0, 9, 9, 9, 9, 9, 100], dtype=float)
    out = binned_median(pd.DataFrame({"log_count": logc, "position": pos}), bins=3)
    assert out["n"].tolist() == [6, 6, 6]
    assert out["position"].tolist() == [3.5, -0.5, 9.0]
    np.testing.assert_allclose(out["log_count"], [1 / 3, 1.0, 5 / 3], atol=1e-6)
    # a bin of fewer than 5 tokens draws no point
    assert len(binned_median(pd.DataFrame({"log_count": logc[:10], "position": pos[:10]}), bins=2)) == 1


def test_the_figure_reads_rho_and_its_verdict_from_the_cache(synthetic_caches):
    from explorer.render import figures, read
    from explorer.render import token_traits as rtraits
    from tying.cache.verdicts import HOLDS

    ref = read.CacheRef.of(synthetic_caches / "synthetic.duckdb")
    line, verdict = rtraits.reading(ref)
    # the fixture's seeds: rho -0.04, -0.03, -0.02: negative in every seed, interval clear of 0
    assert verdict == HOLDS and "-0.03" in line and "3 seeds" in line
    assert "figure-position-frequency" in [f.name for f in figures.drawn_on(ref, "alignment")]
    chart, data = rtraits.figure(ref)
    spec = chart.to_dict()
    assert spec["title"]["text"][0].startswith("Spearman's rho -0.03")
    assert len(data) == 600 and data["log_count"].isna().sum() == 2
