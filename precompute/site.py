"""`precompute site`: the explorer as a static folder of pages that opens with no server and no network.

``python -m precompute site CACHE [CACHE ...] --out DIR`` writes ``DIR/index.html`` (what the
explorer is, and every cache's claims with their verdicts), the tour (``tour/step-N.html``),
one page per cache with every figure it has as an interactive Vega-Lite chart and every table
as an HTML table, the figure pack's files under ``<cache>/downloads/``, and for a cache of at
most :data:`SEARCH_MAX_TOKENS` tokens a token search (``<cache>/tokens.html``: a token's
nearest neighbours in T, I and O).

The pages are Jinja2 templates (``precompute/templates/``, filled in by :mod:`precompute.site_assets`,
every value escaped). The charts are the app's: the same builders (:mod:`explorer.render.figures`,
:mod:`explorer.render.tour`) and the same styled spec (:func:`explorer.render.spec.vega_lite_spec`). Everything a page needs
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

import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from precompute import site_assets, site_map, site_tour, text_page
from precompute.options import cache_dir_option, option
from precompute.report import resolve_cache
from precompute.site_assets import KIND_LABELS, js_data
from tying.cache.summary_types import Summary, model_source
from tying.cache.verdicts import NO_DATA
from tying.cache.writer import remove_dead_leftovers
from tying.errors import UserError, first_line

SEARCH_MAX_TOKENS = 10_000  # a cache with more tokens gets no token search (its data file would be large)
SEARCH_K = 10  # neighbours per matrix in the token search
FORMATS = ("svg", "pdf", "png")
DEFAULT_FORMATS = ("svg", "png")  # PDF on request: a scatter of 12k points is an 8 MB PDF, the demo's site 40 MB
GENERATOR = "python -m precompute site"
MANIFEST = "site.json"  # marks a folder as a site this command wrote (and may replace)
RESERVED = {"assets", "tour"}  # folders of the site itself: no cache may take these names
PAPERS = ("a4", "letter")  # the handout's landscape sheets (explorer.render.handout.PAPERS)


@dataclass
class SiteConfig:
    """What `precompute site` does."""

    caches: list[str] = option(positional=True, help="the caches to publish: files (`cache/<name>.duckdb`) or "
                                                     "names in `--cache-dir`")
    out: str = option("site", help="the folder to write (an earlier site there is replaced; any other folder "
                                   "must be empty)")
    cache_dir: str = cache_dir_option()
    title: str = option("Weight-tying explorer", help="the site's title, also the Hugging Face Space's")
    formats: list[str] = option(list(DEFAULT_FORMATS), help="image files offered beside each chart, from the figure "
                                                            "pack (`svg`, `pdf`, `png`; its CSV, spec and LaTeX files "
                                                            "come with them); `--formats ''` for none")
    presentation: bool = option(False, help="the cache pages' charts and files with presentation mode's larger "
                                            "text (the tour always has it)")
    handout: bool = option(False, help="also write the tour as a PDF to print (`handout.pdf`, linked from every step): "
                                       "a cover with the site's address and QR code (`--base-url`), then a landscape "
                                       "page per step with its chart, verdict and speaker notes, as searchable text")
    base_url: str | None = option(None, help="the address the site will be served from (https://...): the tour's "
                                             "first and last steps then show a QR code of their own address")
    paper: str = option("a4", choices=PAPERS, help="the handout's landscape sheet: `a4` or `letter` (US Letter)")

    def __post_init__(self):
        bad = [f for f in self.formats if f not in FORMATS]
        if bad:
            raise UserError(f"--formats: unknown format {', '.join(bad)}; choose from {', '.join(FORMATS)}")
        if not self.title.strip():
            raise UserError("--title must not be empty")
        if self.paper != "a4" and not self.handout:
            raise UserError("--paper sets the handout's sheet: give it with --handout")
        if self.base_url is not None:
            self.base_url = site_tour.check_base_url(self.base_url)


def run_site(cfg: SiteConfig) -> None:
    t0 = time.perf_counter()
    refs = open_caches(cfg.caches, cfg.cache_dir)
    out = Path(cfg.out).absolute()
    manifest = write_site(refs, out, title=cfg.title, formats=tuple(cfg.formats), presentation=cfg.presentation,
                          base_url=cfg.base_url, handout=cfg.handout, paper=cfg.paper,
                          progress=lambda line: print(line, flush=True))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {out / 'index.html'} ({len(manifest['pages'])} pages, {size / 1e6:.1f} MB) in "
          f"{time.perf_counter() - t0:.0f} s; open it in a browser, no server needed")


# -- caches ----------------------------------------------------------------------------------------


def open_caches(caches: list[str], cache_dir: str) -> list:
    """The caches as the app's CacheRefs, each checked to open; a UserError names the first that does not."""
    from explorer.render import pack

    refs, skipped = [], []
    for c in caches:
        try:
            refs.append(pack.open_ref(resolve_cache(c, cache_dir),
                                      f" (give a cache file or a name in --cache-dir '{cache_dir}')"))
        except UserError as exc:  # one bad cache is left out, with its reason; the others make the site
            skipped.append(exc)
    if not refs:
        raise skipped[0]
    for exc in skipped:
        print(f"skipped: {first_line(exc)}", file=sys.stderr, flush=True)
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
               presentation: bool = False, base_url: str | None = None, handout: bool = False,
               paper: str = "a4", progress=None) -> dict[str, Any]:
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
    remove_dead_leftovers(out.parent, out.name)  # a killed build's .partial-<pid> and .old-<pid>
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        manifest = _Builder(refs, tmp, title=title, formats=formats, presentation=presentation, base_url=base_url,
                            handout=handout, paper=paper, progress=progress or (lambda line: None)).build()
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


