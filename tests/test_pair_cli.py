"""`python -m precompute pair` and `summary` end to end on tiny random-weight models."""

import hashlib
import json
import re

import numpy as np
import pytest

from precompute.cli import main
from tests.stage_lists import MATRICES_ONLY, SKIPPED
from tests.tiny_models import make_tiny_model, make_tokenizer
from tying.cache.store import open_cache, query_df
from tying.registry import PAIR_STAGES

FAST = ["--skip", MATRICES_ONLY, "--spectral-components", "16", "--neighbours-k", "20"]


@pytest.fixture(scope="module")
def models(tiny_model, mirror_pair):
    """A tied model, an unrelated untied one and the tied one's mirror (its output matrix := the
    tied matrix, its input random: O->T must align at 1)."""
    tied, mirror = mirror_pair
    return {"tied": tied, "untied": tiny_model("llama", False, seed=2), "mirror": mirror}


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_pair_end_to_end_known_answers(models, tmp_path, capsys):
    """Untied output == tied matrix: O->T aligns at 1, T~O overlaps at 1, spectral T~O is 0."""
    code, out, err = _run(capsys, "pair", "--tied", models["tied"], "--untied", models["mirror"],
                          "--cache-dir", tmp_path, "--name", "mirror", *FAST)
    assert code == 0, err
    assert "Table 1" in out and "Table 5" in out
    code, out, _ = _run(capsys, "summary", tmp_path / "mirror.duckdb", "--json")
    assert code == 0
    s = json.loads(out)
    for method in ("identity", "orthogonal", "linear"):
        for split in ("in_sample", "held_out"):
            assert s["alignment"]["O->T"][method][split] == pytest.approx(1.0, abs=1e-4)
    # raw rows: 1 for every token but the all-zero padding row, which scores 0
    assert s["alignment"]["O->T"]["identity_raw"]["in_sample"] == pytest.approx(299 / 300, abs=1e-4)
    assert s["overlap_at_10"]["T~O"] == pytest.approx(1.0)
    assert s["overlap"]["T~O"]["20"] == pytest.approx(1.0)
    assert s["spectral"]["T~O"] == pytest.approx(0.0, abs=1e-6)
    # random, unrelated I: far from both
    assert s["alignment"]["I->T"]["identity"]["in_sample"] < 0.3
    assert s["overlap_at_10"]["T~I"] < 0.5
    assert s["spectral"]["T~I"] > 0.1
    assert s["models"]["tied"]["tied_in_weights"] is True
    assert s["models"]["untied"]["tied_in_weights"] is False
    assert s["vocabulary"]["identical"] is True


def test_pair_cache_agrees_with_brute_force(models, tmp_path, capsys):
    code, _, err = _run(capsys, "pair", "--tied", models["tied"], "--untied", models["untied"],
                        "--cache-dir", tmp_path, "--name", "p", *FAST)
    assert code == 0, err
    from tying.loading.weights import load_model_matrices

    T = load_model_matrices(str(models["tied"])).input
    u = load_model_matrices(str(models["untied"]))
    I, O = u.input, u.output
    con = open_cache(tmp_path / "p.duckdb")
    try:
        # identity I->O cosine after centring, per token
        al = query_df(con, "SELECT token, cosine FROM alignment WHERE comparison='I->O' AND method='identity' "
                           "AND split='in_sample' ORDER BY token")
        Ic, Oc = I - I.mean(0), O - O.mean(0)
        brute = (Ic * Oc).sum(1) / np.linalg.norm(Ic, axis=1) / np.linalg.norm(Oc, axis=1)
        np.testing.assert_allclose(al["cosine"].to_numpy(), brute, atol=1e-5)
        # the paper's identity column: raw rows, no centring
        raw = query_df(con, "SELECT token, cosine FROM alignment WHERE comparison='I->O' AND method='identity_raw' "
                            "AND split='in_sample' ORDER BY token")
        with np.errstate(invalid="ignore"):
            brute_raw = np.nan_to_num((I * O).sum(1) / np.linalg.norm(I, axis=1) / np.linalg.norm(O, axis=1))
        np.testing.assert_allclose(raw["cosine"].to_numpy(), brute_raw, atol=1e-5)
        # spectral distance on every common token by default, from the weighted k-NN graphs
        from tying.analysis.neighbours import knn
        from tying.analysis.spectral import spectral_distance

        sp = query_df(con, "SELECT * FROM spectral WHERE pair='T~I'").iloc[0]
        assert sp["n_tokens"] == sp["n_common"] == len(T) and not sp["sampled"]
        k = int(sp["graph_k"])
        expected = spectral_distance(knn(T, k)[0], knn(I, k)[0], n_components=int(sp["n_components"]))
        assert sp["distance"] == pytest.approx(expected, rel=1e-6)
        # neighbours of T by brute force cosine, self excluded
        nb = query_df(con, "SELECT token, rank, neighbour FROM neighbours WHERE matrix='T' ORDER BY token, rank")
        ids = nb["neighbour"].to_numpy().reshape(len(T), -1)
        Tn = T / np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-12)
        sims = Tn @ Tn.T
        np.fill_diagonal(sims, -np.inf)
        top = np.argsort(-sims, axis=1, kind="stable")[:, :ids.shape[1]]
        assert (ids[:, :5] == top[:, :5]).mean() > 0.99
        # overlap@10 from the stored neighbour lists equals the stored curve
        nbi = query_df(con, "SELECT neighbour FROM neighbours WHERE matrix='I' ORDER BY token, rank")
        ids_i = nbi["neighbour"].to_numpy().reshape(len(T), -1)
        manual = np.mean([len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(ids, ids_i)])
        curve = con.execute("SELECT mean_overlap FROM overlap_curve WHERE pair='T~I' AND k=10").fetchone()[0]
        assert curve == pytest.approx(manual)
        # norms
        norms = query_df(con, "SELECT norm FROM norms WHERE matrix='O' ORDER BY token")["norm"].to_numpy()
        np.testing.assert_allclose(norms, np.linalg.norm(O, axis=1), rtol=1e-5)
        models_df = query_df(con, "SELECT * FROM models ORDER BY role")
        assert list(models_df["role"]) == ["tied", "untied"]
        assert (models_df["embedding_share"] > 0).all() and (models_df["embedding_share"] < 1).all()
    finally:
        con.close()


