"""The Streamlit app, in-process (AppTest), on caches built by the project's fixture builder."""

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from explorer.render import pages
from precompute.fixtures import build_sweep_cache, build_synthetic_cache
from tying.cache.store import open_cache
from tying.cache.summary import summarize

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGES = ["overview"] + [p.path for p in pages.PAGES if p.needs]  # the pages of one cache, from the registry


@pytest.fixture(scope="module")
def caches(tmp_path_factory):
    d = tmp_path_factory.mktemp("caches")
    build_synthetic_cache(d, "synthetic", seed=0)
    build_synthetic_cache(d, "other", seed=1, n_tokens=400, lens=False, training=False)
    return d


def _app(cache_dir, monkeypatch, page="overview", **params):
    monkeypatch.setenv("TYING_CACHE_DIR", str(cache_dir))
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = str(v)
    at.run()
    if page != "overview":
        at.switch_page(f"views/{page}.py").run()
    return at


def _text(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [t.value for t in at.title]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders(caches, monkeypatch, page):
    at = _app(caches, monkeypatch, page, pair="synthetic")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    assert any("synthetic" in t.value for t in at.title)


def test_the_provenance_expander_draws_its_tables_only_when_opened(caches, monkeypatch):
    at = _app(caches, monkeypatch, pair="synthetic")
    assert not any("key" in df.value.columns and "value" in df.value.columns for df in at.dataframe)
    at.session_state["provenance_open"] = True
    at.run()
    assert not at.exception
    meta = next(df.value for df in at.dataframe if {"key", "value"} <= set(df.value.columns))
    con = open_cache(caches / "synthetic.duckdb")
    keys = sorted(k for (k,) in con.execute("SELECT key FROM meta").fetchall())
    stages = list(summarize(con).stages)
    con.close()
    assert list(meta["key"]) == keys
    assert list(next(df.value for df in at.dataframe if "stage" in df.value.columns)["stage"]) == stages


def test_overview_numbers_equal_the_cache(caches, monkeypatch):
    at = _app(caches, monkeypatch, pair="synthetic")
    con = open_cache(caches / "synthetic.duckdb")
    s = summarize(con)
    con.close()
    table1 = next(df.value for df in at.dataframe if "comparison" in df.value.columns)
    row = table1[(table1["comparison"] == "O→T") & (table1["map"] == "linear")].iloc[0]
    # three seeds: the per-token columns are seed 0's twins, said so, with the seeds' mean beside them
    assert row["in-sample (seed 0)"] == pytest.approx(s.alignment["O->T"]["linear"]["in_sample"])
    assert row["held-out (seed 0)"] == pytest.approx(s.alignment["O->T"]["linear"]["held_out"])
    held = s.seeds["O->T linear held-out"]
    assert row["held-out, mean ± std of 3 seeds"] == f"{held['mean']:.3f} ± {held['std']:.3f}"
    raw = table1[(table1["comparison"] == "O→T") & (table1["map"] == "identity (raw rows)")].iloc[0]
    assert raw["in-sample (seed 0)"] == pytest.approx(s.alignment["O->T"]["identity_raw"]["in_sample"])
    # a toy-lab cache is set beside the paper's OLMo numbers, labelled as such; raw identity beside raw
    assert raw["paper (olmo)"] == "0.014" and row["paper (olmo)"] == "0.719"
    centred = table1[(table1["comparison"] == "O→T") & (table1["map"] == "identity (centred)")].iloc[0]
    assert centred["paper (olmo)"] == "—"  # the paper has no centred identity: a dash, never "None"
    assert any("Scale." in m.value and "paper: OLMo" in m.value for m in at.info), [m.value for m in at.info]
    seeds = next(df.value for df in at.dataframe if "seeds" in df.value.columns)
    share = seeds[seeds["metric"] == "output share early (exact input)"].iloc[0]
    assert share["seeds"] == 3 and share["mean"] == pytest.approx(0.63) and share["std"] == pytest.approx(0.01)
    # the share beside the paper's 70.3% is the mean of ratios with the authors' proxy; exact is second
    prov = s.gradient_provenance["tied/seed0"]
    text = next(m.value for m in at.markdown if "Output side's share" in m.value)
    assert f"**{prov['beside_paper']['early']:.1%}**" in text and "authors' input proxy" in text
    assert f"exact input norm (what the matrix receives; a second figure, not the paper's): " \
           f"{prov['early']:.1%}" in text
    assert prov["beside_paper"]["early"] != prov["early"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["overlap@10 T~O · mean of 3 seeds"] == f"{s.seeds['overlap@10 T~O']['mean']:.3f}"
    assert metrics["spectral T~I"] == f"{s.spectral['T~I']:.3f}"


def test_neighbours_token_and_k_from_the_url(caches, monkeypatch):
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic", token=300, k=5)
    assert not at.exception
    # the planted token is shown escaped, never as markup
    heading = [m.value for m in at.main.markdown if m.value.startswith("### ")][0]
    assert "<script>" not in heading and "&lt;script&gt;" in heading
    tables = [df.value for df in at.dataframe if "neighbour" in getattr(df.value, "columns", [])]
    assert len(tables) == 3 and all(len(t) == 5 for t in tables)
    con = duckdb.connect(str(caches / "synthetic.duckdb"), read_only=True)
    ids = {m: np.array(con.execute("SELECT neighbour FROM neighbours WHERE matrix=? ORDER BY token, rank",
                                   [m]).fetchnumpy()["neighbour"]).reshape(600, -1) for m in ("T", "I", "O")}
    con.close()
    expected = np.mean([len(set(a[:5]) & set(b[:5])) / 5 for a, b in zip(ids["T"], ids["O"])])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["mean overlap@5 T~O · seed 0"] == f"{expected:.3f}"  # three seeds: the per-token view is seed 0's
    # change k: the tables follow and the URL records it
    at.slider(key="w_k").set_value(12).run()
    assert not at.exception
    tables = [df.value for df in at.dataframe if "neighbour" in getattr(df.value, "columns", [])]
    assert all(len(t) == 12 for t in tables)
    assert at.query_params["k"] == ["12"] or at.query_params["k"] == "12"


def test_pick_a_token_by_search(caches, monkeypatch):
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic")
    at.text_input(key="token_query").set_value("import").run()
    assert not at.exception
    picked = at.selectbox(key="token_hits").value
    heading = [m.value for m in at.main.markdown if m.value.startswith("### ")][0]
    assert "import" in heading
    assert str(picked) in [str(v) for v in np.atleast_1d(at.query_params.get("token"))]


def test_change_pair(caches, monkeypatch):
    at = _app(caches, monkeypatch, pair="synthetic")
    at.selectbox(key="w_pair").set_value("other").run()
    assert not at.exception
    assert any("other" in t.value for t in at.title)
    # the 'other' cache has no lens: the lens page says so in one line, and switches to a cache that has it
    at.switch_page("views/lens.py").run()
    assert not at.exception
    assert len(at.info) == 1 and "no lens results" in at.info[0].value and "'synthetic' has them" in at.info[0].value
    at.button(key="switch_pair").click().run()
    assert not at.exception and any("Lens · synthetic" in t.value for t in at.title)
    assert at.query_params["pair"] in ("synthetic", ["synthetic"])


def test_a_page_no_cache_fills_says_how_to_add_it(tmp_path, monkeypatch):
    build_synthetic_cache(tmp_path, "other", seed=1, n_tokens=400, lens=False, training=False)
    at = _app(tmp_path, monkeypatch, "lens")
    assert not at.exception
    assert len(at.info) == 1 and "python -m precompute lens" in at.info[0].value


def test_junk_url_parameters_are_ignored(caches, monkeypatch):
    at = _app(caches, monkeypatch, "overview", pair="nope", token="abc", k="-5", method="bogus")
    assert not at.exception
    notes = " ".join(c.value for c in at.sidebar.caption)
    assert "token" in notes and "k=" in notes and "method" in notes
    for page in PAGES[1:]:
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, page
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic", token=10 ** 6)
    assert not at.exception


def test_error_states(tmp_path, monkeypatch, caches):
    empty = tmp_path / "empty"
    empty.mkdir()
    at = _app(empty, monkeypatch)
    assert not at.exception
    assert any("python -m precompute demo" in i.value for i in at.info)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.duckdb").write_bytes(b"\0" * 4096)
    con = duckdb.connect(str(bad / "old.duckdb"))
    con.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '0'), ('command', 'python -m precompute demo --force')")
    con.close()
    for name, expected in (("broken", "precompute pair"), ("old", "python -m precompute demo --force")):
        for page in PAGES:
            at = _app(bad, monkeypatch, page, pair=name)
            assert not at.exception, (name, page)
            assert at.error and name in at.error[0].value
            assert any(expected in c.value for c in at.code)


def test_presentation_mode_enlarges_chart_fonts():
    import altair as alt

    from explorer.render.style import styled_dict

    chart = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x")
    small = styled_dict(chart)["config"]["axis"]["labelFontSize"]
    large = styled_dict(chart, presentation=True)["config"]["axis"]["labelFontSize"]
    assert large > small


def test_exports_render_png_svg(caches):

    from explorer import export
    from explorer.render import alignment_charts

    df = pd.DataFrame({"comparison": ["O->T"] * 50 + ["I->T"] * 50,
                       "cosine": np.r_[np.linspace(0.5, 1, 50), np.linspace(-0.1, 0.4, 50)]})
    chart = alignment_charts.cosine_histogram(df)
    png = export.to_png(chart)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    svg = export.to_svg(chart, presentation=True)
    assert svg.lstrip().startswith("<svg") and "per-token cosine" in svg


@pytest.mark.parametrize("page", PAGES)
def test_the_shipped_demo_cache_renders(monkeypatch, page):
    """A fresh clone shows the toy lab at once: cache/demo.duckdb opens and every page renders it."""
    root = Path(APP).parent / "cache"
    assert (root / "demo.duckdb").is_file()
    at = _app(root, monkeypatch, page)
    assert not at.exception, [e.value for e in at.exception]
    notes = [i.value for i in at.info if not i.value.startswith("**Scale.**")]  # the toy lab's scale is stated
    assert not at.error and not notes, notes
    assert any("demo" in t.value for t in at.title)
    if page == "overview":
        assert [i.value for i in at.info if i.value.startswith("**Scale.**")]
        # the shipped demo has 3 seeds, and the paper's directions hold in each
        d = next(df.value for df in at.dataframe if "the paper's direction" in df.value.columns)
        assert d.shape == (3, 4) and (d.drop(columns="the paper's direction") == "holds").all().all()


@pytest.fixture(scope="module")
def paper_cache(tmp_path_factory):
    """cache/paper.duckdb as `precompute paper` builds it from published/, beside a toy-lab cache."""
    from precompute.published import PaperConfig, build_paper

    d = tmp_path_factory.mktemp("paper-caches")
    build_paper(PaperConfig(cache_dir=str(d)))
    build_synthetic_cache(d, "synthetic", seed=0)
    return d


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_the_published_cache(paper_cache, monkeypatch, page):
    at = _app(paper_cache, monkeypatch, page, pair="paper")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    if page in ("overview", "lens", "dynamics"):
        assert any("paper" in t.value for t in at.title)
    else:  # no per-token data: one clear note, not a rebuild command
        assert len(at.info) == 1 and "published measurements" in at.info[0].value


@pytest.mark.slow
def test_the_app_process_never_imports_torch(tmp_path):
    """Every page on the shipped caches, in a fresh interpreter: torch stays out of sys.modules."""
    import subprocess
    import sys

    script = f"""
import os, sys
os.environ["TYING_CACHE_DIR"] = {str(Path(APP).parent / "cache")!r}
sys.path.insert(0, {str(Path(APP).parent)!r})
from tests import apptest_runs  # each page compiled once, as in the other tests (it imports no torch)
apptest_runs.install()
from streamlit.testing.v1 import AppTest
for pair in ("demo", "paper"):
    for page in {PAGES + ["sweep"]!r}:
        at = AppTest.from_file({APP!r}, default_timeout=120)
        at.query_params["pair"] = pair
        at.run()
        if page != "overview":
            at.switch_page(f"views/{{page}}.py").run()
        assert not at.exception, (pair, page, [e.value for e in at.exception])
# a visitor's own text on the Lens page: the models run in a child process, not here
at = AppTest.from_file({APP!r}, default_timeout=120)
at.query_params["pair"] = "demo"
at.run()
at.switch_page("views/lens.py").run()
at.radio(key="traj_source").set_value("own").run()
at.text_area(key="traj_typed").input("def main(): return 0")
next(b for b in at.button if "Trace" in str(b.label)).click().run()
assert not at.exception and not at.error, [e.value for e in at.error]
assert any(c.value.startswith("Input: def") for c in at.caption), [c.value for c in at.caption]
print("torch" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_projection_opens_where_neighbours_does(caches, monkeypatch):
    """No token in the URL: both pages open on the same default token and write nothing; a
    token picked on Neighbours travels in the URL to Projection."""
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic")
    toks = duckdb.connect(str(caches / "synthetic.duckdb"), read_only=True).execute(  # the most frequent word
        "SELECT token FROM tokens WHERE regexp_full_match(trim(text), '[A-Za-z]{3,}') "
        "ORDER BY freq_tied DESC, token LIMIT 1").fetchone()[0]
    assert f"token #{toks} " in _text(at)
    at.switch_page("views/projection.py").run()  # as from the sidebar
    assert not at.exception
    assert "token" not in at.query_params and "k" not in at.query_params  # defaults stay out of the URL
    # the charts are keyed by the token they highlight (and their colouring and selection)
    assert _keyed(at, f"umap_T_{toks}_")
    at.switch_page("views/neighbours.py").run()
    at.button(key="random").click().run()
    picked = _token_param(at)
    at.switch_page("views/projection.py").run()
    assert not at.exception and _token_param(at) == picked and _keyed(at, f"umap_T_{picked}_")


def _keyed(at, prefix: str) -> bool:
    """Whether a widget of the page has a key that starts with ``prefix``."""
    return any(str(k).startswith(prefix) for k in at.session_state.keys())


def _token_param(at) -> int:
    v = at.query_params["token"]
    return int(v[0] if isinstance(v, list) else v)


def test_random_token_is_not_undone_by_a_search_still_in_the_box(caches, monkeypatch):
    """The dice (or the most-changed list) picks a token once and clears the search, so the
    search's matches cannot take the token back at the next interaction."""
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic", token=5)
    at.text_input(key="token_query").input("a").run()
    searched = _token_param(at)
    assert at.selectbox(key="token_hits").value == searched
    for _ in range(5):  # the dice may land on the searched token: roll until it does not
        at.button(key="random").click().run()
        if _token_param(at) != searched:
            break
    rolled = _token_param(at)
    assert rolled != searched and at.text_input(key="token_query").value == ""
    at.slider(key="w_k").set_value(3).run()  # the next interaction keeps the rolled token
    assert _token_param(at) == rolled and f"token #{rolled} " in _text(at)


def test_density_is_side_by_side_and_says_so(caches, monkeypatch):
    at = _app(caches, monkeypatch, "projection", pair="synthetic", view="overlaid")
    assert len(at.get("vega_lite_chart")) == 1  # overlaid: one view
    at.toggle(key="w_density").set_value(True).run()
    layout = at.radio(key="w_view")
    assert layout.disabled and "side by side" in (layout.help or "")
    assert len(at.get("vega_lite_chart")) == 3 and not at.exception


def test_overlaid_projection_names_the_matrix_of_each_label():
    from explorer.render import projection_charts

    df = pd.DataFrame({"matrix": list("TIO"), "token": [1, 1, 1], "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 2.0],
                       "shown": ["cat"] * 3})
    hi = df.assign(role="picked")
    spec = projection_charts.projection(df, hi, mode="overlaid").to_dict()
    labels = next(v for v in spec["datasets"].values() if v and "label" in v[0])
    assert sorted(r["label"] for r in labels) == ["cat (I)", "cat (O)", "cat (T)"]
    side = projection_charts.projection(df, hi).to_dict()  # the exported side-by-side figure: one view per matrix
    assert [v["title"] for v in side["hconcat"]] == ["I (untied input)", "T (tied)", "O (untied output)"]


def test_sweep_page_names_a_crossing_the_seeds_allow(tmp_path, monkeypatch):
    # the gap is clearly positive at 32 and 64 and clearly negative at 128: a crossing between 64 and 128
    build_sweep_cache(tmp_path, {32: [0.30, 0.31, 0.29], 64: [0.10, 0.11, 0.09], 128: [-0.10, -0.11, -0.09]})
    at = _app(tmp_path, monkeypatch, "sweep")
    assert not at.exception and not at.error
    text = _text(at)
    # halfway between 64 and 128 in log width: 2 ** 6.5 = 90.5
    assert re.search(r"untying starts to pay off at a width of about (90|91) \(between 64 and 128", text), text
    assert len(at.get("vega_lite_chart")) == 2
    at.radio(key="w_axis").set_value("embedding_share_tied").run()
    assert not at.exception and "embedding share of about" in _text(at)
    cells = next(df.value for df in at.dataframe if "loss gap" in df.value.columns)
    assert list(cells["d_model"]) == [32, 64, 128] and cells["loss gap"].iloc[0] == "0.300 ± 0.010"


def test_sweep_page_says_when_no_crossing_can_be_named(tmp_path, monkeypatch, caches):
    build_sweep_cache(tmp_path, {32: [0.3, -0.2, 0.1], 64: [-0.2, 0.25, -0.1]})  # means change sign, seeds disagree
    at = _app(tmp_path, monkeypatch, "sweep")
    assert not at.exception and "does not let one name where" in _text(at)
    at = _app(caches, monkeypatch, "sweep")  # no sweep cache at all: how to build one
    assert not at.exception and any("python -m precompute sweep" in i.value for i in at.info)


def test_the_shipped_sweep_cache_renders_and_reads_as_the_readme_says(monkeypatch):
    """cache/sweep.duckdb ships: the Sweep page draws it, with the README's wall-time command."""
    root = Path(APP).parent / "cache"
    assert (root / "sweep.duckdb").is_file()
    s = summarize(open_cache(root / "sweep.duckdb"))
    assert s.kind == "sweep" and {c["d_model"] for c in s.sweep_cells} >= {32, 64, 128, 256}
    assert all(c["n"] >= 3 for c in s.sweep_cells)
    # every row has the matched arm within 2% (the twins' depth, wider feed-forward layers), the baselines
    # and the keys of the third protocol
    assert all(abs(r["params_tied_matched"] - r["params_untied"]) <= 0.02 * r["params_untied"] for r in s.sweep)
    assert all(r["bigram_loss"] < r["unigram_loss"] and r["tokens_seen"] > 0 for r in s.sweep)
    for r in s.sweep:
        assert r["n_layers_matched"] == r["n_layers"] and r["d_ff_matched"] > r["d_ff"] == 4 * r["d_model"], r
        assert r["cos_start_input_untied"] is not None and r["linear_o_t_in"] is not None
        assert r["bigram_train_tokens"] > r["tokens_seen"]
    # every probe stored: at least 3 rates per width and arm, the chosen rate the probe minimum
    con = open_cache(root / "sweep.duckdb")
    probes = con.execute("SELECT * FROM lr_probe").df()
    con.close()
    for (d, arm), g in probes.groupby(["d_model", "arm"]):
        assert g["lr"].nunique() >= 3, (d, arm)
        chosen = {r[f"lr_{arm}"] for r in s.sweep if r["d_model"] == d}
        assert chosen == {float(g.loc[g["loss"].idxmin(), "lr"])}, (d, arm)
    assert set(probes["arm"]) == {"tied", "untied", "tied_matched"}
    at = _app(root, monkeypatch, "sweep")
    assert not at.exception and not at.error and len(at.get("vega_lite_chart")) == 3  # bias, gaps, losses
    assert any(m.value.startswith("Vocabulary 4,096:") for m in at.markdown)
    assert any("the parameter-matched tied model" in m.value for m in at.markdown)
    # rebuilt for issue 48 (protocol 4): independent twins, as the page says; FLOPs per token and T's raw-row
    # cosine with O in every row, the matched arm costing more per token than the twins
    assert any("independent twins: each model its own initial weights and batch order" in c.value for c in at.caption)
    assert all(r["flops_tied"] == r["flops_untied"] < r["flops_tied_matched"] for r in s.sweep)
    assert all(-1 <= r["identity_raw_o_t"] <= 1 for r in s.sweep)


# -- the URL: every parameter, any value; one write per action; only what differs from the defaults --

SHIPPED = Path(APP).parent / "cache"
ALL_PAGES = PAGES + [p.path for p in pages.PAGES if p.folder or p.path == "tour"]
URL_PARAMS = ("pair", "presentation", "token", "k", "method", "split", "view", "density", "points", "renderer",
              "colour", "select", "layer", "model", "sample", "pin", "pos", "runs", "evo_runs", "axis", "step", "notes")
JUNK = ("", "maybe", "yes", "-1", "9" * 40, "/etc/passwd", "<script>alert(1)</script>")


def _shipped(monkeypatch, page: str, **params) -> AppTest:
    monkeypatch.setenv("TYING_CACHE_DIR", str(SHIPPED))
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"views/{page}.py").run()
    return at


