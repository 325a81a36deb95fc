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
import pandas as pd
import pytest

from precompute.cli import main
from tying.cache import claims as C
from tying.cache import sweep_claims as SC
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
    # one run has no interval: however large, its difference cannot be told from the spread between runs
    assert V.decide([0.3]).verdict == V.decide([-0.3]).verdict == V.decide([0.0]).verdict == V.NO_CLAIM
    assert V.decide([0.3]).text == "one run (+0.300): no interval" and V.decide([]).verdict == V.NO_DATA
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
         lens=(0.33, 0.21), map_seeds=None, lens_seeds=None, ceiling=True) -> dict:
    """A toy-lab summary whose per-seed differences are the given ones (``map_seeds``: spectral
    distance T~I minus T~O per seed; ``lens_seeds``: tuned-lens KL tied minus untied per seed;
    without them, the one-run ``spectral`` and ``lens`` figures)."""
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
    if ceiling:  # a second tied run T': 0.95 in-sample and held-out, overlap 0.90, spectral 0.2
        values |= {"T'->T linear in-sample": {str(k): 0.95 for k in range(n)},
                   "T'->T linear held-out": {str(k): 0.95 for k in range(n)},
                   "overlap@10 T~T'": {str(k): 0.90 for k in range(len(overlap))}}
    if map_seeds is not None:
        values |= {"spectral T~I": {str(k): 0.6 for k in range(len(map_seeds))},
                   "spectral T~O": {str(k): 0.6 - v for k, v in enumerate(map_seeds)},
                   "spectral T~T'": {str(k): 0.2 for k in range(len(map_seeds))}}
    if lens_seeds is not None:
        values |= {"tuned-lens KL early tied": {str(k): 3.0 + v for k, v in enumerate(lens_seeds)},
                   "tuned-lens KL early untied": {str(k): 3.0 for k in range(len(lens_seeds))}}
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


SEEDED = {"alignment": "align", "overlap": "overlap", "gradient": "share", "map": "map_seeds", "lens": "lens_seeds"}


@pytest.mark.parametrize("key", list(SEEDED))
@pytest.mark.parametrize("diffs, verdict", [(CLEAR, V.HOLDS), (REVERSED, V.FAILS), (AROUND_ZERO, V.NO_CLAIM),
                                            (SPLIT, V.MIXED)])
def test_per_seed_claims_follow_their_seeds(key, diffs, verdict):
    s = _toy(**{SEEDED[key]: diffs})
    c = C.CLAIMS[key](S(s))
    assert c.verdict == verdict, (key, c)
    assert c.ours.startswith("toy (1.57M/2.10M parameters, 0.26M training tokens)")  # a toy line says so
    assert f"mean of {len(diffs)} seeds" in c.ours and c.n_runs == len(diffs)


@pytest.mark.parametrize("key", list(SEEDED) + ["scaling"])
def test_a_claim_on_one_run_reads_no_claim(key):
    """One seed of the toy lab, however clear its difference: no interval, so no claim."""
    one = [0.4]
    s = _toy(align=one, overlap=one, share=one, to_i=one, from_o=one, map_seeds=one, lens_seeds=one)
    c = C.CLAIMS[key](S(s))
    assert c.verdict == V.NO_CLAIM and c.n_runs == 1, (key, c)
    assert "one run" in c.ours and "no interval" in c.note


def test_claims_read_their_numbers_against_the_ceiling():
    """O->T and I->T as a share of T'->T, two runs of T: 0.900 is 95% of 0.950, 0.500 is 53%."""
    a = C.alignment(S(_toy()))
    assert "O→T 0.900, 95% of the ceiling T'→T 0.950; I→T 0.500, 53%" in a.ours
    assert "held-out: O→T 0.850 vs I→T 0.450" in a.ours  # its ceiling is in the regime table
    assert "T', a second tied run" in a.note
    o = C.overlap(S(_toy()))
    assert "overlap@10 T~O 0.650, 72% of the ceiling T~T' 0.900; T~I 0.450, 50%" in o.ours
    m = C.spectral_map(S(_toy(map_seeds=CLEAR)))
    assert "T~O 0.200 vs T~I 0.600; two runs of T, T~T' 0.200" in m.ours
    # without a ceiling (a cache from before it), the two numbers side by side
    assert "O→T 0.900 vs I→T 0.500 (linear" in C.alignment(S(_toy(ceiling=False))).ours


def test_shared_start_caches_say_so():
    s = _toy()
    s["twins"] = "shared start"
    assert C.alignment(S(s)).ours.startswith("toy (1.57M/2.10M parameters, 0.26M training tokens, shared start)")
    s["twins"] = "independent"
    assert ", shared start" not in C.alignment(S(s)).ours


