"""One real-browser test: `streamlit run` on a free local port, every page in headless Chromium.

Needs Debian's chromium and chromium-driver (CI installs them); skipped where they are absent.
Screenshots go to bench/out/screenshots/.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from explorer.render import tour
from tests import slides
from tests.waiting import wait_until
from tying import registry

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
PAGES = {"overview": "stMetric"} | {p.url_path: "stVegaLiteChart" for p in registry.PAGES if p.needs or p.folder}
"""Each page of the registry (but the tour) and the element that shows it drew."""
FOLDER_PAGES = tuple(p.url_path for p in registry.PAGES if p.folder)
"""The pages that show a cache of the folder (the sweep, the mechanism lab) whichever cache is picked."""

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Debian's chromium and chromium-driver are needed")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(synthetic_caches):
    port = _free_port()
    env = dict(os.environ, TYING_CACHE_DIR=str(synthetic_caches), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok"
        except OSError:
            return False

    try:
        wait_until(lambda: proc.poll() is not None or healthy(), timeout=60, interval=0.5, what="streamlit's health")
        started = proc.poll() is None
    except AssertionError:
        started = False
    if not started:
        proc.kill()
        pytest.fail("streamlit did not start: " + proc.stdout.read().decode(errors="replace")[-2000:])
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield driver
    driver.quit()


def _settled(browser, timeout: float = 30, quiet: float = 0.75) -> None:
    """Wait until the app is idle: no script run in progress (Streamlit's status widget gone) and
    the page's text unchanged for ``quiet`` seconds."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    seen = {"text": None, "since": 0.0}

    def idle(driver) -> bool:
        now = time.monotonic()
        if driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'):
            seen["text"] = None
            return False
        text = driver.find_element(By.TAG_NAME, "body").text
        if text != seen["text"]:
            seen.update(text=text, since=now)
            return False
        return now - seen["since"] >= quiet

    WebDriverWait(browser, timeout, poll_frequency=0.25, ignored_exceptions=(StaleElementReferenceException,)).until(
        idle, f"the page did not settle within {timeout} s")


def test_deep_link_on_a_cold_server(server, browser):
    """The very first request is a deep link: it must open that page with its state, not the overview."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/neighbours?pair=synthetic&token=300&k=7")
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Neighbours"))
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    _settled(browser)
    assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text  # no dialog over the page
    browser.get_log("browser")


def test_overview_by_name_has_no_dialog(server, browser):
    """/overview and /home (the default page's names) open the overview with no "Page not found"
    dialog, and the menu links to /overview, not to the page it is on."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    for path in ("overview", "home"):
        browser.get(f"{server}/{path}?pair=synthetic")
        WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Overview"))
        _settled(browser)
        assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text, path
    # the menu's Overview link has an address of its own, from any page (copy link, a new tab)
    browser.get(f"{server}/alignment?pair=synthetic")
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Alignment"))

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

    path = "" if page == "overview" else page  # the default page lives at the root
    browser.get(f"{server}/{path}?pair=synthetic&token=300")
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, f'[data-testid="{PAGES[page]}"]')))
    if PAGES[page] == "stVegaLiteChart":
        # the chart actually drew (vega-embed produced a canvas or an svg)
        WebDriverWait(browser, 60).until(
            EC.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                             '[data-testid="stVegaLiteChart"] svg.marks')))
    _settled(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert "<script>alert" not in browser.page_source.split("<body", 1)[-1].replace("&lt;script&gt;", "")
    # "T~O ... T~I" is text, never markdown strikethrough; visitors see no Deploy button (.streamlit/config.toml)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] del, [data-testid="stMain"] s')
    assert not [b for b in browser.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Deploy"]
    out = ROOT / "bench" / "out" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / f"{page}.png"))
    # Streamlit's frontend first probes /<page>/_stcore/... to find its base path and gets a
    # 404 there before using the root; that probe is not an error of the app.
    logged = browser.get_log("browser")
    errors = [e for e in logged if e["level"] == "SEVERE" and "favicon" not in e["message"]
              and not (f"/{page}/_stcore/" in e["message"] and "404" in e["message"])]
    assert not errors, errors
    assert not vega_warnings(logged), vega_warnings(logged)


