"""The Streamlit app, in-process (AppTest), on caches built by the project's fixture builder."""

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tying.cache.fixtures import build_sweep_cache, build_synthetic_cache
from tying.cache.store import open_cache
from tying.cache.summary import summarize

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGES = ["overview", "alignment", "neighbours", "projection", "lens", "dynamics"]


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


def test_overview_numbers_equal_the_cache(caches, monkeypatch):
    at = _app(caches, monkeypatch, pair="synthetic")
    con = open_cache(caches / "synthetic.duckdb")
    s = summarize(con)
    con.close()
    table1 = next(df.value for df in at.dataframe if "comparison" in df.value.columns)
    row = table1[(table1["comparison"] == "O→T") & (table1["map"] == "linear")].iloc[0]
    assert row["in-sample"] == pytest.approx(s["alignment"]["O->T"]["linear"]["in_sample"])
    assert row["held-out"] == pytest.approx(s["alignment"]["O->T"]["linear"]["held_out"])
    raw = table1[(table1["comparison"] == "O→T") & (table1["map"] == "identity (raw rows)")].iloc[0]
    assert raw["in-sample"] == pytest.approx(s["alignment"]["O->T"]["identity_raw"]["in_sample"])
    # a toy-lab cache is set beside the paper's OLMo numbers, labelled as such; raw identity beside raw
    assert raw["paper (olmo)"] == "0.014" and row["paper (olmo)"] == "0.719"
    centred = table1[(table1["comparison"] == "O→T") & (table1["map"] == "identity (centred)")].iloc[0]
    assert centred["paper (olmo)"] == "—"  # the paper has no centred identity: a dash, never "None"
    assert any("Scale." in m.value and "paper: OLMo" in m.value for m in at.info), [m.value for m in at.info]
    seeds = next(df.value for df in at.dataframe if "seeds" in df.value.columns)
    share = seeds[seeds["metric"] == "output share early"].iloc[0]
    assert share["seeds"] == 3 and share["mean"] == pytest.approx(0.63) and share["std"] == pytest.approx(0.01)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["overlap@10 T~O"] == f"{s['overlap_at_10']['T~O']:.3f}"
    assert metrics["spectral T~I"] == f"{s['spectral']['T~I']:.3f}"


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
    assert metrics["mean overlap@5 T~O"] == f"{expected:.3f}"
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
    # the 'other' cache has no lens: the lens page says so and how to add it
    at.switch_page("views/lens.py").run()
    assert not at.exception
    assert any("python -m precompute lens" in i.value for i in at.info)


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

    from explorer.charts import style

    chart = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x")
    small = style(chart).to_dict()["config"]["axis"]["labelFontSize"]
    large = style(chart, presentation=True).to_dict()["config"]["axis"]["labelFontSize"]
    assert large > small


def test_exports_render_png_svg(caches):

    from explorer import charts, export

    df = pd.DataFrame({"comparison": ["O->T"] * 50 + ["I->T"] * 50,
                       "cosine": np.r_[np.linspace(0.5, 1, 50), np.linspace(-0.1, 0.4, 50)]})
    chart = charts.cosine_histogram(df)
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


def test_projection_keeps_token_and_k_in_the_url_and_opens_where_neighbours_does(caches, monkeypatch):
    at = _app(caches, monkeypatch, "neighbours", pair="synthetic")
    heading = [m.value for m in at.main.markdown if m.value.startswith("### ")][0]
    at.switch_page("views/projection.py").run()  # as from the sidebar: no token in the URL
    assert not at.exception
    assert at.query_params["token"] and at.query_params["k"]
    toks = duckdb.connect(str(caches / "synthetic.duckdb"), read_only=True).execute(
        "SELECT token FROM tokens ORDER BY freq_tied DESC, token LIMIT 1").fetchone()[0]
    assert int(at.query_params["token"][0] if isinstance(at.query_params["token"], list)
               else at.query_params["token"]) == toks
    assert heading  # neighbours opened on a token too


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
    at.toggle(key="density").set_value(True).run()
    layout = at.radio(key="w_view")
    assert layout.disabled and "side by side" in (layout.help or "")
    assert len(at.get("vega_lite_chart")) == 3 and not at.exception


def test_overlaid_projection_names_the_matrix_of_each_label():
    from explorer import charts

    df = pd.DataFrame({"matrix": list("TIO"), "token": [1, 1, 1], "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 2.0],
                       "shown": ["cat"] * 3})
    hi = df.assign(role="picked")
    spec = charts.projection(df, hi, mode="overlaid").to_dict()
    labels = next(v for v in spec["datasets"].values() if v and "label" in v[0])
    assert sorted(r["label"] for r in labels) == ["cat (I)", "cat (O)", "cat (T)"]
    side = charts.projection(df, hi).to_dict()  # the exported side-by-side figure: one view per matrix
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
    at.radio(key="sweep_x").set_value("embedding_share_tied").run()
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
    assert s["kind"] == "sweep" and {c["d_model"] for c in s["sweep_cells"]} >= {32, 64, 128, 256}
    assert all(c["n"] >= 3 for c in s["sweep_cells"])
    at = _app(root, monkeypatch, "sweep")
    assert not at.exception and not at.error and len(at.get("vega_lite_chart")) == 2
    assert any(m.value.startswith("Vocabulary 4,096:") for m in at.markdown)
