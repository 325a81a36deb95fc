"""The app's pages in a real browser: `streamlit run` on a free local port (tests/appbrowser.py), every
page in headless Chromium for two caches, the URL and the browser's history, a click on the map.
The tour and presentation mode are tests/test_browser_tour.py's.

Needs Debian's chromium and chromium-driver (CI installs them); skipped where they are absent.
Screenshots go to bench/out/screenshots/.

A page load runs all of Streamlit's frontend again (about 2.5 s of Chromium's CPU): the tests load a URL
where what a fresh load does is the point (a deep link, a shared URL, a page's other names) and the
first time they need a query; a next page with the same query they open by the app's own menu
(``ab.goto``), as the tests run in this order on one browser (each still passes alone: it loads). They
wait for a page to settle with ``ab.settled`` (the page's text read by the browser itself).
"""

import pytest

from explorer.render import pages
from tests import appbrowser as ab

PAGES = {"overview": "stMetric"} | {p.path: "stVegaLiteChart" for p in pages.PAGES if p.needs or p.folder}
"""Each page of the registry (but the tour) and the element that shows it drew."""


FOLDER_PAGES = tuple(p.path for p in pages.PAGES if p.folder)
"""The pages that show a cache of the folder (the sweep, the mechanism lab) whichever cache is picked."""


pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not (ab.CHROMIUM and ab.DRIVER), reason="Debian's chromium and chromium-driver are needed")]


def test_deep_link_on_a_cold_server_then_one_history_entry_per_page_change(server, browser):
    """The very first request is a deep link: it must open that page with its state, not the overview.
    From it, three page changes add at most three history entries; Back walks them in order, each
    page with the state it had (token and k included); no URL carries a default. (One visit of the
    deep link for both: they were two tests, each loading it.)"""
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/neighbours?pair=synthetic&token=300&k=7")
    ab.h1(browser, "Neighbours", settle=False)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    ab.settled(browser)
    assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text  # no dialog over the page
    browser.get_log("browser")
    # the history: from the deep link's page, as it opened
    assert "token #300 " in browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert ab.slider_value(browser) == "7"
    start = ab.history(browser)
    lengths, urls = [], []
    for path, title in (("alignment", "Alignment"), ("lens", "Lens"), ("projection", "Projection")):
        ab.menu_link(browser, path).click()
        ab.h1(browser, title, poll=0.1)
        lengths.append(ab.history(browser))
        urls.append(browser.current_url)
        assert ab.query(browser) == {"pair": "synthetic", "token": "300", "k": "7"}, browser.current_url
    assert lengths[-1] - start <= 3, (start, lengths)
    for title in ("Lens", "Alignment", "Neighbours"):
        browser.back()
        ab.h1(browser, title, poll=0.1)
    assert ab.query(browser) == {"pair": "synthetic", "token": "300", "k": "7"}
    assert "token #300 " in browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert ab.slider_value(browser) == "7"
    assert ab.history(browser) == lengths[-1]  # Back moves in the history, it adds nothing
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    browser.get_log("browser")