def test_the_lines_show_the_quantity_their_verdict_is_decided_on():
    s = _toy(ceiling=False)
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
    lens = C.lens(S(_toy(lens_seeds=CLEAR)))
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


@pytest.mark.parametrize("values", [(0.4, 0.6), (0.7, 0.5), (0.5, 0.5)])
def test_one_run_map_and_lens_read_no_claim(values):
    """A cache with the pair stage's one spectral distance and one tuned lens (seed 0's twins, or a
    cache from before the per-seed figures): no claim, whatever the sign."""
    c = C.spectral_map(S(_toy(spectral=values)))
    assert c.verdict == V.NO_CLAIM and "one run" in c.ours and "no interval" in c.note and c.n_runs == 1
    lens = C.lens(S(_toy(lens=(values[1], values[0]))))
    assert lens.verdict == V.NO_CLAIM and "one run" in lens.ours and lens.n_runs == 1


def test_a_single_pair_without_seeds_reads_its_own_in_sample_numbers():
    s = {"kind": "pair", "alignment": {"O->T": {"linear": {"in_sample": 0.8, "held_out": 0.7}},
                                       "I->T": {"linear": {"in_sample": 0.5, "held_out": 0.4}}},
         "overlap_at_10": {"T~O": 0.3, "T~I": 0.1}}
    a = C.alignment(S(s))
    assert a.verdict == V.NO_CLAIM and a.ours.startswith("O→T 0.800 vs I→T 0.500 (linear, in-sample, one run)")
    assert "one run (+0.300): no interval" in a.note and a.n_runs == 1
    assert not a.ours.startswith("toy")  # a real pair is not called a toy
    s["alignment"]["O->T"]["linear"]["in_sample"] = 0.2
    assert C.alignment(S(s)).verdict == V.NO_CLAIM


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
    assert p.verdict == V.MIXED and "faster and further in 1 of 2 models" in p.ours
    one = copy.deepcopy(s)
    del one["evolution"]["m2"]
    assert C.published(S(one)).verdict == V.HOLDS
    one["evolution"]["m1"]["O"]["cos_init"] = [1.0, 0.95]
    assert C.published(S(one)).verdict == V.FAILS
    # further at the last step but not ahead all along (O was slower at first): not "faster", mixed
    one["evolution"]["m1"] = {"I": {"cos_init": [1.0, 0.8, 0.7]}, "O": {"cos_init": [1.0, 0.9, 0.6]}}
    got = C.published(S(one))
    assert got.verdict == V.MIXED and "O below I at 1 of 2 released steps" in got.ours


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
    c = SC.sweep_bias(S({"kind": "sweep", "sweep": _rows(bias)}))
    assert c.verdict == verdict
    assert c.ours.startswith("toy sweep (0.20M-0.33M parameters, 0.33M training tokens per arm)")
    assert "in-sample" in c.ours and "0.90" in c.note  # how far I moved from its start


@pytest.mark.parametrize("gap, verdict", [
    ({32: CLEAR, 64: CLEAR}, V.HOLDS), ({32: REVERSED, 64: REVERSED}, V.FAILS),
    ({32: AROUND_ZERO, 64: AROUND_ZERO}, V.NO_CLAIM), ({32: CLEAR, 64: REVERSED}, V.MIXED)])
def test_sweep_gap_known_answers_and_the_loss_gap_decides_it(gap, verdict):
    c = SC.sweep_gap(S({"kind": "sweep", "sweep": _rows({32: CLEAR, 64: CLEAR}, gap)}))
    assert c.verdict == verdict
    assert "parameter-matched" in c.ours and "above the smoothed bigram" in c.note


def _probes(d: int, untied: dict[float, float], matched: dict[float, float]) -> list[dict]:
    return [{"d_model": d, "vocab_size": 4096, "arm": arm, "lr": lr, "seed": 0, "steps": 80, "loss": loss}
            for arm, losses in (("untied", untied), ("tied_matched", matched)) for lr, loss in losses.items()]


