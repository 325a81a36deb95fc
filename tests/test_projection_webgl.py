"""The Projection page's WebGL views (explorer/deck.py): the compact data they send, the switch
between Vega and WebGL, and, in headless Chromium with software WebGL on a 152,000-token cache,
three views drawn, a click that picks and a search that centres."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydeck.bindings.json_tools import serialize as pydeck_json
from streamlit.testing.v1 import AppTest

from explorer import charts, deck
from tests import webgl
from tests.apppage import open_page
from tests.waiting import wait_until
from tying.cache.fixtures import build_synthetic_cache
from tying.cache.large_fixture import build_large_projection_cache

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def _coords(xy: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"matrix": m, "token": np.arange(len(p)), "x": [a for a, _ in p],
                                    "y": [b for _, b in p]}) for m, p in xy.items()], ignore_index=True)


# -- the data a view sends -------------------------------------------------------------------------

def test_renderer_switch_at_the_named_threshold():
    assert deck.VEGA_MAX_TOKENS == 25_000
    assert deck.renderer(deck.VEGA_MAX_TOKENS) == "vega" and deck.renderer(600) == "vega"
    assert deck.renderer(deck.VEGA_MAX_TOKENS + 1) == "webgl" and deck.renderer(152_000) == "webgl"


def test_a_point_is_one_integer_on_the_grid():
    """Known answer: the map spans x 0..10 (the longer side) and y 0..5; the grid's 31,621 steps
    cover the longer side, so a step is 10/31,621 on both axes, and a point (x, y) on the grid is
    sent as x + 31,622 y."""
    pts = [(0.0, 0.0), (2.5, 1.25), (10.0, 5.0), (1.2345678, 4.9)]
    coords = _coords({"I": pts, "T": pts, "O": pts})
    grid = deck.grid_of(coords)
    assert (grid.x0, grid.y0, grid.scale) == (0.0, 0.0, 3162.1)
    points = deck.view_points(coords, grid)
    t = points["T"]
    assert t.rows.tolist() == [[0, 0], [7905, 3953], [31621, 15810], [3904, 15494]]  # 15810.5: half to even
    assert t.data == [0, 7905 + 31622 * 3953, 31621 + 31622 * 15810, 3904 + 31622 * 15494]
    assert t.ids.tolist() == [0, 1, 2, 3]
    text = deck.points_json(t)
    assert text == "[0,125009671,499975441,489955172]"
    assert deck.bytes_per_point(t) == len(text) / 4 == 8.25  # 33 bytes: brackets and commas included
    # the layer unpacks what it is sent: x = p % BASE, y = (p - x) / BASE (its accessor, run here in Python)
    assert deck.POSITION == "[this % 31622, (this - this % 31622) / 31622]"
    assert [[p % deck.BASE, (p - p % deck.BASE) / deck.BASE] for p in t.data] == t.rows.tolist()
    assert max(t.data) < deck.BASE ** 2 < 10**9  # nine digits at most
    # rounding: back on the map within half a step of where the point was
    back = t.rows / grid.scale + [grid.x0, grid.y0]
    assert np.abs(back - np.array(pts)).max() <= 0.5 / grid.scale + 1e-12
    assert 0.5 / grid.scale < 10 * 1e-4  # better than four significant digits of the map's width


def test_a_view_of_152k_points_is_compact():
    rng = np.random.default_rng(0)
    n = 152_000
    coords = pd.concat([pd.DataFrame({"matrix": m, "token": np.arange(n), "x": rng.normal(0, 5, n).astype(np.float32),
                                      "y": rng.normal(0, 3, n).astype(np.float32)}) for m in "ITO"])
    grid = deck.grid_of(coords)
    points = deck.view_points(coords, grid)
    hi = coords[(coords["matrix"] == "T") & coords["token"].isin([7, 8])].assign(shown=["a", "b"],
                                                                                role=["picked", "neighbour"])
    view = deck.view_deck(points, hi, grid, ["T"])
    sent = view.to_json()
    per_point = deck.bytes_per_point(points["T"])
    assert 9 <= per_point <= 10  # "999950883," at most
    assert len(sent) < n * per_point + 4000  # the rest of the deck is a few hundred bytes
    assert "\n" not in sent and deck.points_json(points["T"]) in sent  # the rows as they are, no spaces
    assert len(pydeck_json(view)) > 1.8 * len(sent)  # pydeck's own (indented) JSON of the same deck


def _deck_dict(view) -> dict:
    return json.loads(view.to_json())


def test_highlighted_rows_on_top_and_the_picked_token_last():
    pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 0.5), (4.0, 2.0)]
    coords = _coords({"I": pts, "T": pts, "O": pts}).assign(shown=lambda d: "tok" + d["token"].astype(str))
    grid = deck.grid_of(coords)
    points = deck.view_points(coords, grid)
    hi = coords[coords["token"].isin([1, 2, 3])].assign(role=lambda d: np.where(d["token"] == 2, "picked", "neighbour"))
    spec = _deck_dict(deck.view_deck(points, hi, grid, ["T"]))
    assert [layer["id"] for layer in spec["layers"]] == ["points-T", "highlight", "label"]  # later layers on top
    rows = spec["layers"][1]["data"]
    assert [(r["t"], r["r"]) for r in rows] == [(1, 0), (3, 0), (2, 1)]  # neighbours, then the picked token
    assert rows[-1]["p"] == points["T"].rows[2].tolist() and rows[-1]["s"] == "tok2"
    assert spec["layers"][1]["getFillColor"] == deck.rgba(charts.HIGHLIGHT)
    assert spec["layers"][1]["getLineColor"] == [0, 0, 0, 255] and spec["layers"][1]["stroked"] is True
    assert spec["layers"][2]["data"] == [{**rows[-1], "a": "middle"}]  # only the picked token is labelled
    # near the map's left edge a label runs rightwards (anchored at its start), near the right edge leftwards
    for t, anchor in ((0, "start"), (3, "end")):
        edge = coords[coords["token"] == t].assign(role="picked")
        label = _deck_dict(deck.view_deck(points, edge, grid, ["T"]))["layers"][2]["data"]
        assert [(r["t"], r["a"]) for r in label] == [(t, anchor)]
    assert spec["layers"][0]["getFillColor"][:3] == deck.rgba(charts.PALETTE["T"])[:3]
    assert spec["layers"][0]["data"] == points["T"].data
    assert spec["layers"][0]["getPosition"] == "@@=" + deck.POSITION
    assert spec["views"] == [{"@@type": "OrthographicView", "controller": True, "flipY": False}]
    overlaid = _deck_dict(deck.view_deck(points, hi, grid, charts.PROJECTION_ORDER))
    assert [layer["id"] for layer in overlaid["layers"]] == ["points-I", "points-T", "points-O", "highlight", "label"]
    labels = sorted(r["s"] for r in overlaid["layers"][-1]["data"])
    assert labels == ["tok2 (I)", "tok2 (O)", "tok2 (T)"]


def test_focus_centres_the_token_closer():
    pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 0.5), (4.0, 2.0)]
    coords = _coords({"I": pts, "T": pts, "O": pts}).assign(shown="x")
    grid = deck.grid_of(coords)
    points = deck.view_points(coords, grid)
    hi = coords[coords["token"] == 1].assign(role="picked")
    whole = _deck_dict(deck.view_deck(points, hi, grid, ["O"], width_px=300, height_px=420))["initialViewState"]
    assert whole["target"] == [31621 / 2, 15810 / 2, 0]  # the grid's box: x 0..31,621, y 0..15,810
    assert whole["zoom"] == pytest.approx(math.log2(0.9 * 300 / 31621), abs=1e-4)
    near = _deck_dict(deck.view_deck(points, hi, grid, ["O"], focus=1, width_px=300, height_px=420))["initialViewState"]
    assert near["target"] == points["O"].rows[1].tolist() + [0]
    assert near["zoom"] == pytest.approx(whole["zoom"] + deck.FOCUS_ZOOM, abs=1e-3)


def test_a_click_names_its_token_by_layer_and_row():
    coords = _coords({"I": [(0, 0), (1, 1)], "T": [(0, 0), (1, 1)], "O": [(0, 0), (1, 1)]})
    coords.loc[coords["matrix"] == "T", "token"] = [40, 41]
    points = deck.view_points(coords, deck.grid_of(coords))
    assert deck.picked_token({"selection": {"indices": {"points-T": [1]}, "objects": {"points-T": [[9, 9]]}}},
                             points) == 41
    assert deck.picked_token({"selection": {"indices": {"highlight": [0]}, "objects": {"highlight": [{"t": 7}]}}},
                             points) == 7
    assert deck.picked_token({"selection": {"indices": {}, "objects": {}}}, points) is None
    assert deck.picked_token({"selection": {"indices": {"points-T": [5]}}}, points) is None  # a stale row
    assert deck.picked_token(None, points) is None


# -- the page's switch (AppTest) -------------------------------------------------------------------

@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("webgl-small")
    build_synthetic_cache(d, "synthetic", lens=False, training=False)
    return d


def _projection(cache_dir, monkeypatch, **params) -> AppTest:
    at = open_page(cache_dir, monkeypatch, "projection", **params)
    assert not at.exception, [e.value for e in at.exception]
    return at


def _decks(at) -> list[dict]:
    return [json.loads(e.proto.json) for e in at.get("deck_gl_json_chart")]


def test_the_page_draws_vega_up_to_the_threshold_and_webgl_above(small, monkeypatch):
    at = _projection(small, monkeypatch, pair="synthetic")  # 600 tokens: Vega, as before
    assert len(at.get("vega_lite_chart")) == 3 and not at.get("deck_gl_json_chart")
    assert any("with Vega" in c.value for c in at.caption)
    assert at.select_slider(key="w_points")
    monkeypatch.setattr(deck, "VEGA_MAX_TOKENS", 500)  # the same cache above the threshold: WebGL
    at = _projection(small, monkeypatch, pair="synthetic")
    decks = _decks(at)
    assert len(decks) == 3 and not at.get("vega_lite_chart")
    assert [len(d["layers"][0]["data"]) for d in decks] == [600, 600, 600]  # every token, no sample
    caption = next(c.value for c in at.caption if "WebGL" in c.value)
    assert "all 600 projected tokens per view" in caption and "more than 500 tokens" in caption
    assert re.search(r"sends [0-9.]+ kB: [0-9.]+ bytes a point", caption)  # 600 points: kilobytes
    assert (deck.size_text(1_520_000), deck.size_text(12_345), deck.size_text(800)) == ("1.5 MB", "12.3 kB", "800 bytes")
    assert not [s for s in at.get("select_slider") if s.key == "w_points"]  # no sampling slider
    at.radio(key="w_view").set_value("overlaid").run()
    assert [len(d["layers"]) for d in _decks(at)] == [5]  # one view: three matrices, highlight, label
    at.toggle(key="w_density").set_value(True).run()  # density grids stay with Vega
    assert len(at.get("vega_lite_chart")) == 3 and not at.get("deck_gl_json_chart")


def test_a_search_picks_and_centres_the_token_in_every_view(small, monkeypatch):
    monkeypatch.setattr(deck, "VEGA_MAX_TOKENS", 500)
    at = _projection(small, monkeypatch, pair="synthetic")
    before = _decks(at)
    at.text_input(key="proj_query").input("import").run()
    token = int(at.query_params["token"][0] if isinstance(at.query_params["token"], list) else at.query_params["token"])
    assert "import" in at.selectbox(key="proj_hits").format_func(token)
    after = _decks(at)
    keys = [e.proto.id for e in at.get("deck_gl_json_chart")]
    assert len(keys) == 3
    for d, b in zip(after, before):
        picked = [r for r in d["layers"][-2]["data"] if r["r"] == 1]
        assert [r["t"] for r in picked] == [token]
        assert d["initialViewState"]["target"] == picked[0]["p"] + [0]  # centred on it
        assert d["initialViewState"]["zoom"] == pytest.approx(b["initialViewState"]["zoom"] + deck.FOCUS_ZOOM, abs=1e-3)
    at.button(key="proj_whole").click().run()  # the whole map again, the token still picked
    assert [d["initialViewState"] for d in _decks(at)] == [b["initialViewState"] for b in before]


# -- headless Chromium, software WebGL, 152,000 tokens ----------------------------------------------



def in_chromium(test):
    """A browser test's marks (as tests/test_browser.py's): slow, browser, skipped without Chromium."""
    for mark in (pytest.mark.slow, pytest.mark.browser,
                 pytest.mark.skipif(not (webgl.CHROMIUM and webgl.DRIVER),
                                    reason="Debian's chromium and chromium-driver are needed")):
        test = mark(test)
    return test


CLICKABLE_TOKENS = 3_000
SERVER_PID: dict[str, int] = {}
DRAW_TIMEOUT = 240  # generous: a shared, loaded machine; bench/bench_projection_webgl.py measures the time


@pytest.fixture(scope="module")
def large_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("webgl-large")
    build_large_projection_cache(d, "large", n_tokens=152_000)
    proc, url = webgl.serve(d)
    SERVER_PID[url] = proc.pid  # to measure that the server rests
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def clickable_server(tmp_path_factory):
    """A vocabulary whose software pick fits deck.gl's tap (see test_a_click_picks_a_token)."""
    d = tmp_path_factory.mktemp("webgl-clickable")
    build_large_projection_cache(d, "large", n_tokens=CLICKABLE_TOKENS)
    proc, url = webgl.serve(d)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def chromium():
    driver = webgl.chromium(1440, 900)
    yield driver
    driver.quit()


