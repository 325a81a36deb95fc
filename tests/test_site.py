"""`precompute site`: a static folder that opens from file:// with the network off.

The fast tests build a site from synthetic caches (one of whose tokens is a script tag); the
slow ones from copies of the shipped demo, paper and sweep caches, and open it in headless
Chromium (Debian's chromium and chromium-driver, as tests/appbrowser.py) counting every
request the pages make: tests/test_site_chromium.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from explorer.render import tour
from precompute import site
from precompute.cli import main
from tests.conftest import demo_share
from tying.cache.summary_types import Summary

ROOT = Path(__file__).resolve().parent.parent
DEMO_BUDGET = 25e6  # bytes: the demo's site fits a Static Space and a USB stick with room to spare


def _run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


class _Refs(HTMLParser):
    """Every URL a page names, by tag and attribute."""

    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, name, value))


def _refs(page: Path) -> list[tuple[str, str, str]]:
    p = _Refs()
    p.feed(page.read_text(encoding="utf-8"))
    return p.refs


def _local_target(page: Path, url: str) -> Path | None:
    """The file a relative URL of ``page`` points at (None for an absolute URL or a bare #fragment)."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    return (page.parent / parts.path).resolve()


def _pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def check_site(root: Path) -> None:
    """index.html exists; every page it (or any page) links, and every script and style sheet, exists;
    nothing but a plain <a href> names a URL off the site."""
    assert (root / "index.html").is_file()
    linked_from_index = {_local_target(root / "index.html", u) for t, a, u in _refs(root / "index.html")} - {None}
    assert any(p.name == "step-1.html" for p in linked_from_index)
    for page in _pages(root):
        for tag, attr, url in _refs(page):
            if re.match(r"^(https?:)?//", url):
                assert tag == "a", f"{page.relative_to(root)}: <{tag} {attr}> loads {url} from the network"
                continue
            target = _local_target(page, url)
            if target is not None:
                assert target.is_file(), f"{page.relative_to(root)} links {url}, which is missing"
                assert root.resolve() in target.parents, f"{page.relative_to(root)} links {url} outside the site"
        text = page.read_text(encoding="utf-8")
        assert "<script type='module'" not in text and "fetch(" not in text


# -- synthetic caches (fast) -----------------------------------------------------------------------


@pytest.fixture
def synthetic_site(synthetic_site):
    """The shared site of the synthetic folder (conftest): its command wrote and said nothing on stderr."""
    out, stdout, err = synthetic_site
    assert "wrote" in stdout and not err.strip()
    return out


@pytest.mark.slow
def test_site_pages_link_only_files_of_the_site(synthetic_site):
    check_site(synthetic_site)
    manifest = json.loads((synthetic_site / site.MANIFEST).read_text())
    assert manifest["generator"] == site.GENERATOR
    for page in manifest["pages"]:
        assert (synthetic_site / page).is_file()
    for c in manifest["caches"]:
        assert c["skipped"] == {}, c
    kinds = {c["name"]: c for c in manifest["caches"]}
    assert kinds["synthetic"]["tokens"] and not kinds["paper"]["tokens"] and not kinds["sweep"]["tokens"]
    assert "projection-umap" in kinds["synthetic"]["charts"] and "table1" in kinds["synthetic"]["tables"]


@pytest.mark.slow
def test_site_has_every_tour_step_with_its_keys(synthetic_site):
    from explorer.render import tour

    steps = sorted((synthetic_site / "tour").glob("step-*.html"))
    assert len(steps) == len(tour.STEPS)
    for step in tour.STEPS:
        text = (synthetic_site / "tour" / f"step-{step.number}.html").read_text()
        rels = {(t, u) for t, a, u in _refs(synthetic_site / "tour" / f"step-{step.number}.html") if t == "link"}
        assert (("link", f"step-{step.number + 1}.html") in rels) == (step.number < len(tour.STEPS))
        assert (("link", f"step-{step.number - 1}.html") in rels) == (step.number > 1)
        assert f"Step {step.number} of {len(tour.STEPS)}" in text
        # the presenter view (N, its own window): this step's notes, hidden but there; the clock's and the
        # following windows' scripts
        assert "class='presenter'" in text and html.escape(step.notes.caveat) in text
        scripts = set(_refs(synthetic_site / "tour" / f"step-{step.number}.html"))
        assert {("script", "src", "../assets/clock.js"), ("script", "src", "../assets/follow.js")} <= scripts
        if step.claim is not None:  # every step has its cache here: a verdict, not the missing-data note
            assert "tour-verdict" in text and "class='missing'>No cache" not in text, step.slug
    assert "ArrowRight" in (synthetic_site / "assets" / "site.js").read_text()
    assert "presenter-view" in (synthetic_site / "assets" / "site.js").read_text()
    assert "body.presenter-view .presenter" in (synthetic_site / "assets" / "site.css").read_text()
    assert "tourFollow" in (synthetic_site / "assets" / "follow.js").read_text()


@pytest.mark.slow
def test_site_escapes_token_strings(synthetic_site):
    """The synthetic vocabulary holds "<script>alert('x')</script>": text everywhere, never markup."""
    for page in _pages(synthetic_site):
        assert "<script>alert" not in page.read_text(), page
    data = (synthetic_site / "synthetic" / "tokens-data.js").read_text()
    assert "<script" not in data and "\\u003cscript>alert('x')\\u003c/script>" in data
    for js in (synthetic_site / "synthetic" / "charts").glob("*.js"):
        assert "<" not in js.read_text(), js
    assert "innerHTML" not in (synthetic_site / "assets" / "tokens.js").read_text()


def test_a_token_string_is_escaped_in_a_rendered_page(tmp_path):
    """No page of the synthetic site shows its script-tag token (the token search draws it from its
    data file): a cache page rendered from its template with that string as a cache's name, a
    figure's title and caption, and a table cell, shows it as text every time."""
    import pandas as pd

    token = "<script>alert('x')</script>"
    shown = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
    c = site._Cache(SimpleNamespace(name=f"cache {token}"), "cache", Summary(), "pair", {})
    c.figures = [SimpleNamespace(name="nb", title=f"Neighbours of {token}", caption=token)]
    c.tables["nb"] = pd.DataFrame({token: [token], "n": [1]})  # a column's name is a phone's card label too
    builder = site._Builder([], tmp_path, title=f"site {token}", formats=(), presentation=False, progress=print)
    builder.caches.append(c)
    builder.cache_page(c)
    page = (tmp_path / "cache" / "index.html").read_text()
    assert "<script>alert" not in page
    assert re.findall(r"<script[^>]*>", page) == ["<script src='../assets/vega.js'>", "<script src='../assets/site.js'>"]
    for where in (f"<title>cache {shown}: figures and tables</title>", f"<h1>cache {shown}</h1>",
                  f">site {shown}</a>", f"<h2>Neighbours of {shown}</h2>", f"<p class='caption'>{shown}</p>",
                  f"<td data-label='{shown}'>{shown}</td><td data-label='n' class=num>1</td>"):
        assert where in page, where


@pytest.mark.slow
def test_site_css_takes_the_apps_t_i_o_colours_once(synthetic_site):
    from explorer.render.style import PALETTE

    css = (synthetic_site / "assets" / "site.css").read_text()
    for m, colour in PALETTE.items():
        assert re.findall(rf"--{m}:\s*([^;]+);", css) == [colour], m
    assert "{{" not in css and "{#" not in css


@pytest.mark.slow
def test_site_text_reads_at_4_5_to_1_in_the_light_and_the_dark_theme(synthetic_site):
    """Both themes of the stylesheet (the dark one for a reader whose system prefers it): text,
    grey notes and links on the page and on its soft panels, white on the buttons and the header
    bar, every pair at WCAG AA's 4.5:1 or more."""
    from tests.test_figures_pack import contrast

    css = (synthetic_site / "assets" / "site.css").read_text()
    light = dict(re.findall(r"--([A-Za-z-]+):\s*(#[0-9a-fA-F]{6});", css.split("@media")[0]))
    dark_block = re.search(r"prefers-color-scheme: dark\)\s*\{\s*:root\s*\{([^}]*)\}", css)
    assert dark_block, "no dark theme"
    dark = {**light, **dict(re.findall(r"--([A-Za-z-]+):\s*(#[0-9a-fA-F]{6});", dark_block.group(1)))}
    assert dark["paper"] != light["paper"] and dark["ink"] != light["ink"]
    for theme, v in (("light", light), ("dark", dark)):
        for fg, bg in (("ink", "paper"), ("muted", "paper"), ("link", "paper"), ("ink", "soft"), ("muted", "soft")):
            assert contrast(v[fg], v[bg]) >= 4.5, (theme, fg, bg, contrast(v[fg], v[bg]))
        for bg in ("accent", "bar"):
            assert contrast("#ffffff", v[bg]) >= 4.5, (theme, "white on", bg, contrast("#ffffff", v[bg]))
    # the T, I and O chips: their text on their colour, whatever the theme
    for m in "TIO":
        assert re.search(rf"\.tio\.{m} \{{ background: var\(--{m}\); color: var\(--on-{m}\); \}}", css), m
        assert contrast(light[f"on-{m}"], light[m]) >= 4.5, (m, contrast(light[f"on-{m}"], light[m]))


def test_the_templates_ship_with_the_package():
    """pyproject.toml's package data names every file of precompute/templates/ (a wheel holds them)."""
    import tomllib
    from fnmatch import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["precompute"]
    files = [p.relative_to(ROOT / "precompute").as_posix() for p in (ROOT / "precompute" / "templates").rglob("*")
             if p.is_file()]
    assert "templates/base.html" in files and "templates/site.js" in files
    assert [f for f in files if not any(fnmatch(f, pat) for pat in patterns)] == []


@pytest.mark.slow
def test_site_shows_claims_with_verdicts_and_downloads(synthetic_site):
    index = (synthetic_site / "index.html").read_text()
    for name in ("synthetic", "paper", "sweep"):
        assert f"href='{name}/index.html'" in index
    assert "class='verdict'" in index and "holds" in index
    page = (synthetic_site / "synthetic" / "index.html").read_text()
    assert "data-chart='synthetic/figure1-alignment'" in page
    svg = [u for t, a, u in _refs(synthetic_site / "synthetic" / "index.html") if u.endswith(".svg")]
    assert "downloads/figure1-alignment.svg" in svg and "downloads/table1.svg" in svg
    assert not any(u.endswith(".pdf") for t, a, u in _refs(synthetic_site / "synthetic" / "index.html"))
    # the published cache's numbers are the paper's: its claims table has no "The paper" column to repeat them
    paper = (synthetic_site / "paper" / "index.html").read_text()
    head = paper[paper.index("<table class='claims'>"):paper.index("</thead>", paper.index("<table class='claims'>"))]
    assert "The paper&#x27;s numbers" in head and "<th>The paper</th>" not in head
    assert "<th>The paper</th>" in page  # a pair's table keeps it


@pytest.mark.slow
def test_site_is_a_static_space(synthetic_site):
    readme = (synthetic_site / "README.md").read_text()
    front = readme.split("---\n")[1]
    fields = dict(line.split(": ", 1) for line in front.strip().splitlines())
    assert fields["sdk"] == "static" and fields["app_file"] == "index.html"
    assert json.loads(fields["title"]) == "Weight-tying explorer"
    assert {"emoji", "colorFrom", "colorTo"} <= set(fields)
    assert (synthetic_site / ".nojekyll").is_file()  # GitHub Pages serves the folder as it is


TEXT_FILES = (".html", ".js", ".json", ".md", ".css", ".csv", ".svg", ".tex", ".txt")


def _published_text(root: Path) -> dict[str, str]:
    """{file: its text} of every file of the site a visitor can read: text files as they are,
    PDFs (the handout) as the text a reader extracts; nothing else may be left unread."""
    import pypdf

    texts = {}
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        if f.suffix == ".pdf":
            texts[str(f.relative_to(root))] = " ".join(page.extract_text() for page in pypdf.PdfReader(f).pages)
        elif f.suffix in TEXT_FILES or f.name == ".nojekyll":
            texts[str(f.relative_to(root))] = f.read_text(encoding="utf-8")
        else:
            raise AssertionError(f"a file of a kind this test does not read: {f.relative_to(root)}")
    return texts


@pytest.mark.slow
def test_nothing_of_the_building_machine_is_published(synthetic_site, synthetic_caches):
    """The synthetic toy lab records its twins by absolute paths under this run's temporary folder
    (as one built with an absolute --cache-dir does): the site names them by folder, with the
    weights file's size and sha256, and no file of it (pages, scripts, data, the handout's text)
    holds a path of the machine that built it."""
    texts = _published_text(synthetic_site)
    assert "handout.pdf" in texts and any(name.endswith(".js") for name in texts)
    machine = {"the checkout": str(ROOT), "the home folder": str(Path.home()) + "/", "an installed package":
               "site-packages", "the build's temporary folder": str(synthetic_caches.parent)}
    for name, text in texts.items():
        for what, path in machine.items():
            assert path not in text, f"{name} holds {what} ({path})"
    models = json.loads(texts["synthetic/downloads/manifest.json"])["models"]  # its figure pack's record of them
    sha = hashlib.sha256(b"synthetic/tied").hexdigest()
    assert models["tied"] == f"tied-seed0 (model.safetensors, 76,800 bytes, sha256 {sha})"


@pytest.mark.slow
def test_site_replaces_an_earlier_site_and_refuses_other_folders(synthetic_caches, tmp_path):
    out = tmp_path / "site"
    assert _run("site", "sweep", "--cache-dir", synthetic_caches, "--out", out, "--formats", "")[0] == 0
    (out / "stale.html").write_text("old")
    assert _run("site", "sweep", "--cache-dir", synthetic_caches, "--out", out, "--formats", "")[0] == 0
    assert not (out / "stale.html").exists() and (out / "index.html").is_file()
    # a step whose data no cache here holds says which kind of cache does
    assert "No cache in this site holds this step's data: it is in a toylab cache" in (
        out / "tour" / "step-2.html").read_text()
    assert "tour-verdict" in (out / "tour" / f"step-{tour.BY_SLUG['sweep-bias'].number}.html").read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind

    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code, _, err = _run("site", "sweep", "--cache-dir", synthetic_caches, "--out", other)
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("argv, says", [
    (["nosuch"], "no cache at"),
    (["sweep", "--formats", "gif"], "unknown format gif"),
    (["sweep", "--title", " "], "--title"),
    (["sweep", "--paper", "letter"], "--paper sets the handout's sheet"),  # a sheet without a handout
    (["sweep", "--handout", "--paper", "a5"], "invalid choice: 'a5'"),
])
def test_site_user_mistakes_are_one_line(synthetic_caches, tmp_path, argv, says):
    code, _, err = _run("site", *argv, "--cache-dir", synthetic_caches, "--out", tmp_path / "site")
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "site").exists()