def test_sweep_gap_reads_no_claim_where_a_learning_rate_step_could_flip_it():
    gap = {32: [-0.10, -0.11, -0.12], 64: [-0.10, -0.11, -0.12]}  # untied ahead by 0.11, every seed
    rows = _rows({32: CLEAR, 64: CLEAR}, {d: [-g for g in v] for d, v in gap.items()})
    # d=32: moving a rate one step moves the probes' gap by at most 0.02; d=64: by up to +0.3 (flips it)
    probes = (_probes(32, {1e-3: 5.52, 3e-3: 5.5, 1e-2: 5.51}, {1e-3: 5.62, 3e-3: 5.6, 1e-2: 5.61})
              + _probes(64, {1e-3: 5.52, 3e-3: 5.5, 1e-2: 5.8}, {1e-3: 5.62, 3e-3: 5.6, 1e-2: 5.7}))
    c = SC.sweep_gap(S({"kind": "sweep", "sweep": rows, "sweep_probes": probes}))
    d32, d64 = c.ours.split("; ")
    assert d32.endswith("-0.11 [-0.13, -0.09] holds")  # a rate step leaves it below zero: not named
    assert "a rate step -0.21 to +0.19 flips it: no claim" in d64
    assert c.verdict == V.NO_CLAIM  # one width undecided: no claim over the sweep
    # without probes the intervals alone decide
    assert SC.sweep_gap(S({"kind": "sweep", "sweep": rows})).verdict == V.HOLDS


def test_undertrained_widths_are_named_and_no_crossing_comes_from_them():
    from explorer.render.sweep_tables import sweep_crossings

    rows = _rows({32: CLEAR, 64: CLEAR, 128: CLEAR})
    for r in rows:  # only d=128's arms are past the bigram
        r["bigram_loss"] = 5.2 if r["d_model"] == 128 else 4.0
    assert SC.undertrained_widths(SC.point_means(rows)) == [(4096, 32), (4096, 64)]
    assert "Undertrained at d=32, d=64 (an arm above the smoothed bigram)" in SC.sweep_gap(
        S({"kind": "sweep", "sweep": rows})).note
    # a gap that changes sign between d=32 and d=64, both intervals clear: named only when both are trained
    points = pd.DataFrame({"vocab_size": 4096, "d_model": [32, 64, 128], "loss_gap": [0.2, -0.2, -0.3],
                           "loss_gap_half": 0.05, "eval_loss_untied": [5.0, 5.0, 5.0], "eval_loss_tied": 5.0,
                           "bigram_loss": [5.5, 5.5, 5.5]})
    named, lines = sweep_crossings(points, "d_model")
    assert list(named["x"].round()) == [45]
    points["bigram_loss"] = [4.0, 4.0, 5.5]
    named, lines = sweep_crossings(points, "d_model")
    assert named.empty and "d=32, d=64 undertrained" in lines[0]


