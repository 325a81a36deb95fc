"""Placing tokens into a UMAP map fitted on a sample (tying.analysis.placement.place and its
quality measures), and the umap stage of a pair run holding every common token (issue 19)."""

import json

import numpy as np
import pytest

from tests.stage_lists import RUNS_A_MODEL
from tying.analysis.placement import holdout_check, neighbourhood_scores, place
from tying.analysis.projection import project


def test_a_token_equal_to_a_fitted_one_lands_on_it():
    rng = np.random.default_rng(0)
    fitted = rng.standard_normal((200, 16)).astype(np.float32)
    xy = rng.uniform(-10, 10, (200, 2)).astype(np.float32)
    picks = [0, 17, 123, 199]
    # the same rows, and the same directions at another length (cosine 1: the same token to the map)
    new = np.concatenate([fitted[picks], 3.5 * fitted[picks]])
    out = place(fitted, xy, new, k=10)
    assert out.shape == (8, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out, np.concatenate([xy[picks], xy[picks]]), atol=1e-6)


def test_a_token_halfway_between_two_clusters_lands_between_them():
    """Clusters A and B, mirror images across the plane e1 = 0 (the same noise, the opposite
    side), drawn at x = -10 and x = +10 on the map; a token at their midpoint is as similar to
    A_i as to B_i, so it lands midway, far from both clusters."""
    rng = np.random.default_rng(1)
    n, d = 30, 12
    noise = 0.3 * rng.standard_normal((n, d))
    noise[:, 0] = 0.0
    centre = np.zeros(d)
    centre[1] = 2.0
    a = centre + noise
    a[:, 0] = 1.5
    b = a.copy()
    b[:, 0] = -1.5
    fitted = np.concatenate([a, b]).astype(np.float32)
    spot = rng.normal(0, 0.5, (n, 2))
    xy = np.concatenate([spot + [-10, 0], spot * [-1, 1] + [10, 0]]).astype(np.float32)  # B mirrors A on the map
    halfway = centre[None].astype(np.float32)
    x, y = place(fitted, xy, halfway, k=10)[0]
    assert abs(x) < 1.0  # midway: each cluster's points lie within about 2 of x = -10 or +10
    assert abs(y) < 2.0
    # nearer one cluster in the original space: nearer it on the map
    toward_a = (0.75 * a.mean(axis=0) + 0.25 * b.mean(axis=0))[None].astype(np.float32)
    assert place(fitted, xy, toward_a, k=10)[0, 0] < -5


def test_place_weights_the_nearest_most_and_handles_edge_rows():
    fitted = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    xy = np.array([[0, 0], [1, 0], [2, 0], [3, 0]], dtype=np.float32)
    # nearer (1, 0) than (0.8, 0.6): placed between them, nearer the first
    x = place(fitted, xy, np.array([[1, 0.2]], dtype=np.float32), k=2)[0, 0]
    assert 0 < x < 0.5
    # an all-zero row has no direction: the centre of the fitted map
    np.testing.assert_allclose(place(fitted, xy, np.zeros((1, 2), np.float32), k=2), [[1.5, 0]])
    assert place(fitted, xy, np.zeros((0, 2), np.float32)).shape == (0, 2)
    with pytest.raises(ValueError, match="one width"):
        place(fitted, xy, np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match="fitted_xy"):
        place(fitted, xy[:3], fitted)


def test_neighbourhood_scores_are_sklearns_trustworthiness_when_every_row_is_a_query():
    from sklearn.manifold import trustworthiness  # (here: every worker collects this module)

    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 20)).astype(np.float32)
    xy = X[:, :2] + 0.3 * rng.standard_normal((300, 2))
    got = neighbourhood_scores(X, xy, np.arange(300), k=10)
    assert got["trustworthiness"] == pytest.approx(trustworthiness(X, xy, n_neighbors=10, metric="cosine"), abs=1e-6)
    # a map that keeps every neighbourhood: points on a circle drawn where they are
    angles = np.sort(rng.uniform(0, 2 * np.pi, 200))
    circle = np.column_stack([np.cos(angles), np.sin(angles)]).astype(np.float32)
    perfect = neighbourhood_scores(circle, circle, np.arange(0, 200, 7), k=10)
    assert perfect == {"trustworthiness": pytest.approx(1.0), "nn_share": 1.0}