def vega_warnings(logged: list[dict]) -> list[str]:
    """Vega's and Vega-Lite's console warnings among a page's log (a conflicting legend, an infinite
    extent): each a chart drawn other than it was written."""
    return [e["message"] for e in logged if e["level"] == "WARNING" and '"WARN"' in e["message"]]


@pytest.mark.parametrize("page", list(PAGES))
def test_published_cache_page_in_chromium(server, browser, page):
    """The paper's published measurements open on every page: charts where it has data, one note where not."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    path = "" if page == "overview" else page
    browser.get(f"{server}/{path}?pair=paper")
    charts = ("lens", "dynamics") + FOLDER_PAGES  # a folder page shows the folder's cache, not the picked one
    drawn = ('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks'
             if page in charts else '[data-testid="stDataFrame"]' if page == "overview"
             else '[data-testid="stAlert"]')
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, drawn)))
    _settled(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    if page not in ("overview", *charts):
        assert "published measurements" in browser.find_element(By.CSS_SELECTOR, '[data-testid="stAlert"]').text
    out = ROOT / "bench" / "out" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(out / f"paper-{page}.png"))
    logged = browser.get_log("browser")
    assert not vega_warnings(logged), vega_warnings(logged)


def test_presentation_mode_enlarges_headline_numbers_and_survives_a_reload(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def metric_px(url: str) -> float:
        browser.get(url)
        WebDriverWait(browser, 60).until(EC.presence_of_element_located(
            (By.CSS_SELECTOR, '[data-testid="stMetricValue"]')))
        _settled(browser)
        return _metric_text_px()

    def _metric_text_px() -> float:
        # the size the digits are drawn at: the innermost element holding the number's text
        el = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
        inner = browser.execute_script(
            "let e = arguments[0]; while (e.firstElementChild) { e = e.firstElementChild; } return e;", el)
        return float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", inner))

    normal = metric_px(f"{server}/?pair=synthetic")
    big = metric_px(f"{server}/?pair=synthetic&presentation=True")
    assert big >= 1.4 * normal and big >= 48, (normal, big)
    browser.refresh()  # a reload keeps it: it lives in the URL
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="stMetricValue"]')))
    _settled(browser)
    assert _metric_text_px() == big
    assert "presentation=True" in browser.current_url


def _charts_drawn(browser, n: int, timeout: float = 60) -> list:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def drawn(driver) -> list:
        found = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                      '[data-testid="stVegaLiteChart"] svg.marks')
        running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        return found if len(found) >= n and not running else []

    return WebDriverWait(browser, timeout, poll_frequency=0.3).until(
        drawn, f"fewer than {n} charts drew within {timeout} s")


def _url_token(browser) -> str | None:
    from urllib.parse import parse_qs, urlparse

    return (parse_qs(urlparse(browser.current_url).query).get("token") or [None])[0]


def test_click_a_point_on_projection_picks_its_token(server, browser):
    """A click on a point of the T view picks its token: the URL, the chart and the Neighbours page follow."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/projection?pair=synthetic&token=300&k=5")
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Projection"))
    _charts_drawn(browser, 3)  # I, T and O side by side
    _settled(browser)
    picked = None
    for n in (100, 250, 400, 50):  # click a point of the T view (its background layer), until one is not token 300
        charts = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')
        points = charts[1].find_elements(By.CSS_SELECTOR, "g.mark-symbol path")
        assert len(points) > n, len(points)
        ActionChains(browser).move_to_element(points[n]).click().perform()
        try:
            WebDriverWait(browser, 20, poll_frequency=0.2).until(lambda d: _url_token(d) != "300")
        except TimeoutException:
            pass  # the click missed: try another point
        if _url_token(browser) != "300":
            picked = _url_token(browser)
            break
        _charts_drawn(browser, 3)
    assert picked is not None and picked.isdigit(), browser.current_url
    _charts_drawn(browser, 3)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    # linked: the Neighbours page opens on the picked token
    link = _menu_link(browser, "neighbours")
    link.click()
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Neighbours"))
    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element(
        (By.CSS_SELECTOR, '[data-testid="stMain"]'), f"token #{picked} "))
    assert _url_token(browser) == picked
    browser.get_log("browser")


