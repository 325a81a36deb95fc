"""The output share of the gradient as the paper averages it (tying.analysis.share), and the `grads` import."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from precompute.cli import main
from tying.analysis.share import early_steps_for, output_share, step_share
from tying.cache.summary import summarize

ROOT = Path(__file__).resolve().parent.parent
AUTHORS_LOG = ROOT / "published" / "olmo-1b-tied-gradient-provenance.csv"


def test_share_on_a_sparse_scaled_log_by_hand():
    """Every 10th step from step 5, in shuffled order, with norms whose ratios are easy sums.

    steps   input  output  ratio
      5       1      3     0.75
     15       2      2     0.50
     25       3      1     0.25
     35      10     30     0.75
    early (N = 20): steps 5, 15 -> mean(0.75, 0.5) = 0.625; ratio of sums 5 / 8 = 0.625 too,
    overall: mean(0.75, 0.5, 0.25, 0.75) = 0.5625; ratio of sums 36 / 52 = 0.6923...
    """
    steps = [25, 5, 35, 15]
    inp = [3.0, 1.0, 10.0, 2.0]
    out = [1.0, 3.0, 30.0, 2.0]
    s = output_share(steps, inp, out, early_steps=20)
    assert s["early"] == pytest.approx(0.625)
    assert s["overall"] == pytest.approx(0.5625)
    assert s["ratio_of_sums"]["early"] == pytest.approx(5 / 8)
    assert s["ratio_of_sums"]["overall"] == pytest.approx(36 / 52)
    assert (s["early_steps"], s["logged_steps"], s["early_logged_steps"]) == (20, 4, 2)
    assert (s["first_step"], s["last_step"]) == (5, 35)
    # scaling both norms of one step leaves its ratio, and so the paper's share, unchanged;
    # the ratio of sums moves: it weighs steps by their norm
    scaled = output_share(steps, [3.0, 1.0, 1.0, 2.0], [1.0, 3.0, 3.0, 2.0], early_steps=20)
    assert scaled["overall"] == pytest.approx(s["overall"])
    assert scaled["ratio_of_sums"]["overall"] == pytest.approx(9 / 16)  # 9 of 7 + 9
    # the window is by step number: N = 4 holds no logged step (not "the first row")
    assert output_share(steps, inp, out, early_steps=4)["early"] is None
    assert output_share(steps, inp, out, early_steps=5)["early"] == pytest.approx(0.75)


def test_share_skips_steps_without_gradient_and_checks_input():
    s = output_share([1, 2, 3], [0.0, 1.0, np.nan], [0.0, 1.0, 5.0], early_steps=10)
    assert s["overall"] == pytest.approx(0.5) and s["logged_steps"] == 2
    np.testing.assert_allclose(step_share([1.0, 0.0], [3.0, 0.0]), [0.75, np.nan])
    with pytest.raises(ValueError):
        output_share([1], [1.0], [-1.0])
    with pytest.raises(ValueError):
        output_share([1, 2], [1.0], [1.0])
    with pytest.raises(ValueError):
        output_share([1], [1.0], [1.0], early_steps=0)
    assert early_steps_for(250) == 25 and early_steps_for(3) == 1


def test_the_authors_log_gives_the_papers_numbers():
    """The authors' public OLMo-1B log: 0.7033 over steps 1-1,000, 0.6357 over all (PAPER.md)."""
    log = pd.read_csv(AUTHORS_LOG)
    s = output_share(log["step"], log["embedding_grad_l2_norm_effective"], log["output_proj_grad_l2_norm_effective"],
                     early_steps=1000)
    assert round(s["early"], 4) == 0.7033
    assert round(s["overall"], 4) == 0.6357
    assert round(s["ratio_of_sums"]["early"], 4) == 0.7384  # not the paper's quantity
    assert round(s["ratio_of_sums"]["overall"], 4) == 0.6511
    assert s["logged_steps"] == 10010 and s["early_logged_steps"] == 1000


def _import(tmp_path, csv: Path, *extra: str):
    rc = main(["grads", "--csv", str(csv), "--name", "prov", "--cache-dir", str(tmp_path), *extra])
    assert rc == 0
    con = duckdb.connect(str(tmp_path / "prov.duckdb"), read_only=True)
    try:
        return summarize(con)
    finally:
        con.close()


def test_grads_imports_the_authors_log_with_the_papers_definition(tmp_path, capsys):
    s = _import(tmp_path, AUTHORS_LOG)
    p = s.gradient_provenance["olmo-1b-tied-gradient-provenance"]
    assert round(p["early"], 4) == 0.7033 and round(p["overall"], 4) == 0.6357
    assert p["early_steps"] == 1000 and p["input_norm"] == "effective"
    out = capsys.readouterr().out
    assert "early  0.703" in out and "ratio of summed norms" in out
    # --early-steps moves the window
    s = _import(tmp_path, AUTHORS_LOG, "--early-steps", "10000")
    assert round(s.gradient_provenance["olmo-1b-tied-gradient-provenance"]["early"], 4) == 0.6357


def test_grads_prefers_effective_columns_and_says_which(tmp_path):
    """A scaled run: the plain input norm is the unscaled one, *_effective what reached the matrix."""
    steps = np.arange(10, 110, 10)
    frame = pd.DataFrame({"step": steps, "embedding_grad_l2_norm": 1.0, "output_proj_grad_l2_norm": 3.0,
                          "embedding_grad_l2_norm_effective": 3.0, "output_proj_grad_l2_norm_effective": 3.0})
    both = tmp_path / "scaled.csv"
    frame.to_csv(both, index=False)
    p = _import(tmp_path, both, "--early-steps", "50").gradient_provenance["scaled"]
    assert p["input_norm"] == "effective" and p["early"] == pytest.approx(0.5)
    assert p["early_logged_steps"] == 5
    plain = tmp_path / "plain.csv"
    frame.drop(columns=["embedding_grad_l2_norm_effective", "output_proj_grad_l2_norm_effective"]).to_csv(
        plain, index=False)
    p = _import(tmp_path, plain).gradient_provenance["plain"]
    assert p["input_norm"] == "plain" and p["early"] == pytest.approx(0.75)
    con = duckdb.connect(str(tmp_path / "prov.duckdb"), read_only=True)
    settings = json.loads(con.execute("SELECT settings FROM runs").fetchone()[0])
    con.close()
    assert settings["columns"]["grad_input_norm"] == "embedding_grad_l2_norm"


def test_grads_bad_early_steps_writes_nothing(tmp_path, capsys):
    rc = main(["grads", "--csv", str(AUTHORS_LOG), "--name", "x", "--cache-dir", str(tmp_path), "--early-steps", "0"])
    assert rc == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not list(tmp_path.iterdir())