def _notes(at) -> str:
    """The sidebar's notes on the URL, as read (markdown escapes removed)."""
    from explorer import state

    return " ".join(c.value.replace("\\", "") for c in at.sidebar.caption if c.value.startswith(state.NOTE_ICON))


def test_the_app_reads_every_parameter_the_state_module_knows():
    from explorer import state

    assert set(URL_PARAMS) == set(state.PARAMS)


@pytest.mark.parametrize("pair", ["demo", "paper", "sweep"])
@pytest.mark.parametrize("page", ALL_PAGES)
def test_junk_in_every_url_parameter_never_raises(monkeypatch, pair, page):
    """Every page of every shipped cache, with every parameter the app reads set to junk (empty,
    an unknown word, negative, huge, a path, markup): no exception, and a note on the junk."""
    monkeypatch.setenv("TYING_CACHE_DIR", str(SHIPPED))
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(f"views/{page}.py")
    for value in JUNK:
        at.query_params.clear()
        for name in URL_PARAMS:
            at.query_params[name] = value
        at.query_params["pair"] = pair  # junk everywhere else, on a real cache
        at.run()
        assert not at.exception, (pair, page, value, [e.value for e in at.exception])
        notes = _notes(at)
        assert ("presentation" in notes) == (value != "yes"), (value, notes)  # "yes" is a boolean
        assert not any("<script>" in c.value for c in at.sidebar.caption)  # escaped: shown as text
    at.query_params["pair"] = "<script>alert(1)</script>"  # and a pair no cache has
    at.run()
    assert not at.exception and "pair=" in _notes(at)