def test_holdout_check_on_a_map_that_is_the_data():
    """Points on a circle drawn where they are (cosine order is the map's order): a held-out
    point is placed from its neighbours on either side, next to its own spot."""
    rng = np.random.default_rng(3)
    angles = rng.uniform(0, 2 * np.pi, 600)
    X = np.column_stack([np.cos(angles), np.sin(angles)]).astype(np.float32)
    check = holdout_check(X, X, fraction=0.1, k=10, seed=0)
    assert check["tokens"] == 60
    assert check["median_error"] < 0.01 and check["in_neighbourhood"] > 0.9
    assert holdout_check(X[:10], X[:10]) is None  # too few to hold any out


@pytest.mark.slow
def test_project_fits_a_sample_and_places_the_rest():
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((4, 60)) * 3
    X = (centres[np.repeat(np.arange(4), 75)] + rng.standard_normal((300, 60))).astype(np.float32)
    Y = (X @ rng.standard_normal((60, 24)) / 8).astype(np.float32)
    fit = np.sort(rng.choice(300, 200, replace=False))
    proj = project([X, Y], fit, seed=0, n_epochs=50, quality_tokens=500)
    assert [c.shape for c in proj.coords] == [(300, 2), (300, 2)]
    assert all(np.isfinite(c).all() for c in proj.coords)
    assert proj.placed.sum() == 100 and not proj.placed[fit].any()
    for view in ("0", "1"):
        q = proj.quality[view]
        assert q["placed"]["trustworthiness"] > 0.8 and q["fitted"]["trustworthiness"] > 0.8
        assert q["holdout"]["tokens"] == 10
    # placed tokens sit with their own cluster: nearer its fitted members' centre than any other's
    labels = np.repeat(np.arange(4), 75)
    E = proj.coords[0]
    centroids = np.stack([E[fit][labels[fit] == c].mean(axis=0) for c in range(4)])
    placed = np.flatnonzero(proj.placed)
    nearest = np.linalg.norm(E[placed, None] - centroids[None], axis=2).argmin(axis=1)
    assert (nearest == labels[placed]).mean() > 0.95
    assert proj.quality["settings"]["k"] == 10 and proj.quality["seconds"] >= 0


# -- the umap stage of a pair run ------------------------------------------------------------


@pytest.fixture(scope="module")
def pair_models(tmp_path_factory):
    from tests.tiny_models import make_tiny_model, make_tokenizer

    root = tmp_path_factory.mktemp("placement-models")
    make_tokenizer(root / "tok", 300)
    tied = make_tiny_model("llama", root / "tied", tied=True, tokenizer_dir=root / "tok", seed=1)
    untied = make_tiny_model("llama", root / "untied", tied=False, tokenizer_dir=root / "tok", seed=2)
    return tied, untied


