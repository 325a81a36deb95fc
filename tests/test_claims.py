"""The paper's claims with a cache's numbers and verdicts (tying/cache/claims.py): known answers."""

import copy

import pytest

from tying.cache import claims as C


def _toy(o_t=0.86, i_t=0.45, holds=(True, True, True)) -> dict:
    return {
        "kind": "toylab",
        "alignment": {"O->T": {"linear": {"held_out": o_t}}, "I->T": {"linear": {"held_out": i_t}}},
        "directions": {"O->T above I->T (linear, held-out)": {"holds": list(holds), "all": all(holds)}},
        "seeds": {"O->T linear held-out": {"mean": o_t, "std": 0.01, "n": len(holds)},
                  "I->T linear held-out": {"mean": i_t, "std": 0.01, "n": len(holds)}},
        "overlap_at_10": {"T~O": 0.3, "T~I": 0.02, "I~O": 0.01},
        "spectral": {"T~O": 0.4, "T~I": 0.6},
        "gradient_provenance": {"tied/seed0": {"early": 0.85, "early_steps": 25,
                                               "beside_paper": {"early": 0.87, "input": "proxy"}},
                                "untied/seed0": {"early": 0.1, "early_steps": 25}},
        "lens": {"gap": {"layers": 2, "tied": 0.33, "untied": 0.21}},
        "table2": {"procrustes in-sample": {
            "tied/seed0": {"I": 0.30, "O": 0.80, "input_grad_scale": 1.0},
            "tied_scaled_x5/seed0": {"I": 0.35, "O": 0.70, "input_grad_scale": 5.0},
            "tied/seed1": {"I": 0.31, "O": 0.81, "input_grad_scale": 1.0},
            "tied_scaled_x5/seed1": {"I": 0.36, "O": 0.71, "input_grad_scale": 5.0}}},
    }


def test_a_toy_cache_that_shows_the_paper_holds_everywhere():
    got = C.claims(_toy())
    for key in ("alignment", "overlap", "map", "gradient", "scaling", "lens"):
        assert got[key].verdict == C.HOLDS, key
    assert got["alignment"].ours == "O→T 0.860 vs I→T 0.450 (mean of 3 seeds)"
    assert got["alignment"].headline.endswith(": holds")
    assert got["scaling"].ours.startswith("to I 0.305 → 0.355, to O 0.805 → 0.705 (x5)")  # means over 2 seeds
    assert got["gradient"].ours.startswith("output share 87.0%")  # the proxy figure, the paper's quantity
    assert got["published"].verdict == got["sweep"].verdict == C.NO_DATA
    assert got["published"].needs == "published" and got["sweep"].needs == "sweep"


def test_reversed_numbers_do_not_hold_and_seed_splits_are_mixed():
    assert C.alignment(_toy(o_t=0.40, i_t=0.70, holds=(False, False, False))).verdict == C.FAILS
    mixed = C.alignment(_toy(holds=(True, False, True)))
    assert mixed.verdict == C.MIXED and "in 2 of 3" in mixed.ours
    s = _toy()
    s["spectral"] = {"T~O": 0.7, "T~I": 0.5}
    assert C.spectral_map(s).verdict == C.FAILS
    s["lens"]["gap"] = {"layers": 2, "tied": 0.1, "untied": 0.2}
    assert C.lens(s).verdict == C.FAILS
    s["table2"]["procrustes in-sample"]["tied_scaled_x5/seed0"]["I"] = 0.2  # seed 0 moves away from I
    assert C.scaling(s).verdict == C.MIXED


def test_a_single_seed_cache_reads_its_own_numbers():
    s = _toy()
    del s["directions"], s["seeds"]
    a = C.alignment(s)
    assert a.verdict == C.HOLDS and "seeds" not in a.ours
    s["alignment"]["O->T"]["linear"]["held_out"] = 0.2
    assert C.alignment(s).verdict == C.FAILS


def test_no_data_names_the_cache_kind_that_has_it():
    empty = {"kind": "pair"}
    got = C.claims(empty)
    assert all(c.verdict == C.NO_DATA for c in got.values())
    assert got["alignment"].needs == "toylab" and got["sweep"].needs == "sweep"


def _cells(gaps: dict[int, tuple[float, float]], bias=0.4, bias_half=0.05):
    return [{"d_model": d, "vocab_size": 4096, "bias_linear": bias, "bias_linear_half": bias_half,
             "loss_gap_matched": m, "loss_gap_matched_half": h} for d, (m, h) in gaps.items()]


def test_the_sweep_claims_only_what_its_intervals_show():
    s = {"kind": "sweep", "sweep_cells": _cells({32: (0.05, 0.10), 64: (-0.02, 0.10)})}
    c = C.sweep(s)
    assert "every 95% interval includes zero, no claim" in c.ours
    assert c.verdict == C.HOLDS  # T stays output-like: bias 0.4 ± 0.05 above zero at both widths
    s = {"kind": "sweep", "sweep_cells": _cells({32: (-0.2, 0.05), 64: (0.01, 0.10), 128: (0.3, 0.1)})}
    c = C.sweep(s)
    assert "untied ahead of the parameter-matched tied model at d = 32" in c.ours and "behind it at d = 128" in c.ours
    s = {"kind": "sweep", "sweep_cells": _cells({32: (0.0, 0.1)}, bias=0.02, bias_half=0.05)}
    assert C.sweep(s).verdict == C.FAILS  # the bias interval includes zero: not shown output-like


def test_the_published_cache_reads_the_printed_tables_and_released_curves():
    s = {"kind": "published", "paper": {}, "evolution": {
        "m1": {"I": {"cos_init": [1.0, 0.9]}, "O": {"cos_init": [1.0, 0.5]}},
        "m2": {"I": {"cos_init": [1.0, 0.6]}, "O": {"cos_init": [1.0, 0.7]}}}}
    assert C.alignment(s).ours == "O→T 0.719 vs I→T 0.525"  # the paper's Table 1 (reference.TABLE1)
    p = C.published(s)
    assert p.verdict == C.MIXED and "in 1 of 2 models" in p.ours
    one = copy.deepcopy(s)
    del one["evolution"]["m2"]
    assert C.published(one).verdict == C.HOLDS


@pytest.mark.parametrize("verdict", C.VERDICTS)
def test_every_verdict_has_a_style(verdict):
    from explorer.sections import VERDICT_STYLE

    colour, sign = VERDICT_STYLE[verdict]
    assert colour.startswith("#") and sign