def test_overview_by_name_has_no_dialog(server, browser):
    """/overview and /home (the default page's names) open the overview with no "Page not found"
    dialog, and the menu links to /overview, not to the page it is on."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    for path in ("overview", "home"):
        browser.get(f"{server}/{path}?pair=synthetic")
        ab.h1(browser, "Overview")
        assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text, path
    # the menu's Overview link has an address of its own, from any page (copy link, a new tab): from
    # /home, the menu's link to Alignment (the same query) opens it in the app
    ab.goto(browser, server, "alignment", "pair=synthetic")

    def menu(driver) -> dict:  # the sidebar's links by their label, once the menu has drawn its Overview
        links = {a.text.strip().splitlines()[-1]: a.get_attribute("href")
                 for a in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a') if a.text.strip()}
        return links if "Overview" in links else {}

    try:
        links = WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,)).until(menu)
    finally:
        browser.get_log("browser")  # the /home probe's 404 (see below) stays with this test
    assert links["Overview"] == f"{server}/overview?pair=synthetic", links


@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders_in_chromium(server, browser, page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    # the default page lives at the root; after the first case, the menu's link (same query) opens the next page
    ab.goto(browser, server, "" if page == "overview" else page, "pair=synthetic&token=300")

    def drawn() -> None:
        WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, f'[data-testid="{PAGES[page]}"]')))
        if PAGES[page] == "stVegaLiteChart":
            # the chart actually drew (vega-embed produced a canvas or an svg)
            WebDriverWait(browser, 60).until(
                EC.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                                 '[data-testid="stVegaLiteChart"] svg.marks')))

    drawn()
    ab.settled(browser)
    drawn()  # again once settled: in the app, the page before's chart is gone only when this page's run ends
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert "<script>alert" not in browser.page_source.split("<body", 1)[-1].replace("&lt;script&gt;", "")
    # "T~O ... T~I" is text, never markdown strikethrough; visitors see no Deploy button (.streamlit/config.toml)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] del, [data-testid="stMain"] s')
    assert not [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Deploy"]
    out = ab.ROOT / "bench" / "out" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / f"{page}.png"))
    # Streamlit's frontend first probes /<page>/_stcore/... to find its base path and gets a
    # 404 there before using the root; that probe is not an error of the app.
    logged = browser.get_log("browser")
    errors = [e for e in logged if e["level"] == "SEVERE" and "favicon" not in e["message"]
              and not (f"/{page}/_stcore/" in e["message"] and "404" in e["message"])]
    assert not errors, errors
    assert not ab.vega_warnings(logged), ab.vega_warnings(logged)


def test_back_undoes_one_pick(server, browser):
    """A pick is one entry: Back returns to the token before it, Forward to the pick."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ab.goto(browser, server, "neighbours", "pair=synthetic&token=300")  # after the pages above: the menu's link
    ab.h1(browser, "Neighbours", poll=0.1)
    start = ab.history(browser)
    next(b for b in browser.find_elements(By.TAG_NAME, "button") if "Random" in b.text).click()
    WebDriverWait(browser, 30).until(lambda d: ab.query(d).get("token") != "300")
    ab.settled(browser)
    picked = ab.query(browser)["token"]
    assert ab.history(browser) == start + 1 and set(ab.query(browser)) == {"pair", "token"}

    def main() -> str:
        return browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text

    assert f"token #{picked} " in main()
    browser.back()
    WebDriverWait(browser, 30).until(lambda d: "token #300 " in main())
    browser.forward()
    WebDriverWait(browser, 30).until(lambda d: f"token #{picked} " in main())
    browser.get_log("browser")


PAPER_DRAWS = ("overview", "lens", "dynamics") + FOLDER_PAGES
"""The pages that draw the published cache (a folder page shows the folder's cache, not the picked
one). On the others it is one note, which tests/test_app.py's AppTest reads on every page."""


@pytest.mark.parametrize("page", PAPER_DRAWS)
def test_published_cache_page_in_chromium(server, browser, page):
    """The paper's published measurements draw where they have data: its table or its charts."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    ab.goto(browser, server, "" if page == "overview" else page, "pair=paper")  # the menu's link after the first
    drawn = ('[data-testid="stDataFrame"]' if page == "overview" else
             '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks')
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, drawn)))
    ab.settled(browser)
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, drawn)))  # this page's
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    out = ab.ROOT / "bench" / "out" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / f"paper-{page}.png"))
    logged = browser.get_log("browser")
    assert not ab.vega_warnings(logged), ab.vega_warnings(logged)


def test_click_a_point_on_projection_picks_its_token(server, browser):
    """A click on a point of the T view picks its token: the URL, the chart and the Neighbours page follow."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/projection?pair=synthetic&token=300&k=5")
    ab.h1(browser, "Projection", settle=False)
    ab.charts_drawn(browser, 3)  # I, T and O side by side
    ab.settled(browser)
    picked = None
    for n in (100, 250, 400, 50):  # click a point of the T view (its background layer), until one is not token 300
        charts = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')
        points = charts[1].find_elements(By.CSS_SELECTOR, "g.mark-symbol path")
        assert len(points) > n, len(points)
        ActionChains(browser).move_to_element(points[n]).click().perform()
        try:
            WebDriverWait(browser, 20, poll_frequency=0.2).until(lambda d: ab.url_token(d) != "300")
        except TimeoutException:
            pass  # the click missed: try another point
        if ab.url_token(browser) != "300":
            picked = ab.url_token(browser)
            break
        ab.charts_drawn(browser, 3)
    assert picked is not None and picked.isdigit(), browser.current_url
    ab.charts_drawn(browser, 3)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    # linked: the Neighbours page opens on the picked token
    link = ab.menu_link(browser, "neighbours")
    link.click()
    ab.h1(browser, "Neighbours", settle=False)
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, '[data-testid="stMain"]'), f"token #{picked} "))
    assert ab.url_token(browser) == picked
    browser.get_log("browser")