@pytest.mark.slow
def test_rerun_skips_finished_stages_and_force_recomputes(models, tmp_path, capsys):
    args = ["pair", "--tied", models["tied"], "--untied", models["untied"], "--cache-dir", tmp_path,
            "--name", "r", *FAST]
    code, _, err = _run(capsys, *args)
    assert code == 0
    # each stage it ran says its time and peak memory, as the cache records the time
    said = {m[0]: float(m[1]) for m in re.findall(r"^stage (\w+): ([0-9.]+) s, peak memory [0-9.]+ GB$", err, re.M)}
    ran = set(PAIR_STAGES) - SKIPPED  # every stage of the registry but those FAST skips
    assert set(said) == ran
    path = tmp_path / "r.duckdb"
    con = open_cache(path)
    first = dict(con.execute("SELECT stage, finished_at FROM stages").fetchall())
    recorded = dict(con.execute("SELECT stage, seconds FROM stages").fetchall())
    con.close()
    assert set(first) == ran
    assert all(abs(said[s] - recorded[s]) <= 0.05 for s in said)
    code, _, err = _run(capsys, *args)
    assert code == 0 and "stage alignment:" not in err  # a cached stage is not rerun, nor reported
    con = open_cache(path)
    assert dict(con.execute("SELECT stage, finished_at FROM stages").fetchall()) == first
    con.close()
    # a changed parameter reruns only its stage
    assert _run(capsys, *args[:-2], "--neighbours-k", "10")[0] == 0
    con = open_cache(path)
    again = dict(con.execute("SELECT stage, finished_at FROM stages").fetchall())
    con.close()
    assert again["alignment"] == first["alignment"] and again["neighbours"] != first["neighbours"]
    assert _run(capsys, *args, "--force")[0] == 0
    con = open_cache(path)
    forced = dict(con.execute("SELECT stage, finished_at FROM stages").fetchall())
    con.close()
    assert all(forced[s] > again[s] for s in forced)