@pytest.mark.parametrize("value,on", [("yes", True), ("no", False), ("on", True), ("off", False), ("true", True),
                                      ("false", False), ("1", True), ("0", False), ("True", True), (" ON ", True)])
def test_presentation_accepts_the_usual_spellings_of_a_boolean(monkeypatch, value, on):
    at = _shipped(monkeypatch, "overview", presentation=value)
    assert not at.exception and not _notes(at)
    assert at.toggle(key="w_presentation").value is on


@pytest.mark.parametrize("page", ["neighbours", "projection"])
def test_a_token_the_cache_lacks_gets_a_note(monkeypatch, page):
    at = _shipped(monkeypatch, page, token="999999")
    assert not at.exception and "token='999999'" in _notes(at)
    assert at.query_params["token"] in ("999999", ["999999"])  # left as it came; the next action's write drops it
    at.slider(key="w_k").set_value(5).run() if page == "neighbours" else at.toggle(key="w_density").set_value(True).run()
    assert "token" not in at.query_params and not _notes(at)


@pytest.mark.parametrize("page", ALL_PAGES)
def test_opening_a_page_writes_nothing_to_the_url(monkeypatch, page):
    """Seeding defaults on a page load adds no history entry: the URL is not written at all."""
    from streamlit.runtime.state.query_params import QueryParams

    writes = []
    send = QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: (writes.append(str(self)), send(self)))
    at = _shipped(monkeypatch, page, pair="demo")
    assert not at.exception and writes == [] and dict(at.query_params) == {"pair": "demo"}


