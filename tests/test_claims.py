"""The paper's claims with a cache's numbers and verdicts (tying/cache/claims.py): known answers.

For every claim id: the paper's direction gives "holds", the reverse "does not hold", an
interval around zero "no claim", seeds that split beyond their spread "mixed", and the
paper's printed numbers "reported". The sweep's claims are also checked end to end on copies
of the shipped sweep cache with their per-seed rows rewritten (`summary --json`).
"""

import copy
import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

from precompute.cli import main
from tying.cache import claims as C
from tying.cache import verdicts as V
from tying.cache.summary_types import Summary

S = Summary.from_json  # the summaries below are written as their JSON

ROOT = Path(__file__).resolve().parent.parent

# per-seed differences: clearly positive, reversed, around zero, split beyond the spread (10 seeds)
CLEAR, REVERSED, AROUND_ZERO = [0.40, 0.42, 0.38], [-0.40, -0.42, -0.38], [-0.05, 0.0, 0.05]
SPLIT = [1.0] * 9 + [-0.1]


def test_decide_known_answers():
    d = V.decide(CLEAR)
    assert d.verdict == V.HOLDS and d.mean == pytest.approx(0.4)
    # the 95% t-interval with 2 degrees of freedom: 4.303 * sd / sqrt(3)
    assert d.hi - d.mean == pytest.approx(4.302653 * np.std(CLEAR, ddof=1) / np.sqrt(3), rel=1e-5)
    assert V.decide(REVERSED).verdict == V.FAILS
    assert V.decide(AROUND_ZERO).verdict == V.NO_CLAIM
    # the seeds all agree but the spread is too large to tell the mean from zero: no claim
    assert V.decide([0.01, 0.5, 0.02]).verdict == V.NO_CLAIM
    split = V.decide(SPLIT)
    assert split.verdict == V.MIXED and "1 of 10 go the other way" in split.text
    assert V.decide([0.3]).verdict == V.HOLDS and V.decide([-0.3]).verdict == V.FAILS
    assert V.decide([0.0]).verdict == V.NO_CLAIM and V.decide([]).verdict == V.NO_DATA
    assert V.decide([None, float("nan")]).verdict == V.NO_DATA
    assert V.decide([0.2, 0.2]).verdict == V.HOLDS  # equal runs: a zero-width interval clear of zero


def test_combine_known_answers():
    assert V.combine([V.HOLDS, V.HOLDS]) == V.HOLDS
    assert V.combine([V.FAILS, V.FAILS]) == V.FAILS
    assert V.combine([V.HOLDS, V.FAILS]) == V.MIXED
    assert V.combine([V.HOLDS, V.NO_CLAIM]) == V.NO_CLAIM  # "at every width" cannot be said while one is undecided
    assert V.combine([V.HOLDS, V.MIXED, V.NO_CLAIM]) == V.MIXED
    assert V.combine([V.NO_DATA, V.HOLDS]) == V.HOLDS and V.combine([]) == V.NO_DATA


