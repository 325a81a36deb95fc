"""Tables the app sets beside the paper's numbers (explorer.render (the *_tables modules)), on constructed summaries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explorer.render import convergence, dynamics_tables, lens_tables, paper_tables, seed_tables, sweep_tables
from tying.cache.summary import paper_reference, seed_directions
from tying.cache.summary_types import Summary

S = Summary.from_json  # the summaries below are written as their JSON


def test_table1_puts_the_papers_identity_beside_the_raw_one():
    s = {"alignment": {"O->T": {"identity_raw": {"in_sample": 0.5, "held_out": 0.4},
                                "identity": {"in_sample": 0.6, "held_out": 0.55},
                                "linear": {"in_sample": 0.9, "held_out": 0.8}}},
         "paper": paper_reference("olmo") | {"beside_toylab": True}}
    t = paper_tables.table1(S(s))
    assert list(t.columns) == ["comparison", "map", "in-sample", "held-out", "paper (olmo)"]
    by_map = t.set_index("map")
    assert by_map.loc["identity (raw rows)", "paper (olmo)"] == "0.014"
    assert by_map.loc["identity (centred)", "paper (olmo)"] == "—"
    assert by_map.loc["linear", "paper (olmo)"] == "0.719" and by_map.loc["linear", "held-out"] == 0.8
    assert "orthogonal" not in by_map.index  # absent from the cache: no row
    s.pop("paper")
    assert list(paper_tables.table1(S(s)).columns) == ["comparison", "map", "in-sample", "held-out"]


def test_seeds_leave_the_spread_blank_for_one_seed_and_directions_per_seed():
    sm = pd.DataFrame([{"seed": i, "metric": m, "value": v} for i, vals in enumerate([(0.9, 0.5, 0.3, 0.1, 0.8),
                                                                                      (0.4, 0.5, 0.3, 0.1, 0.4)])
                       for m, v in zip(["O->T linear held-out", "I->T linear held-out", "overlap@10 T~O",
                                        "overlap@10 T~I", "output share early"], vals)])
    d = seed_directions(sm)
    assert d["O->T above I->T (linear, held-out)"]["holds"] == [True, False]
    assert d["T~O above T~I (overlap@10)"]["all"] is True
    assert d["output share early above 1/2"]["holds"] == [True, False]
    table = seed_tables.directions(S({"directions": d}))
    assert list(table.columns) == ["the paper's direction", "seed 0", "seed 1"]
    assert table.iloc[0]["seed 1"] == "fails"
    one = seed_tables.seeds(S({"seeds": {"x": {"n": 1, "mean": 0.5, "std": None},
                                         "y": {"n": 3, "mean": 0.2, "std": 0.1}}}))
    assert pd.isna(one.set_index("metric").at["x", "std"]) and one.set_index("metric").at["y", "std"] == 0.1


def test_provenance_view_recomputes_the_share_from_the_chosen_input_side():
    log = pd.DataFrame({"run": "r", "step": [1, 2], "grad_input_norm": [1.0, 1.0], "grad_output_norm": [3.0, 1.0],
                        "grad_input_proxy_norm": [3.0, np.nan], "output_share": [0.75, 0.5]})
    assert dynamics_tables.provenance_view(log, "exact") is log
    proxy = dynamics_tables.provenance_view(log, "proxy")
    assert list(proxy["step"]) == [1] and proxy["output_share"].iloc[0] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        dynamics_tables.provenance_view(log, "other")


def test_lens_convergence_lines():
    steps = np.arange(100)
    flat = pd.DataFrame({"model": "untied", "step": steps, "layer": 0, "kl_bits": 1.0 + 0.0 * steps})
    falling = pd.DataFrame({"model": "tied", "step": steps, "layer": 0, "kl_bits": 10.0 - 0.05 * steps})
    last = [pd.DataFrame({"model": m, "step": steps, "layer": 1, "kl_bits": 0.0}) for m in ("tied", "untied")]
    curve = pd.concat([flat, falling, *last], ignore_index=True)
    budget = {"steps": 100, "tokens_per_step": 2048, "accumulate": 4, "batch_size": 8, "seq_len": 64, "device": "cpu"}
    lines = dict(zip(["tied", "untied"], convergence.lens_convergence(curve, budget)))
    assert "**not converged**" in lines["tied"] and "hidden state 0" in lines["tied"]
    assert "converged —" in lines["untied"] and "**not" not in lines["untied"]
    assert "100 steps × 2,048 tokens (4 micro-batches of 8 × 64) = 204,800 tokens" in lines["untied"]


def test_figure1_bars_stand_on_the_axis_and_name_comparisons_as_the_page_does():
    from explorer.render import alignment_charts

    df = pd.DataFrame({"comparison": ["O->T"] * 50 + ["I->T"] * 50, "cosine": np.linspace(-0.1, 1, 100)})
    spec = alignment_charts.cosine_histogram(df).to_dict()
    bars = spec["layer"][0]
    assert bars["mark"]["type"] == "bar" and bars["encoding"]["y2"] == {"datum": 0}
    assert bars["encoding"]["color"]["scale"]["domain"] == ["O→T", "I→T"]


def test_evolution_axis_ends_at_the_last_step():
    from explorer.render import dynamics_charts

    e = pd.DataFrame({"run": "r", "step": [0, 10, 250], "label": ["0", "10", "250"], "matrix": "O",
                      "cos_init": [1.0, 0.9, 0.4], "cos_prev": [np.nan, 0.9, 0.5]})
    x = dynamics_charts.evolution(e).to_dict()["layer"][0]["encoding"]["x"]["scale"]
    assert x["domain"] == [1, 250] and x["nice"] is False


def test_one_seed_shows_no_spread_column_and_readable_lens_charts():
    from explorer.render import dynamics_charts, lens_charts, style

    one = seed_tables.seeds(S({"seeds": {"x": {"n": 1, "mean": 0.5, "std": None}}}))
    assert list(one.columns) == ["metric", "mean", "seeds"]
    traj = pd.DataFrame([{"model": "tied", "sample": 0, "position": p, "token": "a", "layer": layer, "lens": "tuned",
                          "rank": 1, "prediction": "b", "prob": 0.5} for p in range(3) for layer in range(5)])
    assert lens_charts.trajectory(traj).to_dict()["height"] >= 260  # five hidden states, not a 110-px sliver
    kl = pd.DataFrame([{"model": m, "lens": lens, "layer": layer, "kl_mean": 8.0 if layer == 0 else 0.1,
                        "kl_std": 0.0} for m in ("tied", "untied") for lens in ("tuned", "logit") for layer in range(4)])
    spec = lens_charts.kl_curves(kl, y_axis="symlog").to_dict()
    assert spec["layer"][1]["encoding"]["y"]["scale"]["type"] == "symlog"
    share = dynamics_charts.output_share(pd.DataFrame({"run": ["tied/seed0"] * 3 + ["tied_scaled_x5/seed0"] * 3,
                                                       "step": [1, 2, 3] * 2, "output_share": 0.6})).to_dict()
    colour = share["layer"][0]["encoding"]["color"]["scale"]
    assert colour["domain"] == ["tied/seed0", "tied_scaled_x5/seed0"] and colour["range"] == [style.COLOURS["T"]] * 2


def _summary(name):
    from pathlib import Path

    from explorer import data

    path = Path(__file__).resolve().parent.parent / "cache" / f"{name}.duckdb"
    if not path.exists():
        pytest.skip(f"the shipped cache {path.name} is absent")
    return data.summary(data.CacheRef.of(path))


def test_share_table_names_the_authors_proxy_one_way_and_leaves_nothing_blank():
    paper = dynamics_tables.output_shares(_summary("paper"))
    assert list(paper["input side"]) == ["authors' proxy"]  # not "effective"; the paper's row not twice
    assert paper.notna().all().all()  # the published run's proxy share is its share: no "None"
    assert "early, exact" not in paper.columns  # the authors' log holds only their proxy
    demo = dynamics_tables.output_shares(_summary("demo"))
    # beside the paper's 0.7033 the toy lab's share uses the authors' proxy too; exact is a second column
    assert set(demo["input side"]) == {"authors' proxy"}
    assert demo["early, exact"].iloc[:-1].notna().all() and pd.isna(demo["early, exact"].iloc[-1])
    assert set(dynamics_tables.OUTPUT_SHARE_HELP) <= set(demo.columns)
    assert max(len(c) for c in demo.columns) <= 18  # short headers: the table fits a laptop's width


def test_one_arrow_everywhere():
    s = _summary("demo")
    shown = " ".join(seed_tables.seeds(s)["metric"]) + " ".join(seed_tables.directions(s).iloc[:, 0])
    assert "->" not in shown and "O→T" in shown


def test_sweep_table_comes_in_two_parts_that_fit():
    cells = _summary("sweep").sweep_cells
    whole = sweep_tables.sweep_table(cells)
    for part, columns in sweep_tables.SWEEP_TABLE_PARTS.items():
        t = sweep_tables.sweep_table(cells, part)
        assert list(t.columns) == columns and len(t) == len(whole) and len(columns) <= 10
    assert set(whole.columns) == set().union(*sweep_tables.SWEEP_TABLE_PARTS.values())
    assert "loss gap" in sweep_tables.SWEEP_TABLE_PARTS["loss"] and "d_model" in sweep_tables.SWEEP_TABLE_PARTS["loss"]


def test_top_k_rows_are_headed_by_their_tokens():
    t = pd.DataFrame([{"position": p, "token": tok, "layer": 1, "rank": r, "prediction": f"{tok}{r}", "prob": 0.1}
                      for p, tok in enumerate(["In", "␣a", "In"]) for r in (1, 2)])
    top = lens_tables.top_k(t, 1)
    assert list(top.columns) == ["input token", "top 1", "top 2"]  # as wide as k, however long the text
    assert list(top["input token"]) == ["0: In", "1: ␣a", "2: In"]  # a repeated token keeps its own row
    assert top.iloc[1]["top 2"] == "␣a2"


def _presented_table():
    import pandas as pd
    import streamlit as st

    from explorer import frame, state

    get = state.get
    state.get = lambda name, default=None: True if name == "presentation" else get(name, default)
    try:
        frame.table(pd.DataFrame({"run": ["a", "b"], "share": [0.5, None], "side": ["exact", None]}),
                    numbers=("share",))
    finally:
        state.get = get
    st.caption("shown")


def test_a_presented_table_shows_a_dash_where_a_value_is_missing():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_presented_table).run(timeout=60)
    assert not at.exception
    shown = at.table[0].value
    assert list(shown.iloc[1]) == ["b", "—", "—"] and "None" not in shown.to_string()


def test_table2_names_the_papers_map_and_sets_its_numbers_beside_it_only():
    from tying.cache import reference

    assert paper_tables.scaling_methods(["linear held-out", "identity", reference.TABLE2_METHOD])[0] == \
        reference.TABLE2_METHOD
    own = paper_tables.scaling_caption(reference.TABLE2_METHOD)
    assert "the paper's method" in own and "0.216 / 0.384" in own and "Procrustes" in own
    extra = paper_tables.scaling_caption("identity")
    assert "an extra, not the paper's method" in extra
    paper = paper_tables.paper_scaling()
    assert set(paper["method"]) == {reference.TABLE2_METHOD}


def test_the_share_beside_the_papers_is_the_mean_of_ratios_with_the_authors_proxy():
    """Known answer: two logged steps, exact input norms 1 and 3, proxy input norms 3 and 1,
    output norms 1: exact share (1/2 + 1/4) / 2 = 0.375, proxy share (1/4 + 1/2) / 2 = 0.375 over
    all steps; early (step 1 only) 0.5 exact and 0.25 with the proxy. The table sets the proxy's
    0.25 beside the paper and keeps the exact 0.5 as a labelled second figure."""
    from tying.analysis.share import output_share
    from tying.cache.summary import share_beside_paper

    steps, exact, proxy, out = [1, 2], [1.0, 3.0], [3.0, 1.0], [1.0, 1.0]
    p = output_share(steps, exact, out, early_steps=1) | {"input_norm": "exact"}
    px = output_share(steps, proxy, out, early_steps=1)
    p["proxy"] = {"early": px["early"], "overall": px["overall"], "ratio_of_sums": px["ratio_of_sums"]}
    b = share_beside_paper(p)
    assert b["input"] == "proxy" and b["like_paper"]
    assert b["early"] == pytest.approx(0.25) and b["overall"] == pytest.approx(0.375)
    row = dynamics_tables.output_shares(S({"gradient_provenance": {"tied/seed0": p}})).iloc[0]
    assert row["early share"] == pytest.approx(0.25) and row["early, exact"] == pytest.approx(0.5)
    assert row["input side"] == "authors' proxy"
    # a run that logged no proxy keeps its exact figure, and says it is not the paper's quantity
    plain = share_beside_paper({k: v for k, v in p.items() if k != "proxy"})
    assert plain["input"] == "exact" and not plain["like_paper"] and plain["early"] == pytest.approx(0.5)


def test_labels_say_what_fraction_lens_text_and_twin_sizes_are():
    from tying.cache.summary import toylab_scale

    note = dynamics_tables.released_fraction_note({"paper: EleutherAI/pythia-1b": 15_000, "demo: tied/seed0": 250})
    assert "EleutherAI/pythia-1b: the first 15,000 of its 143,000 training steps" in note
    assert "tied/seed0: steps up to 250" in note and "released" in note
    s = {"stages": {"lens": {"params": {"text": "corpus.txt", "eval_tokens": 16_384,
                                        "budget": {"train_tokens": 204_800}}}}}
    lens = lens_tables.lens_text_note(S(s))
    assert "WikiText-103" in lens and "WikiText-2" in lens and "corpus.txt (204,800 training tokens" in lens
    assert "ours" not in lens_tables.lens_text_note(S({})) and "WikiText-103" in lens_tables.lens_text_note(S({}))
    # both twins' parameter counts, from the cache's models (not hard-coded)
    scale = toylab_scale({"models": {"tied": {"n_params": 1_574_016}, "untied": {"n_params": 2_098_304}}},
                         {"toylab": "{}"})
    assert "1.57M (tied) and 2.10M (untied) parameters" in scale["line"]
    assert scale["n_params_untied"] == 2_098_304
    demo = _summary("demo")
    m = demo.models
    assert f"{m['tied']['n_params'] / 1e6:.2f}M (tied) and {m['untied']['n_params'] / 1e6:.2f}M (untied)" \
        in demo.scale["line"]


def test_run_names_read_as_words_in_the_seed_table():
    assert seed_tables.run_words("eval loss tied_scaled_x5") == "eval loss tied (input gradient ×5)"
    assert seed_tables.run_words("eval loss untied") == "eval loss untied"
    s = {"seeds": {"eval loss tied_scaled_x5": {"mean": 5.0, "std": 0.1, "n": 3}}}
    assert seed_tables.seeds(S(s))["metric"].tolist() == ["eval loss tied (input gradient ×5)"]


def test_the_paper_row_is_not_repeated_beside_the_authors_own_log():
    """The paper cache holds the authors' published OLMo-1B log: its share table shows it once."""
    from pathlib import Path

    from explorer import data

    s = data.summary(data.CacheRef.of(Path("cache/paper.duckdb")))
    t = dynamics_tables.output_shares(s)
    assert len(t) == 1 and abs(t["early share"].iloc[0] - 0.7033) < 1e-4
