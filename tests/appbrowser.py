"""The app in a real browser, for tests/test_browser.py and tests/test_browser_tour.py: `streamlit run`
on a free local port over the shared synthetic caches, headless Chromium, and the waits and readings
the tests share. conftest.py loads it as a plugin: each test module that asks for ``server`` and
``browser`` gets its own (module scope), so the two modules can run side by side on two xdist workers.

Needs Debian's chromium (or chromium-headless-shell) and chromium-driver (CI installs them); the tests skip
where they are absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def _browser_binary(path: str | None) -> str | None:
    """The browser a launcher script runs where the script runs it as its child (no ``exec``), as
    Debian's /usr/bin/chromium-headless-shell does: chromedriver's quit ends the process it started,
    so the script went and the browser lived on (a browser leaked by every driver, seven a run of the
    suite). Anything else: ``path`` itself."""
    if path is None:
        return None
    try:
        head = Path(path).read_bytes()[:4096].decode()
    except (OSError, UnicodeDecodeError):
        return path  # a binary
    if not head.startswith("#!"):
        return path
    runs = re.search(r'^\s*(/\S+)\s+"\$@"\s*$', head, re.MULTILINE)  # a child run as `/path/binary "$@"`
    return runs.group(1) if runs and os.access(runs.group(1), os.X_OK) else path


CHROMIUM = _browser_binary(shutil.which("chromium-headless-shell") or shutil.which("chromium")
                           or shutil.which("chromium-browser"))
"""The browser the tests drive: Debian's chromium-headless-shell where it is installed (Chromium's own
headless build, the same Blink and version without the desktop browser around it: 9-11% less CPU for
the same browser modules, measured; CI installs it), else chromium; the binary itself, not a launcher
script that would outlive it (:func:`_browser_binary`)."""


DRIVER = shutil.which("chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str) -> bool:
    """Whether the Streamlit server at ``url`` answers its health check."""
    try:
        return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok"
    except OSError:
        return False


PUBLIC_URL = "https://example.org/tying/tour"  # the test server's address as a visitor's phone would open it


@pytest.fixture(scope="module")
def server(synthetic_caches):
    port = free_port()
    # served as a Space is: at a public address, so the tour's first and last steps draw their QR codes
    env = dict(os.environ, TYING_CACHE_DIR=str(synthetic_caches), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               TYING_PUBLIC_URL=PUBLIC_URL)
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or healthy(url), timeout=60, interval=0.5, what="streamlit's health")
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


FLAGS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
"""Headless Chromium's flags in every browser test: no sandbox (root in CI), nothing off the machine."""


def chromium(width: int = 1400, height: int = 1000, *, requests: bool = False, flags=("--disable-gpu",)):
    """Headless Chromium (a Selenium driver) in a ``width`` x ``height`` window, the console logged;
    ``requests``: Chrome's network events too (:func:`requested_urls`); ``flags``: more of them
    (the GPU off by default; tests/webgl.py passes software WebGL's)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, *flags, f"--window-size={width},{height}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", **({"performance": "ALL"} if requests else {})})
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


def requested_urls(driver) -> list[str]:
    """The URLs of every request since the last call (Chrome's Network.requestWillBeSent events;
    the driver started with ``chromium(requests=True)``)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.fixture(scope="module")
def browser():
    driver = chromium()
    yield driver
    driver.quit()


def settled(browser, timeout: float = 30, quiet: float = 0.75) -> None:
    """Wait until the app is idle: no script run in progress (Streamlit's status widget gone) and
    the page's text unchanged for ``quiet`` seconds, polled every 0.25 s. The text is read by the
    browser itself (``document.body.innerText``, one script a poll), not as WebDriver's visible text:
    ``.text`` runs WebDriver's visibility script over every element, 0.25 to 0.6 s of the renderer's
    CPU a read on the app's pages (innerText: under 0.05 s), which kept Chromium busy for most of
    every wait. (A shorter quiet window made a test flaky: 0.75 s stays.)"""
    from selenium.webdriver.support.ui import WebDriverWait

    seen = {"text": None, "since": 0.0}

    def still(driver) -> bool:
        now = time.monotonic()
        text = driver.execute_script(PAGE_TEXT_JS)
        if text is None or text != seen["text"]:
            seen.update(text=text, since=now)
            return False
        return now - seen["since"] >= quiet

    WebDriverWait(browser, timeout, poll_frequency=0.25).until(still, f"the page did not settle within {timeout} s")


