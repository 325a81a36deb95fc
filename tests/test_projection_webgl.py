"""The Projection page's WebGL views (explorer/deck.py): the compact data they send, the switch
between Vega and WebGL, and, in headless Chromium with software WebGL on a 152,000-token cache,
three views drawn, a click that picks and a search that centres."""

import base64
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from explorer import deck, deck_backdrop, deck_grid
from explorer.render import projection_charts, style
from precompute.fixtures import build_synthetic_cache
from precompute.large_fixture import build_large_projection_cache
from tests import webgl
from tests.apppage import open_page
from tests.waiting import holds_for, wait_until

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
    grid = deck_grid.grid_of(coords)
    assert (grid.x0, grid.y0, grid.scale) == (0.0, 0.0, 3162.1)
    points = deck_grid.view_points(coords, grid)
    t = points["T"]
    assert t.rows.tolist() == [[0, 0], [7905, 3953], [31621, 15810], [3904, 15494]]  # 15810.5: half to even
    assert t.data == [0, 7905 + 31622 * 3953, 31621 + 31622 * 15810, 3904 + 31622 * 15494]
    assert t.ids.tolist() == [0, 1, 2, 3]
    assert deck_grid.points_json(t) == "[0,125009671,499975441,489955172]"
    # a click cell's accessor unpacks x = p % BASE, y = (p - x) / BASE and puts the point at its cell's
    # centre: run here in Python (JavaScript's % on these non-negative integers is Python's)
    for cell in (1, 7, 1000):
        expr = deck_backdrop.cell_position(cell)
        assert expr == (f"[this % 31622 - this % 31622 % {cell} + {cell / 2:g}, (this - this % 31622) / 31622 - "
                        f"(this - this % 31622) / 31622 % {cell} + {cell / 2:g}]")
        centres = [eval(expr.replace("this", str(p))) for p in t.data]
        assert centres == [[(x // cell) * cell + cell / 2, (y // cell) * cell + cell / 2] for x, y in t.rows.tolist()]
    assert max(t.data) < deck_grid.BASE ** 2 < 10**9  # nine digits at most
    # rounding: back on the map within half a step of where the point was
    back = t.rows / grid.scale + [grid.x0, grid.y0]
    assert np.abs(back - np.array(pts)).max() <= 0.5 / grid.scale + 1e-12
    assert 0.5 / grid.scale < 10 * 1e-4  # better than four significant digits of the map's width


def test_a_view_of_152k_points_is_an_image_and_click_cells():
    """152,000 points: the deck sends a PNG of them (base64) and one click cell per non-empty square
    of HIT_PX screen pixels, a few thousand, not the points; well under the 1.5 MB the points cost
    as integers."""
    rng = np.random.default_rng(0)
    n = 152_000
    coords = pd.concat([pd.DataFrame({"matrix": m, "token": np.arange(n), "x": rng.normal(0, 5, n).astype(np.float32),
                                      "y": rng.normal(0, 3, n).astype(np.float32)}) for m in "ITO"])
    grid = deck_grid.grid_of(coords)
    points = deck_grid.view_points(coords, grid)
    hi = coords[(coords["matrix"] == "T") & coords["token"].isin([7, 8])].assign(shown=["a", "b"],
                                                                                role=["picked", "neighbour"])
    back = deck_backdrop.backdrop(points, ["T"])
    sent = deck.view_deck(points, hi, grid, ["T"], back=back).to_json()
    spec = json.loads(sent)
    image = spec["layers"][0]
    assert image["@@type"] == "BitmapLayer" and image["image"].startswith("data:image/png;base64,")
    png = base64.b64decode(image["image"].split(",", 1)[1])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) == back.rasters[0].n_bytes
    cells = spec["layers"][1]["data"]
    _, whole = deck_grid.fit(deck_grid.bounds_of([points["T"]]), deck_grid.VIEW_WIDTH_PX, 420)
    cell = round(deck_backdrop.HIT_PX / 2 ** whole)
    squares = {(x // cell, y // cell) for x, y in points["T"].rows.tolist()}
    assert len(cells) == len(squares) < 10_000  # one per non-empty square
    assert "\n" not in sent and len(sent) < 0.4 * len(deck_grid.points_json(points["T"]))
    assert len(sent) < back.n_bytes() + 3000  # the rest of the deck is small


def _deck_dict(view) -> dict:
    return json.loads(view.to_json())


def test_image_then_click_cells_then_highlighted_rows_the_picked_token_last():
    pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 0.5), (4.0, 2.0)]
    coords = _coords({"I": pts, "T": pts, "O": pts}).assign(shown=lambda d: "tok" + d["token"].astype(str))
    grid = deck_grid.grid_of(coords)
    points = deck_grid.view_points(coords, grid)
    hi = coords[coords["token"].isin([1, 2, 3])].assign(role=lambda d: np.where(d["token"] == 2, "picked", "neighbour"))
    spec = _deck_dict(deck.view_deck(points, hi, grid, ["T"]))
    assert [layer["id"] for layer in spec["layers"]] == ["image-0", "points-T", "highlight"]  # later layers on top
    assert spec["layers"][0]["pickable"] is False
    rows = spec["layers"][2]["data"]
    assert [(r["t"], r["r"]) for r in rows] == [(1, 0), (3, 0), (2, 1)]  # neighbours, then the picked token
    assert rows[-1]["p"] == points["T"].rows[2].tolist() and rows[-1]["s"] == "tok2"
    assert spec["layers"][2]["getFillColor"] == deck_grid.rgba(style.HIGHLIGHT)
    assert spec["layers"][2]["getLineColor"] == [0, 0, 0, 255] and spec["layers"][2]["stroked"] is True
    hit = spec["layers"][1]
    assert hit["getFillColor"] == [0, 0, 0, 0] and hit["pickable"] is True  # transparent, clickable
    assert sorted(hit["data"]) == sorted(points["T"].data)  # four points far apart: a cell each
    assert spec["views"] == [{"@@type": "OrthographicView", "controller": True, "flipY": False}]
    # centred: a sharper image of the window, its finer cells, and the picked token labelled
    centred = _deck_dict(deck.view_deck(points, hi, grid, ["T"], focus=2))
    assert [layer["id"] for layer in centred["layers"]] == ["image-0", "image-1", "points-T", "near-T", "highlight",
                                                            "label"]
    assert centred["layers"][-1]["data"] == [{**rows[-1], "a": "middle"}]  # only the picked token is labelled
    # the whole map's image, magnified and blurred there, fades under the window's sharp one
    assert [centred["layers"][i]["opacity"] for i in (0, 1)] == [deck.BLURRED_OPACITY, 1.0]
    assert spec["layers"][0]["opacity"] == 1.0
    overlaid = _deck_dict(deck.view_deck(points, hi, grid, projection_charts.PROJECTION_ORDER, focus=2,
                                         width_px=3 * deck_grid.VIEW_WIDTH_PX))
    assert [layer["id"] for layer in overlaid["layers"]] == ["image-0", "image-1", "points-I", "points-T", "points-O",
                                                             "near-I", "near-T", "near-O", "highlight", "label"]
    labels = sorted(r["s"] for r in overlaid["layers"][-1]["data"])
    assert labels == ["tok2 (I)", "tok2 (O)", "tok2 (T)"]


def test_focus_centres_the_token_closer():
    pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 0.5), (4.0, 2.0)]
    coords = _coords({"I": pts, "T": pts, "O": pts}).assign(shown="x")
    grid = deck_grid.grid_of(coords)
    points = deck_grid.view_points(coords, grid)
    hi = coords[coords["token"] == 1].assign(role="picked")
    whole = _deck_dict(deck.view_deck(points, hi, grid, ["O"], width_px=300, height_px=420))["initialViewState"]
    assert whole["target"] == [31621 / 2, 15810 / 2, 0]  # the grid's box: x 0..31,621, y 0..15,810
    assert whole["zoom"] == pytest.approx(math.log2(0.9 * 300 / 31621), abs=1e-4)
    near = _deck_dict(deck.view_deck(points, hi, grid, ["O"], focus=1, width_px=300, height_px=420))["initialViewState"]
    assert near["target"] == points["O"].rows[1].tolist() + [0]
    assert near["zoom"] == pytest.approx(whole["zoom"] + deck_backdrop.FOCUS_ZOOM, abs=1e-3)