def _count_writes(monkeypatch) -> list:
    from streamlit.runtime.state.query_params import QueryParams

    writes = []
    send = QueryParams._send_query_param_msg
    monkeypatch.setattr(QueryParams, "_send_query_param_msg", lambda self: (writes.append(str(self)), send(self)))
    return writes


def test_each_action_writes_the_url_once_and_only_what_differs_from_the_defaults(monkeypatch):
    writes = _count_writes(monkeypatch)
    at = _shipped(monkeypatch, "neighbours", pair="paper")  # not a page the published cache fills
    at.button(key="switch_pair").click().run()  # to the toy lab: the default pair, so no pair in the URL
    assert len(writes) == 1 and dict(at.query_params) == {} and any("Neighbours · demo" in t.value for t in at.title)
    at.slider(key="w_k").set_value(7).run()
    assert len(writes) == 2 and dict(at.query_params) == {"k": "7"}
    at.slider(key="w_k").set_value(10).run()  # back to the default: out of the URL
    assert len(writes) == 3 and dict(at.query_params) == {}
    at.button(key="random").click().run()
    assert len(writes) == 4 and set(at.query_params) == {"token"}
    at.toggle(key="w_presentation").set_value(True).run()
    assert len(writes) == 5 and at.query_params["presentation"] in ("on", ["on"])
    at.selectbox(key="w_pair").set_value("paper").run()  # a new pair: the old one's token leaves in the same write
    assert len(writes) == 6 and dict(at.query_params) == {"pair": "paper", "presentation": "on"}


