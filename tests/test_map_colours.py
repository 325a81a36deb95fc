"""The map's colours and selection (explorer/render/map_colours.py): the frame a chart is given,
the scales the Vega and WebGL views share, the URL's ``colour=`` and ``select=`` on the
Projection page (AppTest), and a cache without the token_traits table."""

from __future__ import annotations

import math
import shutil

import duckdb
import numpy as np
import pandas as pd
import pytest

from explorer import deck
from explorer.render import map_colours as mc
from explorer.render import projection_charts, read, token_traits
from tests.apppage import open_page


def _coords() -> pd.DataFrame:
    return pd.DataFrame({"matrix": ["I", "T", "O", "T", "T"], "token": [0, 0, 0, 1, 2],
                         "x": [0.0, 1, 2, 3, 4], "y": [0.0, 1, 2, 3, 4], "shown": ["a", "a", "a", "<b>", "c"]})


def _traits() -> pd.DataFrame:
    return pd.DataFrame({"token": [0, 1, 2], "count": [1000, 7, 0], "log_count": [3.0, math.log10(7), np.nan],
                         "position": [0.5, -0.25, 0.0], "under_trained": [False, False, True]})


def test_a_token_seen_n_times_gets_log10_n_in_the_colour_column():
    """Known answer: counts 1000 and 7 give 3 and log10 7 in ``colour`` for every view of the token;
    a token never seen gets none (drawn grey); the tooltip's count comes along."""
    f = mc.colour_frame(_coords(), _traits(), None, "log_count")
    by = f.groupby("token")["colour"].agg(list)
    assert by[0] == [3.0, 3.0, 3.0] and by[1] == [pytest.approx(math.log10(7))] and math.isnan(by[2][0])
    assert f.set_index("token")["count"].to_dict() == {0: 1000, 1: 7, 2: 0}
    assert f.attrs["colour"] == "log_count" and (f["shade"] == mc.SHOWN).all()
    # the chart is given this column: its colour encodes `colour`, missing values grey
    spec = projection_charts.projection_view(f, f.head(0).assign(role=[]), "T", title="count in corpus.txt").to_dict()
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["condition"]["field"] == "colour" and colour["value"] == mc.MISSING
    assert colour["condition"]["legend"]["title"] == ["count in corpus.txt"]


def test_norm_is_each_views_own_matrix_and_position_and_flag_are_the_tokens():
    norms = pd.DataFrame({"matrix": ["I", "T", "O", "T", "T"], "token": [0, 0, 0, 1, 2], "norm": [1.0, 2, 3, 4, 5]})
    f = mc.colour_frame(_coords(), None, norms, "norm")
    assert f.set_index(["matrix", "token"])["colour"].to_dict() == {("I", 0): 1, ("T", 0): 2, ("O", 0): 3,
                                                                    ("T", 1): 4, ("T", 2): 5}
    p = mc.colour_frame(_coords(), _traits(), None, "position")
    assert p[p["token"] == 1]["colour"].tolist() == [-0.25]
    s = mc.scale_of(p)  # diverging about 0: I's blue below, O's vermillion above
    assert s.domain[1] == 0 and s.domain[0] == -s.domain[2] and s.range == (mc.PALETTE["I"], mc.MIDDLE, mc.PALETTE["O"])
    assert mc.rgb(s, [0.0]).tolist() == [list(bytes.fromhex(mc.MIDDLE[1:]))]
    u = mc.colour_frame(_coords(), _traits(), None, "under_trained")
    assert u.iloc[-1]["token"] == 2 and u.iloc[-1]["colour"] == mc.FLAG_LABELS[0]  # the flagged drawn last, on top


def test_a_selection_fades_the_rest_and_draws_on_top():
    f = mc.colour_frame(_coords(), None, None, "matrix", selected=[1])
    assert f.iloc[-1]["token"] == 1 and f.iloc[-1]["shade"] == mc.CHOSEN
    assert (f[f["token"] != 1]["shade"] == mc.FADED).all()  # faded, not hidden: every row is still there
    assert len(f) == len(_coords())
    assert mc.parse_select(["12, 345,12"]) == (12, 345) and mc.select_text((12, 345)) == "12,345"
    for junk in (["a,b"], [""], ["-1"], [",".join(["1"] * 2) + ",x"]):
        with pytest.raises(ValueError):
            mc.parse_select(junk)
    box = mc.tokens_in_box(_coords(), ["T"], {"x": [2.5, 4.5], "y": [4.5, 2.5]})
    assert box == (1, 2)