def test_presentation_mode_enlarges_tables_and_chart_heights(server, browser):
    """A projector's tables: static ones with large text; charts taller so titles keep their room."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def measure(query: str) -> tuple[float, float]:
        browser.get(f"{server}/neighbours?pair=synthetic&token=300&k=5{query}")
        WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Neighbours"))
        charts = _charts_drawn(browser, 2)
        _settled(browser)
        cells = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stTable"] td')
        px = float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", cells[0])) \
            if cells else 0.0
        return px, charts[0].size["height"]

    table_px, chart_h = measure("")
    big_px, big_h = measure("&presentation=True")
    assert table_px == 0.0  # on screen: interactive tables (a canvas)
    assert big_px >= 20, big_px  # a projector: static tables, large text
    # the plot grows 1.5x (export.PRESENTATION_SIZE); the legend under it grows with its font only
    assert big_h >= 1.3 * chart_h, (chart_h, big_h)
    body = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]')
    assert not body.find_elements(By.CSS_SELECTOR, "del, s")  # escaped cells: "T~O" is never struck through
    assert not body.find_elements(By.TAG_NAME, "script")  # a token "<script>..." is text
    cells = " ".join(c.text for c in body.find_elements(By.CSS_SELECTOR, '[data-testid="stTable"] td'))
    assert "&#x27;" not in cells and "&amp;" not in cells and "\\" not in cells  # shown as typed, not as escapes
    browser.get_log("browser")


# -- the URL and the browser's history: one entry per action, Back restores the view ----------------


def _menu_link(browser, path: str):
    """The sidebar menu's link to a page (the app's own menu: its links carry the URL's state)."""
    from selenium.webdriver.common.by import By

    return next(a for a in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
                if a.get_attribute("href").split("?")[0].rstrip("/").endswith("/" + path))


def _query(browser) -> dict:
    from urllib.parse import parse_qs, urlparse

    return {k: v if len(v) > 1 else v[0] for k, v in parse_qs(urlparse(browser.current_url).query,
                                                               keep_blank_values=True).items()}


def _h1(browser, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 60).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), text))
    _settled(browser)


def _history(browser) -> int:
    return browser.execute_script("return history.length")


def _slider_value(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stSlider"] input'
                                ).get_attribute("value")


def test_one_history_entry_per_page_change_and_back_restores_the_view(server, browser):
    """Three page changes add at most three history entries; Back walks them in order, each
    page with the state it had (token and k included); no URL carries a default."""
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/neighbours?pair=synthetic&token=300&k=7")
    _h1(browser, "Neighbours")
    assert "token #300 " in browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert _slider_value(browser) == "7"
    start = _history(browser)
    lengths, urls = [], []
    for path, title in (("alignment", "Alignment"), ("lens", "Lens"), ("projection", "Projection")):
        _menu_link(browser, path).click()
        _h1(browser, title)
        lengths.append(_history(browser))
        urls.append(browser.current_url)
        assert _query(browser) == {"pair": "synthetic", "token": "300", "k": "7"}, browser.current_url
    assert lengths[-1] - start <= 3, (start, lengths)
    for title in ("Lens", "Alignment", "Neighbours"):
        browser.back()
        _h1(browser, title)
    assert _query(browser) == {"pair": "synthetic", "token": "300", "k": "7"}
    assert "token #300 " in browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text
    assert _slider_value(browser) == "7"
    assert _history(browser) == lengths[-1]  # Back moves in the history, it adds nothing
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    browser.get_log("browser")