def test_a_shared_url_restores_the_view_and_an_older_url_restores_the_older_view(monkeypatch):
    """What a link holds comes back (density, points, runs, sample, model, axis); the URL is
    read on every run, so the URL of a Back restores that view."""
    at = _shipped(monkeypatch, "projection", density="on", points="2000")
    assert at.toggle(key="w_density").value is True and at.select_slider(key="w_points").value == 2000
    at.query_params.clear()  # Back to the link without them: the defaults
    at.run()
    assert at.toggle(key="w_density").value is False and at.select_slider(key="w_points").value == 5000
    # more points than the demo's 4,096 projected tokens means all of them: the last step, no note
    at = _shipped(monkeypatch, "projection", points="12000")
    slider = at.select_slider(key="w_points")
    assert slider.value == 5000 and slider.options[-1] == "all 4,096"
    assert not [c for c in at.caption if "points" in c.value and "ignored" in c.value]
    at = _shipped(monkeypatch, "dynamics", runs=["untied/seed1", "tied/seed2"], evo_runs="")
    assert at.multiselect(key="w_runs").value == ["untied/seed1", "tied/seed2"]
    assert at.multiselect(key="w_evo_runs").value == []  # an empty choice is a choice
    at = _shipped(monkeypatch, "lens", model="untied", sample="2")
    assert at.radio(key="w_model").value == "untied" and at.selectbox(key="w_sample").value == 2
    at = _shipped(monkeypatch, "sweep", axis="embedding_share_tied")
    assert at.radio(key="w_axis").value == "embedding_share_tied"
    at = _shipped(monkeypatch, "dynamics", runs="no-such-run")
    assert not at.exception and "runs='no-such-run'" in _notes(at)


