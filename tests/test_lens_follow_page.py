"""The Lens page follows a token (issue 53, item 3): a cell's top k, the commitment strip and the pinned
tokens (``pin=``), in AppTest (the page's logic) and in Chromium (a click on the grid, the URL)."""

from __future__ import annotations

import html
import json
import re

import pytest

from tests import appbrowser as ab
from tests.apppage import open_page


def _texts(at) -> str:
    """The page's markdown and captions as read (escapes of token texts undone)."""
    return html.unescape(re.sub(r"\\(.)", r"\1", "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])))


def test_pins_from_the_url_are_read_from_the_stored_top_k_with_the_gaps_stated(synthetic_caches, monkeypatch):
    """pin=␣f,x on a stored sample: "␣f" (in every cell's stored top 3) drawn, "x" (in none) stated,
    never drawn; the followed cell's top k listed; the commitment strip drawn for both models."""
    monkeypatch.setenv("TYING_WARM_AT_START", "0")
    at = open_page(synthetic_caches, monkeypatch, "lens", pair="synthetic", sample=0, pin="␣f,x")
    assert not at.exception, [e.value for e in at.exception]
    text = _texts(at)
    assert "From the stored top 10 of each cell" in text
    assert '"x": outside the stored top 10 at every hidden state of this position: nothing to draw.' in text
    assert "**Top 3 of the tied model at hidden state" in text and "(position 5;" in text
    assert at.text_input(key="w_pin").value == "␣f,x"
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    assert titles.count("“␣f”") == 1 and "“x”" not in titles  # one pinned chart: "␣f"
    # following another position writes it to the URL; pins typed in the box go there too
    at.selectbox(key="w_pos").set_value(2).run()
    assert not at.exception and at.query_params["pos"] in ("2", ["2"])
    assert "(position 2;" in _texts(at)
    at.text_input(key="w_pin").input("(,␣return").run()
    assert not at.exception and at.query_params["pin"] in ("(,␣return", ["(,␣return"])


def test_without_pins_the_page_says_how_to_pin(synthetic_caches, monkeypatch):
    monkeypatch.setenv("TYING_WARM_AT_START", "0")
    at = open_page(synthetic_caches, monkeypatch, "lens", pair="synthetic")
    assert not at.exception
    assert "`pin=` in the page's address keeps them" in _texts(at)
    assert "Commitment" in _texts(at)




@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not (ab.CHROMIUM and ab.DRIVER), reason="Debian's chromium and chromium-driver are needed")
def test_pin_in_the_url_and_a_click_on_the_grid_in_chromium(server, browser):
    """pin= draws the pinned chart (one more chart than without); a click on a grid cell follows it:
    pos= and layer= in the URL, its top k under the grid."""
    from urllib.parse import parse_qs, quote, urlparse

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    def charts():
        return browser.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')

    def query():
        return parse_qs(urlparse(browser.current_url).query)

    browser.get(f"{server}/lens?pair=synthetic&sample=0")
    ab.h1(browser, "Lens")
    ab.settled(browser)
    plain = len(charts())
    browser.get(f"{server}/lens?pair=synthetic&sample=0&pin={quote('␣f,x')}")
    ab.h1(browser, "Lens")
    ab.charts_drawn(browser, plain + 1)
    ab.settled(browser)
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


def test_pinned_token_texts_are_shown_escaped(synthetic_caches, monkeypatch):
    monkeypatch.setenv("TYING_WARM_AT_START", "0")
    at = open_page(synthetic_caches, monkeypatch, "lens", pair="synthetic", sample=0, pin="<b>x</b>,*y*")
    assert not at.exception
    raw = "\n".join(c.value for c in at.caption)
    # backslash escapes: a caption shows an HTML entity as typed (an apostrophe read "&#x27;")
    assert "\\<b\\>x\\</b\\>" in raw and "<b>" not in raw and "\\*y\\*" in raw
