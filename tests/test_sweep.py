"""The width sweep: grid and shard arithmetic, the crossing point, and `precompute sweep` end to end."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from precompute.cli import main
from tests.waiting import wait_until
from tying.analysis import sweep as S
from tying.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
ROW_KEYS = {"d_model", "vocab_size", "seed", "linear_o_t", "linear_i_t", "overlap_t_o", "overlap_t_i",
            "output_share_early", "eval_loss_tied", "eval_loss_untied", "embedding_share_tied"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    text = (ROOT / "cache" / "toylab" / "demo" / "corpus.txt")
    if text.is_file():
        body = text.read_text(encoding="utf-8")[:120_000]
    else:  # a fresh clone without the demo's corpus: the offline one
        from tying.loading.corpus import load_corpus

        body = load_corpus("python-docs", 120_000)
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(body, encoding="utf-8")
    return path


def tiny(corpus, cache_dir, *extra) -> list[str]:
    # vocabulary 640, widths 20 and 40, one block: a deeper tied model matches the untied twin within 2%
    return ["sweep", "--cache-dir", str(cache_dir), "--corpus", str(corpus), "--vocab-size", "640", "--n-layers", "1",
            "--n-heads", "2", "--context", "16", "--batch-size", "4", *extra]


def rows(path) -> pd.DataFrame:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT * FROM sweep ORDER BY vocab_size, d_model, seed").df()
    finally:
        con.close()


# -- pure parts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [("", "at least one"), ("32,,64", "not a whole number"),
                                           ("32,x", "not a whole number"), ("32,0", "positive"),
                                           ("32,64,32", "more than once")])
def test_bad_lists_are_refused(text, message):
    with pytest.raises(UserError, match=message):
        S.parse_ints(text, "--d-model")


def test_grid_checks_and_shards_cover_every_cell_once():
    with pytest.raises(UserError, match="not divisible by --n-heads 4"):
        S.check_grid([32, 30], [4096], 3, 4)
    with pytest.raises(UserError, match="256 byte tokens"):
        S.check_grid([32], [200], 1, 4)
    cells = S.grid([64, 32], [4096, 1024], 3)
    assert len(cells) == 12 and cells[0] == S.Cell(32, 1024, 0)
    parts = [S.shard_cells(cells, (i, 5)) for i in range(5)]
    assert sorted((c for p in parts for c in p), key=cells.index) == cells
    for bad in ("3/3", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(UserError):
            S.parse_shard(bad)


def test_crossing_known_answers():
    # the gap falls from +0.5 to -0.5 between widths 32 and 64, both intervals clear of zero:
    # halfway in log2 width, 2**5.5
    c = S.crossing([32, 64, 128], [0.5, -0.5, -1.0], [0.1, 0.1, 0.1])
    assert c["between"] == (32.0, 64.0) and c["x"] == pytest.approx(2 ** 5.5)
    c = S.crossing([0.1, 0.3], [0.3, -0.1], [0.05, 0.05], log_x=False)
    assert c["x"] == pytest.approx(0.1 + 0.75 * 0.2)
    # the same means with intervals that reach zero: nothing named, and why
    c = S.crossing([32, 64, 128], [0.5, -0.5, -1.0], [0.6, 0.6, 0.6])
    assert c["x"] is None and "does not let one name" in c["why"]
    assert "never pays off in this range" in S.crossing([32, 64], [0.2, 0.1], [0.05, 0.05])["why"]
    assert "1 of 2 points" in S.crossing([32, 64], [-0.2, -0.1], [0.05, 0.5])["why"]
    assert S.half_width(1.0, 3) == pytest.approx(4.302653 / np.sqrt(3), rel=1e-6) and S.half_width(1.0, 1) == np.inf


def test_by_cell_means_spreads_and_gaps():
    base = {m: 0.0 for m in S.METRICS}
    r = pd.DataFrame([dict(base, d_model=32, vocab_size=300, seed=s, linear_o_t=0.9, linear_i_t=0.5 + 0.1 * s,
                           eval_loss_tied=5.0, eval_loss_untied=5.0 + 0.2 * s) for s in range(3)])
    c = S.by_cell(r).iloc[0]
    assert c["n"] == 3 and c["bias_linear"] == pytest.approx(0.3) and c["bias_linear_std"] == pytest.approx(0.1)
    assert c["loss_gap"] == pytest.approx(0.2) and c["loss_gap_std"] == pytest.approx(0.2)
    assert c["loss_gap_half"] == pytest.approx(4.302653 * 0.2 / np.sqrt(3), rel=1e-6)  # the 95% t-interval over 3 seeds
    assert S.by_cell(r.iloc[:1]).iloc[0]["bias_linear_half"] == np.inf  # one seed: no interval


# -- end to end ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_two_cells_two_seeds_end_to_end(corpus, tmp_path, capsys):
    assert main(tiny(corpus, tmp_path, "--d-model", "20,40", "--seeds", "2", "--steps", "12")) == 0
    text = capsys.readouterr().out
    assert "Width sweep" in text and "± " in text
    got = rows(tmp_path / "sweep.duckdb")
    assert len(got) == 4 and sorted(set(zip(got["d_model"], got["seed"]))) == [(20, 0), (20, 1), (40, 0), (40, 1)]
    # the parameter-matched arm, the baselines, the budget and the learning rates of every row
    assert (abs(got["params_tied_matched"] - got["params_untied"]) <= 0.02 * got["params_untied"]).all()
    # the matched arm keeps the twins' depth and width and widens its feed-forward layers (issue 29)
    assert (got["n_layers_matched"] == got["n_layers"]).all() and (got["d_ff_matched"] > got["d_ff"]).all()
    assert (got["d_ff"] == 4 * got["d_model"]).all() and got["eval_loss_tied_matched"].notna().all()
    # the in-sample map, how far I moved, the bigram's training tokens
    for col in ("linear_o_t_in", "linear_i_t_in", "cos_start_input_untied"):
        assert got[col].between(-1, 1).all() and got[col].notna().all(), col
    assert (got["bigram_train_tokens"] > got["tokens_seen"]).all()
    # the fourth protocol: FLOPs per token (the twins alike, the matched arm more) and T's raw-row cosine with O
    assert (got["flops_tied"] == got["flops_untied"]).all() and (got["flops_tied_matched"] > got["flops_tied"]).all()
    assert got["identity_raw_o_t"].between(-1, 1).all() and got["identity_raw_o_t"].notna().all()
    # every probe stored: 3 rates (the default grid) x 3 arms per width, the chosen rate the probe minimum
    con = duckdb.connect(str(tmp_path / "sweep.duckdb"), read_only=True)
    probes = con.execute("SELECT * FROM lr_probe").df()
    con.close()
    assert len(probes) == 2 * 3 * 3 and set(probes["arm"]) == {"tied", "untied", "tied_matched"}
    for (d, arm), g in probes.groupby(["d_model", "arm"]):
        lr = got.loc[got["d_model"] == d, f"lr_{arm}"].iloc[0]
        assert lr == g.loc[g["loss"].idxmin(), "lr"], (d, arm)
    assert (got["unigram_loss"] > got["bigram_loss"]).all() and (got["bigram_loss"] > 0).all()
    assert (got["tokens_seen"] == 12 * 4 * 16).all() and (got["epochs"] > 0).all()
    lrs = got[["d_model", "lr_tied", "lr_untied", "lr_tied_matched"]]
    assert lrs.drop(columns="d_model").isin([1e-3, 3e-3, 1e-2]).all().all()  # the default --lr-grid
    assert (lrs.groupby("d_model").nunique() == 1).all().all()  # chosen per width and arm, not per seed
    # the untied twin has one more V x d matrix; the embedding shares follow from the counts
    assert ((got["params_untied"] - got["params_tied"]) == got["vocab_size"] * got["d_model"]).all()
    np.testing.assert_allclose(got["embedding_share_tied"], got["vocab_size"] * got["d_model"] / got["params_tied"])
    np.testing.assert_allclose(got["embedding_share_untied"],
                               2 * got["vocab_size"] * got["d_model"] / got["params_untied"])
    for col in ("linear_o_t", "linear_i_t", "overlap_t_o", "overlap_t_i", "output_share_early"):
        assert got[col].between(-1, 1).all() and got[col].notna().all()
    assert main(["summary", str(tmp_path / "sweep.duckdb"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["kind"] == "sweep" and len(s["sweep"]) == 4 and set(s["sweep"][0]) >= ROW_KEYS
    assert [(c["d_model"], c["n"]) for c in s["sweep_cells"]] == [(20, 2), (40, 2)]
    assert all(np.isfinite(c["loss_gap_matched"]) for c in s["sweep_cells"])


@pytest.mark.slow
def test_a_finished_cell_is_not_trained_again(corpus, tmp_path, capsys, monkeypatch):
    from precompute.sweep import SweepRun
    from precompute.sweep_config import SweepConfig

    cfg = dict(cache_dir=str(tmp_path), corpus=str(corpus), widths=[20, 40], vocab_sizes=[640], seeds=1, n_layers=1,
               n_heads=2, context=16, batch_size=4, steps=12)

    def stop_after_one(cell):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        SweepRun(SweepConfig(**cfg)).run(on_cell=stop_after_one)
    assert len(rows(tmp_path / "sweep.duckdb")) == 1
    trained = []
    SweepRun(SweepConfig(**cfg)).run(on_cell=trained.append)
    assert trained == [S.Cell(40, 640, 0)] and len(rows(tmp_path / "sweep.duckdb")) == 2


@pytest.mark.slow
def test_resume_after_a_kill(corpus, tmp_path):
    """SIGKILL mid-sweep: the cache holds the finished cells, uncorrupted; a rerun trains only the rest."""
    args = tiny(corpus, tmp_path, "--d-model", "20,40", "--seeds", "3", "--steps", "30")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "precompute", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = tmp_path / "sweep.duckdb"

    def midway() -> str | None:
        """"midway": 1 to 5 of the 6 cells in the cache; "finished": the sweep ended first."""
        if cache.exists():
            try:
                if 1 <= len(rows(cache)) < 6:
                    return "midway"
            except duckdb.Error:  # between writes
                pass
        return "finished" if proc.poll() is not None else None

    try:
        if wait_until(midway, timeout=180, interval=0.05, what="a sweep with some of its cells") == "finished":
            pytest.skip("the sweep finished before it could be killed")
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()  # a sweep that never got midway: stopped all the same
        proc.wait(30)
    done = len(rows(cache))  # opens read-only: the file is a whole cache
    assert 1 <= done < 6
    out = subprocess.run([sys.executable, "-m", "precompute", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-1000:]
    assert f"6 cells, {done} already in" in out.stderr
    assert len(rows(cache)) == 6


@pytest.mark.slow
def test_shard_caches_merge_into_the_rows_of_one_run(corpus, tmp_path, capsys):
    one, sharded = tmp_path / "one", tmp_path / "sharded"
    grid = ("--d-model", "20,40", "--seeds", "2", "--steps", "12")
    assert main(tiny(corpus, one, *grid)) == 0
    for i in range(3):
        assert main(tiny(corpus, sharded, *grid, "--shard", f"{i}/3")) == 0
    shards = sorted(sharded.glob("sweep.shard*of3.duckdb"))
    assert len(shards) == 3 and sum(len(rows(p)) for p in shards) == 4
    assert main(["sweep-merge", *map(str, shards), "--cache-dir", str(sharded)]) == 0
    capsys.readouterr()
    merged, single = rows(sharded / "sweep.duckdb"), rows(one / "sweep.duckdb")
    keys = ["d_model", "vocab_size", "seed"]
    pd.testing.assert_frame_equal(merged[keys], single[keys])
    shard_rows = pd.concat([rows(p) for p in shards]).sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(merged.drop(columns="seconds"), shard_rows.drop(columns="seconds"))
    for col in S.METRICS:  # the same training: the same numbers as one run (CPU kernels: within 1e-3)
        np.testing.assert_allclose(merged[col], single[col], atol=1e-3, err_msg=col)
    # shards of another sweep (other steps) do not merge
    assert main(tiny(corpus, tmp_path / "other", "--d-model", "20", "--steps", "13")) == 0
    capsys.readouterr()
    assert main(["sweep-merge", str(shards[0]), str(tmp_path / "other" / "sweep.duckdb"),
                 "--cache-dir", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and "steps" in err and not (tmp_path / "bad" / "sweep.duckdb").exists()


@pytest.mark.parametrize("extra, message", [
    (("--d-model", "30,32"), "not divisible by --n-heads 4"),
    (("--d-model", ""), "at least one"),
    (("--d-model", "32,64,32"), "more than once"),
    (("--vocab-size", "4096,4096"), "more than once"),
    (("--vocab-size", "100"), "256 byte tokens"),
    (("--shard", "2/2"), "0 <= i < n"),
])
def test_bad_grids_are_one_line_errors_and_write_nothing(tmp_path, capsys, extra, message):
    rc = main(["sweep", "--cache-dir", str(tmp_path / "c"), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()


# -- issue 20: baselines, the parameter-matched arm, the budget, the learning-rate split -----------

def test_unigram_and_bigram_known_answers():
    # training tokens 0 1 0 1 0 2 over a vocabulary of 3: unigram counts 3, 2, 1 of 6;
    # add-one: p = 4/9, 3/9, 2/9
    train = np.array([0, 1, 0, 1, 0, 2])
    assert S.unigram_loss(train, np.array([0, 2]), 3) == pytest.approx(-(np.log(4 / 9) + np.log(2 / 9)) / 2)
    # bigram counts: after 0: 1 twice, 2 once (c(0) = 3); after 1: 0 twice (c(1) = 2); nothing after 2.
    # beta = 1: p(1|0) = (2 + 3/9) / (3 + 1) = 7/12; p(2|0) = (1 + 2/9) / 4 = 11/36;
    # p(1|1) = (0 + 3/9) / (2 + 1) = 1/9; after 2 (never followed): the unigram, p(0|2) = 4/9
    prev, tgt = np.array([0, 0, 1, 2]), np.array([1, 2, 1, 0])
    want = -(np.log(7 / 12) + np.log(11 / 36) + np.log(1 / 9) + np.log(4 / 9)) / 4
    assert S.bigram_loss(train, prev, tgt, 3, beta=1.0) == pytest.approx(want)
    # a very strong prior is the unigram; the eval pairs are the targets of evaluate_loss's windows
    assert S.bigram_loss(train, prev, tgt, 3, beta=1e12) == pytest.approx(S.unigram_loss(train, tgt, 3))
    p, t = S.window_pairs(np.arange(10), context=3)  # windows 0-3, 3-6, 6-9: targets 1..9
    assert list(t) == list(range(1, 10)) and list(p) == list(range(0, 9))
    assert S.fit_beta(train, prev, tgt, 3) in S.BETAS


@pytest.mark.slow
def test_the_matched_tied_model_has_the_untied_parameter_count_within_two_percent():
    from precompute.sweep_config import FULL, QUICK
    from tying.toylab.model import build_twins

    for d in sorted(set(FULL["widths"]) | set(QUICK["widths"])):
        f = S.matched_d_ff(4096, d, 4)
        untied, matched = S.llama_params(4096, d, 4, tied=False), S.llama_params(4096, d, 4, d_ff=f)
        # the twins' depth, wider feed-forward layers; the nearest integer misses by at most 1.5 d L
        assert f > 4 * d and abs(matched - untied) <= 1.5 * d * 4, d
        assert S.match_error(4096, d, 4) <= 0.02
        # the brute-force nearest over every feed-forward width
        assert f == min(range(4 * d, 4 * d + 4096), key=lambda g: abs(S.llama_params(4096, d, 4, d_ff=g) - untied))
    assert [S.matched_d_ff(4096, d, 4) for d in (32, 64, 128, 256)] == [469, 597, 853, 1365]  # 4d + 4096/12
    # the formula counts what torch counts (a tied matrix once), a widened feed-forward layer too
    m = build_twins({"vocab_size": 300, "d_model": 16, "n_layers": 2, "n_heads": 2, "context": 16}, 0)
    assert sum(p.numel() for p in m["tied"].parameters()) == S.llama_params(300, 16, 2)
    assert sum(p.numel() for p in m["untied"].parameters()) == S.llama_params(300, 16, 2, tied=False)
    w = build_twins({"vocab_size": 300, "d_model": 16, "n_layers": 2, "n_heads": 2, "context": 16, "d_ff": 99}, 0,
                    variants=("tied",))
    assert sum(p.numel() for p in w["tied"].parameters()) == S.llama_params(300, 16, 2, d_ff=99)


def test_validation_windows_and_evaluation_windows_do_not_overlap():
    from precompute.sweep import validation_split
    from tying.toylab.train import eval_span, split_eval

    ids = np.arange(100_000)
    for context in (16, 64):
        _, held = split_eval(ids, context)
        _, valid = validation_split(ids, context)
        a, b = eval_span(len(valid), context)
        c, d = eval_span(len(held), context)
        v_pos, e_pos = set(valid[a:b]), set(held[c:d])
        assert v_pos and e_pos and not v_pos & e_pos and max(v_pos) < min(e_pos)


def test_the_budget_sets_steps_and_epochs_count_rereading():
    from precompute.sweep_config import SweepConfig
    from tying.toylab.train import epoch_offsets

    cfg = SweepConfig(tokens_per_param=2.0, widths=[32, 64])
    untied = S.llama_params(4096, 32, 4, tied=False)
    assert cfg.cell_steps(32, 4096) == int(np.ceil(2 * untied / (16 * 64)))
    assert SweepConfig(tokens=16 * 64 * 10 + 1).cell_steps(64, 4096) == 11
    with pytest.raises(UserError, match="not both"):
        SweepConfig(tokens=1000, steps=10)
    # 10 windows of 4 (+1) in 41 tokens; 6 steps x 3 = 18 sequences: every window once, then 8 again
    off, epochs = epoch_offsets(41, 6, 3, 4, seed=0)
    flat = list(off.ravel())
    assert epochs == pytest.approx(1.8) and sorted(flat[:10]) == list(range(0, 40, 4))
    assert len(set(flat[10:])) == 8


@pytest.mark.slow
def test_a_job_array_through_submitit_gives_the_rows_of_one_run(corpus, tmp_path):
    """--executor: the grid as a job array of --jobs tasks (one --shard each), merged at the end;
    submitit's DebugExecutor runs the tasks in this process, the same path as a cluster."""
    import submitit

    from precompute.sweep import run_on_executor
    from precompute.sweep_config import SweepConfig

    cfg = SweepConfig(cache_dir=str(tmp_path), corpus=str(corpus), widths=[20, 40], vocab_sizes=[640], seeds=1,
                      n_layers=1, n_heads=2, context=16, batch_size=4, steps=6, executor="local", jobs=2)
    path = run_on_executor(cfg, submitit.DebugExecutor(folder=str(tmp_path / "submitit")))
    assert path == tmp_path / "sweep.duckdb" and sorted(tmp_path.glob("sweep.shard*of2.duckdb"))
    got = rows(path)
    assert list(got["d_model"]) == [20, 40] and got["eval_loss_tied_matched"].notna().all()


