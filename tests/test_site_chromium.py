"""The static site in Chromium, from file:// (Debian's chromium and chromium-driver, as
tests/appbrowser.py starts it): every chart of a page draws with no request off the machine, the
tour's keys, slides on three screens, print, the presenter's notes, the token search. The site is
the shipped caches' (conftest's shipped_site, built once per run, the demo's text page in it).
"""

from __future__ import annotations

import io
import json
import re

import pytest

from explorer.render import tour
from precompute import site
from tests import slides
from tests.appbrowser import CHROMIUM, DRIVER, chromium, requested_urls
from tests.waiting import wait_until

needs_chromium = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Debian's chromium and chromium-driver are "
                                                                      "needed")


@pytest.fixture(scope="module")
def browser():
    driver = chromium(requests=True)
    yield driver
    driver.quit()


def charts_drawn(driver, timeout: float = 60) -> int:
    """Wait until every chart of the page drew (a canvas inside each container); their number."""
    def done():
        state = driver.execute_script(
            "var c = document.querySelectorAll('[data-chart]');"
            "var d = document.querySelectorAll('[data-chart][data-drawn] canvas');"
            "var e = document.querySelectorAll('[data-chart].error');"
            "return [c.length, d.length, e.length, window.SITE_CHARTS_DONE === true];")
        return state if state[3] else None

    total, drawn, errors, _ = wait_until(done, timeout, 0.1, "every chart of the page")
    assert errors == 0 and drawn == total, (total, drawn, errors)
    return total


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("page, charts", [("index.html", 0), ("demo/index.html", None), ("paper/index.html", None),
                                          ("sweep/index.html", None), ("mechanism/index.html", None)]
                         + [(f"tour/step-{tour.BY_SLUG[slug].number}.html", 1)
                            for slug in ("setup", "alignment", "map", "why", "published", "sweep-bias")])