def _toy(align=CLEAR, overlap=CLEAR, share=CLEAR, to_i=CLEAR, from_o=CLEAR, spectral=(0.4, 0.6),
         lens=(0.33, 0.21)) -> dict:
    """A toy-lab summary whose per-seed differences are the given ones."""
    n = len(align)
    values = {
        "O->T linear in-sample": {str(k): 0.5 + v for k, v in enumerate(align)},
        "I->T linear in-sample": {str(k): 0.5 for k in range(n)},
        "O->T linear held-out": {str(k): 0.45 + v for k, v in enumerate(align)},
        "I->T linear held-out": {str(k): 0.45 for k in range(n)},
        "overlap@10 T~O": {str(k): 0.45 + v / 2 for k, v in enumerate(overlap)},
        "overlap@10 T~I": {str(k): 0.45 for k in range(len(overlap))},
        "output share early (proxy input)": {str(k): 0.5 + v / 2 for k, v in enumerate(share)},
        "output share early": {str(k): 0.5 + v / 2 for k, v in enumerate(share)},
    }
    table2 = {}
    for k, (a, b) in enumerate(zip(to_i, from_o)):
        table2[f"tied/seed{k}"] = {"I": 0.30, "O": 0.80, "input_grad_scale": 1.0}
        table2[f"tied_scaled_x5/seed{k}"] = {"I": 0.30 + a / 10, "O": 0.80 - b / 10, "input_grad_scale": 5.0}
    return {
        "kind": "toylab",
        "scale": {"n_params": 1_570_000, "n_params_untied": 2_100_000, "tokens": 256_000},
        "seed_values": values,
        "spectral": {"T~O": spectral[0], "T~I": spectral[1]},
        "gradient_provenance": {"tied/seed0": {"early": 0.85, "early_steps": 25,
                                               "beside_paper": {"early": 0.87, "input": "proxy"}}},
        "lens": {"gap": {"layers": 2, "tied": lens[0], "untied": lens[1]}},
        "table2": {"procrustes in-sample": table2},
        "paper": {"preset": "olmo", "table1": {"O->T": {"linear": 0.719}, "I->T": {"linear": 0.525}},
                  "table5": {"T~O": 0.733, "T~I": 0.496}, "output_share": {"early": 0.7033, "early_steps": 1000},
                  "tuned_lens_kl": {"tied": [8.86, 9.61], "untied": [7.01, 6.64]}},
    }


SEEDED = {"alignment": "align", "overlap": "overlap", "gradient": "share"}


@pytest.mark.parametrize("key", ["alignment", "overlap", "gradient"])
@pytest.mark.parametrize("diffs, verdict", [(CLEAR, V.HOLDS), (REVERSED, V.FAILS), (AROUND_ZERO, V.NO_CLAIM),
                                            (SPLIT, V.MIXED)])
def test_per_seed_claims_follow_their_seeds(key, diffs, verdict):
    s = _toy(**{SEEDED[key]: diffs})
    c = C.CLAIMS[key](S(s))
    assert c.verdict == verdict, (key, c)
    assert c.ours.startswith("toy (1.57M/2.10M parameters, 0.26M training tokens)")  # a toy line says so
    assert f"mean of {len(diffs)} seeds" in c.ours


def test_the_lines_show_the_quantity_their_verdict_is_decided_on():
    s = _toy()
    a = C.alignment(S(s))
    # in-sample linear (the paper's protocol) beside the paper's; held-out as a labelled second figure
    assert "O→T 0.900 vs I→T 0.500 (linear, in-sample, mean of 3 seeds); held-out: O→T 0.850 vs I→T 0.450" in a.ours
    assert "(linear, in-sample)" in a.paper and "in-sample" in a.note
    # the gradient line shows the proxy share and its verdict is decided on it: proxy reversed, exact not
    s = _toy(share=CLEAR)
    s["seed_values"]["output share early (proxy input)"] = {"0": 0.3, "1": 0.31, "2": 0.29}
    g = C.gradient(S(s))
    assert g.verdict == V.FAILS and "output share 30.0%" in g.ours and "authors' input proxy" in g.ours
    # the lens line says on the same line that the paper's numbers are of another indexing
    lens = C.lens(S(_toy()))
    assert "shifted indexing" in lens.paper and "not the same quantity" in lens.paper


@pytest.mark.parametrize("kwargs, verdict", [
    ({}, V.HOLDS),
    ({"to_i": REVERSED, "from_o": REVERSED}, V.FAILS),
    ({"to_i": AROUND_ZERO}, V.NO_CLAIM),
    ({"to_i": REVERSED}, V.MIXED),  # towards I reversed while away from O holds: one part of two
    ({"to_i": SPLIT, "from_o": [0.4] * 10}, V.MIXED),
])
def test_scaling_decides_both_moves(kwargs, verdict):
    assert C.scaling(S(_toy(**kwargs))).verdict == verdict