@dataclass
class _Cache:
    ref: Any
    folder: str
    summary: Summary
    kind: str
    claims: dict
    figures: list = field(default_factory=list)  # explorer.render.figure.Figure, in the registry's order
    charts: dict = field(default_factory=dict)  # figure name -> chart key (drawn ones)
    tables: dict = field(default_factory=dict)  # figure name -> DataFrame
    downloads: dict = field(default_factory=dict)  # figure name -> [(label, path relative to the cache folder)]
    skipped: dict = field(default_factory=dict)  # figure name -> why it is not shown
    tokens: bool = False
    text: dict | None = None  # the twins that run in the browser on its text page (precompute/text_page.py)

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def kind_label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)

    @property
    def description(self) -> str:
        """One sentence on what the cache holds (its models, its scale, or its sweep)."""
        s = self.summary
        if (s.scale or {}).get("line"):
            return str(s.scale["line"])
        cells = s.sweep_cells or []
        if cells:
            widths = sorted({int(c["d_model"]) for c in cells})
            seeds = max(int(c.get("n") or 0) for c in cells)
            return f"{len(cells)} cells, widths d = {', '.join(map(str, widths))}, up to {seeds} seeds each."
        models = s.models
        return "; ".join(f"{role}: {model_source(m)}" for role, m in models.items() if m)  # never the builder's path

    @property
    def claim_rows(self) -> list:
        """The paper's claims this cache tests (those with data), for the claims table."""
        return [c for c in self.claims.values() if c.verdict != NO_DATA]


