"""`precompute site`: the explorer as a static folder of pages that opens with no server and no network.

``python -m precompute site CACHE [CACHE ...] --out DIR`` writes ``DIR/index.html`` (what the
explorer is, and every cache's claims with their verdicts), the tour (``tour/step-N.html``),
one page per cache with every figure it has as an interactive Vega-Lite chart and every table
as an HTML table, the figure pack's files under ``<cache>/downloads/``, and for a cache of at
most :data:`SEARCH_MAX_TOKENS` tokens a token search (``<cache>/tokens.html``: a token's
nearest neighbours in T, I and O).

The charts are the app's: the same builders (:mod:`explorer.render.figures`, :mod:`explorer.render.tour`)
and the same styled spec (:func:`explorer.render.spec.vega_lite_spec`). Everything a page needs
sits beside it: the Vega, Vega-Lite and vega-embed bundle that vl-convert ships, written once
to ``assets/vega.js`` as a classic script (Chromium refuses module scripts and ``fetch()`` from
``file://``), and each chart's spec with its data in a ``.js`` file loaded by a ``<script
src>``. The folder is a Hugging Face Static Space as it stands (its ``README.md`` carries the
front matter) and serves from GitHub Pages or a USB stick alike.

This module reads caches through the app's readers (``explorer``): a read-side renderer, the
one documented exception to "precompute imports only tying" (tests/test_layers.py). Those
imports are deferred to the functions that draw, so the CLI's other commands do not load them.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from precompute import site_assets
from precompute.options import option
from precompute.report import resolve_cache
from tying.cache.claims import VERDICT_STYLE
from tying.errors import UserError

SEARCH_MAX_TOKENS = 10_000  # a cache with more tokens gets no token search (its data file would be large)
SEARCH_K = 10  # neighbours per matrix in the token search
FORMATS = ("svg", "pdf", "png")
DEFAULT_FORMATS = ("svg", "png")  # PDF on request: a scatter of 12k points is an 8 MB PDF, the demo's site 40 MB
GENERATOR = "python -m precompute site"
MANIFEST = "site.json"  # marks a folder as a site this command wrote (and may replace)
RESERVED = {"assets", "tour"}  # folders of the site itself: no cache may take these names
PAPER_TITLE = "Weight Tying Biases Token Embeddings Towards the Output Space"

KIND_LABELS = {
    "toylab": "the toy lab: tied and untied twins trained on this machine",
    "published": "the paper's authors' published measurements of real models",
    "sweep": "the width sweep: tied and untied twins over a grid of widths and seeds",
    "pair": "a tied and an untied model",
}


@dataclass
class SiteConfig:
    """What `precompute site` does."""

    caches: list[str] = option(positional=True, help="the caches to publish: files (`cache/<name>.duckdb`) or "
                                                     "names in `--cache-dir`")
    out: str = option("site", help="the folder to write (an earlier site there is replaced; any other folder "
                                   "must be empty)")
    cache_dir: str = option("cache", help="folder of the caches")
    title: str = option("Weight-tying explorer", help="the site's title, also the Hugging Face Space's")
    formats: list[str] = option(list(DEFAULT_FORMATS), help="image files offered beside each chart, from the figure "
                                                            "pack (`svg`, `pdf`, `png`; its CSV, spec and LaTeX files "
                                                            "come with them); `--formats ''` for none")
    presentation: bool = option(False, help="the cache pages' charts and files with presentation mode's larger "
                                            "text (the tour always has it)")

    def __post_init__(self):
        bad = [f for f in self.formats if f not in FORMATS]
        if bad:
            raise UserError(f"--formats: unknown format {', '.join(bad)}; choose from {', '.join(FORMATS)}")
        if not self.title.strip():
            raise UserError("--title must not be empty")


def run_site(cfg: SiteConfig) -> None:
    t0 = time.perf_counter()
    refs = open_caches(cfg.caches, cfg.cache_dir)
    out = Path(cfg.out).absolute()
    manifest = write_site(refs, out, title=cfg.title, formats=tuple(cfg.formats), presentation=cfg.presentation,
                          progress=lambda line: print(line, flush=True))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out / 'index.html'} ({len(manifest['pages'])} pages, {size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - t0:.0f} s; open it in a browser, no server needed")


# -- caches ----------------------------------------------------------------------------------------


def open_caches(caches: list[str], cache_dir: str) -> list:
    """The caches as the app's CacheRefs, each checked to open; a UserError names the first that does not."""
    from explorer.render import pack

    refs = [pack.open_ref(resolve_cache(c, cache_dir), f" (give a cache file or a name in --cache-dir '{cache_dir}')")
            for c in caches]
    folders = [folder_name(r.name) for r in refs]
    for f in set(folders):
        if folders.count(f) > 1:
            raise UserError(f"two caches would share the folder '{f}/' of the site: give caches of different names")
        if f in RESERVED:
            raise UserError(f"a cache named '{f}' would take the site's own folder '{f}/': rename the cache")
    return refs