PAGE_TEXT_JS = """
const body = document.body;
return !body || document.querySelector('[data-testid="stStatusWidget"]') ? null : body.innerText;
"""
"""The page's rendered text as the browser lays it out, or null while a script runs (Streamlit's status widget)."""


def vega_warnings(logged: list[dict]) -> list[str]:
    """Vega's and Vega-Lite's console warnings among a page's log (a conflicting legend, an infinite
    extent): each a chart drawn other than it was written."""
    return [e["message"] for e in logged if e["level"] == "WARNING" and '"WARN"' in e["message"]]


def charts_drawn(browser, n: int, timeout: float = 60) -> list:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def drawn(driver) -> list:
        found = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                      '[data-testid="stVegaLiteChart"] svg.marks')
        running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        return found if len(found) >= n and not running else []

    return WebDriverWait(browser, timeout, poll_frequency=0.3).until(
        drawn, f"fewer than {n} charts drew within {timeout} s")


def url_token(browser) -> str | None:
    from urllib.parse import parse_qs, urlparse

    return (parse_qs(urlparse(browser.current_url).query).get("token") or [None])[0]


def menu_link(browser, path: str):
    """The sidebar menu's link to a page (the app's own menu: its links carry the URL's state)."""
    from selenium.webdriver.common.by import By

    return next(a for a in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
                if a.get_attribute("href").split("?")[0].rstrip("/").endswith("/" + path))


def query(browser) -> dict:
    from urllib.parse import parse_qs, urlparse

    return {k: v if len(v) > 1 else v[0] for k, v in parse_qs(urlparse(browser.current_url).query,
                                                               keep_blank_values=True).items()}


H1_JS = """const h = document.querySelector('h1'); return h ? h.innerText : null;"""
"""The text of the page's first h1 as the browser lays it out (null before there is one): one script,
as :func:`settled` reads the page."""


def h1(browser, text: str, settle: bool = True, poll: float = 0.5) -> None:
    """Wait until the page's h1 shows ``text`` (looking every ``poll`` seconds), then (``settle``) until
    the app is idle (a test that next waits for its charts settles once, after them)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 60, poll_frequency=poll).until(lambda d: text in (d.execute_script(H1_JS) or ""),
                                                          f"the page's h1 never showed {text!r}")
    if settle:
        settled(browser)


def history(browser) -> int:
    return browser.execute_script("return history.length")


def slider_value(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stSlider"] input'
                                ).get_attribute("value")


def wait_for_button(browser, text: str):
    """The main pane's button that shows ``text``, once there and the page settled."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def found(driver):
        return next((b for b in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] button')
                     if text in b.text), None)

    WebDriverWait(browser, 60).until(found)
    settled(browser)
    return found(browser)


FIRST_SCREEN = """
const bottom = sel => Math.max(0, ...[...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().bottom));
return {chart: bottom('[data-testid="stVegaLiteChart"]'), verdict: bottom('.tour-verdict'),
        charts: document.querySelectorAll('[data-testid="stVegaLiteChart"] canvas, '
                                          + '[data-testid="stVegaLiteChart"] svg.marks').length,
        height: window.innerHeight, step: (document.querySelector('.tour-head .n') || {}).textContent};
"""


