"""What a class sees first: icons drawn without an emoji font, an ordinary word as the token the
Neighbours and Projection pages open on, the map step's marker as its text names it with a label
beside it, and the Overview opening on the set-up, T, I and O, and the tour's door."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from explorer.render import projection_charts, read, tour
from explorer.render.style import HIGHLIGHT
from precompute.fixtures import build_synthetic_cache
from tests.apppage import open_page

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cache"

EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2300-\u23FF\u2600-\u27BF\u2B00-\u2BFF\uFE0F\u200D]")
"""Emoji and the symbol blocks most of them live in (pictographs, misc technical, misc symbols,
dingbats, misc symbols and arrows), the emoji variation selector and the zero-width joiner."""
ALLOWED = {
    "tying/cache/verdicts.py": {"✓", "✗"},  # the verdicts' signs: text-presentation dingbats every UI font draws
    "precompute/templates/space-readme.md": {"🪢"},  # the Hugging Face Space's front-matter emoji: a card, not the app
}
SOURCES = ("app.py", "views", "explorer", "precompute/templates", "tying/cache/verdicts.py")
"""What the app and the static site draw from: their code and templates."""


def _sources():
    for name in SOURCES:
        path = ROOT / name
        yield from ([path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                              and p.suffix in (".py", ".html", ".js", ".css", ".md")))


def test_no_emoji_in_the_apps_source_and_every_icon_a_material_symbol():
    """A lecture-hall PC may have no emoji font (a 🎲 drew a missing-glyph box): the app's and the
    site's source hold no emoji but the listed exceptions, and every ``icon=``/``page_icon=`` of a
    Streamlit call names a Material symbol (Streamlit draws those with its own font)."""
    found, icons = {}, []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        extra = set(EMOJI.findall(text)) - ALLOWED.get(rel, set())
        if extra:
            found[rel] = sorted(extra)
        icons += [(rel, m) for m in re.findall(r"icon=(?:f?[\"'])([^\"']*)[\"']", text)]
    assert not found, found
    assert len(icons) >= 6, icons  # the scan sees the app's icons (menu, tour, export, dice, page icon ...)
    assert all(re.fullmatch(r":material/[a-z0-9_]+:", icon) for _, icon in icons), icons
    assert ("views/neighbours.py", ":material/casino:") in icons  # the dice, once an emoji


def test_the_tab_icon_is_inline_svg_in_the_palette():
    """The browser tab's icon is SVG markup (Streamlit sends it as a data: URI; a Material page icon
    is fetched from Google's font server, an emoji needs an emoji font): no address in it but the
    SVG namespace, I, O and T in their palette colours."""
    from explorer.render import pages
    from explorer.render.style import PALETTE

    assert pages.TAB_ICON.startswith("<svg ") and pages.TAB_ICON.endswith("</svg>")
    assert re.findall(r"https?://[^'\"]*", pages.TAB_ICON) == ["http://www.w3.org/2000/svg"]
    assert re.findall(r"fill='(#[0-9A-Fa-f]{6})'", pages.TAB_ICON) == [PALETTE[m] for m in "IOT"]
    assert "page_icon=pages.TAB_ICON" in (ROOT / "app.py").read_text(encoding="utf-8")


# -- the default token ---------------------------------------------------------------------------

def _tokens(texts, freq) -> pd.DataFrame:
    return pd.DataFrame({"token": np.arange(len(texts)), "text": texts, "freq_tied": pd.array(freq, dtype="Int64")})


def test_the_default_token_is_the_most_frequent_word_known_answer():
    """Words are letters only, three or more, spaces around them aside; the most frequent of them
    wins over the more frequent newline, full stop and short words; within ``among`` the best word
    there; without counts the lowest id word (a BPE's earliest merge); no word at all: the most
    frequent token."""
    texts = ["\n", ".", " a", " the", "ing", "Returns", "<|endoftext|>", " x1y", " élan"]
    toks = _tokens(texts, [900, 800, 700, 300, 120, 150, 999, 990, 10])
    assert read.default_token(toks) == 3  # ' the'
    assert read.default_token(toks, among=[0, 1, 4, 5]) == 5  # 'Returns' (150) over 'ing' (120)
    assert read.default_token(toks, among=[8, 0]) == 8  # ' élan': letters in any script
    assert read.default_token(_tokens(texts, [None] * len(texts))) == 3  # no counts: the lowest id word
    assert read.default_token(_tokens(texts, [None] * len(texts)), among=[5, 4]) == 4
    assert read.default_token(toks, among=[0, 1, 2]) == 0  # no word among them: the most frequent token
    assert list(read.word_like(toks)) == [False, False, False, True, True, True, False, False, True]


def _check_default(path: Path, top: float) -> None:
    """The cache's default token is an ordinary word, the most frequent one, and frequent among all
    tokens (in the ``top`` share by count); a word on the Projection page's projected tokens too."""
    con = duckdb.connect(str(path), read_only=True)
    toks = con.execute("SELECT token, text, freq_tied FROM tokens ORDER BY token").df()
    con.close()
    words = toks[toks["text"].fillna("").str.strip().str.fullmatch(r"[^\W\d_]{3,}")]
    ref = read.CacheRef.of(path)
    t = read.default_token(read.tokens(ref))
    assert t in set(words["token"]), toks.loc[t, "text"]
    assert toks.loc[t, "freq_tied"] == words["freq_tied"].max()
    assert (toks["freq_tied"] > toks.loc[t, "freq_tied"]).mean() < top
    if read.has_rows(ref, "umap"):
        shown = read.default_token(read.tokens(ref), among=read.projected_tokens(ref))
        assert shown in set(words["token"])


def test_the_default_token_is_a_frequent_word_on_the_demo():
    _check_default(SHIPPED / "demo.duckdb", top=0.01)  # not the newline its counts rank first


def test_the_default_token_is_a_frequent_word_on_a_synthetic_cache(tmp_path):
    """The synthetic vocabulary's 256 most frequent tokens are its bytes (letters, punctuation,
    controls): the default passes them for a word, still in the more frequent half."""
    _check_default(build_synthetic_cache(tmp_path, "synthetic", lens=False, training=False), top=0.5)


# -- the map step's marker ---------------------------------------------------------------------------

def _layers(spec: dict):
    for view in spec.get("hconcat", [spec]):
        yield from view.get("layer", [view])


def test_the_map_steps_marker_is_what_its_text_says_and_its_label_clears_it():
    """Step 4's how-to-read names the picked token's mark by its shape in the chart (and no other
    shape); the label sits beside the marker, offset right and up by more than the marker's reach
    plus its halo, so it covers neither; the marker is drawn on top of its neighbours."""
    step = next(s for s in tour.STEPS if s.figure == "projection-umap")
    ref = read.CacheRef.of(SHIPPED / "demo.duckdb")
    chart, _ = tour.step_figure(step, ref)
    spec = chart.to_dict()
    layers = list(_layers(spec))
    shapes = [ly["encoding"]["shape"]["scale"] for ly in layers if "shape" in ly.get("encoding", {})]
    assert shapes, "no shaped marks"
    picked = {dict(zip(s["domain"], s["range"]))["picked"] for s in shapes}
    assert picked == {projection_charts.ROLE_SHAPES["picked"]}
    shape = picked.pop()
    assert shape in step.read and "circled" not in step.read, step.read
    other = {"circle", "square", "triangle", "cross", "diamond"} - {shape, "circle"}  # 'circle': the dots' shape
    assert not any(w in step.read for w in other), step.read
    reach = math.sqrt(projection_charts.ROLE_SIZES["picked"]) / 2
    texts = [ly["mark"] for ly in layers if isinstance(ly.get("mark"), dict) and ly["mark"].get("type") == "text"]
    assert texts
    for mark in texts:
        dx, dy = mark.get("dx", 0), mark.get("dy", 0)
        assert dx != 0 and dy != 0, mark
        halo = mark.get("strokeWidth", 0) / 2
        # the text's box lies right of dx and above dy (align left, baseline bottom): its nearest corner
        # is dx + |dy| from the centre in the diamond's |x| + |y| metric, the diamond reaches ``reach``
        assert mark["align"] == "left" and mark["baseline"] == "bottom" and dx > 0 > dy, mark
        assert dx + abs(dy) - 2 * halo > reach, (mark, reach)
    assert any(m.get("strokeWidth", 0) >= 3 and m.get("stroke") == HIGHLIGHT for m in texts)  # a halo under it
    assert any(m.get("fill") == "#000000" and not m.get("strokeWidth") for m in texts)  # black text on the halo
    for ly in layers:  # the picked token is drawn last of the highlighted marks: on top of its neighbours
        if "shape" in ly.get("encoding", {}):
            roles = [r["role"] for r in spec["datasets"][ly["data"]["name"]]]
            assert roles.count("picked") == 1 and roles[-1] == "picked", roles


# -- the Overview's first screen ---------------------------------------------------------------------------

def _leaves(node):
    """The page's elements in the order they are drawn (blocks, columns and containers opened)."""
    for child in getattr(node, "children", {}).values():
        if getattr(child, "children", None):
            yield from _leaves(child)
        else:
            yield child


@pytest.mark.slow
def test_the_overview_opens_on_the_setup_t_i_o_and_the_tour(monkeypatch):
    """Before the claims: the set-up diagram, a sentence naming T, I and O and the paper's claim, and
    a "Start the tour" link to the tour; none of it says "cache"."""
    at = open_page(SHIPPED, monkeypatch, "overview", pair="demo")
    assert not at.exception
    leaves = list(_leaves(at.main))
    heading = next(i for i, c in enumerate(leaves) if getattr(c, "value", None) == "The paper's claims, checked on "
                   "these models")
    opening = leaves[:heading]
    charts = [json.loads(c.proto.spec) for c in opening if getattr(c, "type", None) == "vega_lite_chart"]
    # the diagram, and its phone layout (explorer/phone.py: shown instead on a narrow screen)
    titles = [" ".join(t["text"]) if isinstance(t := c["title"], dict) else t for c in charts]
    assert titles == ["Which gradients reach the embedding matrices"] * 2
    words = [c.value for c in opening if type(c).__name__ == "Markdown" and "**T**" in c.value]
    assert len(words) == 1 and all(f"**{m}**" in words[0] for m in "TIO") and "resembling O, not I" in words[0]
    links = [c for c in opening if type(c).__name__ == "PageLink"]
    assert [(c.proto.label, c.proto.page) for c in links] == [("Start the tour", "tour")], links  # the tour's URL path
    text = " ".join(str(getattr(c, "value", "")) for c in opening)
    assert "cache" not in text.lower(), text