def test_a_shared_url_restores_density_runs_sample_and_axis(server, browser):
    from selenium.webdriver.common.by import By

    def checked(label: str) -> bool:
        box = browser.find_element(By.CSS_SELECTOR, f'[data-testid="stMain"] input[aria-label="{label}"]')
        return box.is_selected()

    browser.get(f"{server}/projection?pair=synthetic&density=on")
    ab.h1(browser, "Projection", poll=0.1)
    ab.charts_drawn(browser, 3)
    assert checked("Density instead of points")
    browser.get(f"{server}/dynamics?pair=synthetic&runs=untied/seed0&runs=tied_scaled_x5/seed0")
    ab.h1(browser, "Training dynamics", poll=0.1)
    tags = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stMultiSelect"]')[0]
    assert [t.get_attribute("aria-label") for t in tags.find_elements(By.CSS_SELECTOR, "[data-tag]")] == [
        "untied/seed0", "tied_scaled_x5/seed0"]
    browser.get(f"{server}/lens?pair=synthetic&model=untied&sample=0")
    ab.h1(browser, "Lens", poll=0.1)
    radios = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stRadioOption"]')
    assert any(r.text == "untied" and r.get_attribute("data-selected") == "true" for r in radios)
    browser.get(f"{server}/sweep?pair=sweep&axis=embedding_share_tied")
    ab.h1(browser, "Sweep", poll=0.1)
    radios = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stRadioOption"]')
    assert [r.text for r in radios if r.get_attribute("data-selected") == "true"] == ["embedding share (tied)"]
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    browser.get_log("browser")


def test_the_menu_leaves_out_the_pages_a_cache_does_not_fill(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/?pair=sweep")
    ab.h1(browser, "Overview", poll=0.1)
    links = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
    folder = [p.title for p in pages.PAGES if p.folder]  # the folder holds a sweep and a mechanism lab
    assert [a.text.split("\n")[-1] for a in links] == ["Tour", "Overview", *folder]
    sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]').text
    left_out = ", ".join(p.title for p in pages.PAGES if p.needs)  # a sweep fills none of the cache pages
    assert f"Not in 'sweep': {left_out}." in sidebar
    browser.get(f"{server}/neighbours?pair=sweep")  # a page left out still answers its URL: one line, a way back
    button = ab.wait_for_button(browser, "Switch to")
    assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text
    assert len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stAlert"]')) == 1
    button.click()
    ab.h1(browser, "Neighbours", poll=0.1)
    assert ab.query(browser).get("pair") == "synthetic"
    browser.get_log("browser")


PHONE = (390, 844)  # CSS px: a phone that opened the tour's QR code

OVERFLOW_JS = """
const main = document.querySelector('[data-testid="stMain"]');
return Math.max(...[document.documentElement, main].filter(Boolean).map(e => e.scrollWidth - e.clientWidth));
"""
"""How far the page or the app's main pane scrolls sideways (0: not at all)."""

