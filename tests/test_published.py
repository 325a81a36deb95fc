"""The paper's published measurements: the evolution-JSON importer, `precompute paper`, side-by-side tables."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer.render import dynamics_tables
from precompute.cli import main
from precompute.published import read_evolution_json

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "published"


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _evolution_file(path: Path, **override) -> Path:
    data = {"model_id": "org/tiny-untied", "steps": [0, 10, 30],
            "input_vs_init": [1.0, 0.9, 0.8], "output_vs_init": [1.0, 0.7, 0.4],
            "input_consecutive": [1.0, 0.9, 0.95], "output_consecutive": [1.0, 0.7, 0.6]}
    data.update(override)
    path.write_text(json.dumps(data))
    return path


def test_evolution_json_known_answers(tmp_path, capsys):
    f = _evolution_file(tmp_path / "evo.json")
    model, rows = read_evolution_json(f)
    assert model == "org/tiny-untied" and len(rows) == 6
    last = rows[rows["step"] == 30].set_index("matrix")
    assert last.loc["I", "cos_init"] == 0.8 and last.loc["O", "cos_init"] == 0.4
    assert last.loc["O", "cos_prev"] == 0.6
    assert rows[rows["step"] == 0]["cos_prev"].isna().all()  # no previous checkpoint at the first
    code, out, err = _run(capsys, "evolution-json", "--json", f, "--json",
                          _evolution_file(tmp_path / "b.json", model_id="org/other"), "--name", "evo",
                          "--cache-dir", tmp_path)
    assert code == 0, err
    s = json.loads(_run(capsys, "summary", tmp_path / "evo.duckdb", "--json")[1])
    assert s["kind"] == "evolution"
    assert s["evolution"]["org/tiny-untied"]["O"]["cos_init"] == [1.0, 0.7, 0.4]
    assert s["evolution"]["org/tiny-untied"]["I"]["steps"] == [0, 10, 30]
    assert set(s["runs"]) == {"org/tiny-untied", "org/other"}


@pytest.mark.parametrize("case", ["not-json", "not-object", "missing-key", "lengths", "empty", "steps-order",
                                  "steps-fraction", "cosine-range", "cosine-text", "no-file", "same-model"])
def test_bad_evolution_files_one_line_and_nothing_written(tmp_path, capsys, case):
    f = tmp_path / "bad.json"
    good = _evolution_file(tmp_path / "good.json")
    if case == "not-json":
        f.write_text("steps: 0, 10")
    elif case == "not-object":
        f.write_text("[1, 2, 3]")
    elif case == "missing-key":
        data = json.loads(good.read_text())
        del data["output_vs_init"]
        f.write_text(json.dumps(data))
    elif case == "lengths":
        _evolution_file(f, input_vs_init=[1.0, 0.9])
    elif case == "empty":
        _evolution_file(f, steps=[], input_vs_init=[], output_vs_init=[], input_consecutive=[], output_consecutive=[])
    elif case == "steps-order":
        _evolution_file(f, steps=[0, 30, 10])
    elif case == "steps-fraction":
        _evolution_file(f, steps=[0, 10.5, 30])
    elif case == "cosine-range":
        _evolution_file(f, output_vs_init=[1.0, 1.7, 0.4])
    elif case == "cosine-text":
        _evolution_file(f, output_vs_init=[1.0, "high", 0.4])
    elif case == "no-file":
        f = tmp_path / "absent.json"
    elif case == "same-model":
        f = good
    argv = ["evolution-json", "--json", good, "--json", f, "--name", "evo", "--cache-dir", tmp_path / "out"]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.fixture(scope="module")
def paper_summary(tmp_path_factory):
    d = tmp_path_factory.mktemp("paper")
    assert main(["paper", "--cache-dir", str(d)]) == 0
    from tying.cache.store import open_cache, query_df
    from tying.cache.summary import summarize

    con = open_cache(d / "paper.duckdb")
    try:
        return summarize(con), query_df(con, "SELECT run, source FROM runs").set_index("run")["source"].to_dict()
    finally:
        con.close()


def test_paper_cache_gives_the_papers_numbers(paper_summary):
    s, run_sources = paper_summary
    assert s.kind == "published"
    p = s.gradient_provenance["OLMo-1B tied (published run)"]
    assert round(p["early"], 4) == 0.7033 and round(p["overall"], 4) == 0.6357 and p["logged_steps"] == 10010
    olmo = s.evolution["allenai/OLMo-1B-0724-hf"]
    assert olmo["I"]["steps"][-1] == 20000 and olmo["O"]["steps"][-1] == 20000
    assert round(olmo["I"]["cos_init"][-1], 3) == 0.865 and round(olmo["O"]["cos_init"][-1], 3) == 0.561
    assert set(s.evolution) == {"allenai/OLMo-1B-0724-hf", "allenai/OLMo-7B-0424-hf", "EleutherAI/pythia-1b"}
    lens = s.analysis("lens")
    assert lens["kl"]["tied"]["tuned"][1] == 9.61 and lens["kl"]["untied"]["tuned"][-1] == 0.18
    # every figure carries its source: the file, the authors' repository and commit
    files = {Path(x["file"]).name: x for x in s.sources if x.get("file")}
    assert set(files) == {"olmo-1b-tied-gradient-provenance.csv", "evolution_OLMo-1B-0724-hf.json",
                          "evolution_OLMo-7B-0424-hf.json", "evolution_pythia-1b.json"}
    assert all(x["commit"] == "d94ddeef29af9a6b5c3fef471b07f4365db298cc" and "Apache-2.0" in x["license"]
               for x in files.values())
    assert {x["figure"] for x in s.sources} >= {"Figure 3", "Figure 4", "Table 1", "Table 2", "Table 5", "Table 6"}
    assert len(run_sources) == 4
    assert all("weight-tying-bias@d94ddeef29af" in src for src in run_sources.values())


def test_published_folder_keeps_the_license_and_attribution():
    assert "Apache License" in (PUBLISHED / "LICENSE-Apache-2.0.txt").read_text()
    readme = (PUBLISHED / "README.md").read_text()
    assert "d94ddeef29af9a6b5c3fef471b07f4365db298cc" in readme and "Apache License 2.0" in readme


def test_paper_with_a_missing_file_writes_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(PUBLISHED, data)
    (data / "evolution_pythia-1b.json").unlink()
    code, _, err = _run(capsys, "paper", "--data-dir", data, "--cache-dir", tmp_path / "out")
    assert code == 2 and "evolution_pythia-1b.json" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    (data / "evolution_pythia-1b.json").write_text("{}")  # junk in place of a file
    code, _, err = _run(capsys, "paper", "--data-dir", data, "--cache-dir", tmp_path / "out")
    assert code == 2 and "has no key" in err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_side_by_side_tables_put_runs_on_a_fraction_of_their_length():
    toy = pd.DataFrame({"step": [0, 125, 250], "matrix": "O", "cos_init": [1.0, 0.6, 0.4]})
    real = pd.DataFrame({"step": [0, 10000, 20000], "matrix": "O", "cos_init": [1.0, 0.7, 0.56]})
    both = dynamics_tables.evolution_by_fraction({"demo: untied": toy, "paper: OLMo": real})
    np.testing.assert_allclose(both[both.source == "demo: untied"]["fraction"], [0, 0.5, 1])
    np.testing.assert_allclose(both[both.source == "paper: OLMo"]["fraction"], [0, 0.5, 1])
    log = pd.DataFrame({"step": np.arange(1, 101), "output_share": np.r_[np.ones(50), np.zeros(50)]})
    share = dynamics_tables.share_by_fraction({"run": log}, window_fraction=0.1)  # a window of 10 steps
    assert share["share"].iloc[49] == 1.0 and share["share"].iloc[54] == pytest.approx(0.5)
    assert share["fraction"].iloc[-1] == 1.0 and math.isclose(share["fraction"].iloc[0], 0.01)