@pytest.mark.parametrize("values, verdict", [((0.4, 0.6), V.HOLDS), ((0.7, 0.5), V.FAILS), ((0.5, 0.5), V.NO_CLAIM)])
def test_one_run_claims_read_their_sign(values, verdict):
    c = C.spectral_map(S(_toy(spectral=values)))
    assert c.verdict == verdict and "one run" in c.ours and "no interval" in c.note
    assert C.lens(S(_toy(lens=(values[1], values[0])))).verdict == verdict


def test_a_single_pair_without_seeds_reads_its_own_in_sample_numbers():
    s = {"kind": "pair", "alignment": {"O->T": {"linear": {"in_sample": 0.8, "held_out": 0.7}},
                                       "I->T": {"linear": {"in_sample": 0.5, "held_out": 0.4}}},
         "overlap_at_10": {"T~O": 0.3, "T~I": 0.1}}
    a = C.alignment(S(s))
    assert a.verdict == V.HOLDS and a.ours.startswith("O→T 0.800 vs I→T 0.500 (linear, in-sample, one run)")
    assert not a.ours.startswith("toy")  # a real pair is not called a toy
    s["alignment"]["O->T"]["linear"]["in_sample"] = 0.2
    assert C.alignment(S(s)).verdict == V.FAILS


def test_no_data_names_the_cache_kind_that_has_it():
    got = C.claims(S({"kind": "pair"}))
    assert tuple(got) == C.IDS and all(c.verdict == V.NO_DATA for c in got.values())
    assert got["alignment"].needs == "toylab" and got["sweep_bias"].needs == got["sweep_gap"].needs == "sweep"
    assert got["published"].needs == "published"


def test_the_published_cache_reports_the_printed_tables_and_decides_on_released_curves():
    s = {"kind": "published", "paper": {"tuned_lens_kl": {"tied": [8.86, 9.61], "untied": [7.01, 6.64]}},
         "table2": {"paper": {"Table 2 x1": {"input_grad_scale": 1.0, "I": 0.216, "O": 0.384},
                              "Table 2 x5": {"input_grad_scale": 5.0, "I": 0.222, "O": 0.369}}},
         "evolution": {"m1": {"I": {"cos_init": [1.0, 0.9]}, "O": {"cos_init": [1.0, 0.5]}},
                       "m2": {"I": {"cos_init": [1.0, 0.6]}, "O": {"cos_init": [1.0, 0.7]}}}}
    got = C.claims(S(s))
    for key in ("alignment", "overlap", "scaling", "lens"):
        assert got[key].verdict == V.REPORTED, key
        assert "not evidence" in got[key].note
    assert got["alignment"].ours == "O→T 0.719 vs I→T 0.525"  # the paper's Table 1 (reference.TABLE1)
    p = got["published"]
    assert p.verdict == V.MIXED and "in 1 of 2 models" in p.ours
    one = copy.deepcopy(s)
    del one["evolution"]["m2"]
    assert C.published(S(one)).verdict == V.HOLDS
    one["evolution"]["m1"]["O"]["cos_init"] = [1.0, 0.95]
    assert C.published(S(one)).verdict == V.FAILS


# -- the sweep's two claims ------------------------------------------------------------------------

def _rows(bias: dict[int, list[float]], gap: dict[int, list[float]] | None = None) -> list[dict]:
    """Sweep rows: per width the per-seed in-sample bias and matched-minus-untied loss gap."""
    rows = []
    for d, biases in bias.items():
        for seed, b in enumerate(biases):
            g = (gap or {}).get(d, [0.1] * len(biases))[seed]
            rows.append({"d_model": d, "vocab_size": 4096, "seed": seed, "linear_o_t_in": 0.5 + b,
                         "linear_i_t_in": 0.5, "linear_o_t": 0.5 + b, "linear_i_t": 0.5, "eval_loss_untied": 5.0,
                         "eval_loss_tied": 5.05, "eval_loss_tied_matched": 5.0 + g, "bigram_loss": 4.0,
                         "params_tied": 200_000, "params_untied": 330_000, "tokens_seen": 330_752,
                         "cos_start_input_untied": 0.9, "d_ff_matched": 469})
    return rows