SHOWN_CHARTS_JS = """
const near = (p, c) => Math.hypot(p[0] - c[0], p[1] - c[1], p[2] - c[2]);
const palette = arguments[0], out = [];
for (const el of document.querySelectorAll('[data-testid="stMain"] [data-testid="stVegaLiteChart"]')) {
  const r = el.getBoundingClientRect(), c = el.querySelector('canvas'), svg = el.querySelector('svg.marks');
  if (!el.offsetParent || !r.width || !(c || svg)) continue;
  const colours = [];  // every 4th pixel of a canvas, or the fill of each point of an SVG (Vega draws small data so)
  if (c) {
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < px.length; i += 16) if (px[i + 3] >= 128) colours.push([px[i], px[i + 1], px[i + 2]]);
  } else {
    const ctx = document.createElement('canvas').getContext('2d');
    for (const path of svg.querySelectorAll('.mark-symbol path')) {
      ctx.fillStyle = '#000000'; ctx.fillStyle = path.getAttribute('fill') || '#000000';
      colours.push([1, 3, 5].map(i => parseInt(ctx.fillStyle.slice(i, i + 2), 16)));
    }
  }
  const n = {};
  for (const p of colours) {  // the matrix colour nearest each coloured one
    if (Math.max(...p) - Math.min(...p) < 40) continue;  // white, grey, black: no matrix's
    const [m, d] = Object.entries(palette).map(([k, v]) => [k, near(p, v)]).sort((a, b) => a[1] - b[1])[0];
    if (d < 90) n[m] = (n[m] || 0) + 1;
  }
  const box = el.closest('[class*="st-key-phone_"]');
  out.push({left: r.left, right: r.right, phone: box ? box.className.match(/st-key-(phone_\\w+)/)[1] : null,
            colour: Object.keys(n).sort((a, b) => n[b] - n[a])[0] || null});
}
return out;
"""
"""Each chart the page shows (not hidden): its sides, the phone's container it is in (explorer/phone.py),
and the matrix colour most of its points have."""


def test_a_phone_never_scrolls_sideways_and_compares_t_i_o(server, browser):
    """Every page of the registry and every tour step on a 390x844 phone (Chrome's mobile emulation):
    neither the page nor its main pane scrolls sideways. The map step shows one map at a time, at the
    screen's width, under a T / I / O switch, and a press draws the map it names (its points in that
    matrix's colour); the set-up diagram is drawn in two columns; Neighbours shows T's, I's and O's
    lists side by side in one table."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from explorer.render import tour
    from explorer.render.style import PALETTE

    palette = {m: [int(c[i:i + 2], 16) for i in (1, 3, 5)] for m, c in PALETTE.items()}

    def shown() -> list:
        return browser.execute_script(SHOWN_CHARTS_JS, palette)

    try:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": PHONE[0], "height": PHONE[1], "deviceScaleFactor": 1, "mobile": True})
        for i, page in enumerate(PAGES):
            if i == 0:  # a phone's first load; then the menu's links (a phone's menu is collapsed: a script's click)
                browser.get(f"{server}/{'' if page == 'overview' else page}?pair=synthetic&token=300")
                ab.h1(browser, pages.BY_PATH[page].title, settle=False)
            else:
                ab.goto(browser, server, page, "pair=synthetic&token=300")
            ab.settled(browser, quiet=0.3)  # (a layout holds still sooner than the text it measures)
            assert browser.execute_script(OVERFLOW_JS) <= 0, page
            if page == "neighbours":  # one table, T, I and O side by side; the three tables hidden
                heads = [h.rect for h in browser.find_elements(By.CSS_SELECTOR, ".st-key-nb_phone th span")]
                assert [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".st-key-nb_phone th span")] == list("TIO")
                assert len({round(h["y"]) for h in heads}) == 1 and heads[0]["x"] < heads[1]["x"] < heads[2]["x"]
                assert heads[2]["x"] + heads[2]["width"] <= PHONE[0]
                assert len(browser.find_elements(By.CSS_SELECTOR, ".st-key-nb_phone tbody tr")) >= 5
                assert not browser.find_element(By.CSS_SELECTOR, ".st-key-nb_lists").is_displayed()
        browser.get(f"{server}/tour?pair=synthetic&step=1")
        for n in range(1, len(tour.STEPS) + 1):
            ab.tour_step(browser, n, settle=False, poll=0.1)
            ab.settled(browser, quiet=0.3)
            assert browser.execute_script(OVERFLOW_JS) <= 0, f"step {n}"
            if n == 1:  # the set-up diagram in two columns, the one-row diagram hidden
                charts = shown()
                assert [c["phone"] for c in charts] == ["phone_setup"] and charts[0]["right"] <= PHONE[0], charts
            if n == tour.BY_SLUG["map"].number:
                charts = WebDriverWait(browser, 30).until(lambda d: [c for c in shown() if c["colour"]] and shown())
                assert len(charts) == 1 and charts[0]["phone"] == "phone_map" and charts[0]["colour"] == "T", charts
                assert charts[0]["left"] >= 0 and charts[0]["right"] <= PHONE[0], charts
                buttons = browser.find_elements(By.CSS_SELECTOR, ".st-key-phone_map [data-testid='stButtonGroup'] button")
                assert [b.text for b in buttons if b.text] == list("TIO")
                for pick in "IO":
                    button = next(b for b in buttons if b.text == pick)
                    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
                    button.click()
                    WebDriverWait(browser, 30).until(lambda d, m=pick: [c["colour"] for c in shown()] == [m])
                    buttons = browser.find_elements(By.CSS_SELECTOR,
                                                    ".st-key-phone_map [data-testid='stButtonGroup'] button")
            if n < len(tour.STEPS):
                browser.find_element(By.CSS_SELECTOR, ".st-key-tour_next button").click()  # settled: no second wait
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    browser.get_log("browser")


def test_colour_and_select_from_the_url_and_a_shift_drag_box(server, browser):
    """colour= and select= open the Projection page coloured and with those tokens at full strength
    (the rest faded); shift and drag a box on the T view selects its points: select= follows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/projection?pair=synthetic&colour=under_trained&select=1,2,3")
    ab.h1(browser, "Projection", settle=False)
    ab.charts_drawn(browser, 3)
    ab.settled(browser)  # one quiet window, once the charts drew
    main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert "under-trained" in main and "3 selected tokens" in main and "Under-trained (10 tokens)" in main
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    t_view = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')[1]
    plot = t_view.find_element(By.CSS_SELECTOR, "canvas, svg")
    (ActionChains(browser).move_to_element_with_offset(plot, -60, -60).key_down(Keys.SHIFT).click_and_hold()
     .move_by_offset(60, 60).move_by_offset(60, 60).release().key_up(Keys.SHIFT).perform())
    WebDriverWait(browser, 30, poll_frequency=0.2).until(lambda d: ab.query(d).get("select") not in (None, "1,2,3"))
    assert all(p.isdigit() for p in ab.query(browser)["select"].split(",")), browser.current_url
    assert ab.query(browser).get("colour") == "under_trained"
    ab.charts_drawn(browser, 3)
    assert "selected tokens" in browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text


