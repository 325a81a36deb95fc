"""The Sweep page on a cache of the third protocol (a widened parameter-matched arm, baselines, budget,
stored learning-rate probes) and on an older cache."""

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tying.analysis import sweep as S
from tying.cache.writer import CacheWriter

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def build(cache_dir, losses: dict[int, tuple[float, float, float]], bigram: float = 5.5):
    """Three seeds per width; (tied, untied, matched) mean eval losses; seeds spread by +-0.01."""
    w = CacheWriter(Path(cache_dir) / "sweep.duckdb",
                    meta={"kind": "sweep", "name": "sweep", "sweep": {"n_layers": 4, "batch_size": 16, "context": 64,
                                                                      "corpus": "python-docs"}})
    for d, (lt, lu, lm) in losses.items():
        for seed, e in enumerate((-0.01, 0.0, 0.01)):
            cell = S.Cell(d, 4096, seed)
            pt, pu = S.llama_params(4096, d, 4), S.llama_params(4096, d, 4, tied=False)
            f = S.matched_d_ff(4096, d, 4)
            row = {m: 0.5 for m in S.METRICS} | {
                "d_model": d, "vocab_size": 4096, "seed": seed, "n_layers": 4, "steps": 100,
                "linear_o_t": 0.8, "linear_i_t": 0.4, "overlap_t_o": 0.3, "overlap_t_i": 0.05,
                "linear_o_t_in": 0.85 + e, "linear_i_t_in": 0.45, "cos_start_input_untied": 0.9,
                "eval_loss_tied": lt + e, "eval_loss_untied": lu + e, "eval_loss_tied_matched": lm - e,
                "params_tied": pt, "params_untied": pu, "params_tied_matched": S.llama_params(4096, d, 4, d_ff=f),
                "n_layers_matched": 4, "d_ff": 4 * d, "d_ff_matched": f, "embedding_share_tied": 4096 * d / pt,
                "unigram_loss": 7.0, "bigram_loss": bigram, "bigram_beta": 10.0, "bigram_train_tokens": 500_000,
                "tokens_seen": 102_400, "epochs": 0.4, "lr_tied": 3e-3, "lr_untied": 3e-3, "lr_tied_matched": 1e-3,
                "seconds": 1.0}
            w.write_cell(cell.stage, {"stage": cell.stage}, "sweep", pd.DataFrame([row]),
                         {"d_model": d, "vocab_size": 4096, "seed": seed}, seconds=1.0)
        probes = pd.DataFrame([{"d_model": d, "vocab_size": 4096, "arm": arm, "lr": lr, "seed": 0, "steps": 25,
                                "loss": 6.0 + abs(lr - best) * 10}
                               for arm, best in (("tied", 3e-3), ("untied", 3e-3), ("tied_matched", 1e-3))
                               for lr in (1e-3, 3e-3, 1e-2)])
        w.write_cell(f"sweep:lr:d{d}:v4096", {"d": d}, "lr_probe", probes, {"d_model": d, "vocab_size": 4096},
                     seconds=0.0)


def page(cache_dir, monkeypatch):
    monkeypatch.setenv("TYING_CACHE_DIR", str(cache_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/sweep.py").run()
    return at


def text(at) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption, *at.title, *at.info])


@pytest.mark.slow
def test_the_page_draws_the_matched_gap_the_baselines_and_every_arm_s_parameters(tmp_path, monkeypatch):
    # d=32: every arm above the bigram (5.5); d=64: the tied twin only; d=128: none
    build(tmp_path, {32: (6.0, 5.8, 5.9), 64: (5.6, 5.4, 5.45), 128: (5.2, 5.3, 5.1)})
    at = page(tmp_path, monkeypatch)
    assert not at.exception and not at.error
    t = text(at)
    assert len(at.get("vega_lite_chart")) == 3  # bias, the two gaps, the losses with reference lines
    assert "untied against the parameter-matched tied model" in t
    assert "Not yet past bigram statistics" in t and "d=32 (tied, untied, parameter-matched tied)" in t
    assert "d=64 (tied)" in t and "d=128" not in t.split("Not yet past bigram statistics")[1].split("\n")[0]
    assert "sample standard deviation" in t and "95% interval" in t
    assert "direction, not the size" not in t and "compute-matched" not in t
    budget = next(df.value for df in at.dataframe if "parameters (matched)" in df.value.columns)
    assert list(budget["parameters (untied)"])[0] == f"{S.llama_params(4096, 32, 4, tied=False):,}"
    assert list(budget["lr matched"]) == ["0.001"] * 3
    loss = next(df.value for df in at.dataframe if "gap vs matched" in df.value.columns)
    assert loss["gap vs matched"].iloc[0] == "-0.100 ± 0.020"
    # the verdicts drawn above their charts, decided on the drawn quantities
    html = "\n".join(str(h.proto.body) for h in at.get("html"))
    assert "✓ holds" in html and "O→T minus I→T (linear, in-sample)" in html
    assert "feed-forward layers" in t and "deeper" not in t.split("Every cell")[0]
    # how far I moved, the bigram's training tokens, the probes and their sensitivity band
    assert "d=32 0.90" in t and "all 500,000 training tokens, 4.88x the 102,400" in t
    assert "learning-rate sensitivity" in t
    probes = next(df.value for df in at.dataframe if "probe steps" in df.value.columns)
    assert len(probes) == 9 and list(probes.columns[-3:]) == ["lr 0.001", "lr 0.003", "lr 0.01"]
    matched = probes[(probes["arm"] == "parameter-matched tied") & (probes["d_model"] == 32)].iloc[0]
    assert matched["lr 0.001"].endswith(" *") and not matched["lr 0.003"].endswith("*")


def test_an_old_cache_says_what_it_lacks(tmp_path, monkeypatch):
    from precompute.fixtures import build_sweep_cache

    build_sweep_cache(tmp_path, {32: [0.3, 0.31, 0.29], 64: [0.1, 0.11, 0.09]})
    at = page(tmp_path, monkeypatch)
    assert not at.exception and "written before the sweep trained a parameter-matched" in text(at)
    assert len(at.get("vega_lite_chart")) == 2
