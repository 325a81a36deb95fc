"""The static site's text page (issue 31): the toy lab's twins run in the browser. twins.js's
tokenizer and forward pass against Python's known answers (in Node), and the page itself in
Chromium from file:// with nothing requested off the disk, its rows equal to `precompute
trajectory`'s, the text from the URL fragment shown as text, never as HTML."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
import pytest

from explorer.render import tour
from precompute import text_page
from precompute.cli import main
from tests.conftest import demo_share

ROOT = Path(__file__).resolve().parent.parent
TWINS_JS = ROOT / "precompute" / "templates" / "twins.js"
DEMO = ROOT / "cache" / "demo.duckdb"
NODE = shutil.which("node")
TEXTS = ["Les élèves lisent: déjà vu? 🙂 def f(x): return x",
         "import os\nfor name in sorted(os.listdir('.')):\n    print(name)  # 日本語 ½"]
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js is needed to run twins.js outside a browser")


def _trajectory(cache: Path, text: str) -> pd.DataFrame:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["trajectory", str(cache), "--text", text, "--top-k", "10", "--max-tokens", "64"]) == 0
    return pd.DataFrame(json.loads(buf.getvalue())["rows"])


def assert_same_rows(python: pd.DataFrame, browser: pd.DataFrame) -> None:
    """The same predictions at every (model, lens, hidden state, position, rank), probabilities within 1e-4."""
    key = ["model", "lens", "layer", "position", "rank"]
    a, b = python.sort_values(key).reset_index(drop=True), browser.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) and (a[key].to_numpy() == b[key].to_numpy()).all()
    assert a["token"].tolist() == b["token"].tolist() and a["prediction"].tolist() == b["prediction"].tolist()
    np.testing.assert_allclose(a["prob"].to_numpy(), b["prob"].to_numpy(), atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def twins():
    if not DEMO.exists():
        pytest.skip("the shipped demo cache is absent")
    from explorer.render import read

    found = text_page.sources(read.CacheRef.of(DEMO))
    assert found is not None, "the shipped demo's twins and lenses should give a text page"
    return found


def _node(script: str, payload: dict) -> dict:
    run = subprocess.run([NODE, "-e", script], input=json.dumps(payload), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


NODE_TOKENIZE = f"""
const T = require({json.dumps(str(TWINS_JS))});
const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
const tok = new T.Tokenizer(p.spec);
console.log(JSON.stringify({{ids: p.texts.map(t => tok.encode(t)), decoded: p.ids.map(i => tok.decode(i))}}));
"""


@needs_node
def test_the_javascript_tokenizer_encodes_and_decodes_as_tokenizers_does(twins):
    from tokenizers import Tokenizer

    path = twins["tied"][0] / "tokenizer.json"
    ref = Tokenizer.from_file(str(path))
    texts = [*TEXTS, "", " ", "   leading and trailing   ", "tab\tand\r\nnewlines\n\n", "don't we'll I'd they're",
             "naïve café, Ærøskøbing, straße", "Ελληνικά и русский", "中文字符和日本語のテキスト", "한국어 텍스트",
             "emoji 🙂🙃👩‍💻 flags 🇫🇷", "combining é vs é", "math ∑∫√∞ ≠ ≤", "<|endoftext|>after the special",
             "a<|endoftext|>b", "numbers 3.14159 1,000,000 0x1F", "x = [i**2 for i in range(10)]  # squares",
             "$%&*@!?~^`|\\", "\u00a0nbsp\u2009thin", "ZWJ\u200dinside", "CamelCaseWords and snake_case_words"]
    ids = list(range(0, ref.get_vocab_size(), 37))
    got = _node(NODE_TOKENIZE, {"spec": text_page.tokenizer_spec(path), "texts": texts, "ids": ids})
    for text, js in zip(texts, got["ids"]):
        assert js == ref.encode(text).ids, text
    from transformers import AutoTokenizer  # decoded as `precompute trajectory` decodes (special tokens kept)

    hf = AutoTokenizer.from_pretrained(twins["tied"][0])
    assert got["decoded"] == [hf.decode([i]) for i in ids]


NODE_LONG_WORD = f"""
const T = require({json.dumps(str(TWINS_JS))});
const p = JSON.parse(require("fs").readFileSync(0, "utf8"));
const tok = new T.Tokenizer(p.spec);
const t0 = Date.now();
const ids = tok.encode(p.text, 65);
console.log(JSON.stringify({{ids: ids, ms: Date.now() - t0}}));
"""


@needs_node
def test_a_300000_letter_word_is_cut_before_it_is_tokenised(twins):
    """encode(text, limit) stops at ``limit`` ids and reads a word's first 2,048 bytes: the 300,000
    letters that once overflowed the stack (a spread of every id) cost what a short word does, and
    the ids it gives are the first ones the whole text gives."""
    import random

    from tokenizers import Tokenizer

    path = twins["tied"][0] / "tokenizer.json"
    rng = random.Random(0)
    word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(300_000))
    got = _node(NODE_LONG_WORD, {"spec": text_page.tokenizer_spec(path), "text": "say " + word + " end"})
    assert got["ids"] == Tokenizer.from_file(str(path)).encode("say " + word).ids[:65]
    assert got["ms"] < 5000, got["ms"]


NODE_TRACE = f"""
const fs = require("fs");
const T = require({json.dumps(str(TWINS_JS))});
const p = JSON.parse(fs.readFileSync(0, "utf8"));
const tok = new T.Tokenizer(p.spec);
let rows = [];
for (const [role, m] of Object.entries(p.models)) {{
  const model = new T.Model(m.config, T.readSafetensors(new Uint8Array(fs.readFileSync(m.weights))).tensors);
  const lens = new T.TunedLens(T.readSafetensors(new Uint8Array(fs.readFileSync(m.lens))).tensors, m.config.hidden_size);
  const ids = tok.encode(p.text).slice(0, Math.min(64, m.config.max_position_embeddings));
  rows = rows.concat(T.trajectory(role, model, tok, lens, ids, 10).rows);
}}
console.log(JSON.stringify(rows));
"""


@needs_node
@pytest.mark.parametrize("text", TEXTS)
def test_the_javascript_forward_pass_gives_the_rows_python_prints(twins, text):
    models = {role: {"config": json.loads((folder / "config.json").read_text()),
                     "weights": str(folder / "model.safetensors"), "lens": str(lens)}
              for role, (folder, lens) in twins.items()}
    rows = _node(NODE_TRACE, {"spec": text_page.tokenizer_spec(twins["tied"][0] / "tokenizer.json"),
                              "models": models, "text": text})
    assert_same_rows(_trajectory(DEMO, text), pd.DataFrame(rows))


# -- the page in Chromium, from file:// (slow) -----------------------------------------------------


@pytest.mark.slow
def test_the_text_page_is_linked_and_its_files_fit_a_space(shipped_site):
    manifest = json.loads((shipped_site / "site.json").read_text())
    assert manifest["caches"][0]["text"] is True
    for page in ("index.html", "demo/index.html", "demo/tokens.html"):
        assert "text.html" in (shipped_site / page).read_text(), page
    lens_step = shipped_site / "tour" / f"step-{tour.BY_SLUG['lens'].number}.html"
    assert "Try your own text" in lens_step.read_text()
    sizes = {p.relative_to(shipped_site).as_posix(): p.stat().st_size for p in demo_share(shipped_site)}
    assert max(sizes.values()) < 10e6, max(sizes, key=sizes.get)  # a plain git push to a Space takes it
    assert sum(sizes.values()) <= 45e6, f"{sum(sizes.values()) / 1e6:.1f} MB"  # the demo's own site
    other_pages = [p for p in shipped_site.rglob("*.html") if p.name != "text.html"]
    assert not any("text/tied-model" in p.read_text() for p in other_pages)  # weights load with the text page only


def _computed(driver, timeout: float = 60) -> float:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda d: d.execute_script("return document.body.getAttribute('data-computed')"))
    return float(driver.execute_script("return document.body.getAttribute('data-computed')"))


@pytest.mark.slow
def test_the_text_page_gives_the_rows_python_prints_from_file_with_nothing_sent(shipped_site):
    from selenium.common.exceptions import NoAlertPresentException

    from tests.appbrowser import CHROMIUM, DRIVER, chromium, requested_urls

    if not (CHROMIUM and DRIVER):
        pytest.skip("Debian's chromium and chromium-driver are needed")
    driver = chromium(1440, 900, requests=True)
    try:
        page = (shipped_site / "demo" / "text.html").as_uri()
        for text in TEXTS:
            driver.get("about:blank")
            driver.get(page + "#text=" + quote(text))
            _computed(driver)
            rows = pd.DataFrame(json.loads(driver.execute_script(
                "return document.getElementById('trajectory-json').textContent")))
            assert_same_rows(_trajectory(DEMO, text), rows)
            assert driver.execute_script("return document.getElementById('text').value") == text
        urls = requested_urls(driver)
        assert urls and all(u.startswith(("file://", "data:", "blob:")) for u in urls), urls
        # a fragment holding HTML is shown as text: nothing runs, no element is made of it
        attack = "<img src=x onerror=alert(1)><script>alert(2)</script>"
        driver.get("about:blank")
        driver.get(page + "#text=" + quote(attack))
        _computed(driver)
        with pytest.raises(NoAlertPresentException):
            _ = driver.switch_to.alert.text
        assert driver.execute_script("return document.querySelectorAll('#result img, #result script').length") == 0
        assert driver.execute_script("return document.getElementById('text').value") == attack
        # editing the text updates the fragment; a text past the context is cut with a note
        box = driver.find_element("id", "text")
        box.clear()
        box.send_keys("word " * 80)
        driver.execute_script("document.body.removeAttribute('data-computed')")
        _computed(driver)
        assert "The twins read at most 64 tokens" in driver.find_element("id", "note").text
        assert driver.execute_script("return decodeURIComponent(location.hash)").startswith("#text=word word")
        # a 300,000-letter word: a bounded prefix is read, never the whole word, and the page answers
        driver.execute_script("document.body.removeAttribute('data-computed')")
        driver.execute_script("location.hash = '#text=' + 'abcdefghij'.repeat(30000)")
        _computed(driver)
        assert "The twins read at most 64 tokens" in driver.find_element("id", "note").text
        box.clear()
        box.send_keys(" ")
        import time

        time.sleep(1.5)
        assert driver.find_element("id", "note").text.startswith("Type a text")
        assert driver.execute_script("return document.getElementById('trajectory-json').textContent") == "[]"
    finally:
        driver.quit()


@pytest.mark.slow
def test_pinned_tokens_on_the_text_page_come_from_the_whole_softmax(shipped_site):
    """#...&pin=: each pinned token's probability at every cell, computed in the page, equals Python's
    (the worker's :meth:`Tracer.follow`); a pin that is no single token is named, not drawn; a click
    on a cell follows it (its top 10, the curves at its position); nothing is requested off file://."""
    from precompute.trajectory import Tracer
    from tests.appbrowser import CHROMIUM, DRIVER, chromium, requested_urls

    if not (CHROMIUM and DRIVER):
        pytest.skip("Debian's chromium and chromium-driver are needed")
    text, pins = "def main(): return self.x == 0", [" self", "(", "no such token"]
    driver = chromium(1440, 900, requests=True)
    try:
        driver.get((shipped_site / "demo" / "text.html").as_uri() + "#text=" + quote(text) + "&pin="
                   + quote("␣self,(,no such token"))
        _computed(driver)
        got = pd.DataFrame(json.loads(driver.execute_script(
            "return document.getElementById('pinned-json').textContent")))
        want, unknown = Tracer(DEMO).follow(text, pins, max_tokens=64)
        assert unknown == {"tied": ["no such token"], "untied": ["no such token"]}
        key = ["model", "lens", "layer", "position", "pin"]
        a, b = want.sort_values(key).reset_index(drop=True), got.sort_values(key).reset_index(drop=True)
        assert len(a) == len(b) > 0 and (a[key].to_numpy() == b[key].to_numpy()).all()
        np.testing.assert_allclose(a["prob"].astype(float), b["prob"].astype(float), atol=1e-4, rtol=0)
        result = driver.find_element("id", "result")
        assert 'Not a single token of the twins\' vocabulary, so not drawn: "no such token"' in result.text
        assert len(driver.find_elements("css selector", "figure.pin-chart svg polyline")) == 2 * 2 * 2  # twin, pin, lens
        assert len(driver.find_elements("css selector", "table.grid.strip")) == 2  # tied beside untied
        driver.find_element("css selector", "td[data-position='1'][data-layer='2']").click()
        assert "Top 10 at hidden state 2, after" in result.text and "(position 1)" in result.text
        assert len(driver.find_elements("css selector", "table.cell-top")[0].find_elements("tag name", "tr")) == 1 + 10
        assert "pin=" in driver.execute_script("return location.hash")
        urls = requested_urls(driver)
        assert urls and all(u.startswith(("file://", "data:", "blob:")) for u in urls), urls
    finally:
        driver.quit()