class _Builder:
    def __init__(self, refs, root: Path, *, title: str, formats, presentation: bool, progress,
                 base_url: str | None = None, handout: bool = False, paper: str = "a4"):
        self.refs, self.root, self.title, self.base_url, self.handout = refs, root, title, base_url, handout
        self.paper = paper  # the handout's sheet (explorer.render.handout.PAPERS)
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

    def page(self, rel: str, template: str, *, current: str, scripts=(), charts: bool = True,
             prev: str | None = None, next: str | None = None, **context) -> None:
        """Write the page ``rel`` from ``template`` (precompute/templates/, which extends base.html: the
        site's header, the page, and its scripts, charts' data first, then Vega); ``current`` is the
        header link it marks as the page shown."""
        self.write(rel, site_assets.render(template, generator=GENERATOR, site_title=self.title, caches=self.caches,
                                           up="../" * rel.count("/"), current=current, scripts=list(scripts),
                                           charts=charts, prev=prev, next=next, **context))

    def chart_file(self, rel: str, key: str, chart, presentation: bool) -> None:
        """Write ``rel`` (.js) registering the chart's styled spec under ``key``: a chart that fits
        its column's width takes it (one with a width of its own, e.g. side-by-side panels, keeps it);
        with its phone layout beside it where it has one (site_assets.narrow_chart)."""
        from explorer.render.spec import vega_lite_spec

        text = ""
        for name, drawn, big in ((key, chart, presentation),  # and a phone's layout, at a screen's sizes
                                 (key + site_assets.NARROW, site_assets.narrow_chart(key), False)):
            if drawn is None:
                continue
            spec = json.loads(vega_lite_spec(drawn, presentation=big))
            spec["datasets"] = {n: _packed(rows) for n, rows in (spec.get("datasets") or {}).items()}
            if getattr(drawn, "width", None) == "container":
                # the page's column, as in the app: the width fits it, legends under the plot add height
                spec["width"] = "container"
                spec.setdefault("autosize", {"type": "fit-x", "contains": "padding", "resize": True})
            text += f"(window.SITE_CHARTS = window.SITE_CHARTS || {{}})[{js_data(name)}] = {js_data(spec)};\n"
        self.write(rel, text)

    # -- the whole site

    def build(self) -> dict[str, Any]:
        from explorer.render import presenter, slide, tour_notes
        from explorer.render import read as data
        from explorer.render.style import ON, PALETTE  # the app's T, I and O colours, and text on them
        from tying.cache.claims import claims

        t0 = time.perf_counter()
        self.write("assets/vega.js", site_assets.vega_bundle())
        self.write("assets/site.css", site_assets.render("site.css", palette=PALETTE, on=ON, slide=slide))
        for name in site_assets.SCRIPTS:
            self.write(f"assets/{name}", site_assets.script(name))
        self.write("assets/clock.js", tour_notes.CLOCK_JS)  # the presenter view's, the app's own
        self.write("assets/follow.js", presenter.site_js())  # the audience's and the presenter's windows follow
        self.write("assets/slide.js", slide.fit_js(".tour"))  # a tour step zoomed to the window, as in the app
        for ref in self.refs:
            s = data.summary(ref)
            self.caches.append(_Cache(ref, folder_name(ref.name), s, s.kind or "pair", claims(s)))
        for c in self.caches:
            c.tokens = self.searchable(c)
            c.text = text_page.sources(c.ref)
        for c in self.caches:
            t1 = time.perf_counter()
            self.cache_figures(c)
            site_map.write(self, c, js_data)  # the map's chart again, with its colourings (assets/map.js)
            self.cache_downloads(c)
            self.cache_page(c)
            if c.tokens:
                self.token_search(c)
            if c.text:
                text_page.write(self, c, js_data, c.text)
            self.progress(f"  {c.ref.name}: {len(c.charts)} charts, {len(c.tables)} tables, "
                          f"{sum(len(v) for v in c.downloads.values())} files"
                          f"{', token search' if c.tokens else ''} ({time.perf_counter() - t1:.0f} s)")
        site_tour.write(self, self.base_url, self.handout)
        self.page("index.html", "index.html", current="index.html")
        self.write("README.md", site_assets.render(
            "space-readme.md", title=self.title, title_json=json.dumps(self.title, ensure_ascii=False),
            names=", ".join(c.ref.name for c in self.caches), generator=GENERATOR, built=date.today().isoformat()))
        self.write(".nojekyll", "")
        manifest = {
            "generator": GENERATOR, "title": self.title, "built": date.today().isoformat(),
            "pages": sorted(self.pages), "tour": self.tour_pages, "handout": self.handout,
            "caches": [{"name": c.ref.name, "folder": c.folder, "kind": c.kind, "charts": sorted(c.charts),
                        "tables": sorted(c.tables), "downloads": {k: [p for _, p in v] for k, v in c.downloads.items()},
                        "skipped": c.skipped, "tokens": c.tokens, "text": c.text is not None} for c in self.caches],
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
        shown = [f for f in c.figures if f.name in c.charts or f.name in c.tables]
        self.page(f"{c.folder}/index.html", "cache.html", current=f"{c.folder}/index.html",
                  scripts=[f"charts/{f.name}.js" for f in shown if f.name in c.charts] + site_map.scripts(c),
                  c=c, shown=shown, tables={name: table_cells(df) for name, df in c.tables.items()})

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
        self.write(f"{c.folder}/tokens-data.js", f"window.SITE_TOKENS = {js_data(payload)};\n")
        self.page(f"{c.folder}/tokens.html", "tokens.html", current=f"{c.folder}/tokens.html",
                  scripts=["tokens-data.js", "../assets/tokens.js"], charts=False, c=c, k=k, tokens=f"{n:,}")

# -- what pages show -------------------------------------------------------------------------------


DOWNLOAD_LABELS = {"svg": "SVG", "pdf": "PDF", "png": "PNG", "csv": "CSV (data)", "tex": "LaTeX",
                   "json": "Vega-Lite spec"}


def _download_label(path: Path) -> str:
    ext = path.suffix.lstrip(".").lower()
    return DOWNLOAD_LABELS.get(ext, ext.upper() or path.name)


_NUMBER = re.compile(r"^[-−+]?[0-9][0-9.,]*( ± [0-9.,]+)?%?$")


def table_cells(df) -> dict[str, list]:
    """A table as the figure pack writes its cells (explorer.render.typesetting.formatted: 3 decimals, whole
    numbers for a column of them, "—" for none), for macros.html's data_table: the column names,
    whether each is a column of numbers (right-aligned), and the rows of text."""
    from explorer.render.typesetting import formatted

    cells = formatted(df)
    numeric = [all(v == "—" or _NUMBER.match(v) for v in cells[c]) and any(v != "—" for v in cells[c])
               for c in cells.columns]
    return {"columns": [str(c) for c in cells.columns], "numeric": numeric,
            "rows": [list(rec) for rec in cells.itertuples(index=False)]}