def folder_name(name: str) -> str:
    """A cache's folder in the site: its name with only URL-safe characters."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "-" for c in name).strip("-.")
    return safe or "cache"


# -- writing the folder ----------------------------------------------------------------------------


def write_site(refs: list, out: Path, *, title: str = "Weight-tying explorer",
               formats: tuple[str, ...] = DEFAULT_FORMATS,
               presentation: bool = False, progress=None) -> dict[str, Any]:
    """Build the site in a folder beside ``out`` and rename it into place; returns its manifest.

    ``out`` may be missing, empty, or an earlier site (it is replaced); anything else is refused."""
    if not refs:
        raise UserError("give at least one cache")
    out = Path(out).absolute()  # "." has a name and a parent to build beside
    if out.exists():
        if not out.is_dir():
            raise UserError(f"--out '{out}' is a file, not a folder")
        if any(out.iterdir()) and not _is_site(out):
            raise UserError(f"--out '{out}' holds files that are not a site written by '{GENERATOR}': give a new "
                            "or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        manifest = _Builder(refs, tmp, title=title, formats=formats, presentation=presentation,
                            progress=progress or (lambda line: None)).build()
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _is_site(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST).read_text()).get("generator") == GENERATOR
    except (OSError, ValueError, AttributeError):
        return False


def _js_data(value: Any) -> str:
    """A value as a JavaScript literal: JSON with '<' escaped (safe in any page), NaN as null."""
    text = json.dumps(_no_nan(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _no_nan(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


SIGNIFICANT = 6  # digits a chart's data keeps (float32 data has about 7; a screen shows 3 or 4)


def _short(v: Any) -> Any:
    return float(f"{v:.{SIGNIFICANT}g}") if isinstance(v, float) and math.isfinite(v) else v


def _packed(rows: Any) -> Any:
    """A dataset of rows (objects of the same keys) as columns, its numbers to SIGNIFICANT digits:
    a third of the size. assets/site.js turns it back into rows before Vega sees it."""
    if not (isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows)):
        return rows
    keys = list(rows[0])
    if any(list(r) != keys for r in rows):
        return rows
    return {"__columns": {k: [_short(r[k]) for r in rows] for k in keys}}


def _vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script setting window.vegaEmbed (vl-convert's
    bundle of the Vega-Lite version Altair writes), wrapped so its top-level names stay private."""
    import altair as alt
    import vl_convert as vlc

    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = vlc.get_vegalite_versions()
    bundle = vlc.javascript_bundle(vl_version=version if version in known else None)
    return "(function () {\n" + bundle + "\n})();\n"


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


