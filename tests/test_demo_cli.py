"""`precompute demo`, `evolution` and `grads` end to end (a shortened toy lab)."""

import json
import shutil

import numpy as np
import pytest

from precompute.cli import main
from tying.cache.store import open_cache, query_df

SHORT = ["--steps", "60", "--checkpoints", "5", "--vocab-size", "512", "--d-model", "64", "--n-layers", "2",
         "--max-chars", "300000", "--skip", "umap", "--lens-steps", "10", "--batch-size", "8"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    import contextlib
    import io

    root = tmp_path_factory.mktemp("demo")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["demo", "--cache-dir", str(root), *SHORT, "--input-grad-scale", "2,5", "--seeds", "2"])
    assert code == 0, err.getvalue()
    return root


@pytest.mark.slow
def test_demo_summary_reproduces_the_papers_directions(demo, capsys):
    """The scientific check on a shortened run: the direction of every headline number."""
    code, out, _ = _run(capsys, "summary", demo / "demo.duckdb", "--json")
    assert code == 0
    s = json.loads(out)
    assert s["kind"] == "toylab" and s["twins"] == "independent"
    # the ceiling T' and the per-seed lens and map figures, for every seed; every claim says over how many runs
    for metric in ("T'->T linear in-sample", "overlap@10 T~T'", "spectral T~T'", "spectral T~O", "CKA T~T'",
                   "tuned-lens KL early tied", "tuned-lens KL early untied"):
        assert set(s["seed_values"][metric]) == {"0", "1"}, metric
    assert {s["claims"][k]["n_runs"] for k in ("alignment", "overlap", "map", "lens")} == {2}
    assert {r["variant"] for r in s["runs"].values()} >= {"tied", "untied", "tied_scaled", "tied_rerun"}
    lin = s["alignment"]
    assert lin["O->T"]["linear"]["held_out"] > lin["I->T"]["linear"]["held_out"]
    assert s["overlap_at_10"]["T~O"] > s["overlap_at_10"]["T~I"]
    early = s["gradient_provenance"]["tied/seed0"]["early"]
    assert early > 0.5
    assert s["seeds"]["output share early"]["n"] == 2
    # Table 2: all three tied runs of both seeds, against I and O
    runs = s["table2"]["identity"]
    assert set(runs) == {f"{r}/seed{i}" for r in ("tied", "tied_scaled_x2", "tied_scaled_x5") for i in (0, 1)}
    assert all(-1 <= runs[r]["I"] <= 1 and -1 <= runs[r]["O"] <= 1 for r in runs)
    # independent twins share no coordinates: unmapped rows of T and of the untied twin's matrices sit near 0
    raw = s["table2"]["identity (raw rows)"]
    assert all(abs(raw[r]["I"]) < 0.3 and abs(raw[r]["O"]) < 0.3 for r in raw)
    # frequencies were counted on the corpus (norm vs frequency)
    con = open_cache(demo / "demo.duckdb")
    try:
        freq = query_df(con, "SELECT sum(freq_tied) AS n, count(*) FILTER (WHERE freq_tied > 0) AS seen FROM tokens")
        assert freq["n"][0] > 10_000 and freq["seen"][0] > 256
        evo = query_df(con, "SELECT run, step, matrix, cos_init, cos_prev FROM evolution ORDER BY run, matrix, step")
    finally:
        con.close()
    # the per-seed rho of log count against T's position: seed 0's is the token_traits stage's, on the same counts
    rho = s["seed_values"]["rho position~log count"]
    assert set(rho) == {"0", "1"} and all(-1 <= v <= 1 for v in rho.values())
    ran = s["stages"]["token_traits"]["params"]
    assert ran["ran"]["rho"] == pytest.approx(rho["0"], abs=1e-4)
    assert ran["ran"]["under_trained"].startswith("seen fewer than")
    first = evo.groupby(["run", "matrix"]).head(1)
    np.testing.assert_allclose(first["cos_init"], 1.0, atol=1e-6)
    assert set(evo[evo.run == "tied/seed0"].matrix) == {"T"}
    assert set(evo[evo.run == "untied/seed0"].matrix) == {"I", "O"}


@pytest.mark.slow
def test_demo_rerun_skips_training(demo, capsys):
    con = open_cache(demo / "demo.duckdb")
    before = dict(con.execute("SELECT stage, finished_at FROM stages").fetchall())
    con.close()
    code, _, err = _run(capsys, "demo", "--cache-dir", demo, *SHORT, "--input-grad-scale", "2,5", "--seeds", "2")
    assert code == 0, err
    assert "training: cached" in err
    con = open_cache(demo / "demo.duckdb")
    after = dict(con.execute("SELECT stage, finished_at FROM stages").fetchall())
    con.close()
    assert after == before