def test_back_undoes_one_pick(server, browser):
    """A pick is one entry: Back returns to the token before it, Forward to the pick."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/neighbours?pair=synthetic&token=300")
    _h1(browser, "Neighbours")
    start = _history(browser)
    next(b for b in browser.find_elements(By.TAG_NAME, "button") if "Random" in b.text).click()
    WebDriverWait(browser, 30).until(lambda d: _query(d).get("token") != "300")
    _settled(browser)
    picked = _query(browser)["token"]
    assert _history(browser) == start + 1 and set(_query(browser)) == {"pair", "token"}

    def main() -> str:
        return browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]').text

    assert f"token #{picked} " in main()
    browser.back()
    WebDriverWait(browser, 30).until(lambda d: "token #300 " in main())
    browser.forward()
    WebDriverWait(browser, 30).until(lambda d: f"token #{picked} " in main())
    browser.get_log("browser")


def test_a_shared_url_restores_density_runs_sample_and_axis(server, browser):
    from selenium.webdriver.common.by import By

    def checked(label: str) -> bool:
        box = browser.find_element(By.CSS_SELECTOR, f'[data-testid="stMain"] input[aria-label="{label}"]')
        return box.is_selected()

    browser.get(f"{server}/projection?pair=synthetic&density=on")
    _h1(browser, "Projection")
    _charts_drawn(browser, 3)
    assert checked("Density instead of points")
    browser.get(f"{server}/dynamics?pair=synthetic&runs=untied/seed0&runs=tied_scaled_x5/seed0")
    _h1(browser, "Training dynamics")
    tags = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stMultiSelect"]')[0]
    assert [t.get_attribute("aria-label") for t in tags.find_elements(By.CSS_SELECTOR, "[data-tag]")] == [
        "untied/seed0", "tied_scaled_x5/seed0"]
    browser.get(f"{server}/lens?pair=synthetic&model=untied&sample=0")
    _h1(browser, "Lens")
    radios = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stRadioOption"]')
    assert any(r.text == "untied" and r.get_attribute("data-selected") == "true" for r in radios)
    browser.get(f"{server}/sweep?pair=sweep&axis=embedding_share_tied")
    _h1(browser, "Sweep")
    radios = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stRadioOption"]')
    assert [r.text for r in radios if r.get_attribute("data-selected") == "true"] == ["embedding share (tied)"]
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    browser.get_log("browser")


@pytest.mark.parametrize("value", ["yes", "on", "", "maybe"])
def test_presentation_yes_or_junk_shows_no_error(server, browser, value):
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/neighbours?pair=synthetic&token=300&presentation={value}")
    _h1(browser, "Neighbours")
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]').text
    assert ("ignored the link's presentation=" in sidebar) == (value not in ("yes", "on")), sidebar
    heading = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stMarkdown"] h3')
    px = float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", heading))
    assert (px >= 40) == (value in ("yes", "on")), px  # the picked token's heading grows with the page
    browser.get_log("browser")


def test_presentation_mode_grows_widget_text_and_keeps_slider_values_off_the_thumb(server, browser):
    from selenium.webdriver.common.by import By

    def sizes(query: str) -> dict:
        browser.get(f"{server}/neighbours?pair=synthetic&token=300{query}")
        _h1(browser, "Neighbours")

        def px(el) -> float:
            return float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", el))

        main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]')
        value = main.find_element(By.CSS_SELECTOR, '[data-testid="stSliderThumbValue"]')
        thumb = browser.execute_script("return arguments[0].parentElement", value)
        handle = [e for e in thumb.find_elements(By.XPATH, "./div") if e != value][-1]
        return {"input": px(main.find_element(By.CSS_SELECTOR, '[data-testid="stTextInputField"]')),
                "gap": handle.rect["y"] - (value.rect["y"] + value.rect["height"])}

    small, big = sizes(""), sizes("&presentation=on")
    assert big["input"] >= 1.4 * small["input"], (small, big)  # the search box's text
    assert big["gap"] >= 0, big  # the value above the thumb, not over it
    browser.get(f"{server}/dynamics?pair=synthetic&presentation=on")
    _h1(browser, "Training dynamics")
    tag = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stMultiSelect"] [data-tag]')
    assert float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", tag)) >= 18
    browser.get_log("browser")


def test_the_menu_leaves_out_the_pages_a_cache_does_not_fill(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/?pair=sweep")
    _h1(browser, "Overview")
    links = browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
    folder = [p.title for p in registry.PAGES if p.folder]  # the folder holds a sweep and a mechanism lab
    assert [a.text.split("\n")[-1] for a in links] == ["Tour", "Overview", *folder]
    sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]').text
    left_out = ", ".join(p.title for p in registry.PAGES if p.needs)  # a sweep fills none of the cache pages
    assert f"Not in 'sweep': {left_out}." in sidebar
    browser.get(f"{server}/neighbours?pair=sweep")  # a page left out still answers its URL: one line, a way back
    button = _wait_for_button(browser, "Switch to")
    assert "Page not found" not in browser.find_element(By.TAG_NAME, "body").text
    assert len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stAlert"]')) == 1
    button.click()
    _h1(browser, "Neighbours")
    assert _query(browser).get("pair") == "synthetic"
    browser.get_log("browser")


def _wait_for_button(browser, text: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(driver):
        return next((b for b in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] button')
                     if text in b.text), None)

    WebDriverWait(browser, 60).until(found)
    _settled(browser)
    return found(browser)


# -- the tour (views/tour.py) -----------------------------------------------------------------

FIRST_SCREEN = """
const bottom = sel => Math.max(0, ...[...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().bottom));
return {chart: bottom('[data-testid="stVegaLiteChart"]'), verdict: bottom('.tour-verdict'),
        charts: document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas, '
                                          + '[data-testid="stVegaLiteChart"] svg.marks').length,
        height: window.innerHeight, step: (document.querySelector('.tour-head .n') || {}).textContent};