@pytest.mark.parametrize("bias, verdict", [
    ({32: CLEAR, 64: CLEAR}, V.HOLDS), ({32: REVERSED, 64: REVERSED}, V.FAILS),
    ({32: AROUND_ZERO, 64: AROUND_ZERO}, V.NO_CLAIM), ({32: CLEAR, 64: REVERSED}, V.MIXED),
    ({32: CLEAR, 64: AROUND_ZERO}, V.NO_CLAIM), ({32: SPLIT}, V.MIXED)])
def test_sweep_bias_known_answers(bias, verdict):
    c = C.sweep_bias(S({"kind": "sweep", "sweep": _rows(bias)}))
    assert c.verdict == verdict
    assert c.ours.startswith("toy sweep (0.20M-0.33M parameters, 0.33M training tokens per arm)")
    assert "in-sample" in c.ours and "0.90" in c.note  # how far I moved from its start


@pytest.mark.parametrize("gap, verdict", [
    ({32: CLEAR, 64: CLEAR}, V.HOLDS), ({32: REVERSED, 64: REVERSED}, V.FAILS),
    ({32: AROUND_ZERO, 64: AROUND_ZERO}, V.NO_CLAIM), ({32: CLEAR, 64: REVERSED}, V.MIXED)])
def test_sweep_gap_known_answers_and_the_loss_gap_decides_it(gap, verdict):
    c = C.sweep_gap(S({"kind": "sweep", "sweep": _rows({32: CLEAR, 64: CLEAR}, gap)}))
    assert c.verdict == verdict
    assert "parameter-matched" in c.ours and "above the smoothed bigram" in c.note


def _rewritten_sweep(tmp_path, sql: str) -> dict:
    path = tmp_path / "sweep.duckdb"
    shutil.copyfile(ROOT / "cache" / "sweep.duckdb", path)
    con = duckdb.connect(str(path))
    try:
        con.execute(sql)
    finally:
        con.close()
    return path


@pytest.mark.parametrize("sql, key, verdict", [
    # an output bias of mean zero at every width (-0.05, 0, +0.05 over the seeds): no claim
    ("UPDATE sweep SET linear_o_t = linear_i_t + 0.05 * (seed - 1), "
     "linear_o_t_in = coalesce(linear_i_t_in, 0) + 0.05 * (seed - 1)", "sweep_bias", V.NO_CLAIM),
    # a reversed bias: I and O swapped in every row
    ("UPDATE sweep SET linear_o_t = linear_i_t, linear_i_t = linear_o_t, linear_o_t_in = linear_i_t_in, "
     "linear_i_t_in = linear_o_t_in", "sweep_bias", V.FAILS),
    # loss gaps of mean zero against the matched arm
    ("UPDATE sweep SET eval_loss_tied_matched = eval_loss_untied + 0.02 * (seed - 1)", "sweep_gap", V.NO_CLAIM),
])
def test_summary_json_reads_rewritten_copies_of_the_shipped_sweep(tmp_path, capsys, sql, key, verdict):
    path = _rewritten_sweep(tmp_path, sql)
    assert main(["summary", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["claims"]
    assert set(got) == set(C.IDS)
    assert got[key]["verdict"] == verdict
    assert set(got[key]) >= {"verdict", "ours", "paper", "note"}


def test_summary_json_of_the_shipped_paper_cache_reports_the_printed_numbers(capsys):
    assert main(["summary", str(ROOT / "cache" / "paper.duckdb"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["claims"]
    for key in ("alignment", "overlap", "scaling", "lens"):
        assert got[key]["verdict"] == V.REPORTED, key


def test_summary_text_prints_the_claims_as_a_table(capsys):
    assert main(["summary", str(ROOT / "cache" / "demo.duckdb")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Claims"):]
    assert "alignment   holds" in table and "no data: mechanism_size, mechanism_reach, mechanism_optimizer, published, sweep_bias, sweep_gap" in table


@pytest.mark.parametrize("verdict", V.VERDICTS)
def test_every_verdict_has_a_style(verdict):
    from explorer.sections import VERDICT_STYLE

    colour, sign = VERDICT_STYLE[verdict]
    assert colour.startswith("#") and sign