@pytest.mark.slow
def test_evolution_of_local_checkpoints(demo, tmp_path, capsys):
    """Checkpoint 'step0' is the initial copy: cos_init there is 1; the second checkpoint's cos_prev is
    its cos_init (its previous checkpoint is the first). An identical copy is refused (test below)."""
    work = demo / "toylab" / "demo"
    ckpts = tmp_path / "ckpts"
    shutil.copytree(work / "untied-seed0", ckpts / "step100")
    shutil.copytree(work / "untied-seed1", ckpts / "step0")
    code, _, err = _run(capsys, "evolution", "--model", ckpts, "--revisions", "step0,step100",
                        "--cache-dir", tmp_path, "--name", "evo")
    assert code == 0, err
    s = json.loads(_run(capsys, "summary", tmp_path / "evo.duckdb", "--json")[1])
    assert s["kind"] == "evolution"
    series = s["evolution"][str(ckpts)]
    assert series["I"]["steps"] == [0, 100]
    assert series["I"]["cos_init"][0] == pytest.approx(1.0)
    assert series["O"]["cos_init"][1] < 0.999  # another seed's weights
    con = open_cache(tmp_path / "evo.duckdb")
    rows = con.execute("SELECT cos_prev, cos_init FROM evolution WHERE step = 100").fetchall()
    con.close()
    assert all(p == pytest.approx(i) for p, i in rows)


@pytest.mark.parametrize("tied", [False, True])
def test_evolution_refuses_two_revisions_with_identical_matrices(tmp_path, capsys, tied):
    """EleutherAI/pythia issue 205: many pythia-2.8b step branches serve the final weights. Two local
    revisions holding the same tiny model (same seed) are refused with one line naming both, even
    when another revision lies between them; distinct weights pass."""
    from tests.tiny_models import make_tiny_model

    ckpts = tmp_path / "ckpts"
    for rev, seed in (("step0", 0), ("step100", 1), ("step200", 0)):
        make_tiny_model("llama", ckpts / rev, tied=tied, vocab_size=64, d=16, n_layers=1, seed=seed)
    code, _, err = _run(capsys, "evolution", "--model", ckpts, "--revisions", "step0,step100,step200",
                        "--cache-dir", tmp_path, "--name", "dup")
    assert code == 2
    line = err.strip().splitlines()[-1]
    assert "'step0'" in line and "'step200'" in line and "identical embedding matrices" in line
    assert "pythia issue 205" in line
    assert not (tmp_path / "dup.duckdb").exists()
    code, _, err = _run(capsys, "evolution", "--model", ckpts, "--revisions", "step0,step100",
                        "--cache-dir", tmp_path, "--name", "ok")
    assert code == 0, err


def test_grads_csv_import(tmp_path, capsys):
    csv = tmp_path / "olmo.csv"
    rows = ["step,embedding_grad_l2_norm,output_proj_grad_l2_norm"]
    rows += [f"{s},{1.0},{3.0 if s <= 10 else 1.0}" for s in range(1, 101)]
    csv.write_text("\n".join(rows) + "\n")
    code, out, err = _run(capsys, "grads", "--csv", csv, "--name", "olmo-grads", "--cache-dir", tmp_path,
                          "--early-steps", "10")
    assert code == 0, err
    s = json.loads(_run(capsys, "summary", tmp_path / "olmo-grads.duckdb", "--json")[1])
    p = s["gradient_provenance"]["olmo"]
    assert p["early"] == pytest.approx(0.75) and p["early_steps"] == 10 and p["early_logged_steps"] == 10
    # the paper's quantity: mean of the per-step ratios (10 steps at 3/4, 90 at 1/2)
    assert p["overall"] == pytest.approx((10 * 0.75 + 90 * 0.5) / 100)
    assert p["ratio_of_sums"]["overall"] == pytest.approx((30 + 90) / (100 + 30 + 90))
    assert p["input_norm"] == "plain"
    # user-named columns
    csv2 = tmp_path / "named.csv"
    csv2.write_text("it,in,out\n1,1,1\n2,1,3\n")
    code, _, err = _run(capsys, "grads", "--csv", csv2, "--name", "n", "--cache-dir", tmp_path,
                        "--step-column", "it", "--input-column", "in", "--output-column", "out")
    assert code == 0, err


@pytest.mark.parametrize("case", ["tiny-corpus", "empty-corpus", "vocab-too-large", "factor", "steps",
                                  "csv-columns", "csv-missing", "csv-junk"])
def test_bad_input_one_line_exit_2(tmp_path, capsys, case):
    small = tmp_path / "small.txt"
    small.write_text("hello world. " * 50)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    junk = tmp_path / "junk.csv"
    junk.write_text("step,embedding_grad_l2_norm,output_proj_grad_l2_norm\na,b,c\n")
    argv = {
        "tiny-corpus": ["demo", "--corpus", small],
        "empty-corpus": ["demo", "--corpus", empty],
        "vocab-too-large": ["demo", "--max-chars", "30000", "--vocab-size", "60000"],
        "factor": ["demo", "--input-grad-scale", "-1"],
        "steps": ["demo", "--steps", "5", "--checkpoints", "12"],
        "csv-columns": ["grads", "--csv", small, "--name", "x"],
        "csv-missing": ["grads", "--csv", tmp_path / "nope.csv", "--name", "x"],
        "csv-junk": ["grads", "--csv", junk, "--name", "x"],
    }[case]
    code, _, err = _run(capsys, *argv, "--cache-dir", tmp_path / "c")
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # progress lines may precede it; the error itself is one line, the last
    assert lines[-1].startswith("error: ") and sum("error" in ln for ln in lines) == 1, err
    assert "Traceback" not in err
    assert not list((tmp_path / "c").glob("*.duckdb")) if (tmp_path / "c").exists() else True