"""


def _tour_step(browser, n: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 60).until(
        lambda d: (d.execute_script(FIRST_SCREEN)["step"] or "").startswith(f"Step {n} of")
        and d.execute_script(FIRST_SCREEN)["charts"] >= 1)
    _settled(browser)


def test_tour_deep_link_then_the_keys_a_clicker_sends(server, browser):
    """A cold deep link to step 5; the right arrow goes to step 6 and PageDown to 7, PageUp back to
    6, Space and Shift+Space a step, End to the last and Home to the first; the URL follows each."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{server}/tour?pair=synthetic&step=5")
    _tour_step(browser, 5)
    for key, n in ((Keys.ARROW_RIGHT, 6), (Keys.PAGE_DOWN, 7), (Keys.PAGE_UP, 6), (Keys.ARROW_LEFT, 5),
                   (Keys.SPACE, 6), ((Keys.SHIFT, Keys.SPACE), 5), (Keys.END, len(tour.STEPS)),
                   (Keys.HOME, 1)):
        chain = ActionChains(browser)
        if isinstance(key, tuple):
            chain.key_down(key[0]).send_keys(key[1]).key_up(key[0])
        else:
            chain.send_keys(key)
        chain.perform()
        _tour_step(browser, n)
        assert _query(browser).get("step") == (str(n) if n > 1 else None)  # step 1, the default, is not written
    browser.get_log("browser")


def test_the_n_key_opens_the_presenter_view_with_a_running_clock(server, browser):
    import re

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    browser.get(f"{server}/tour?pair=synthetic&step=2")
    _tour_step(browser, 2)
    assert not browser.find_elements(By.CSS_SELECTOR, ".presenter")
    ActionChains(browser).send_keys("n").perform()
    wait_until(lambda: browser.find_elements(By.ID, "tour-clock"), 30, what="the presenter view")
    wait_until(lambda: re.fullmatch(r"\d\d:\d\d · \d+:\d\d in", browser.find_element(By.ID, "tour-clock").text),
               10, what="the clock")
    assert tour.step_at(2).notes.say in browser.find_element(By.CSS_SELECTOR, ".presenter").text
    assert _query(browser).get("notes") == "on"
    browser.get_log("browser")