def test_a_click_names_its_token_by_layer_and_row():
    """A click cell's row is its token's grid position (the lowest id there); a highlighted row
    names its token."""
    coords = _coords({"I": [(0, 0), (1, 1)], "T": [(0, 0), (1, 1), (1, 1)], "O": [(0, 0), (1, 1)]})
    coords.loc[coords["matrix"] == "T", "token"] = [40, 42, 41]
    points = deck_grid.view_points(coords, deck_grid.grid_of(coords))
    p41 = points["T"].data[1]  # token 41 and 42 share a position: the lowest id
    assert deck.picked_token({"selection": {"indices": {"points-T": [0]}, "objects": {"points-T": [p41]}}},
                             points) == 41
    assert deck.picked_token({"selection": {"indices": {"near-T": [3]}, "objects": {"near-T": [0]}}}, points) == 40
    assert deck.picked_token({"selection": {"indices": {"highlight": [0]}, "objects": {"highlight": [{"t": 7}]}}},
                             points) == 7
    assert deck.picked_token({"selection": {"indices": {}, "objects": {}}}, points) is None
    assert deck.picked_token({"selection": {"indices": {"points-T": [0]}, "objects": {"points-T": [12345]}}},
                             points) is None  # no token there (a stale row)
    assert deck.picked_token({"selection": {"indices": {"points-T": [5]}}}, points) is None
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