def _rewritten(tmp_path, sql: str | None, name: str = "sweep") -> Path:
    """A copy of the shipped cache ``name`` with ``sql`` run on it (None: as shipped)."""
    path = tmp_path / f"{name}.duckdb"
    shutil.copyfile(ROOT / "cache" / f"{name}.duckdb", path)
    if sql:
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
    path = _rewritten(tmp_path, sql)
    assert main(["summary", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["claims"]
    assert set(got) == set(C.IDS)
    assert got[key]["verdict"] == verdict
    assert set(got[key]) >= {"verdict", "ours", "paper", "note"}


def _swap(a: str, b: str) -> str:
    """SQL: the per-seed values of metrics ``a`` and ``b`` exchanged, seed by seed."""
    return (f"UPDATE seed_metrics SET metric = CASE metric WHEN '{a}' THEN '{b}' ELSE '{a}' END "
            f"WHERE metric IN ('{a}', '{b}')")


def _straddle(a: str, b: str) -> str:
    """SQL: metric ``a`` set to ``b`` + 0.05 (seed - 1): differences -0.05, 0, +0.05 over 3 seeds."""
    return (f"UPDATE seed_metrics SET value = (SELECT m.value FROM seed_metrics m WHERE m.metric = '{b}' AND "
            f"m.seed = seed_metrics.seed) + 0.05 * (seed - 1) WHERE metric = '{a}'")


@pytest.mark.parametrize("key, a, b", [
    ("alignment", "O->T linear in-sample", "I->T linear in-sample"),
    ("overlap", "overlap@10 T~O", "overlap@10 T~I"),
    ("map", "spectral T~I", "spectral T~O"),
    ("lens", "tuned-lens KL early tied", "tuned-lens KL early untied"),
])
def test_summary_json_of_the_demo_decides_every_claim_over_its_seeds(tmp_path, capsys, key, a, b):
    """The shipped demo's per-seed rows, rewritten: reversed reads "does not hold", straddling zero
    "no claim", one seed "no claim"; each claim carries its n_runs."""
    def claim(sql: str | None) -> dict:
        assert main(["summary", str(_rewritten(tmp_path, sql, "demo")), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["claims"][key]

    shipped = claim(None)
    assert shipped["n_runs"] >= 3 and shipped["verdict"] in V.VERDICTS
    mirror = {V.HOLDS: V.FAILS, V.FAILS: V.HOLDS, V.NO_CLAIM: V.NO_CLAIM, V.MIXED: V.MIXED}
    assert claim(_swap(a, b))["verdict"] == mirror[shipped["verdict"]]
    assert claim(_straddle(a, b))["verdict"] == V.NO_CLAIM
    one = claim("DELETE FROM seed_metrics WHERE seed > 0")
    assert one["verdict"] == V.NO_CLAIM and one["n_runs"] == 1


def test_summary_json_of_the_shipped_paper_cache_reports_the_printed_numbers(capsys):
    assert main(["summary", str(ROOT / "cache" / "paper.duckdb"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["claims"]
    for key in ("alignment", "overlap", "scaling", "lens"):
        assert got[key]["verdict"] == V.REPORTED, key


def test_summary_text_prints_the_claims_as_a_table(capsys):
    assert main(["summary", str(ROOT / "cache" / "demo.duckdb")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Claims"):]
    assert "alignment   holds" in table and "no data: mechanism_size, mechanism_update, mechanism_reach, mechanism_optimizer, published, sweep_bias, sweep_gap" in table


@pytest.mark.parametrize("verdict", V.VERDICTS)
def test_every_verdict_has_a_style(verdict):
    from explorer.sections import VERDICT_STYLE

    colour, sign = VERDICT_STYLE[verdict]
    assert colour.startswith("#") and sign


def test_the_regime_table_sets_shared_start_beside_independent_beside_the_ceiling():
    from tying.cache.regime import regime_table

    def per_seed(*v):
        return {str(k): x for k, x in enumerate(v)}

    values = {"O->T linear in-sample (shared start)": per_seed(0.87, 0.88, 0.86),
              "I->T linear in-sample (shared start)": per_seed(0.50, 0.51, 0.49),
              "O->T linear in-sample": per_seed(0.53, 0.54, 0.52), "I->T linear in-sample": per_seed(0.29, 0.30, 0.28),
              "T'->T linear in-sample": per_seed(0.56, 0.56, 0.56), "overlap@10 T~T'": per_seed(0.06, 0.06, 0.06)}
    rows = regime_table(S({"kind": "toylab", "twins": "independent", "seed_values": values}))
    assert [r["what T is compared with"].split(",")[0] for r in rows] == ["O", "O", "T'"]
    assert "shared start" in rows[0]["what T is compared with"] and "ceiling" in rows[2]["what T is compared with"]
    # mean [95% t-interval]: 0.53 +- 4.303 * 0.01 / sqrt(3)
    assert rows[1]["→T linear in-sample"] == "0.530 [0.505, 0.555]"
    assert rows[0]["→T linear in-sample"] == "0.870 [0.845, 0.895]"
    assert rows[2]["→T linear in-sample"] == "0.560 [0.560, 0.560]" and rows[2]["I→T linear in-sample"] == "-"
    assert rows[2]["overlap@10 with T"] == "0.060 [0.060, 0.060]" and rows[1]["CKA with T"] == "-"
    # a cache trained with shared starts: its plain metrics are the control's, and there is no independent row
    old = regime_table(S({"kind": "toylab", "twins": "shared start", "seed_values": values}))
    assert len(old) == 2 and "shared start" in old[0]["what T is compared with"]
    assert old[0]["→T linear in-sample"] == "0.530 [0.505, 0.555]"


@pytest.mark.parametrize("name, key, section", [("sweep", "sweep_bias", "sweep"),
                                                ("mechanism", "mechanism_size", "mechanism")])
def test_caches_trained_with_shared_starts_say_so(tmp_path, capsys, name, key, section):
    """The shipped sweep and mechanism caches are independent twins (issue 48): their lines do not say
    "shared start"; the same cache recorded as trained with shared starts says so in every claim line
    (the Sweep page too: tests/test_app.py)."""
    from tying.cache.sentences import twins_text

    assert main(["summary", str(ROOT / "cache" / f"{name}.duckdb"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["twins"] == "independent" and "shared start" not in got["claims"][key]["ours"]
    path = _rewritten(tmp_path, "UPDATE meta SET value = replace(value, '\"shared_start\": false', "
                                f"'\"shared_start\": true') WHERE key = '{section}'", name)
    assert main(["summary", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["twins"] == "shared start" and "shared start" in got["claims"][key]["ours"]
    assert "shared start" in twins_text(S({"twins": "shared start"})) and twins_text(S({})) == ""