def _token(driver) -> str | None:
    from urllib.parse import parse_qs, urlparse

    return (parse_qs(urlparse(driver.current_url).query).get("token") or [None])[0]


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]
            and not ("/_stcore/" in e["message"] and "404" in e["message"])]


def _open(driver, url: str, query: str = "") -> list[dict]:
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/projection?pair=large{query}")
    found = wait_until(lambda: webgl.drawn(driver), timeout=DRAW_TIMEOUT, interval=0.5, what="three WebGL views drawn")
    assert not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    return found


@in_chromium
def test_three_webgl_views_of_152k_tokens_draw_and_the_server_rests(large_server, chromium):
    """Three views drawn; then the server does nothing: no file watcher rescanning app.py's
    folder (with a .venv inside it watchdog's inotify queue overflowed and rescanned without
    end, a core busy for good: .streamlit/config.toml turns the watcher off)."""
    import time

    found = _open(chromium, large_server)
    assert [v["key"].split("_")[1] for v in found] == list(charts.PROJECTION_ORDER)
    assert all(v["filled"] > webgl.DRAWN_FILL and v["width"] > 200 and v["height"] >= 400 for v in found)
    assert not _severe(chromium)
    pid = SERVER_PID[large_server]
    before = _cpu_s(pid)
    time.sleep(5)
    assert _cpu_s(pid) - before < 0.5  # it was 4.3 s of 5 with the watcher on