@pytest.mark.slow
def test_executor_local_runs_the_cli_path(corpus, tmp_path):
    """`precompute sweep --executor local`: submitit's LocalExecutor, tasks as subprocesses here."""
    args = tiny(corpus, tmp_path, "--d-model", "20,40", "--seeds", "1", "--steps", "4", "--executor", "local",
                "--jobs", "2")
    out = subprocess.run([sys.executable, "-m", "precompute", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "submitted 2 tasks" in out.stderr and len(rows(tmp_path / "sweep.duckdb")) == 2


def test_the_probes_score_the_validation_split_and_are_stored(tmp_path, monkeypatch):
    """The learning-rate probes train on the training tokens less the validation split and are scored
    on it (train_twins holds out the last 5% of what it is given); every probe lands in lr_probe and
    a rerun reads them back instead of training again."""
    from types import SimpleNamespace

    from precompute.sweep import SweepRun, validation_split
    from precompute.sweep_config import SweepConfig
    from tying.cache.writer import CacheWriter
    from tying.toylab.train import split_eval

    cfg = SweepConfig(cache_dir=str(tmp_path), widths=[32], seeds=1, lr_grid=[1e-3, 3e-3, 1e-2], context=16)
    run = SweepRun(cfg)
    seen = []

    def fake_train(ids, n_vocab, d, arm, d_ff, steps, lr, seed, progress=None):
        seen.append(ids)
        return SimpleNamespace(eval_loss={1e-3: 5.0, 3e-3: 4.0, 1e-2: 4.5}[lr] + (arm == "untied") * 0.1)

    monkeypatch.setattr(run, "_train", fake_train)
    ids = np.arange(50_000)
    writer = CacheWriter(run.path)
    params = {"stage": run.probe_stage(4096, 32), "x": 1}
    chosen = run.choose_lrs(ids, 4096, 32, 4096, 100, lambda _: None, writer, params)
    assert chosen == {"tied": 3e-3, "untied": 3e-3, "tied_matched": 3e-3} and len(seen) == 9
    _, valid = validation_split(ids, 16)
    assert all(np.array_equal(split_eval(s, 16)[1], valid) for s in seen)
    con = duckdb.connect(str(run.path), read_only=True)
    probes = con.execute("SELECT * FROM lr_probe ORDER BY arm, lr").df()
    con.close()
    assert len(probes) == 9 and set(probes["steps"]) == {25}  # --lr-probe 0.25 of 100 steps
    seen.clear()
    again = SweepRun(cfg)
    monkeypatch.setattr(again, "_train", fake_train)
    assert again.choose_lrs(ids, 4096, 32, 4096, 100, lambda _: None, CacheWriter(again.path), params) == chosen
    assert not seen  # read back, not trained again


def test_lr_sensitivity_known_answers():
    import pandas as pd

    probes = pd.DataFrame([{"arm": a, "lr": lr, "loss": loss} for a, losses in
                           (("tied", {1: 5.0, 2: 4.0, 3: 4.4}), ("untied", {1: 4.9, 2: 3.8, 3: 4.0}))
                           for lr, loss in losses.items()])
    assert S.chosen_rates(probes) == {"tied": 2.0, "untied": 2.0}
    band = S.lr_sensitivity(probes)
    # chosen gap 3.8 - 4.0 = -0.2; moves: untied to 1 or 3 (+0.9, +0.0), tied to 1 or 3 (-1.2, -0.6)
    assert band["gap"] == pytest.approx(-0.2)
    assert band["low"] == pytest.approx(-1.2 + 0.2) and band["high"] == pytest.approx(0.9 + 0.2)
    assert S.lr_sensitivity(probes[probes["lr"] == 2.0]) is None  # one rate: no neighbours


def test_the_matched_arm_starts_from_the_twins_draw_with_its_feed_forward_output_kept():
    import math

    import torch

    from tying.toylab.model import build_twins, widen_feed_forward

    kw = dict(vocab_size=300, d_model=32, n_layers=2, n_heads=4, d_ff=None, context=16)
    twin = dict(build_twins(kw, 5, ("tied",))["tied"].named_parameters())
    wide_model = build_twins(dict(kw, d_ff=300), 5, ("tied",), draw_d_ff=128)["tied"]
    for name, w in wide_model.named_parameters():
        t = twin[name]
        if w.shape == t.shape:  # every tensor the two share: the very same draw
            assert torch.equal(w, t), name
        elif name.endswith("down_proj.weight"):  # the twin's units first, scaled by sqrt(128 / 300)
            assert torch.allclose(w[:, :128], t * math.sqrt(128 / 300))
        else:
            assert torch.equal(w[:128], t) and w.shape == (300, 32), name
    # measured: the feed-forward output's size at step 0 is the twin's (within 10% on 512 random inputs)
    h = torch.randn(512, 32, generator=torch.Generator().manual_seed(0))
    narrow = build_twins(kw, 5, ("tied",))["tied"]
    for a, b in zip(narrow.model.layers, wide_model.model.layers):
        with torch.no_grad():
            ratio = b.mlp(h).pow(2).mean().sqrt() / a.mlp(h).pow(2).mean().sqrt()
        assert 0.9 < ratio.item() < 1.1
    with pytest.raises(ValueError, match="cannot widen"):
        widen_feed_forward("model.embed_tokens.weight", twin["model.embed_tokens.weight"], (300, 64), 0)


def test_train_flops_per_token_agree_with_torchs_flop_counter():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from tying.toylab.model import build_twins

    for d_ff in (80, 200):
        model = build_twins(dict(vocab_size=300, d_model=32, n_layers=2, n_heads=4, d_ff=d_ff, context=16), 0,
                            ("untied",))["untied"]
        model.config._attn_implementation = "eager"  # matrix products torch's counter sees one by one
        x = torch.randint(0, 300, (3, 16), generator=torch.Generator().manual_seed(0))
        with FlopCounterMode(display=False) as counter:
            logits = model(input_ids=x).logits
            torch.nn.functional.cross_entropy(logits.reshape(-1, 300), x.reshape(-1)).backward()
        assert counter.get_total_flops() / x.numel() == S.train_flops_per_token(300, 32, 2, 16, d_ff=d_ff)