def test_pin_in_the_url_and_a_click_on_the_grid_in_chromium(server, browser):
    """The Lens page follows a token (issue 53, item 3; its AppTest tests are tests/test_lens_follow_page.py's):
    pin= draws the pinned chart (one more chart than without); a click on a grid cell follows it: pos= and
    layer= in the URL, its top k under the grid."""
    from urllib.parse import parse_qs, quote, urlparse

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    def charts():
        return browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')

    def query():
        return parse_qs(urlparse(browser.current_url).query)

    browser.get(f"{server}/lens?pair=synthetic&sample=0")
    ab.h1(browser, "Lens", poll=0.1)  # (settled)
    plain = len(charts())
    browser.get(f"{server}/lens?pair=synthetic&sample=0&pin={quote('␣f,x')}")
    ab.h1(browser, "Lens", settle=False)
    ab.charts_drawn(browser, plain + 1)
    ab.settled(browser)  # one quiet window, once the charts drew
    main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert '"x": outside the stored top 10' in main and query()["pin"] == ["␣f,x"]
    # the grid: the chart with the most cells; a click on one follows it
    grid = max(charts(), key=lambda c: len(c.find_elements(By.CSS_SELECTOR, "g.mark-rect path")))
    cells = grid.find_elements(By.CSS_SELECTOR, "g.mark-rect path")
    ActionChains(browser).move_to_element(cells[0]).click().perform()
    ab.wait_until(lambda: "pos" in query(), timeout=30, interval=0.2, what="pos= in the URL after a click")
    ab.settled(browser)
    pos, layer = query()["pos"][0], query()["layer"][0]
    main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert f"at hidden state {layer}, after" in main and f"(position {pos};" in main
    assert query()["pin"] == ["␣f,x"]  # the pins stay
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    browser.get_log("browser")
