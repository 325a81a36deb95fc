"""The tour and presentation mode in a real browser (tests/appbrowser.py): slides on three screens and
a phone, the keys a clicker sends, the presenter's notes, headline numbers, tables and widgets grown
for a projector, contrast in the dark and the light theme.

Needs Debian's chromium and chromium-driver (CI installs them); skipped where they are absent.
"""

import pytest

from explorer.render import qr, tour
from tests import appbrowser as ab
from tests import slides
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not (ab.CHROMIUM and ab.DRIVER), reason="Debian's chromium and chromium-driver are needed")]


BADGE_BOTTOMS = """
return [...document.querySelectorAll('[data-testid="stMain"] span')]
  .filter(e => e.getClientRects().length && /(holds|does not hold)$/.test(e.innerText.trim()))
  .map(e => e.getBoundingClientRect().bottom);
"""
"""The bottom of each verdict's badge on the page (a span whose shown text ends "holds" or "does not
hold"), in the page's order: one script, not a WebDriver call for each span's text."""


def test_the_overview_first_screen_holds_a_verdict_and_presentation_enlarges_its_numbers(server, browser):
    """The overview at 1440x900, then in presentation mode at 1920x1080: each time a verdict lies
    inside the first screen; at 1440x900 every text of the page and its sidebar reads at WCAG AA's
    contrast in the light theme (the dark one: the dark-theme test); presentation mode draws the headline numbers at 48 px or more (1.4x the
    screen's), and a reload keeps it (it lives in the URL). Presentation mode is turned on in the
    page: the sidebar's toggle writes presentation=on into the URL, and the reload opens that link
    afresh and draws the same (the numbers at the same size, the verdict inside the first screen).
    A link's other spellings draw what "on" draws (tests/test_app.py, every spelling)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def metric_text_px() -> float:
        # the size the digits are drawn at: the innermost element holding the number's text
        el = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMetricValue"]')
        inner = browser.execute_script(
            "let e = arguments[0]; while (e.firstElementChild) { e = e.firstElementChild; } return e;", el)
        return float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", inner))

    def first_screen(size) -> None:  # a verdict inside the first screen
        WebDriverWait(browser, 60).until(EC.presence_of_element_located(
            (By.CSS_SELECTOR, '[data-testid="stMetricValue"]')))
        height = browser.execute_script("return window.innerHeight")
        badges = browser.execute_script(BADGE_BOTTOMS)
        assert badges and 0 < badges[0] <= height, size

    try:
        browser.set_window_size(1440, 900)
        browser.get(f"{server}/?pair=synthetic")
        ab.h1(browser, "Overview")
        first_screen((1440, 900))
        # the light theme's contrast, every text of the page and its sidebar
        assert not ab.contrast_failures(browser), ab.contrast_failures(browser)
        normal = metric_text_px()
        browser.set_window_size(1920, 1080)
        toggle = next(e for e in browser.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] label')
                      if e.text.strip() == "Presentation mode")
        toggle.click()
        wait_until(lambda: ab.query(browser).get("presentation") == "on", 30, what="presentation=on in the URL")
        ab.settled(browser)
        first_screen((1920, 1080))
        big = metric_text_px()
        assert big >= 1.4 * normal and big >= 48, (normal, big)
        browser.refresh()  # a reload keeps it: it lives in the URL
        ab.h1(browser, "Overview")
        first_screen(("reloaded", 1920, 1080))
        assert metric_text_px() == big
        assert ab.query(browser).get("presentation") == "on", browser.current_url
    finally:
        browser.set_window_size(1400, 1000)
    browser.get_log("browser")


PRESENTATION_VALUES = (None, "maybe", "on")
"""A link's presentation= of each kind: absent, junk, on (last: the Training dynamics page is
reached from it in the app). The other spellings of a boolean and the other junk set the same
toggle and note in-process (tests/test_app.py: every spelling, every junk value), so they draw
what these draw."""


def test_presentation_mode_on_the_neighbours_page(server, browser):
    """The Neighbours page for each kind of presentation= of a link, one visit each. Absent: interactive
    tables (a canvas), the screen's sizes. On (True, yes, on): static tables in large text, charts
    1.3x taller (the plot grows 1.5x, export.PRESENTATION_SIZE; the legend under it with its font
    only), the picked token's heading at 40 px or more, the search box's text 1.4x the screen's, the
    slider's value above its thumb, escaped cells shown as typed. Junk (maybe): no error, a
    note in the sidebar, the screen's sizes. Then, through the sidebar menu's link from the last
    (presentation=on), the Training dynamics page's tags at 18 px or more."""
    from selenium.webdriver.common.by import By

    def px(el) -> float:
        return float(browser.execute_script("return parseFloat(getComputedStyle(arguments[0]).fontSize)", el))

    seen = {}
    for value in PRESENTATION_VALUES:
        query = "" if value is None else f"&presentation={value}"
        browser.get(f"{server}/neighbours?pair=synthetic&token=300&k=5{query}")
        ab.h1(browser, "Neighbours", settle=False)
        charts = ab.charts_drawn(browser, 2)
        ab.settled(browser)  # once, with its charts drawn
        on = value == "on"
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'), value
        sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]').text
        assert ("ignored the link's presentation=" in sidebar) == (value is not None and not on), (value, sidebar)
        main = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"]')
        heading = main.find_element(By.CSS_SELECTOR, '[data-testid="stMarkdown"] h3')
        assert (px(heading) >= 40) == on, (value, px(heading))  # the picked token's heading grows with the page
        cells = main.find_elements(By.CSS_SELECTOR, '[data-testid="stTable"] td')
        thumb_value = main.find_element(By.CSS_SELECTOR, '[data-testid="stSliderThumbValue"]')
        thumb = browser.execute_script("return arguments[0].parentElement", thumb_value)
        handle = [e for e in thumb.find_elements(By.XPATH, "./div") if e != thumb_value][-1]
        seen[value] = {"table": px(cells[0]) if cells else 0.0, "chart": charts[0].size["height"],
                       "input": px(main.find_element(By.CSS_SELECTOR, '[data-testid="stTextInputField"]')),
                       "gap": handle.rect["y"] - (thumb_value.rect["y"] + thumb_value.rect["height"])}
        if on:
            assert not main.find_elements(By.CSS_SELECTOR, "del, s")  # escaped cells: "T~O" is never struck through
            assert not main.find_elements(By.TAG_NAME, "script")  # a token "<script>..." is text
            shown = " ".join(c.text for c in cells)
            assert "&#x27;" not in shown and "&amp;" not in shown and "\\" not in shown  # as typed, not as escapes
        browser.get_log("browser")
    screen = seen[None]
    assert screen["table"] == 0.0  # on screen: interactive tables (a canvas)
    for value, m in seen.items():
        if value == "on":
            assert m["table"] >= 20, (value, m)  # a projector: static tables, large text
            assert m["chart"] >= 1.3 * screen["chart"], (value, screen, m)
            assert m["input"] >= 1.4 * screen["input"], (value, screen, m)  # the search box's text
            assert m["gap"] >= 0, (value, m)  # the value above the thumb, not over it
        else:
            assert m["table"] == 0.0 and m["input"] == screen["input"], (value, screen, m)
    ab.menu_link(browser, "dynamics").click()  # from the last, presentation=on: the menu's link carries it
    ab.h1(browser, "Training dynamics")
    assert ab.query(browser).get("presentation") == "on" and ab.query(browser).get("pair") == "synthetic"
    tag = browser.find_element(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stMultiSelect"] [data-tag]')
    assert px(tag) >= 18
    browser.get_log("browser")


def arrived(browser, n: int, timeout: float = 60) -> None:
    """Wait until the tour, moved to step ``n`` in the app, shows it (ab.tour_step: its label and a
    chart drawn) and its run is over (slides.STILL_JS: till then the last step's slide stays).
    Polled every 0.1 s."""
    ab.tour_step(browser, n, settle=False, poll=0.1)
    wait_until(lambda: browser.execute_script(slides.STILL_JS), timeout, what=f"step {n}'s run over")


def test_tour_deep_link_then_the_keys_a_clicker_sends(server, browser):
    """A cold deep link to step 3, whose every text (the neighbour lists' T, I and O chips among them)
    reads at WCAG AA's contrast in the light theme (the dark one: the test below); the right arrow
    goes to step 4 and PageDown to 5, PageUp back to 4, Space and Shift+Space a step, End to the
    last and Home to the first; the URL follows each."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{server}/tour?pair=synthetic&step=3")
    ab.tour_step(browser, 3)
    assert not ab.contrast_failures(browser), ab.contrast_failures(browser)
    for key, n in ((Keys.ARROW_RIGHT, 4), (Keys.PAGE_DOWN, 5), (Keys.PAGE_UP, 4), (Keys.ARROW_LEFT, 3),
                   (Keys.SPACE, 4), ((Keys.SHIFT, Keys.SPACE), 3), (Keys.END, len(tour.STEPS)),
                   (Keys.HOME, 1)):
        chain = ActionChains(browser)
        if isinstance(key, tuple):
            chain.key_down(key[0]).send_keys(key[1]).key_up(key[0])
        else:
            chain.send_keys(key)
        chain.perform()
        arrived(browser, n)  # its run over: the next key reaches this step's buttons
        assert ab.query(browser).get("step") == (str(n) if n > 1 else None)  # step 1, the default, is not written
    browser.get_log("browser")


def test_the_presenter_window_and_the_audiences_follow_each_other(server, browser):
    """The audience's window (a slide) shows no notes; N opens the presenter view in a window of its
    own at the same step, with this step's notes and a running clock. Next in the presenter's window
    moves the audience's; End in the audience's moves the presenter's; the audience's never shows
    notes on the way."""
    import re

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def at(handle, n: int) -> None:
        browser.switch_to.window(handle)
        ab.tour_step(browser, n, settle=False)
        if handle == audience:
            assert not browser.find_elements(By.CSS_SELECTOR, ".presenter"), n
            assert tour.step_at(n).notes.say not in browser.find_element(By.TAG_NAME, "body").text

    browser.get(f"{server}/tour?pair=synthetic&step=2&presentation=on")
    ab.tour_step(browser, 2)
    audience = browser.current_window_handle
    at(audience, 2)
    ActionChains(browser).send_keys("n").perform()
    wait_until(lambda: len(browser.window_handles) == 2, 10, what="the presenter's window")
    presenter = next(h for h in browser.window_handles if h != audience)
    try:
        at(presenter, 2)
        assert ab.query(browser).get("view") == "presenter" and "presentation" not in ab.query(browser)
        wait_until(lambda: browser.find_elements(By.ID, "tour-clock"), 30, what="the presenter view")
        wait_until(lambda: re.fullmatch(r"\d\d:\d\d · \d+:\d\d in", browser.find_element(By.ID, "tour-clock").text),
                   10, what="the clock")
        assert tour.step_at(2).notes.say in browser.find_element(By.CSS_SELECTOR, ".presenter").text
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
        at(presenter, 3)
        at(audience, 3)  # followed
        ActionChains(browser).send_keys(Keys.END).perform()
        at(audience, len(tour.STEPS))
        at(presenter, len(tour.STEPS))  # followed
        assert ab.query(browser).get("view") == "presenter"
    finally:
        browser.switch_to.window(presenter)
        browser.close()
        browser.switch_to.window(audience)
    browser.get_log("browser")


def qr_read(browser) -> list[str]:
    """What a QR decoder reads off the window's screenshot: the code as the browser drew it."""
    import io

    import numpy as np
    import zxingcpp
    from PIL import Image

    image = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("L")
    return [r.text for r in zxingcpp.read_barcodes(np.asarray(image))]


def test_every_tour_step_is_a_slide_that_fits_three_screens(server, browser):
    """In presentation mode each step is a full-screen slide, the sidebar collapsed. At 1920x1080
    its text is at 28 px; at 1280x720 the same slide is zoomed to the screen; a 4:3 screen
    (1024x768) gets a slide laid out for its shape, every text 18 px or more (the claim 24, the
    chart's 14). The first and last steps' QR codes read back from the screen. On each,
    the claim, the chart, the verdict and Next lie inside the first screen, and the chart fills its
    column (Streamlit measures a zoomed column: the chart carries its own width). A phone gets
    no slide: the page's own layout, nothing wider than its screen.

    One window walks the tour as a presenter does (slides.walk): opened at step 1, forward with the
    slide's Next (a button on a zoomed slide) at the wide screens, each step at both, then at the
    last step a 4:3 screen (the slide laid out anew for it) and back with Previous, the URL keeping
    presentation mode and the step; every step measured at every screen."""
    from selenium.webdriver.common.by import By

    last = len(tour.STEPS)
    order = slides.walk(last)
    assert sorted(order) == sorted((n, size) for n in range(1, last + 1) for size in slides.SIZES)
    try:
        slides.inner_size(browser, *order[0][1])
        browser.get(f"{server}/tour?pair=synthetic&presentation=on&step=1")
        ab.tour_step(browser, 1, settle=False)  # slides.steady waits for the slide to hold still
        at = 1
        for n, size in order:
            if n != at:  # the next step or the one before, in the app: the slide's own button
                assert abs(n - at) == 1, (at, n)
                button = "tour_next" if n > at else "tour_prev"
                browser.find_element(By.CSS_SELECTOR, f".st-key-{button} button").click()
                arrived(browser, n)
                # presentation mode stays in the URL; step 1, the default, is not written
                assert ab.query(browser) == {"pair": "synthetic", "presentation": "on"} | ({"step": str(n)} if n > 1 else {}), n
                at = n
            slides.inner_size(browser, *size)
            m = slides.steady(browser)
            assert m["step"].startswith(f"Step {n} of"), (n, size, m)
            slides.check(m, size, claim=n > 1, verdict=n > 1,  # step 1, the set-up: no claim, no verdict
                         panels=tour.step_at(n).figure == "projection-umap")
            assert m["sidebar"] <= 0, (n, size, m)  # collapsed
            if n in (1, last) and size == slides.SIZES[0]:  # the room's phones read its code
                assert qr_read(browser) == [qr.app_step_url(ab.PUBLIC_URL, n, {"pair": ["synthetic"]})]
        slides.inner_size(browser, *slides.PHONE)  # a phone that opened the QR code of a step
        browser.get(f"{server}/tour?pair=synthetic&presentation=on&step=3")
        ab.tour_step(browser, 3)
        slides.check_phone(slides.steady(browser))
    finally:
        browser.set_window_size(1400, 1000)
    logged = browser.get_log("browser")
    assert not ab.vega_warnings(logged), ab.vega_warnings(logged)  # on no step


def test_text_reads_at_4_5_to_1_in_the_dark_theme_too(server, browser):
    """With the system's dark preference (the app follows it), every text of the overview, its
    sidebar, and a tour step (the neighbour lists' T, I and O chips among them) reads at WCAG AA's
    contrast. The light theme's are measured on the same pages by the overview's first-screen test
    and the tour's deep-link test."""
    try:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        for url, n in ((f"{server}/?pair=synthetic", None), (f"{server}/tour?pair=synthetic&step=3", 3)):
            browser.get(url)
            if n is None:
                ab.h1(browser, "Overview")
            else:
                ab.tour_step(browser, n)
            assert not ab.contrast_failures(browser), (url, ab.contrast_failures(browser))
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    browser.get_log("browser")