@pytest.mark.parametrize("pair,filled", [("sweep", set()), ("paper", {"lens", "dynamics"}), ("demo", None)])
def test_the_menu_lists_the_pages_the_cache_fills(monkeypatch, pair, filled):
    """The menu holds the registry's pages but those whose table the cache lacks (``filled``: the
    table pages it has; None: all), named in one caption."""
    at = _shipped(monkeypatch, "overview", pair=pair, k="7")
    links = [p.proto for p in at.get("page_link")]
    assert all(p.query_string == f"pair={pair}&k=7" for p in links)  # a page change keeps the view's state
    menu = [p.proto for p in at.sidebar.get("page_link")]
    assert menu[0].label == "Tour"  # the tour first: where a class or a talk starts
    captions = [c.value for c in at.sidebar.caption if c.value.startswith("Not in")]
    left_out = [p.title for p in pages.PAGES if p.needs and filled is not None and p.path not in filled]
    assert [m.label for m in menu] == [p.title for p in pages.PAGES if p.title not in left_out]
    assert captions == ([f"Not in '{pair}': {', '.join(left_out)}."] if left_out else [])
    for page in ALL_PAGES:  # every page still answers its URL: a deep link never fails
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception and len(at.info) <= 2, (page, [i.value for i in at.info])