@dataclass
class _Cache:
    ref: Any
    folder: str
    summary: dict
    kind: str
    claims: dict
    figures: list = field(default_factory=list)  # explorer.figures.Figure, in the registry's order
    charts: dict = field(default_factory=dict)  # figure name -> chart key (drawn ones)
    tables: dict = field(default_factory=dict)  # figure name -> DataFrame
    downloads: dict = field(default_factory=dict)  # figure name -> [(label, path relative to the cache folder)]
    skipped: dict = field(default_factory=dict)  # figure name -> why it is not shown
    tokens: bool = False


class _Builder:
    def __init__(self, refs, root: Path, *, title: str, formats, presentation: bool, progress):
        self.refs, self.root, self.title = refs, root, title
        self.formats, self.presentation, self.progress = tuple(formats), presentation, progress
        self.pages: list[str] = []
        self.caches: list[_Cache] = []
        self.tour_pages: list[str] = []

    # -- files

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if rel.endswith(".html"):
            self.pages.append(rel)

    def chart_file(self, rel: str, key: str, chart, presentation: bool) -> bool:
        """Write ``rel`` (.js) registering the chart's styled spec under ``key``; whether the chart
        fits its column's width (else it has a width of its own, e.g. side-by-side panels)."""
        from explorer.render.spec import vega_lite_spec

        spec = json.loads(vega_lite_spec(chart, presentation=presentation))
        spec["datasets"] = {name: _packed(rows) for name, rows in (spec.get("datasets") or {}).items()}
        fits = getattr(chart, "width", None) == "container"
        if fits:
            # the page's column, as in the app: the width fits it, legends under the plot add height
            spec["width"] = "container"
            spec.setdefault("autosize", {"type": "fit-x", "contains": "padding", "resize": True})
        self.write(rel, f"(window.SITE_CHARTS = window.SITE_CHARTS || {{}})[{_js_data(key)}] = {_js_data(spec)};\n")
        return fits

    # -- the whole site

    def build(self) -> dict[str, Any]:
        from explorer.render import read as data
        from tying.cache.claims import claims

        t0 = time.perf_counter()
        self.write("assets/vega.js", _vega_bundle())
        self.write("assets/site.css", site_assets.CSS)
        self.write("assets/site.js", site_assets.SITE_JS)
        self.write("assets/tokens.js", site_assets.TOKENS_JS)
        for ref in self.refs:
            s = data.summary(ref)
            self.caches.append(_Cache(ref, folder_name(ref.name), s, s.get("kind") or "pair", claims(s)))
        for c in self.caches:
            c.tokens = self.searchable(c)
        for c in self.caches:
            t1 = time.perf_counter()
            self.cache_figures(c)
            self.cache_downloads(c)
            self.cache_page(c)
            if c.tokens:
                self.token_search(c)
            self.progress(f"  {c.ref.name}: {len(c.charts)} charts, {len(c.tables)} tables, "
                          f"{sum(len(v) for v in c.downloads.values())} files"
                          f"{', token search' if c.tokens else ''} ({time.perf_counter() - t1:.0f} s)")
        self.tour()
        self.index()
        self.write("README.md", self.space_readme())
        self.write(".nojekyll", "")
        manifest = {
            "generator": GENERATOR, "title": self.title, "built": date.today().isoformat(),
            "pages": sorted(self.pages), "tour": self.tour_pages,
            "caches": [{"name": c.ref.name, "folder": c.folder, "kind": c.kind, "charts": sorted(c.charts),
                        "tables": sorted(c.tables), "downloads": {k: [p for _, p in v] for k, v in c.downloads.items()},
                        "skipped": c.skipped, "tokens": c.tokens} for c in self.caches],
            "seconds": round(time.perf_counter() - t0, 1),
        }
        self.write(MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        return manifest

    # -- one cache

    def cache_figures(self, c: _Cache) -> None:
        from explorer.render import figures

        c.figures = figures.available(c.ref)
        for fig in c.figures:
            try:
                chart, table = fig.build(c.ref)
            except Exception as exc:  # one broken figure leaves the rest of the site standing
                c.skipped[fig.name] = f"{type(exc).__name__}: {exc}"
                continue
            if chart is None:
                c.tables[fig.name] = table
            else:
                key = f"{c.folder}/{fig.name}"
                self.chart_file(f"{c.folder}/charts/{fig.name}.js", key, chart, self.presentation)
                c.charts[fig.name] = key

    def cache_downloads(self, c: _Cache) -> None:
        """The figure pack of this cache under ``<cache>/downloads/``, grouped by figure."""
        if not self.formats:
            return
        from explorer.render.pack import write_pack

        dest = self.root / c.folder / "downloads"
        pack = write_pack(c.ref, dest, formats=self.formats, scale=2.0, presentation=self.presentation)
        for entry in pack.get("files", []):
            path = Path(entry["file"])
            rel = (path if path.is_absolute() else dest / path).relative_to(self.root / c.folder).as_posix()
            label = _download_label(path)
            c.downloads.setdefault(entry.get("figure") or path.stem, []).append((label, rel))

    def cache_page(self, c: _Cache) -> None:
        parts = [f"<h1>{_esc(c.ref.name)}</h1>", f"<p class='lead'>{_esc(_sentence(KIND_LABELS.get(c.kind, c.kind)))}</p>",
                 f"<p class='note'>{_esc(_sentence(_describe(c.summary)))}</p>", _legend_html()]
        links = []
        if c.tokens:
            links.append("<a class='button' href='tokens.html'>Search a token's neighbours in T, I and O</a>")
        if c.figures:
            links.append("<a class='button secondary' href='../tour/step-1.html'>The tour</a>")
        parts.append("<p>" + "".join(links) + "</p>")
        parts.append(_claims_table(c.claims))
        shown = [f for f in c.figures if f.name in c.charts or f.name in c.tables]
        if shown:
            parts.append("<h2>Contents</h2><ul class='toc'>" + "".join(
                f"<li><a href='#{_esc(f.name)}'>{_esc(f.title)}</a></li>" for f in shown) + "</ul>")
        else:
            parts.append("<p class='missing'>This cache has no figure or table to show.</p>")
        scripts = []
        for f in shown:
            parts.append(f"<section class='figure' id='{_esc(f.name)}'><h2>{_esc(f.title)}</h2>"
                         f"<p class='caption'>{_esc(f.caption)}</p>")
            if f.name in c.charts:
                parts.append("<div class='chart-box'>" + _chart_div(c.charts[f.name], f"{f.name}-{c.folder}", f.title)
                             + "</div>")
                scripts.append(f"charts/{f.name}.js")
            else:
                parts.append(_table_html(c.tables[f.name]))
            files = c.downloads.get(f.name)
            if files:
                parts.append("<p class='downloads'>Download: " + " ".join(
                    f"<a href='{_esc(rel)}' download>{_esc(label)}</a>" for label, rel in files) + "</p>")
            parts.append("</section>")
        for name, why in c.skipped.items():
            parts.append(f"<p class='missing'>{_esc(name)} could not be drawn: {_esc(why)}</p>")
        self.write(f"{c.folder}/index.html", self.page(f"{c.ref.name}: figures and tables", "".join(parts), depth=1,
                                                       current=f"{c.folder}/index.html", scripts=scripts))

    def searchable(self, c: _Cache) -> bool:
        """Whether the cache gets a token search: neighbour lists of every token, at most SEARCH_MAX_TOKENS."""
        from explorer.render import read as data
        from tying.cache.schema import MATRICES

        try:
            if not (data.has_rows(c.ref, "tokens") and data.has_rows(c.ref, "neighbours")):
                return False
            toks = data.tokens(c.ref)
            n = len(toks)
            if n > SEARCH_MAX_TOKENS or not (toks["token"].to_numpy() == range(n)).all():
                return False  # neighbour ids index rows: a vocabulary with gaps is not searchable here
            return all(data.neighbour_ids(c.ref, m).shape[0] == n and data.neighbour_ids(c.ref, m).shape[1] > 0
                       for m in MATRICES)
        except Exception:  # a cache without readable neighbour lists gets no search
            return False

    def token_search(self, c: _Cache) -> None:
        """``<cache>/tokens.html`` and its data file (the shown text of every token, its neighbour ids)."""
        from explorer.render import read as data
        from tying.cache.schema import MATRICES, MATRIX_NAMES

        toks = data.tokens(c.ref)
        n = len(toks)
        ids = {m: data.neighbour_ids(c.ref, m) for m in MATRICES}
        k = min(SEARCH_K, *(a.shape[1] for a in ids.values()))
        freq = toks["freq_tied"]
        payload = {
            "shown": [str(x) for x in toks["shown"]], "k": k,
            "freq": [int(x) for x in freq.fillna(0)] if freq.notna().any() else None,
            "first": data.default_token(toks),
            "names": {m: f"{m} · {MATRIX_NAMES[m]}" for m in MATRICES},
            **{m: [int(x) for x in ids[m][:, :k].ravel()] for m in MATRICES},
        }
        self.write(f"{c.folder}/tokens-data.js", f"window.SITE_TOKENS = {_js_data(payload)};\n")
        body = (f"<h1>{_esc(c.ref.name)}: a token's neighbours</h1>"
                f"<p class='lead'>Type part of a token, pick one, and see its {k} nearest neighbours (cosine) in "
                "each matrix side by side, with the share two lists have in common (overlap@k). '␣' marks a "
                f"leading or trailing space. {n:,} tokens.</p>" + _legend_html() +
                "<div class='search'><label for='q'>Token</label><input id='q' type='search' autocomplete='off' "
                "spellcheck='false' placeholder='e.g. the'><span id='count' class='note'></span></div>"
                "<div id='hits' class='hits' aria-label='matching tokens'></div><div id='picked' aria-live='polite'>"
                "</div><noscript>The token search needs JavaScript.</noscript>")
        self.write(f"{c.folder}/tokens.html", self.page(f"{c.ref.name}: token search", body, depth=1,
                                                        current=f"{c.folder}/tokens.html",
                                                        scripts=["tokens-data.js", "../assets/tokens.js"],
                                                        charts=False))

    # -- the tour

    def tour(self) -> None:
        from explorer.render import tour

        steps = tour.STEPS
        n = len(steps)
        by_ref = {c.ref: c for c in self.caches}
        for step in steps:
            source = tour.source_for(step, self.refs)
            c = by_ref.get(source)
            key, script, fits = None, None, True
            if step.figure is None:
                key, script = "tour/setup", "charts/setup.js"
                fits = self.chart_file(f"tour/{script}", key, tour.setup_diagram(presentation=True), True)
            elif c is not None:
                key, script = f"tour/{step.slug}", f"charts/{step.slug}.js"
                try:
                    chart, _ = tour.step_figure(step, source)  # the app's example token on the map step
                    fits = self.chart_file(f"tour/{script}", key, chart, True)
                except Exception as exc:
                    c.skipped[f"tour step {step.number}"] = f"{type(exc).__name__}: {exc}"
                    key = script = None
            claim = tour.claim_for(step, source) if (c is not None and step.claim) else None
            rel = f"tour/step-{step.number}.html"
            self.tour_pages.append(rel)
            self.write(rel, self.page(f"Tour {step.number}/{n}: {step.title}",
                                      self.step_body(step, n, c, claim, key, fits), depth=1, current="tour",
                                      scripts=[script] if script else [],
                                      prev=f"step-{step.number - 1}.html" if step.number > 1 else None,
                                      next=f"step-{step.number + 1}.html" if step.number < n else None))

    def step_body(self, step, n: int, c: _Cache | None, claim, key: str | None, fits: bool) -> str:
        """A tour step: claim, chart and the sentence on reading it, the verdict beside the chart (above
        it when the chart is too wide for a column), the paper's numbers, and the way on."""
        from tying.cache.claims import STATEMENTS

        prev = (f"<a class='button secondary' href='step-{step.number - 1}.html'>← Previous</a>" if step.number > 1
                else "<a class='button secondary' href='../index.html'>← Home</a>")
        nxt = (f"<a class='button' href='step-{step.number + 1}.html'>Next →</a>" if step.number < n
               else "<a class='button' href='../index.html'>Done: home →</a>")
        parts = [f"<div class='tour'><div class='step-head'><p class='step-no'>Step {step.number} of {n}</p>"
                 f"<nav class='mini' aria-label='tour, short'>{prev}{nxt}</nav></div><h1>{_esc(step.title)}</h1>"]
        if step.claim is not None:
            parts.append(f"<p class='claim'>{_esc(STATEMENTS[step.claim])}</p>")
        if key is None:
            how = {"sweep": "python -m precompute sweep", "published": "python -m precompute paper"}.get(
                step.needs, "python -m precompute demo")
            parts.append(f"<p class='missing'>No cache in this site holds this step's data: it is in a "
                         f"{_esc(step.needs)} cache (build one with <code>{_esc(how)}</code> and publish it with "
                         "the others).</p>")
        else:
            aside = []
            if claim is not None:
                colour, sign = VERDICT_STYLE.get(claim.verdict, ("#57606a", ""))
                aside.append(f"<div class='tour-verdict' style='background:{colour}'><div class='v'>{sign} "
                             f"{_esc(claim.verdict)}</div><div class='n'>{_esc(claim.ours)}</div></div>")
                text = []
                if claim.paper:
                    text.append(f"<p class='paper'>{_esc(claim.paper)}</p>")
                if claim.note:
                    text.append(f"<p class='note'>{_esc(claim.note)}</p>")
                if c is not None:
                    text.append(f"<p class='note'>From the cache '{_esc(c.ref.name)}' "
                                f"({_esc(KIND_LABELS.get(c.kind, c.kind))}). <a href='../{_esc(c.folder)}/"
                                f"index.html#{_esc(step.figure or '')}'>All its figures</a></p>")
                aside.append("<div>" + "".join(text) + "</div>")
            else:
                aside.append("<ul class='legend'>" + "".join(
                    f"<li><span class='tio {m}'>{m}</span> {_esc(name)}</li>" for m, name in
                    (("T", "tied matrix"), ("I", "untied input matrix"), ("O", "untied output matrix"))) + "</ul>")
            chart = _chart_div(key, f"tour-{step.slug}", step.title) + f"<p class='read'>{_esc(step.read)}</p>"
            if fits:
                parts.append(f"<div class='tour-grid'><div class='tour-chart'>{chart}</div><aside>{''.join(aside)}"
                             "</aside></div>")
            else:  # side-by-side panels take the page's width: the verdict goes above them
                parts.append(f"<div class='tour-strip'>{''.join(aside)}</div><div class='tour-chart'>{chart}</div>")
        dots = "".join(f"<a href='step-{i}.html' aria-label='step {i}'>{'●' if i == step.number else '○'}</a>"
                       for i in range(1, n + 1))
        parts.append(f"<nav class='pager' aria-label='tour'>{prev}<span class='dots'>{dots}</span>{nxt}</nav>"
                     "<p class='keys'>Keys: ← → or Page Up / Page Down (a presentation clicker)</p></div>")
        return "".join(parts)

    # -- the front page

    def index(self) -> None:
        parts = [f"<h1>{_esc(self.title)}</h1>",
                 "<p class='lead'>When a language model shares one matrix between its input embedding and its output "
                 "layer (weight tying), what does that matrix come to look like? Lopardo et al. (<i>"
                 f"{_esc(PAPER_TITLE)}</i>, Findings of ACL 2026) find that the tied matrix resembles an untied "
                 "model's output matrix far more than its input matrix, because the gradients reaching it through "
                 "the output dominate, above all early in training.</p>",
                 "<p class='lead'>This site holds the weight-tying explorer's measurements: each of the paper's claims "
                 "with the numbers here and a verdict computed from them, a tour through the argument, every figure as "
                 "an interactive chart (menu ⋯ to save it as SVG or PNG) and every table, and a search of each token's "
                 "nearest neighbours. It needs no server and no network.</p>",
                 _legend_html(),
                 "<p><a class='button' href='tour/step-1.html'>Start the tour →</a></p>"]
        for c in self.caches:
            links = [f"<a href='{_esc(c.folder)}/index.html'>Figures and tables</a>"]
            if c.tokens:
                links.append(f"<a href='{_esc(c.folder)}/tokens.html'>Token search</a>")
            parts.append(f"<h2><a href='{_esc(c.folder)}/index.html'>{_esc(c.ref.name)}</a></h2>"
                         f"<p>{_esc(_sentence(KIND_LABELS.get(c.kind, c.kind)))}</p>"
                         f"<p class='note'>{_esc(_sentence(_describe(c.summary)))}</p>"
                         + _claims_table(c.claims) + "<p>" + " · ".join(links) + "</p>")
        self.write("index.html", self.page(self.title, "".join(parts), depth=0, current="index.html"))

    def space_readme(self) -> str:
        names = ", ".join(c.ref.name for c in self.caches)
        return (f"---\ntitle: {json.dumps(self.title, ensure_ascii=False)}\nemoji: 🪢\ncolorFrom: pink\ncolorTo: blue\n"
                "sdk: static\napp_file: index.html\npinned: false\n"
                "short_description: Does a tied embedding look like input or output?\n---\n\n"
                f"# {self.title}\n\nA static copy of the weight-tying explorer (caches: {names}), written by "
                f"`{GENERATOR}` on {date.today().isoformat()}. Open `index.html`: the pages need no server and "
                "fetch nothing from the network.\n")

    # -- page frame

    def page(self, title: str, body: str, *, depth: int, current: str, scripts=(), charts: bool = True,
             prev: str | None = None, next: str | None = None) -> str:
        """A whole page: the site's header, ``body``, and its scripts (charts' data first, then Vega)."""
        up = "../" * depth
        nav = [(f"{up}index.html", "index.html", self.title, "home"), (f"{up}tour/step-1.html", "tour", "Tour", "")]
        for c in self.caches:
            nav.append((f"{up}{c.folder}/index.html", f"{c.folder}/index.html", f"{c.ref.name}: figures", ""))
            if c.tokens:
                nav.append((f"{up}{c.folder}/tokens.html", f"{c.folder}/tokens.html", f"{c.ref.name}: tokens", ""))
        links = "".join(
            f"<a href='{_esc(href)}'" + (f" class='{cls}'" if cls else "")
            + (" aria-current='page'" if here == current else "") + f">{_esc(label)}</a>"
            for href, here, label, cls in nav)
        rel = "".join(f"<link rel='{r}' href='{_esc(h)}'>" for r, h in (("prev", prev), ("next", next)) if h)
        wide = " class='tour-page'" if current == "tour" else ""  # the tour's charts take a projector's width
        tags = [f"<script src='{_esc(s)}'></script>" for s in scripts]
        if charts:
            body += "<noscript><p class='missing noscript'>The charts need JavaScript.</p></noscript>"
            tags += [f"<script src='{up}assets/vega.js'></script>", f"<script src='{up}assets/site.js'></script>"]
        return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
                f"<meta name='generator' content='{_esc(GENERATOR)}'><title>{_esc(title)}</title>"
                f"<link rel='stylesheet' href='{up}assets/site.css'>{rel}</head>\n"
                f"<body{wide}><header class='top'><nav aria-label='site'>{links}</nav></header>\n"
                f"<main>{body}</main>\n"
                f"<footer>Written by <code>{_esc(GENERATOR)}</code> from the weight-tying explorer's caches. "
                f"T = tied matrix, I = untied input matrix, O = untied output matrix.</footer>\n"
                + "".join(tags) + "\n</body></html>\n")