def tour_step(browser, n: int, settle: bool = True, poll: float = 0.5) -> None:
    """Wait until the tour shows step ``n`` with its chart drawn (looking every ``poll`` seconds), then
    (``settle``) until the app is idle."""
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(driver) -> bool:
        seen = driver.execute_script(FIRST_SCREEN)  # once a poll
        return (seen["step"] or "").startswith(f"Step {n} of") and seen["charts"] >= 1

    WebDriverWait(browser, 60, poll_frequency=poll).until(shown)
    if settle:
        settled(browser)


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
  if (el instanceof SVGElement && el.ownerSVGElement) {  // a chart's text on a mark (a box's name): the mark's fill
    const x = r.x + r.width / 2, y = r.y + r.height / 2, inside = b => b.left <= x && x <= b.right && b.top <= y && y <= b.bottom;
    const mark = [...el.ownerSVGElement.querySelectorAll('path, rect')].reverse().find(e =>  // drawn before it, topmost
      (e.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) && inside(e.getBoundingClientRect())
      && ((f => f.length === 3 || (f.length === 4 && f[3] > 0.5))(rgba(getComputedStyle(e).fill)))
      && parseFloat(getComputedStyle(e).fillOpacity) * parseFloat(getComputedStyle(e).opacity) > 0.5);
    if (mark) bg = rgba(getComputedStyle(mark).fill).slice(0, 3);
  }
  // a chart's text (Vega draws SVG in the app): its fill, not its colour, and its fill's opacity
  const svg = el instanceof SVGElement, fg = rgba(svg ? getComputedStyle(el).fill : getComputedStyle(el).color);
  if (svg) opacity *= parseFloat(getComputedStyle(el).fillOpacity);
  out.push({text: el.textContent.trim().slice(0, 40), fg: fg.slice(0, 3), alpha: (fg[3] === undefined ? 1 : fg[3]) * opacity,
            bg: bg, size: parseFloat(getComputedStyle(el).fontSize), bold: parseInt(getComputedStyle(el).fontWeight) >= 700});
}
return out;
"""


def contrast_failures(browser) -> list:
    """Each text on the page below WCAG AA (4.5:1; 3:1 for large text), its colour blended with
    its background by its alpha and its opacity; a chart's axis and legend text among them."""
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


def _page_name(path: str) -> str:
    """The page a URL path names (the overview answers at "/", /overview and /home)."""
    path = path.strip("/")
    return "overview" if path in ("", "home") else path


def _same_page(a: str, b: str) -> bool:
    return _page_name(a) == _page_name(b)


def goto(browser, server: str, path: str, query: str = "", *, title: str | None = None) -> bool:
    """Open the page ``path`` ("" for the overview, at "/") with the URL query ``query`` and wait until
    its h1 shows ``title`` (the page's menu title by default). Returns True where it loaded the URL,
    False where the app changed the page.

    In the app where it can: the browser already shows another page of the app at ``server`` with
    exactly that query, and the sidebar menu's link to ``path`` carries exactly that query too; the link's
    click changes the page without loading Streamlit's frontend again (a full load runs all of it again:
    about twice the Chromium CPU). A script's click (the element's own ``click()``), as a phone's menu is
    collapsed. Otherwise (a first visit, another query, the page already shown, no such link) the URL is
    loaded. Not for what only a fresh load shows (a deep link, a shared URL, a cold start: load those)."""
    from urllib.parse import parse_qs, urlparse

    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from explorer.render import pages

    path = path.strip("/")
    if title is None:
        title = pages.BY_PATH[_page_name(path)].title
    wanted = parse_qs(query, keep_blank_values=True)
    link = None
    try:
        here = urlparse(browser.current_url)
        if (f"{here.scheme}://{here.netloc}" == server and not _same_page(here.path, path)
                and parse_qs(here.query, keep_blank_values=True) == wanted):
            link = next((a for a in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[href]')
                         if _same_page(urlparse(a.get_attribute("href")).path, path)
                         and parse_qs(urlparse(a.get_attribute("href")).query, keep_blank_values=True) == wanted),
                        None)
    except WebDriverException:  # the page redrew its menu meanwhile (a stale link): load
        link = None
    if link is not None:
        browser.execute_script("arguments[0].click()", link)
    else:
        browser.get(f"{server}/{path}" + (f"?{query}" if query else ""))

    def arrived(driver) -> bool:
        return _same_page(urlparse(driver.current_url).path, path) and title in (driver.execute_script(H1_JS) or "")

    WebDriverWait(browser, 60, poll_frequency=0.1).until(arrived, f"the page {path or 'overview'} ({title}) did not open")
    return link is None
