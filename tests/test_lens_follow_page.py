"""The Lens page follows a token (issue 53, item 3): a cell's top k, the commitment strip and the pinned
tokens (``pin=``), in AppTest (the page's logic); in Chromium (a click on the grid, the URL) it is
tests/test_browser.py's, on that module's server."""

from __future__ import annotations

import html
import json
import re

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




def test_pinned_token_texts_are_shown_escaped(synthetic_caches, monkeypatch):
    monkeypatch.setenv("TYING_WARM_AT_START", "0")
    at = open_page(synthetic_caches, monkeypatch, "lens", pair="synthetic", sample=0, pin="<b>x</b>,*y*")
    assert not at.exception
    raw = "\n".join(c.value for c in at.caption)
    # backslash escapes: a caption shows an HTML entity as typed (an apostrophe read "&#x27;")
    assert "\\<b\\>x\\</b\\>" in raw and "<b>" not in raw and "\\*y\\*" in raw