def test_alignment_lists_leave_out_the_untrained_rare_tokens_unless_asked(monkeypatch):
    """On the shipped demo, tokens seen 0-4 times align O→T at ~0.998 because their rows sit near the
    shared initialisation: the best/worst lists leave them out by default, a checkbox brings them back,
    and the caption says which."""
    root = Path(APP).parent / "cache"
    at = _app(root, monkeypatch, "alignment")
    at.selectbox(key="align_comp").set_value("O->T").run()
    assert not at.exception, [e.value for e in at.exception]
    best = at.dataframe[0].value if "frequency" in at.dataframe[0].value.columns else \
        next(df.value for df in at.dataframe if "frequency" in df.value.columns)
    assert (best["frequency"] >= 5).all()
    assert any(c.value.startswith("Left out: the ") and "0-4 times" in c.value for c in at.caption)
    at.checkbox(key="align_rare").check().run()
    best = next(df.value for df in at.dataframe if "frequency" in df.value.columns)
    assert (best["frequency"] <= 4).any()
    assert any(c.value.startswith("Included: the ") for c in at.caption)


def test_side_by_side_fraction_and_lens_text_are_labelled(monkeypatch):
    root = Path(APP).parent / "cache"
    at = _app(root, monkeypatch, "dynamics")
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith("The fraction is of the steps each run released") and "OLMo-1B-0724" in c.value
               for c in at.caption), [c.value for c in at.caption]
    at = _app(root, monkeypatch, "lens")
    assert not at.exception, [e.value for e in at.exception]
    assert any("WikiText-103" in c.value and "WikiText-2" in c.value for c in at.caption)


def test_the_smollm2_lens_page_says_its_lens_is_brief_and_its_kl_an_upper_bound(monkeypatch):
    at = _shipped(monkeypatch, "lens", pair="smollm2")
    assert not at.exception
    notes = [c.value for c in at.caption if "upper bound" in c.value]
    assert len(notes) == 1 and "of the tuned-lens library's default budget" in notes[0]
    # and the demo, a toy lab whose twins are read alike, does not call its KL so
    assert not any("upper bound" in c.value for c in _shipped(monkeypatch, "lens", pair="demo").caption)