@pytest.mark.slow
def test_the_page_draws_vega_up_to_the_threshold_and_webgl_above(small, monkeypatch):
    at = _projection(small, monkeypatch, pair="synthetic")  # 600 tokens: Vega, as before
    assert len(at.get("vega_lite_chart")) == 3 and not at.get("deck_gl_json_chart")
    assert any("with Vega" in c.value for c in at.caption)
    assert at.select_slider(key="w_points")
    monkeypatch.setattr(deck, "VEGA_MAX_TOKENS", 500)  # the same cache above the threshold: WebGL
    at = _projection(small, monkeypatch, pair="synthetic")
    decks = _decks(at)
    assert len(decks) == 3 and not at.get("vega_lite_chart")
    assert [[layer["id"] for layer in d["layers"]] for d in decks] == [["image-0", f"points-{m}", "highlight"]
                                                                       for m in projection_charts.PROJECTION_ORDER]
    png = base64.b64decode(decks[1]["layers"][0]["image"].split(",", 1)[1])  # an image of the view's points
    assert png.startswith(b"\x89PNG")
    # on the whole map the picked token is named above each view (labelled on the map only when centred)
    assert len([m for m in at.markdown if " · picked: **" in m.value]) == 3
    caption = next(c.value for c in at.caption if "WebGL" in c.value)
    assert "all 600 projected tokens per view" in caption and "more than 500 tokens" in caption
    assert re.search(r"sends [0-9.]+ kB: its points drawn on the server into an image \([0-9.]+ kB of PNG\)", caption)
    cells = len(decks[0]["layers"][1]["data"])
    assert f"{cells:,} transparent click cells" in caption and 0 < cells <= 600
    assert (deck.size_text(1_520_000), deck.size_text(12_345), deck.size_text(800)) == ("1.5 MB", "12.3 kB", "800 bytes")
    assert not [s for s in at.get("select_slider") if s.key == "w_points"]  # no sampling slider
    at.radio(key="w_view").set_value("overlaid").run()
    assert [len(d["layers"]) for d in _decks(at)] == [5]  # one view: its image, three matrices' cells, highlight
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
        assert d["initialViewState"]["zoom"] == pytest.approx(b["initialViewState"]["zoom"] + deck_backdrop.FOCUS_ZOOM, abs=1e-3)
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


SERVER_PID: dict[str, int] = {}
SERVER_CACHE: dict[str, Path] = {}
DRAW_TIMEOUT = 240  # generous: a shared, loaded machine; bench/bench_projection_webgl.py measures the time