@pytest.mark.slow
def test_the_umap_table_covers_every_common_token(pair_models, tmp_path, capsys, monkeypatch):
    from precompute.cli import main
    from tying.cache.sentences import projection_text
    from tying.cache.store import open_cache, query_df
    from tying.cache.summary import summarize

    tied, untied = pair_models
    code = main(["pair", "--tied", str(tied), "--untied", str(untied), "--cache-dir", str(tmp_path), "--name", "u",
                 "--skip", ",".join(("alignment", "neighbours", "spectral", *RUNS_A_MODEL)), "--umap-tokens", "150",
                 "--umap-epochs", "30"])
    assert code == 0, capsys.readouterr().err
    con = open_cache(tmp_path / "u.duckdb")
    try:
        n = con.execute("SELECT count(*) FROM tokens").fetchone()[0]
        umap = query_df(con, "SELECT * FROM umap")
        s = summarize(con)
    finally:
        con.close()
    assert n > 150  # some tokens were placed
    for m in ("T", "I", "O"):
        rows = umap[umap["matrix"] == m]
        assert sorted(rows["token"]) == list(range(n))
        assert int((~rows["placed"]).sum()) == 150 and int(rows["placed"].sum()) == n - 150
        assert np.isfinite(rows[["x", "y"]].to_numpy()).all()
    # the same tokens were fitted in every view
    fitted = {m: set(umap[(umap["matrix"] == m) & ~umap["placed"]]["token"]) for m in ("T", "I", "O")}
    assert fitted["T"] == fitted["I"] == fitted["O"]
    u = s.analysis("umap")
    assert (u["n_fitted"], u["n_placed"], u["n_common"]) == (150, n - 150, n)
    ran = s.stages["umap"]["params"]["ran"]
    assert ran["tokens"] == 150 and ran["placed"] == n - 150
    for m in ("T", "I", "O"):
        q = ran["placement"][m]
        assert 0 <= q["placed"]["trustworthiness"] <= 1 and 0 <= q["placed"]["nn_share"] <= 1
        assert q["holdout"]["tokens"] == 8  # 5% of 150
    text = projection_text(u)
    assert text.startswith("150 tokens fitted by AlignedUMAP, ") and f"{n - 150:,} placed" in text
    assert "trustworthiness@10" in text
    json.dumps(s.to_json(), allow_nan=False)  # the summary stays strict JSON
    # the Projection page says it in its caption
    from tests.apppage import open_page

    at = open_page(tmp_path, monkeypatch, "projection", pair="u")
    assert not at.exception, [e.value for e in at.exception]
    assert any(f"On the map: {text}" in c.value for c in at.caption), [c.value for c in at.caption]


def test_a_cache_without_the_placed_column_reads_as_all_fitted(tmp_path):
    """A schema-2 cache (no umap.placed) opens; its rows count as fitted; a writer migrates it."""
    import duckdb
    import pandas as pd

    from tying.cache.schema import SCHEMA_VERSION, TABLES
    from tying.cache.sentences import projection_text
    from tying.cache.store import has_column, open_cache
    from tying.cache.summary import summarize
    from tying.cache.writer import CacheWriter

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    for table, body in TABLES.items():
        if table == "umap":
            body = "matrix VARCHAR, token INTEGER, x REAL, y REAL"
        con.execute(f"CREATE TABLE {table} ({body})")
    con.execute("INSERT INTO meta VALUES ('schema_version', '2'), ('name', 'old')")
    con.execute("INSERT INTO tokens (token) SELECT range FROM range(6)")
    con.execute("INSERT INTO umap SELECT 'T', range, range, 0 FROM range(4)")
    con.execute("INSERT INTO stages VALUES ('umap', 'h', '{\"tokens\": 4}', 1.0, now()::TIMESTAMP)")
    con.close()
    con = open_cache(path)
    try:
        assert not has_column(con, "umap", "placed")
        u = summarize(con).analysis("umap")
    finally:
        con.close()
    assert (u["n_fitted"], u["n_placed"], u["n_common"], u["placement"]) == (4, 0, 6, None)
    assert projection_text(u) == ("4 tokens fitted by AlignedUMAP; the other 2 common tokens are not on the map "
                                  "(a cache written before placement: rerun the umap stage)")
    # writing a stage brings it to this schema, keeping the others' stages
    frame = pd.DataFrame({"matrix": "T", "token": np.arange(6, dtype=np.int32), "x": np.float32(0),
                          "y": np.float32(0), "placed": [False] * 4 + [True] * 2})
    writer = CacheWriter(path)
    assert writer.is_done("umap", "h")
    writer.write_stage("umap", {"tokens": 4}, {"umap": frame}, seconds=0.1)
    con = open_cache(path)
    try:
        assert has_column(con, "umap", "placed")
        u = summarize(con).analysis("umap")
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    finally:
        con.close()
    assert (u["n_fitted"], u["n_placed"]) == (4, 2)