def test_site_refuses_a_cache_named_like_its_own_folders(synthetic_caches, tmp_path):
    shutil.copy(synthetic_caches / "sweep.duckdb", tmp_path / "tour.duckdb")
    code, _, err = _run("site", tmp_path / "tour.duckdb", "--out", tmp_path / "site")
    assert code == 2 and "'tour/'" in err


# -- the shipped caches (slow) ---------------------------------------------------------------------


@pytest.mark.slow
def test_shipped_caches_make_a_complete_site(shipped_site):
    check_site(shipped_site)
    manifest = json.loads((shipped_site / site.MANIFEST).read_text())
    by_name = {c["name"]: c for c in manifest["caches"]}
    assert by_name["demo"]["tokens"] and all(c["skipped"] == {} for c in manifest["caches"])
    for c in manifest["caches"]:
        for files in c["downloads"].values():
            assert all((shipped_site / c["folder"] / f).is_file() for f in files)
    assert "figure-scaling" in by_name["demo"]["charts"] and "sweep-loss-gap" in by_name["sweep"]["charts"]
    assert len(manifest["tour"]) == len(tour.STEPS) and "class='missing'>No cache" not in "".join(
        (shipped_site / p).read_text() for p in manifest["tour"])


@pytest.mark.slow
def test_the_demo_site_fits_its_budget(shipped_site):
    """The demo's own site (conftest's demo_share of the shipped site: what `precompute site demo`
    writes, give or take the few kB the other caches add to the index and the tour), its text page
    aside (the twins' weights, which tests/test_text_page.py holds to a Space's limits), fits DEMO_BUDGET."""
    files = demo_share(shipped_site)
    check_site(shipped_site)
    text_page = sum(p.stat().st_size for p in (shipped_site / "demo" / "text").rglob("*") if p.is_file())
    text_page += (shipped_site / "demo" / "text.html").stat().st_size
    assert text_page > 0  # the site has its text page: it is what is set aside
    assert not any(p.relative_to(shipped_site).as_posix().startswith(("paper/", "sweep/", "mechanism/")) for p in files)
    size = sum(p.stat().st_size for p in files) - text_page
    assert size < DEMO_BUDGET, f"{size / 1e6:.1f} MB"