@pytest.fixture(scope="module")
def large_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("webgl-large")
    build_large_projection_cache(d, "large", n_tokens=152_000)
    proc, url = webgl.serve(d)
    SERVER_PID[url] = proc.pid  # to measure that the server rests
    SERVER_CACHE[url] = d / "large.duckdb"  # to check where a click lands
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
def test_152k_tokens_draw_in_three_webgl_views_the_server_rests_a_click_and_a_search_centre_a_token(
        large_server, chromium):
    """One visit of the Projection page over 152,000 tokens (each load draws three WebGL views in software,
    the dearest page load of the suite: the draw, the click and the search once shared it as two tests).

    Three views drawn; then the server does nothing: no file watcher rescanning app.py's folder (with a
    .venv inside it watchdog's inotify queue overflowed and rescanned without end, a core busy for good:
    .streamlit/config.toml turns the watcher off). Nothing is centred yet. A click on a point of the T
    view picks a token there: the URL names it and every view centres on it. deck.gl picks at the
    pointer's press, in one drawing pass over the pickable layers, and counts a click only when the
    release comes within 250 ms; over 152,000 points drawn in software (SwiftShader) that pass took 1.8 s
    and a click was always lost; over the view's click cells (a few thousand, explorer/deck_backdrop.py)
    it takes about 0.1 s. Then a search for '12345' (token 12345, the first whose text holds it) centres
    every view on it (the highlight's yellow under each canvas's centre), and Neighbours opens on the
    token the URL names."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    found = _open(chromium, large_server)
    assert [v["key"].split("_")[1] for v in found] == list(projection_charts.PROJECTION_ORDER)
    assert all(v["filled"] > webgl.DRAWN_FILL and v["width"] > 200 and v["height"] >= 400 for v in found)
    assert not _severe(chromium)
    pid = SERVER_PID[large_server]
    before = _cpu_s(pid)
    # at rest is a rate: CPU seconds over a span of wall time (it was 4.3 s of 5 with the watcher on)
    holds_for(lambda: _cpu_s(pid) - before < 0.5, seconds=3, interval=0.25, what="the server at rest")
    assert not any(webgl.is_highlight(v["centre"]) for v in found)  # the whole map: nothing centred yet

    # a click, on the whole map
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
    # deck.gl drops a click whose release comes over 250 ms after the press: on a machine busy with other
    # work the press's picking pass can take that long, and a hand clicks again (up to three presses). A
    # counted click starts a run of the page at once; a dropped one starts none: 8 s without either a run
    # or a new token is a dropped click (a whole run may take longer: its token is awaited after)
    moved = lambda: _token(chromium) not in (None, first) and _token(chromium)
    for attempt in range(3):
        ActionChains(chromium).move_to_element_with_offset(canvas, spot[0] - canvas.size["width"] / 2,
                                                           spot[1] - canvas.size["height"] / 2).pause(1).click().perform()
        try:
            wait_until(lambda: moved() or not webgl.idle(chromium), timeout=8, interval=0.1,
                       what="a click starts a run of the page")
            break
        except AssertionError:
            if attempt == 2:
                raise
    picked = wait_until(moved, timeout=60, what="a click picks another token")
    assert picked.isdigit()
    # the token is where the click was: in the clicked cell (HIT_PX pixels a side) or its edge
    import duckdb

    with duckdb.connect(str(SERVER_CACHE[large_server]), read_only=True) as con:
        coords = con.execute("SELECT matrix, token, x, y FROM umap ORDER BY matrix, token").df()
    grid = deck_grid.grid_of(coords)
    t = deck_grid.view_points(coords, grid)["T"]
    (cx, cy, _), zoom = deck_grid.fit(deck_grid.bounds_of([t]), deck_grid.VIEW_WIDTH_PX, 420)
    scale = 2 ** zoom  # screen pixels a grid step; the view's centre is the canvas's
    at = (cx + (spot[0] - canvas.size["width"] / 2) / scale, cy - (spot[1] - canvas.size["height"] / 2) / scale)
    where = t.rows[np.searchsorted(t.ids, int(picked))]
    assert math.dist(where, at) * scale <= deck_backdrop.HIT_PX * math.sqrt(2) + 2, (where, at)
    # centred and 8x closer: drawn, and the highlight under every centre
    centred = wait_until(lambda: webgl.drawn(chromium, token=int(picked), fill=0.0), timeout=DRAW_TIMEOUT,
                         interval=0.5, what=f"three views drawn for token {picked}")
    assert all(webgl.is_highlight(v["centre"]) for v in centred), [v["centre"] for v in centred]
    assert not chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')

    # a search
    box = chromium.find_element(By.CSS_SELECTOR, 'input[aria-label^="Find a token"]')
    box.send_keys("12345" + Keys.ENTER)
    wait_until(lambda: _token(chromium) == "12345", timeout=60, what="the URL names token 12345")
    centred = wait_until(lambda: webgl.drawn(chromium, token=12345), timeout=DRAW_TIMEOUT, interval=0.5,
                         what="three views drawn for token 12345")
    assert all(webgl.is_highlight(v["centre"]) for v in centred), [v["centre"] for v in centred]
    assert not chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert not _severe(chromium)
    # linked: Neighbours opens on the token the URL names
    link = next(a for a in chromium.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
                if "/neighbours" in a.get_attribute("href"))
    link.click()
    WebDriverWait(chromium, 120).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Neighbours"))
    WebDriverWait(chromium, 120).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, '[data-testid="stMain"]'), "token #12345 "))
    assert _token(chromium) == "12345"
    assert not _severe(chromium)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far (Linux /proc)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