def test_every_tour_step_is_a_slide_that_fits_three_screens(server, browser):
    """In presentation mode each step is a full-screen slide, the sidebar collapsed. At 1920x1080
    its text is at 28 px; at 1280x720 and 1024x768 the same slide is zoomed to the screen. On each,
    the claim, the chart, the verdict and Next lie inside the first screen, and the chart fills its
    column (Streamlit measures a zoomed column: the chart carries its own width). A phone gets
    no slide: the page's own layout, nothing wider than its screen."""
    try:
        for n in range(1, len(tour.STEPS) + 1):
            slides.inner_size(browser, *slides.SIZES[0])
            browser.get(f"{server}/tour?pair=synthetic&presentation=on&step={n}")
            _tour_step(browser, n)
            for size in slides.SIZES:
                slides.inner_size(browser, *size)
                m = slides.steady(browser)
                slides.check(m, size, claim=n > 1, verdict=n > 1)  # step 1, the set-up: no claim, no verdict
                assert m["sidebar"] <= 0, (n, size, m)  # collapsed
        slides.inner_size(browser, *slides.PHONE)  # a phone that opened the QR code of a step
        browser.get(f"{server}/tour?pair=synthetic&presentation=on&step=3")
        _tour_step(browser, 3)
        slides.check_phone(slides.steady(browser))
    finally:
        browser.set_window_size(1400, 1000)
    logged = browser.get_log("browser")
    assert not vega_warnings(logged), vega_warnings(logged)  # on no step


def test_the_overview_first_screen_holds_a_verdict(server, browser):
    from selenium.webdriver.common.by import By

    for size, query in (((1440, 900), ""), ((1920, 1080), "&presentation=on")):
        browser.set_window_size(*size)
        browser.get(f"{server}/?pair=synthetic{query}")
        _h1(browser, "Overview")
        height = browser.execute_script("return window.innerHeight")
        badges = [e for e in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] span')
                  if e.text.endswith("holds") or e.text.endswith("does not hold")]
        assert badges and 0 < badges[0].rect["y"] + badges[0].rect["height"] <= height, size
    browser.set_window_size(1400, 1000)
    browser.get_log("browser")


TEXT_COLOURS = """
const rgba = s => (s.match(/[\\d.]+/g) || []).map(Number);
const out = [];
for (const el of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const r = el.getBoundingClientRect();
  if (!own || r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
  let opacity = 1, bg = null;
  for (let e = el; e; e = e.parentElement) {
    const cs = getComputedStyle(e);
    opacity *= parseFloat(cs.opacity);
    const c = rgba(cs.backgroundColor);
    if (!bg && c.length >= 3 && (c.length === 3 || c[3] > 0.5)) bg = c.slice(0, 3);
  }
  bg = bg || rgba(getComputedStyle(document.body).backgroundColor).slice(0, 3);
  const fg = rgba(getComputedStyle(el).color);
  out.push({text: el.textContent.trim().slice(0, 40), fg: fg.slice(0, 3), alpha: (fg[3] === undefined ? 1 : fg[3]) * opacity,
            bg: bg, size: parseFloat(getComputedStyle(el).fontSize), bold: parseInt(getComputedStyle(el).fontWeight) >= 700});
}
return out;
"""


def _contrast_failures(browser) -> list:
    """Each text on the page below WCAG AA (4.5:1; 3:1 for large text), its colour blended with
    its background by its alpha and its opacity."""
    from tests.test_figures_pack import contrast

    def hexed(c) -> str:
        return "#" + "".join(f"{max(0, min(255, round(v))):02x}" for v in c)

    bad = []
    for t in browser.execute_script(TEXT_COLOURS):
        fg = [t["alpha"] * f + (1 - t["alpha"]) * b for f, b in zip(t["fg"], t["bg"])]
        large = t["size"] >= 24 or (t["bold"] and t["size"] >= 18.66)
        ratio = contrast(hexed(fg), hexed(t["bg"]))
        if ratio < (3 if large else 4.5):
            bad.append((t["text"], round(ratio, 2), hexed(fg), hexed(t["bg"])))
    return bad


def test_text_reads_at_4_5_to_1_in_the_dark_theme_too(server, browser):
    """With the system's dark preference (the app follows it), every text of the overview, its
    sidebar, and a tour step (the neighbour lists' T, I and O chips among them) reads at WCAG AA's
    contrast; the same in the light theme."""
    try:
        for scheme in ("dark", "light"):
            browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            for url, n in ((f"{server}/?pair=synthetic", None), (f"{server}/tour?pair=synthetic&step=3", 3)):
                browser.get(url)
                if n is None:
                    _h1(browser, "Overview")
                else:
                    _tour_step(browser, n)
                assert not _contrast_failures(browser), (scheme, url, _contrast_failures(browser))
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    browser.get_log("browser")