@pytest.mark.slow
def test_different_tokenizers_use_common_tokens(tmp_path, capsys):
    tok_a, tok_b = tmp_path / "tok_a", tmp_path / "tok_b"
    make_tokenizer(tok_a, 320, corpus_seed=0)
    make_tokenizer(tok_b, 360, corpus_seed=1)
    neo = make_tiny_model("gpt_neo", tmp_path / "neo", tied=True, tokenizer_dir=tok_a)
    pythia = make_tiny_model("gpt_neox", tmp_path / "pythia", tied=False, tokenizer_dir=tok_b)
    code, _, err = _run(capsys, "pair", "--tied", neo, "--untied", pythia, "--cache-dir", tmp_path, "--name", "np",
                        *FAST)
    assert code == 0, err
    code, out, _ = _run(capsys, "summary", "np", "--cache-dir", tmp_path, "--json")
    v = json.loads(out)["vocabulary"]
    assert v["identical"] is False and 256 <= v["n_common"] < 320
    assert v["coverage_tied"] == pytest.approx(v["n_common"] / 320, abs=0.02)
    con = open_cache(tmp_path / "np.duckdb")
    toks = query_df(con, "SELECT raw, tied_id, untied_id FROM tokens")
    con.close()
    from transformers import AutoTokenizer

    ta, tb = AutoTokenizer.from_pretrained(tok_a), AutoTokenizer.from_pretrained(tok_b)
    assert all(ta.convert_ids_to_tokens(int(a)) == r == tb.convert_ids_to_tokens(int(b))
               for r, a, b in toks.itertuples(index=False))
    assert v["match"] == "strings"
    # --match ids: row i with row i, as the authors' Table-1 script did for GPT-Neo vs Pythia
    code, out, err = _run(capsys, "pair", "--tied", neo, "--untied", pythia, "--cache-dir", tmp_path, "--name", "ids",
                          "--match", "ids", *FAST)
    assert code == 0, err
    assert "rows paired by token id" in out
    code, out, _ = _run(capsys, "summary", "ids", "--cache-dir", tmp_path, "--json")
    v = json.loads(out)["vocabulary"]
    assert v["match"] == "ids" and v["n_common"] == 320 and v["same_string"] < 1.0
    con = open_cache(tmp_path / "ids.duckdb")
    toks = query_df(con, "SELECT tied_id, untied_id FROM tokens ORDER BY token")
    con.close()
    assert (toks["tied_id"] == np.arange(320)).all() and (toks["untied_id"] == np.arange(320)).all()


def test_sampled_spectral_distance_says_so(models, tmp_path, capsys):
    code, out, err = _run(capsys, "pair", "--tied", models["tied"], "--untied", models["untied"], "--cache-dir",
                          tmp_path, "--name", "s", "--spectral-tokens", "200", "--skip", f"alignment,{MATRICES_ONLY}",
                          "--spectral-components", "16", "--neighbours-k", "20")
    assert code == 0, err
    assert "sample of 200 of the 300 common tokens" in out
    s = json.loads(_run(capsys, "summary", "s", "--cache-dir", tmp_path, "--json")[1])
    assert s["spectral_params"]["sampled"] is True and s["spectral_params"]["n_tokens"] == 200
    con = open_cache(tmp_path / "s.duckdb")
    preset = con.execute("SELECT count(*) FROM meta WHERE key = 'preset'").fetchone()[0]
    con.close()
    assert preset == 0  # no preset: no row, never the string "null"


def test_different_widths_orthogonal_not_applicable(tmp_path, capsys):
    tok = tmp_path / "tok"
    make_tokenizer(tok, 300)
    small = make_tiny_model("qwen3", tmp_path / "q4", tied=True, d=32, tokenizer_dir=tok)
    big = make_tiny_model("qwen3", tmp_path / "q8", tied=False, d=48, tokenizer_dir=tok)
    code, out, err = _run(capsys, "pair", "--tied", small, "--untied", big, "--cache-dir", tmp_path, "--name", "w",
                          *FAST)
    assert code == 0, err
    s = json.loads(_run(capsys, "summary", tmp_path / "w.duckdb", "--json")[1])
    assert s["alignment"]["O->T"]["orthogonal"]["in_sample"] is None
    assert "width" in s["alignment"]["O->T"]["orthogonal"]["note"]
    assert s["alignment"]["I->O"]["orthogonal"]["in_sample"] is not None  # same model, same width
    assert s["alignment"]["O->T"]["linear"]["held_out"] is not None
    assert 0 <= s["overlap_at_10"]["T~O"] <= 1