# -- pieces of pages -------------------------------------------------------------------------------


def _legend_html(inline: bool = False) -> str:
    body = ("<span class='tio T'>T</span> tied matrix &nbsp; <span class='tio I'>I</span> untied input matrix "
            "&nbsp; <span class='tio O'>O</span> untied output matrix")
    return body if inline else f"<p>{body}</p>"


def _chart_div(key: str, file_stem: str, title: str) -> str:
    return (f"<div class='chart' data-chart='{_esc(key)}' data-file='{_esc(file_stem)}' role='figure' "
            f"aria-label='{_esc(title)}'></div>")


def _verdict_badge(verdict: str) -> str:
    colour, sign = VERDICT_STYLE.get(verdict, ("#57606a", ""))
    return f"<span class='verdict' style='background:{colour}'>{sign} {_esc(verdict)}</span>"


def _claims_table(claims: dict) -> str:
    rows = [c for c in claims.values() if c.verdict != "no data"]
    if not rows:
        return "<p class='note'>This cache tests none of the paper's claims.</p>"
    body = "".join(f"<tr><td>{_esc(c.statement)}</td><td>{_esc(c.ours)}</td><td>{_verdict_badge(c.verdict)}</td>"
                   f"<td>{_esc(c.paper)}</td></tr>" for c in rows)
    return ("<div class='table-wrap'><table class='claims'><colgroup><col class='c1'><col class='c2'><col class='c3'>"
            "<col class='c4'></colgroup><thead><tr><th>The paper's claim</th><th>Here</th><th>Verdict</th>"
            f"<th>The paper</th></tr></thead><tbody>{body}</tbody></table></div>")