@in_chromium
def test_a_search_centres_the_token_in_every_view_of_152k_tokens(large_server, chromium):
    """Search '12345' (token 12345, the first whose text holds it): every view centres on it (the
    highlight's yellow under each canvas's centre)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    before = _open(chromium, large_server)
    assert not any(webgl.is_highlight(v["centre"]) for v in before)  # the whole map: nothing centred yet
    box = chromium.find_element(By.CSS_SELECTOR, 'input[aria-label^="Find a token"]')
    box.send_keys("12345" + Keys.ENTER)
    wait_until(lambda: _token(chromium) == "12345", timeout=60, what="the URL names token 12345")
    centred = wait_until(lambda: webgl.drawn(chromium, token=12345), timeout=DRAW_TIMEOUT, interval=0.5,
                         what="three views drawn for token 12345")
    assert all(webgl.is_highlight(v["centre"]) for v in centred), [v["centre"] for v in centred]
    assert not chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert not _severe(chromium)


@in_chromium
def test_a_click_picks_a_token(clickable_server, chromium):
    """A click on a point of the T view (WebGL, chosen in the URL) picks that point's token: the
    URL names it, every view centres on it and Neighbours opens on it.

    Not on the 152,000-token cache: deck.gl picks at the pointer's press, synchronously, in one
    drawing pass over the view's points, and counts a click only when the release comes within
    250 ms. Drawn in software (SwiftShader) on these 2 cores that pass takes about 12 us a point
    (measured: 1.8 s at 152,000 points, 0.35 s at 30,000), so the release always comes too late
    there; on a graphics card it takes about a millisecond. 3,000 points pick in about 40 ms."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    _open(chromium, clickable_server, "&renderer=webgl")
    first = _token(chromium)
    # a point of the T view well away from the centre (the highlighted tokens sit there): a pixel
    # painted, not yellow, inside a painted 5x5 block (so the click falls within the point's disc)
    canvas = chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stDeckGlJsonChart"] canvas')[1]
    spot = chromium.execute_script("""
        const c = arguments[0], s = document.createElement('canvas'); s.width = c.width; s.height = c.height;
        const g = s.getContext('2d'); g.drawImage(c, 0, 0);
        const px = g.getImageData(0, 0, c.width, c.height).data, W = c.width, H = c.height;
        const a = (x, y) => px[4 * (y * W + x) + 3];
        const yellow = (x, y) => { const j = 4 * (y * W + x); return px[j] > 240 && px[j + 1] > 200 && px[j + 2] < 90; };
        let best = null;
        for (let y = 3; y < H - 3; y++) for (let x = 3; x < W - 3; x++) {
          const d = Math.hypot(x - W / 2, y - H / 2);
          if (d < 70 || (best && d >= best[2])) continue;
          let ok = !yellow(x, y);
          for (let dy = -2; ok && dy <= 2; dy++) for (let dx = -2; ok && dx <= 2; dx++) ok = a(x + dx, y + dy) > 0;
          if (ok) best = [x, y, d];
        }
        return best;""", canvas)
    assert spot, "no point of the T view to click"
    chromium.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)  # offsets count from
    # the centre of the element's visible part: the whole canvas in view
    # move there, rest (deck.gl picks on hover too), then press and release, as a hand does
    ActionChains(chromium).move_to_element_with_offset(canvas, spot[0] - canvas.size["width"] / 2,
                                                       spot[1] - canvas.size["height"] / 2).pause(1).click().perform()
    picked = wait_until(lambda: _token(chromium) not in (None, first) and _token(chromium), timeout=60,
                        what="a click picks another token")
    assert picked.isdigit()
    # centred and 8x closer, a view of 3,000 points paints little more than the picked token and
    # its neighbours: drawn when anything is painted, and the highlight under every centre
    centred = wait_until(lambda: webgl.drawn(chromium, token=int(picked), fill=0.0), timeout=DRAW_TIMEOUT,
                         interval=0.5, what=f"three views drawn for token {picked}")
    assert all(webgl.is_highlight(v["centre"]) for v in centred), [v["centre"] for v in centred]
    assert not chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    link = next(a for a in chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
                if "/neighbours" in a.get_attribute("href"))
    link.click()
    WebDriverWait(chromium, 120).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Neighbours"))
    WebDriverWait(chromium, 120).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, '[data-testid="stMain"]'), f"token #{picked} "))
    assert _token(chromium) == picked
    assert not _severe(chromium)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