def test_pages_draw_every_chart_with_no_request_off_file(shipped, shipped_site, browser, page, charts):
    """Every chart of a page draws from file:// (a cache's page: each figure of the registry the
    cache has the data for, tables aside)."""
    if charts is None:
        from explorer.render import figures, read

        ref = read.CacheRef.of(shipped / f"{page.split('/')[0]}.duckdb")
        charts = sum(not f.is_table for f in figures.available(ref))
    requested_urls(browser)  # count from here
    browser.get((shipped_site / page).as_uri())
    assert charts_drawn(browser) == charts
    urls = requested_urls(browser)
    assert urls and all(u.startswith(("file://", "data:", "blob:")) for u in urls), urls
    logged = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not logged, logged  # no error, and no Vega warning (a conflicting legend, an infinite extent)


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_arrow_keys_and_page_keys_move_through_the_tour(shipped_site, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    def at(n: int) -> bool:
        return browser.current_url.endswith(f"/tour/step-{n}.html")

    browser.get((shipped_site / "tour" / "step-2.html").as_uri())
    for key, n in ((Keys.ARROW_RIGHT, 3), (Keys.ARROW_LEFT, 2), (Keys.PAGE_DOWN, 3), (Keys.PAGE_UP, 2)):
        wait_until(lambda: browser.execute_script("return document.readyState") == "complete", 10)
        ActionChains(browser).send_keys(key).perform()
        wait_until(lambda n=n: at(n), 10, what=f"step {n} after {key!r}")
    browser.get((shipped_site / "tour" / "step-1.html").as_uri())
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()  # nothing before the first step
    assert at(1)
    last = len(tour.STEPS)
    browser.get((shipped_site / "tour" / f"step-{last}.html").as_uri())
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()  # nothing after the last
    assert at(last)
    # Space and Shift+Space a step, Home and End the first and the last step
    browser.get((shipped_site / "tour" / "step-4.html").as_uri())
    for keys, n in (((Keys.SPACE,), 5), ((Keys.SHIFT, Keys.SPACE), 4), ((Keys.END,), last), ((Keys.HOME,), 1)):
        wait_until(lambda: browser.execute_script("return document.readyState") == "complete", 10)
        chain = ActionChains(browser)
        if len(keys) == 2:
            chain = chain.key_down(keys[0]).send_keys(keys[1]).key_up(keys[0])
        else:
            chain = chain.send_keys(keys[0])
        chain.perform()
        wait_until(lambda n=n: at(n), 10, what=f"step {n} after {keys!r}")


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_every_tour_step_is_a_slide_that_fits_three_screens(shipped_site, browser):
    """On a screen each step of the site's tour is a slide, as in the app's presentation mode: at
    1920x1080 its text at 28 px, at 1280x720 zoomed to the screen, at 1024x768 laid out for 4:3
    (every text 18 px or more, the claim 24); claim, chart, verdict and Next inside the first
    screen, the chart filling its column. A phone gets no slide."""
    try:
        for n in range(1, len(tour.STEPS) + 1):
            slides.inner_size(browser, *slides.SIZES[0])
            browser.get((shipped_site / "tour" / f"step-{n}.html").as_uri())
            charts_drawn(browser)
            for size in slides.SIZES:
                slides.inner_size(browser, *size)
                slides.check(slides.steady(browser), size, claim=n > 1, verdict=n > 1,
                             panels=tour.step_at(n).figure == "projection-umap")
        # a zoom a hair short of 1, left by a frame of a layout in motion (a sidebar closing in the app), is not
        # kept at 1920x1080: the slide is drawn at 1 again
        slides.inner_size(browser, *slides.SIZES[0])
        slides.check(slides.steady(browser), slides.SIZES[0], claim=True, verdict=True)
        browser.execute_script("document.querySelector('.tour').style.setProperty('--slide-zoom', '0.999');"
                               "window.slideFit();")
        slides.check(slides.steady(browser), slides.SIZES[0], claim=True, verdict=True)
        slides.inner_size(browser, *slides.PHONE)  # a phone that opened the QR code of a step
        browser.get((shipped_site / "tour" / "step-3.html").as_uri())
        charts_drawn(browser)
        slides.check_phone(slides.steady(browser))
    finally:
        browser.set_window_size(1400, 1000)


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_a_printed_step_is_one_landscape_page_with_its_notes(shipped_site, browser):
    """The site's print stylesheet: each tour step prints on one A4 landscape page, its speaker
    notes under the chart, no pager or keys (Chromium's own print to PDF)."""
    import base64
    import unicodedata

    import pypdf
    from selenium.webdriver.common.print_page_options import PrintOptions

    options = PrintOptions()
    options.orientation, options.page_width, options.page_height = "landscape", 21.0, 29.7
    options.background = True
    pages = {}
    for step in tour.STEPS:
        browser.get((shipped_site / "tour" / f"step-{step.number}.html").as_uri())
        charts_drawn(browser)
        pdf = pypdf.PdfReader(io.BytesIO(base64.b64decode(browser.print_page(options))))
        pages[step.number] = len(pdf.pages)
        text = " ".join(unicodedata.normalize("NFKC", pdf.pages[0].extract_text()).split())  # "ﬀ" is "ff"
        assert step.notes.caveat[:40] in text and "Keys:" not in text, step.slug
        assert float(pdf.pages[0].mediabox.width) > float(pdf.pages[0].mediabox.height)
    assert set(pages.values()) == {1}, pages


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_the_presenter_window_and_the_audiences_follow_each_other(shipped_site, browser):
    """The audience's page (a slide, file://) never shows the notes; N opens the presenter view
    (?view=presenter) in a window of its own at the same step: the notes, the next step, a running
    clock. An arrow in the presenter's window moves the audience's (no server: a BroadcastChannel or
    localStorage between the two pages), End in the audience's moves the presenter's, and the
    presenter's window keeps its view from page to page."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def at(handle, n: int, presenter: bool) -> None:
        browser.switch_to.window(handle)
        want = f"/tour/step-{n}.html" + ("?view=presenter" if presenter else "")
        wait_until(lambda: browser.current_url.endswith(want), 10, what=want)
        wait_until(lambda: browser.execute_script("return document.readyState") == "complete", 10)
        panel = browser.find_element(By.CSS_SELECTOR, ".presenter")
        assert panel.is_displayed() == presenter, (n, presenter)

    browser.get((shipped_site / "tour" / "step-2.html").as_uri())
    audience = browser.current_window_handle
    at(audience, 2, False)
    ActionChains(browser).send_keys("n").perform()
    wait_until(lambda: len(browser.window_handles) == 2, 10, what="the presenter's window")
    presenter = next(h for h in browser.window_handles if h != audience)
    try:
        at(presenter, 2, True)
        panel = browser.find_element(By.CSS_SELECTOR, ".presenter")
        assert tour.step_at(2).notes.ask in panel.text and f"Next: step 3, {tour.step_at(3).title}" in panel.text
        wait_until(lambda: re.fullmatch(r"\d\d:\d\d · \d+:\d\d in", panel.find_element(By.ID, "tour-clock").text),
                   10, what="the clock")
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
        at(presenter, 3, True)
        at(audience, 3, False)  # followed
        ActionChains(browser).send_keys(Keys.END).perform()
        at(audience, len(tour.STEPS), False)
        at(presenter, len(tour.STEPS), True)  # followed
        assert browser.find_element(By.CSS_SELECTOR, ".pager a.button").get_attribute("href").endswith(
            f"step-{len(tour.STEPS) - 1}.html?view=presenter")
    finally:
        browser.switch_to.window(presenter)
        browser.close()
        browser.switch_to.window(audience)


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_token_search_shows_neighbours_in_t_i_and_o(shipped, shipped_site, browser):
    from selenium.webdriver.common.by import By

    requested_urls(browser)
    browser.get((shipped_site / "demo" / "tokens.html").as_uri())
    wait_until(lambda: browser.execute_script("return window.SITE_TOKENS_READY === true"), 20, what="the search")
    browser.find_element(By.ID, "q").send_keys("the")
    hits = wait_until(lambda: browser.find_elements(By.CSS_SELECTOR, "#hits button"), 10, what="matching tokens")
    assert all("the" in h.text.lower() for h in hits)
    hits[0].click()
    picked = hits[0].get_attribute("data-token")
    wait_until(lambda: browser.current_url.endswith(f"#token={picked}"), 10, what="the picked token in the URL")
    for m in ("T", "I", "O"):
        items = browser.find_elements(By.CSS_SELECTOR, f"#picked .nb.{m} li")
        assert len(items) == site.SEARCH_K, m
    shown = browser.find_element(By.CSS_SELECTOR, "#picked .picked code").text
    assert shown == hits[0].text
    assert re.search(r"overlap@10 T~O \d\.\d\d", browser.find_element(By.CSS_SELECTOR, "#picked .overlaps").text)
    # the lists are the cache's
    from explorer import data

    nb = data.neighbours_of(data.CacheRef.of(shipped / "demo.duckdb"), int(picked), site.SEARCH_K)
    for m in ("T", "I", "O"):
        shown = [b.text for b in browser.find_elements(By.CSS_SELECTOR, f"#picked .nb.{m} li button")]
        assert shown == nb[nb["matrix"] == m].sort_values("rank")["shown"].tolist(), m
    urls = requested_urls(browser)
    assert all(u.startswith(("file://", "data:", "blob:")) for u in urls), urls


PHONE_JS = """
const w = document.documentElement.clientWidth;
const off = e => { const r = e.getBoundingClientRect(); return r.width > 0 && (r.left < -1 || r.right > w + 1); };
return {scroll: document.documentElement.scrollWidth, width: w,
        cells: [...document.querySelectorAll('.table-wrap td, table.kl td')].filter(off).map(e => e.textContent).slice(0, 5)};
"""
"""A page at a phone's width: its scroll width, its width, and the table cells outside the screen."""


def phone(driver, dark: bool = False) -> None:
    """The page as a 390x844 phone shows it (Chrome's mobile emulation), with the dark preference or not."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": slides.PHONE[0], "height": slides.PHONE[1], "deviceScaleFactor": 1, "mobile": True})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})


def unphone(driver) -> None:
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_a_phone_in_a_dark_room_reads_every_page(shipped_site, browser):
    """Every page of the site (and the text page, with a text) on a 390x844 phone that prefers dark:
    the page never scrolls sideways, every table cell lies on the screen (a wide table is read as
    cards), and every chart is drawn dark, each of its texts (axis labels, legends, titles, marks'
    text) at 4.5:1 or more against what lies under it."""
    from tests import chart_ink

    text = "demo/text.html"  # with a text, below
    pages = [(shipped_site / p).as_uri() for p in json.loads((shipped_site / site.MANIFEST).read_text())["pages"]
             if p != text]
    pages.append((shipped_site / text).as_uri() + "#text=import%20numpy%20as%20np%0Afor%20x")
    try:
        phone(browser, dark=True)
        for url in pages:
            browser.get(url)
            if browser.execute_script("return document.querySelector('[data-chart]') !== null"):
                charts_drawn(browser)  # (the token search and the text page have none, nor site.js)
            if url.endswith("#text=import%20numpy%20as%20np%0Afor%20x"):
                wait_until(lambda: browser.execute_script("return document.body.hasAttribute('data-computed')"), 30,
                           what="the text page's tables")
            m = browser.execute_script(PHONE_JS)
            assert m["scroll"] <= m["width"] == slides.PHONE[0] and not m["cells"], (url, m)
            for c in chart_ink.charts(browser):
                assert not c.get("missing") and c["theme"] == "dark", (url, c)
                assert chart_ink.is_dark(c["background"]) and chart_ink.is_dark(c["pixel"]), (url, c["chart"], c)
                low = [t for t in c["texts"] if t[2] < 4.5]
                assert c["texts"] and not low, (url, c["chart"], low)
    finally:
        unphone(browser)


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_a_phone_shows_one_map_at_a_time_and_t_i_o_side_by_side(shipped_site, browser):
    """On a phone the map step draws one of its three panels at the screen's width under a T / I / O
    switch (T first), and a press draws the panel it names; the token search shows T's, I's and O's
    lists side by side, rank by rank on one line. Back on a wide screen the map has its three panels,
    and a change of the colour preference draws the charts again in its colours."""
    from selenium.webdriver.common.by import By

    from tests import chart_ink

    def title() -> list:
        return [t[0] for c in chart_ink.charts(browser) for t in c["texts"] if t[1] == "title-text"]

    try:
        phone(browser)
        browser.get((shipped_site / "tour" / f"step-{tour.BY_SLUG['map'].number}.html").as_uri())
        charts_drawn(browser)
        buttons = browser.find_elements(By.CSS_SELECTOR, ".panel-switch button")
        assert [b.text for b in buttons] == ["T", "I", "O"]
        assert [b.get_attribute("aria-pressed") for b in buttons] == ["true", "false", "false"]
        assert title() == ["T (tied)"]
        canvas = browser.find_element(By.CSS_SELECTOR, ".tour-chart canvas")
        assert canvas.rect["x"] >= 0 and canvas.rect["x"] + canvas.rect["width"] <= slides.PHONE[0]
        assert canvas.rect["width"] >= 0.75 * slides.PHONE[0], canvas.rect  # the panel at the screen's width
        buttons[2].click()
        wait_until(lambda: title() == ["O (untied output)"], 20, what="the O panel")
        assert [b.get_attribute("aria-pressed") for b in buttons] == ["false", "false", "true"]
        browser.get((shipped_site / "demo" / "tokens.html").as_uri())
        wait_until(lambda: browser.execute_script("return window.SITE_TOKENS_READY === true"), 20, what="the search")
        heads = [browser.find_element(By.CSS_SELECTOR, f"#picked .nb.{m} h3").rect for m in "TIO"]
        firsts = [browser.find_element(By.CSS_SELECTOR, f"#picked .nb.{m} li").rect for m in "TIO"]
        assert heads[0]["x"] < heads[1]["x"] < heads[2]["x"] and heads[2]["x"] + heads[2]["width"] <= slides.PHONE[0]
        assert len({round(r["y"]) for r in heads}) == 1 and len({round(r["y"]) for r in firsts}) == 1, (heads, firsts)
        # a wide screen: the three panels, no switch; the dark preference, then the light, redraw them
        unphone(browser)
        browser.set_window_size(1400, 1000)
        browser.get((shipped_site / "tour" / f"step-{tour.BY_SLUG['map'].number}.html").as_uri())
        charts_drawn(browser)
        assert title() == ["I (untied input)", "T (tied)", "O (untied output)"]
        assert not browser.find_elements(By.CSS_SELECTOR, ".panel-switch")
        for scheme in ("dark", "light"):
            browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                    {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            wait_until(lambda s=scheme: [c["theme"] for c in chart_ink.charts(browser)] == [s], 20, what=scheme)
            assert chart_ink.is_dark(chart_ink.charts(browser)[0]["pixel"]) == (scheme == "dark")
    finally:
        unphone(browser)


@pytest.mark.slow
@pytest.mark.browser
@needs_chromium
def test_the_map_takes_colour_and_select_from_the_address_and_writes_them_back(shipped_site, browser):
    """demo's map opened with #colour=log_count&select=... draws the log count (its legend titled
    with the counted text) and those tokens at full strength, the rest faded; a search selects its
    matches and a new colouring redraws, both written back to the address; nothing off file://."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    requested_urls(browser)
    browser.get_log("browser")  # what earlier tests of this browser logged (a pixel read's readback note) is theirs
    browser.get((shipped_site / "demo" / "index.html").as_uri() + "?colour=norm#colour=log_count&select=5,6,7")
    charts_drawn(browser)
    key = "demo/projection-umap"

    def drawn() -> dict:
        return browser.execute_script(
            "var k = arguments[0], s = window.SITE_CHARTS[k], e = document.querySelector(\"[data-chart='\" + k + \"']\");"
            "var c = s.hconcat[2].layer[0].encoding.color.condition;"
            "var rows = e.vegaView.data('map-points') || [];"
            "return {title: (c.legend || {}).title, field: c.field, shades: rows.map(function (r) { return r.shade; }),"
            " chosen: rows.filter(function (r) { return r.shade > 0.5; }).map(function (r) { return r.token; }),"
            " status: document.querySelector('.map-status').textContent, hash: location.hash};", key)

    state = drawn()
    assert state["field"] == "colour" and " ".join(state["title"]).startswith("count in corpus.txt")
    assert set(state["chosen"]) <= {5, 6, 7} and state["chosen"] and "3 selected" in state["status"]
    assert len(set(state["shades"])) == 2 and len(state["shades"]) > 1000  # faded, not hidden: every point drawn
    search = browser.find_element(By.CSS_SELECTOR, ".map-controls input")
    search.send_keys("the" + Keys.ENTER)
    Select(browser.find_element(By.CSS_SELECTOR, ".map-controls select")).select_by_value("position")
    wait_until(lambda: "colour=position" in drawn()["hash"] and "select=" in drawn()["hash"], 20, what="the address")
    charts_drawn(browser)
    state = drawn()
    assert "position between I and O" in " ".join(state["title"]) and "5,6,7" not in state["hash"]
    assert state["chosen"] and "selected" in state["status"]
    urls = requested_urls(browser)
    assert urls and all(u.startswith(("file://", "data:", "blob:")) for u in urls), urls
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