def test_the_webgl_images_take_the_same_colours():
    """The WebGL views' point colours are the Vega scale's, in the points' order; a selection goes on top."""
    grid = deck.grid_of(_coords())
    points = deck.view_points(_coords(), grid)
    f = mc.colour_frame(_coords(), _traits(), None, "position")
    scale = mc.scale_of(f)
    c = deck.point_colours(points, f, scale, selected=(2,))
    assert c.rgb["T"].tolist() == mc.rgb(scale, [0.5, -0.25, 0.0]).tolist()
    assert c.top["T"].tolist() == [False, False, True] and c.faded
    back = deck.backdrop(points, ["T"], colours=c)
    assert back.rasters[0].url.startswith("data:image/png")


@pytest.fixture(scope="module")
def no_traits(synthetic_caches, tmp_path_factory):
    """The synthetic pair without its token_traits table (a cache built before the stage)."""
    d = tmp_path_factory.mktemp("no-traits")
    shutil.copy(synthetic_caches / "synthetic.duckdb", d / "synthetic.duckdb")
    with duckdb.connect(str(d / "synthetic.duckdb")) as con:
        con.execute("DROP TABLE token_traits")
    return d


def _page(cache_dir, monkeypatch, **params):
    at = open_page(cache_dir, monkeypatch, "projection", pair="synthetic", **params)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _q(at, name: str) -> str | None:
    v = at.query_params.get(name)
    return v[-1] if isinstance(v, list) else v


def _point_layers(at) -> list[dict]:
    import json

    return [json.loads(c.proto.spec)["layer"][0] for c in at.get("vega_lite_chart")]


@pytest.mark.slow
def test_colour_and_select_in_the_url(synthetic_caches, monkeypatch):
    """colour=log_count colours every view by the log count (one legend, titled with the counted
    text); select= draws those tokens at full strength and fades the rest; the widgets write both back."""
    at = _page(synthetic_caches, monkeypatch, colour="log_count", select="3,5,7")
    assert at.selectbox(key="w_colour").value == "log_count"
    layers = _point_layers(at)
    assert len(layers) == 3 and all(layer["encoding"]["color"]["condition"]["field"] == "colour" for layer in layers)
    legends = [layer["encoding"]["color"]["condition"].get("legend") for layer in layers]
    about = token_traits.traits_about(read.CacheRef.of(synthetic_caches / "synthetic.duckdb"))
    assert legends[:2] == [None, None] and " ".join(legends[2]["title"]).startswith(f"count in {about.counts}")
    assert any("3 selected tokens" in c.value for c in at.caption)
    at.selectbox(key="w_colour").set_value("under_trained").run()
    assert _q(at, "colour") == "under_trained" and _q(at, "select") == "3,5,7"
    assert any(f"Under-trained ({about.n_under_trained:,} tokens)" in c.value for c in at.caption)
    at.button(key="proj_unselect").click().run()
    assert "select" not in at.query_params
    at.text_input(key="proj_query").input("import").run()
    at.button(key="proj_select").click().run()
    assert _q(at, "select") and all(p.isdigit() for p in _q(at, "select").split(","))
    at = _page(synthetic_caches, monkeypatch, colour="nonsense", select="x")  # junk: a note, the defaults
    assert at.selectbox(key="w_colour").value == "matrix" and not at.exception


@pytest.mark.slow
def test_webgl_views_take_the_colour_and_a_legend(synthetic_caches, monkeypatch):
    monkeypatch.setattr(deck, "VEGA_MAX_TOKENS", 100)
    at = _page(synthetic_caches, monkeypatch, colour="position", select="1,2")
    assert len(at.get("deck_gl_json_chart")) == 3
    charts = at.get("vega_lite_chart")  # the colouring's legend alone, above the views
    assert len(charts) == 1 and "position between I and O" in charts[0].proto.spec


@pytest.mark.slow
def test_a_cache_without_traits_offers_the_matrix_only(no_traits, monkeypatch):
    at = _page(no_traits, monkeypatch, colour="log_count")
    assert at.selectbox(key="w_colour").options == ["matrix"]
    sentence = [c.value for c in at.caption if "no per-token traits" in c.value]
    assert len(sentence) == 1 and "python -m precompute" in sentence[0]