@pytest.mark.parametrize("case", ["tied-as-untied", "nan", "missing", "k-too-large", "unwritable", "tiny-overlap"])
def test_bad_input_one_line_exit_2_cache_untouched(models, tmp_path, capsys, case):
    # an existing cache of the same name must survive every failure byte for byte
    assert _run(capsys, "pair", "--tied", models["tied"], "--untied", models["untied"], "--cache-dir", tmp_path,
                "--name", "keep", *FAST, "--skip", f"spectral,alignment,{MATRICES_ONLY}")[0] == 0
    before = _digest(tmp_path / "keep.duckdb")
    tied, untied, extra, cache_dir = models["tied"], models["untied"], [], tmp_path
    if case == "tied-as-untied":
        untied = models["tied"]
    elif case == "nan":
        untied = make_tiny_model("llama", tmp_path / "nan", tied=False, tokenizer_dir=models["tied"],
                                 edit=lambda m: m.lm_head.weight.__setitem__((3, 0), float("nan")))
    elif case == "missing":
        untied = tmp_path / "does-not-exist"
    elif case == "k-too-large":
        extra = ["--neighbours-k", "100000"]
    elif case == "unwritable":
        (tmp_path / "blocker").write_text("x")
        cache_dir = tmp_path / "blocker" / "sub"
    elif case == "tiny-overlap":
        tok = tmp_path / "tok_far"
        make_tokenizer(tok, 300)
        # a tokenizer whose strings are all renamed shares no token with the tied one
        data = json.loads((tok / "tokenizer.json").read_text())
        data["model"]["vocab"] = {f"zz{k}": v for k, v in data["model"]["vocab"].items()}
        data["model"]["merges"] = []
        (tok / "tokenizer.json").write_text(json.dumps(data))
        untied = make_tiny_model("llama", tmp_path / "far", tied=False, tokenizer_dir=tok)
    code, out, err = _run(capsys, "pair", "--tied", tied, "--untied", untied, "--cache-dir", cache_dir,
                          "--name", "keep", *FAST, *extra)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip() and "it/s" not in ln and "stage" not in ln]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    assert _digest(tmp_path / "keep.duckdb") == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_summary_of_missing_or_corrupt_cache(tmp_path, capsys):
    code, _, err = _run(capsys, "summary", tmp_path / "nope.duckdb")
    assert code == 2 and err.startswith("error: no cache")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"\0" * 5000)
    code, _, err = _run(capsys, "summary", bad)
    assert code == 2 and "not a readable cache" in err and "precompute pair" in err


@pytest.mark.slow
def test_module_entry_point_runs(tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "precompute", "pair", "--untied", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: give --tied (with --untied for a pair")


@pytest.mark.slow
def test_lens_command_end_to_end(models, tmp_path, capsys):
    """`precompute lens` stores per-layer KL for both models; the final hidden state's logit-lens KL is ~0."""
    code, _, err = _run(capsys, "lens", "--tied", models["tied"], "--untied", models["untied"], "--cache-dir", tmp_path,
                        "--name", "l", "--lens-steps", "5", "--lens-train-tokens", "2048", "--lens-eval-tokens", "1024",
                        "--lens-seq-len", "32")
    assert code == 0, err
    s = json.loads(_run(capsys, "summary", tmp_path / "l.duckdb", "--json")[1])
    kl = s["lens"]["kl"]
    assert set(kl) == {"tied", "untied"}
    for model in kl.values():
        assert len(model["tuned"]) == len(model["logit"]) == 3  # input + 2 blocks
        assert model["logit"][-1] == pytest.approx(0.0, abs=1e-3)
        assert all(x >= -1e-6 for x in model["tuned"] + model["logit"])
    assert "gap" in s["lens"]
    con = open_cache(tmp_path / "l.duckdb")
    traj = query_df(con, "SELECT * FROM lens_trajectory")
    stages = {r[0] for r in con.execute("SELECT stage FROM stages").fetchall()}
    con.close()
    assert stages == {"load", "lens"} and len(traj) > 0
    assert set(traj["lens"]) == {"tuned", "logit"}
    # the trained lens is saved and reused on a forced rerun
    saved = list((tmp_path / "lens" / "l").glob("*.safetensors"))
    assert len(saved) == 2
    code, _, err = _run(capsys, "lens", "--tied", models["tied"], "--untied", models["untied"], "--cache-dir",
                        tmp_path, "--name", "l", "--lens-steps", "5", "--lens-train-tokens", "2048",
                        "--lens-eval-tokens", "1024", "--lens-seq-len", "32", "--force")
    assert code == 0, err
    assert sorted(saved) == sorted((tmp_path / "lens" / "l").glob("*.safetensors"))


def test_library_versions_read_umap_learns_version_without_importing_it(monkeypatch):
    """A pair run records umap-learn's version from its installed metadata: importing umap compiles
    pynndescent's numba kernels (16 s on a fresh install, 2.9 s from numba's cache, in every process),
    which a run without the umap stage never needs. With umap unimportable the version is still there,
    and the installed one."""
    import importlib.metadata
    import sys

    from precompute.pair import library_versions

    monkeypatch.setitem(sys.modules, "umap", None)  # `import umap` raises ImportError
    versions = library_versions()
    assert versions["umap-learn"] == importlib.metadata.version("umap-learn")
    assert {"torch", "transformers", "duckdb", "faiss", "numpy", "python"} <= set(versions)