def _describe(s: dict) -> str:
    """One sentence on what a cache holds (its models, its scale, or its sweep)."""
    if (s.get("scale") or {}).get("line"):
        return str(s["scale"]["line"])
    cells = s.get("sweep_cells") or []
    if cells:
        widths = sorted({int(c["d_model"]) for c in cells})
        seeds = max(int(c.get("n") or 0) for c in cells)
        return f"{len(cells)} cells, widths d = {', '.join(map(str, widths))}, up to {seeds} seeds each."
    models = s.get("models") or {}
    if models:
        return "; ".join(f"{role}: {m.get('source')}" for role, m in models.items() if m)
    return ""


def _sentence(text: str) -> str:
    """A phrase as a sentence: capital first letter, a full stop at the end ("" stays "")."""
    text = text.strip()
    if not text:
        return ""
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?" else ".")


DOWNLOAD_LABELS = {"svg": "SVG", "pdf": "PDF", "png": "PNG", "csv": "CSV (data)", "tex": "LaTeX",
                   "json": "Vega-Lite spec"}


def _download_label(path: Path) -> str:
    ext = path.suffix.lstrip(".").lower()
    return DOWNLOAD_LABELS.get(ext, ext.upper() or path.name)


_NUMBER = re.compile(r"^[-−+]?[0-9][0-9.,]*( ± [0-9.,]+)?%?$")


def _table_html(df) -> str:
    """A table as the figure pack writes its cells (explorer.pack.formatted: 3 decimals, whole
    numbers for a column of them, "—" for none), escaped; columns of numbers right-aligned."""
    from explorer.render.pack import formatted

    cells = formatted(df)
    numeric = {c: all(v == "—" or _NUMBER.match(v) for v in cells[c]) and any(v != "—" for v in cells[c])
               for c in cells.columns}
    head = "".join(f"<th{' class=num' if numeric[c] else ''}>{_esc(c)}</th>" for c in cells.columns)
    rows = "".join("<tr>" + "".join(f"<td{' class=num' if numeric[c] else ''}>{_esc(v)}</td>"
                                    for c, v in zip(cells.columns, rec)) + "</tr>"
                   for rec in cells.itertuples(index=False))
    return f"<div class='table-wrap'><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
