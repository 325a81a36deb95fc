"""The figure pack: every figure and table a cache supports, as files for a paper or a slide.

``python -m precompute figures CACHE`` writes it to a folder (:func:`write_pack`); the app's
sidebar offers the same pack as one zip (:func:`pack_zip`). Both draw with the registry of
:mod:`explorer.render.figures` (the pages' own chart builders) and the exports' styling
(:func:`explorer.render.spec.vega_lite_spec`: one palette, one font, large fonts with
``presentation``). Per registry entry:

* a figure: ``<name>.svg|pdf|png`` (the asked formats), ``<name>.json`` (the Vega-Lite spec
  that drew them, data inline) and ``<name>.csv`` (the chart's data);
* a table: ``<name>.csv``, ``<name>.tex`` (booktabs, escaped, its caption and label) and
  the table drawn as a figure, ``<name>.svg|pdf|png``, to paste on a slide.

Every image carries its caption (the registry's) and a source line (the cache, its models
or data, this repository's commit, the parameters of the stage behind it) under the plot,
and in its metadata (SVG ``<title>``/``<desc>``, PNG ``iTXt``). ``manifest.json`` lists
every other file with its figure, title, caption, source and format.

Nothing here needs a Streamlit server, and nothing starts a process (the app imports this
module; tests/test_layers.py): the commit is read from ``.git`` directly.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
import shutil
import struct
import textwrap
import threading
import uuid
import zipfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import altair as alt
import pandas as pd

from explorer.render import figures, read
from explorer.render.spec import vega_lite_spec
from explorer.render.style import NEUTRAL, style
from tying.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("svg", "pdf", "png")
MANIFEST = "manifest.json"
FOOTER_GAP = 16  # pixels between a plot (or its legends) and its caption
TEXT_COLOUR = "#333333"  # the caption; the source line is NEUTRAL

HIDDEN_PARAMS = {"inputs", "stage", "corpus_sha256", "tied", "untied", "tied_revision", "untied_revision"}
"""Stage parameters a source line leaves out: hashes, and the models (named once already)."""


# -- provenance -------------------------------------------------------------------------------


def git_commit(root: Path = ROOT) -> str:
    """The short commit of the checkout at ``root`` (what ``git rev-parse --short HEAD`` says
    for an unambiguous 7-digit prefix), read from ``.git``; "unknown" outside a checkout."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree or a submodule: "gitdir: <path>"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():  # a worktree keeps its branches in the main .git
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head[:7] if re.fullmatch(r"[0-9a-f]{40}", head) else "unknown"
        name = head[4:].strip()
        for base in (git, common):
            if (base / name).is_file():
                return (base / name).read_text().strip()[:7]
        for base in (git, common):
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    sha, _, ref_name = line.partition(" ")
                    if ref_name == name and re.fullmatch(r"[0-9a-f]{40}", sha):
                        return sha[:7]
    except (OSError, IndexError):
        pass
    return "unknown"


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, str) and os.path.isabs(v):
        try:  # a path under the repository reads the same on every machine
            return str(Path(v).relative_to(ROOT))
        except ValueError:
            return v
    return str(v)


def stage_params(stages: dict, wanted: tuple[str, ...] | None) -> str:
    """The recorded parameters of the wanted stages, briefly: ``alignment: held_out=0.2, seed=0``.
    Stages ``<name>:<cell>`` (a sweep's) are one group, a parameter that differs between
    them listed as its values (``d_model=32/64/128``)."""
    groups: dict[str, dict[str, list]] = {}
    for stage, info in stages.items():
        group = stage.split(":", 1)[0]
        if wanted is not None and group not in wanted:
            continue
        params = groups.setdefault(group, {})
        for key, v in ((info or {}).get("params") or {}).items():
            if key in HIDDEN_PARAMS or v is None or isinstance(v, dict):
                continue
            text = ",".join(_value(x) for x in v) if isinstance(v, list) else _value(v)
            if text and text not in params.setdefault(key, []):
                params[key].append(text)
    parts = []
    for group, params in groups.items():
        def order(x: str):
            try:
                return (0, float(x), x)
            except ValueError:
                return (1, 0.0, x)
        cells = [f"{k}={'/'.join(sorted(vs, key=order))}" for k, vs in params.items() if vs]
        if cells:
            parts.append(f"{group}: {', '.join(cells)}")
    return "; ".join(parts)


def _where_from(s: dict) -> str:
    """The models of a cache (source@revision), or the published data it was built from."""
    models = s.get("models") or {}
    named = [f"{role} {m['source']}" + (f"@{m['revision']}" if m.get("revision") else "")
             for role, m in models.items() if m and m.get("source")]
    if named:
        return "models: " + ", ".join(named)
    repos = []
    for src in s.get("sources") or []:
        text = f"{src.get('repository')}@{str(src.get('commit') or '')[:7]}".rstrip("@")
        if src.get("repository") and text not in repos:
            repos.append(text)
    if repos:
        licence = next((src.get("license", "").split(" (")[0] for src in s["sources"] if src.get("license")), "")
        return "data: " + ", ".join(repos) + (f" ({licence})" if licence else "")
    return ""


def source_line(ref: read.CacheRef, s: dict, name: str, commit: str) -> str:
    """Where a figure comes from: the cache, its models (or data), this repository's commit and
    the parameters of the stages behind it."""
    parts = [f"weight-tying explorer @ {commit}, cache '{ref.name}' ({s.get('kind') or 'pair'})"]
    where = _where_from(s)
    if where:
        parts.append(where)
    params = stage_params(s.get("stages") or {}, figures.BY_NAME[name].stages or None if name in figures.BY_NAME else None)
    if params:
        parts.append(params)
    return "Source: " + "; ".join(parts) + "."


# -- drawing ----------------------------------------------------------------------------------


@functools.cache
def _fonts(presentation: bool) -> dict:
    """The font sizes of the charts' styling (explorer.charts.style) in this mode."""
    config = style(alt.Chart(pd.DataFrame({"x": [0]})).mark_point(), presentation=presentation).to_dict()["config"]
    label = config["axis"]["labelFontSize"]
    return {"label": label, "text": config["text"]["fontSize"], "source": max(9, round(label * 0.8))}


_CHAR_EM = {**dict.fromkeys("0123456789", 0.556), **dict.fromkeys("mwMW", 0.94), **dict.fromkeys(" .,:;'|!il", 0.3),
            **dict.fromkeys("ABCDEFGHIJKLNOPQRSTUVXYZ", 0.72), **dict.fromkeys("—→←‖", 1.0)}


def text_px(text: str, size: float, *, bold: bool = False) -> float:
    """A generous estimate of a text's width in the sans-serif font vl-convert draws with."""
    em = sum(_CHAR_EM.get(c, 0.6 if not c.islower() else 0.53) for c in text)
    return em * size * (1.08 if bold else 1.0)


def _spec_width(spec: dict) -> float:
    """The drawn width of a Vega-Lite view, plots only (axes and legends not counted)."""
    if "hconcat" in spec:
        return sum(_spec_width(s) for s in spec["hconcat"]) + 20 * (len(spec["hconcat"]) - 1)
    if "vconcat" in spec:
        return max(_spec_width(s) for s in spec["vconcat"])
    w = spec.get("width")
    if isinstance(w, (int, float)) and not isinstance(w, bool):
        return float(w)
    if "layer" in spec:
        return max([_spec_width(s) for s in spec["layer"]] + [0.0]) or 300.0
    return 300.0


MISSING_GLYPHS = {"‖": "||"}
"""Characters the font vl-convert draws with lacks (a line holding one falls back to a serif
font as a whole), and what is drawn instead."""


def drawable(text: str) -> str:
    return "".join(MISSING_GLYPHS.get(c, c) for c in text)


def _lines(text: str, width: float, size: float) -> list[str]:
    return textwrap.wrap(drawable(text), max(30, int(width / (0.5 * size))), break_on_hyphens=False)


TOP_LEVEL = ("$schema", "config", "datasets", "background", "padding", "autosize", "usermeta")


def with_footer(spec: dict, caption: str, source: str, *, presentation: bool) -> dict:
    """A finished Vega-Lite spec with its caption and, smaller and grey, its source line drawn
    under it (under its legends too), wrapped to the plot's width: the view goes into a
    one-view ``vconcat`` whose title, at the bottom, holds the two."""
    spec = dict(spec)
    top = {k: spec.pop(k) for k in TOP_LEVEL if k in spec}
    fonts = _fonts(presentation)
    width = max(_spec_width(spec), 30.0 * fonts["label"])  # a narrow table's caption still reads as prose
    title = {"text": _lines(caption, width, fonts["label"]), "subtitle": _lines(source, width, fonts["source"]),
             "orient": "bottom", "anchor": "start", "frame": "group", "offset": FOOTER_GAP,
             "fontSize": fonts["label"], "fontWeight": "normal", "color": TEXT_COLOUR,
             "lineHeight": round(fonts["label"] * 1.35), "subtitleFontSize": fonts["source"],
             "subtitleColor": NEUTRAL, "subtitleLineHeight": round(fonts["source"] * 1.35),
             "subtitlePadding": round(fonts["source"] * 0.6)}
    return {**top, "description": caption, "usermeta": {"caption": caption, "source": source},
            "vconcat": [spec], "title": title}


def figure_spec(chart: alt.TopLevelMixin, caption: str, source: str, *, presentation: bool) -> dict:
    """The spec of a figure as written: the pages' chart, styled for files, with its caption."""
    return with_footer(json.loads(vega_lite_spec(chart, presentation=presentation)), caption, source,
                       presentation=presentation)


def _blank(v) -> bool:
    try:
        return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
    except TypeError:
        return False


def formatted(df: pd.DataFrame) -> pd.DataFrame:
    """A table's cells as text, as the tables show them: 3 decimals (whole numbers for a
    column of whole numbers), "—" for a missing value."""
    out = {}
    for col in df.columns:
        v = df[col]
        if pd.api.types.is_float_dtype(v):
            whole = v.dropna().map(lambda x: float(x).is_integer()).all()
            out[col] = ["—" if _blank(x) else (f"{x:,.0f}" if whole else f"{x:.3f}") for x in v]
        elif pd.api.types.is_bool_dtype(v):
            out[col] = ["—" if _blank(x) else ("yes" if x else "no") for x in v]
        else:
            out[col] = ["—" if _blank(x) else str(x) for x in v]
    return pd.DataFrame(out, columns=[str(c) for c in df.columns])


_NUMBER = re.compile(r"^[-−+]?[0-9.,]+")


def _numeric(values: list[str]) -> bool:
    shown = [v for v in values if v != "—"]
    return bool(shown) and all(_NUMBER.match(v) for v in shown)


WIDE = 10  # a table of more columns than this (and than rows) is drawn transposed: one column per row


def _for_slide(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells as drawn: a wide table (a sweep's 23 columns) transposed, each row becoming a
    column headed by the first column whose values are all different ("d_model 32")."""
    if len(cells.columns) <= WIDE or len(cells.columns) <= len(cells):
        return cells
    key = next((c for c in cells.columns if cells[c].nunique() == len(cells)), None)
    heads = [f"{key} {v}" if key else f"row {i + 1}" for i, v in enumerate(cells[key] if key else cells.index)]
    body = {"": list(cells.columns)}
    for head, (_, row) in zip(heads, cells.iterrows()):
        body[head] = list(row)
    return pd.DataFrame(body)


def table_chart(df: pd.DataFrame, *, presentation: bool) -> alt.LayerChart:
    """A table drawn as a text grid (header bold, rules above and under the header and at the
    end, numbers right-aligned), at the charts' text size: a table to paste on a slide."""
    size = _fonts(presentation)["text"]
    cells = _for_slide(formatted(df))
    cells = pd.DataFrame({drawable(c): [drawable(v) for v in cells[c]] for c in cells.columns})
    gap, row_h = size * 1.6, round(size * 1.8)
    rows, x = [], 0.0
    for col in cells.columns:
        values = list(cells[col])
        width = max([text_px(col, size, bold=True)] + [text_px(v, size) for v in values])
        right = _numeric(values)
        anchor = x + width if right else x
        rows.append({"text": col, "x": anchor, "y": row_h / 2, "align": "right" if right else "left", "head": 1})
        rows += [{"text": v, "x": anchor, "y": row_h * (i + 1.5) + 4, "align": "right" if right else "left",
                  "head": 0} for i, v in enumerate(values)]
        x += width + gap
    width, height = round(x - gap), round(row_h * (len(cells) + 1) + 8)
    grid = pd.DataFrame(rows)
    layers = []
    for align in ("left", "right"):
        for head in (1, 0):
            sub = grid[(grid["align"] == align) & (grid["head"] == head)]
            if len(sub):
                layers.append(alt.Chart(sub).mark_text(
                    align=align, baseline="middle", fontSize=size, fontWeight="bold" if head else "normal",
                    color=TEXT_COLOUR).encode(x=alt.X("x:Q", scale=None, axis=None),
                                              y=alt.Y("y:Q", scale=None, axis=None), text="text:N"))
    rules = pd.DataFrame({"y": [0.5, row_h + 2, height - 0.5], "w": [1.5, 1.0, 1.5]})
    layers.append(alt.Chart(rules).mark_rule(color=NEUTRAL).encode(
        y=alt.Y("y:Q", scale=None, axis=None), x=alt.value(0), x2=alt.value(width),
        strokeWidth=alt.StrokeWidth("w:Q", scale=None, legend=None)))
    return alt.layer(*layers).properties(width=width, height=height)


def table_spec(df: pd.DataFrame, caption: str, source: str, *, presentation: bool) -> dict:
    """The spec of a table drawn as a figure, with its caption: sized here, so not rescaled for
    presentation (its font already is)."""
    chart = style(table_chart(df, presentation=presentation), presentation=presentation)
    return with_footer(chart.to_dict(), caption, source, presentation=presentation)


# -- files ------------------------------------------------------------------------------------

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_TEX_UNICODE = {"→": r"$\rightarrow$", "←": r"$\leftarrow$", "±": r"$\pm$", "—": "---", "–": "--",
                "‖": r"$\|$", "×": r"$\times$", "≤": r"$\leq$", "≥": r"$\geq$", "≈": r"$\approx$",
                "−": "$-$", "␣": r"\textvisiblespace{}", "…": r"\ldots{}"}


def tex_escape(text: str) -> str:
    """Plain text as LaTeX text (special characters escaped, the app's arrows and signs as macros)."""
    text = "".join(_TEX_SPECIAL.get(c, c) for c in text)
    return "".join(_TEX_UNICODE.get(c, c) for c in text)


def latex(df: pd.DataFrame, name: str, title: str, caption: str, source: str) -> str:
    """A booktabs table: the cells as the image shows them, escaped; caption, label, source."""
    cells = formatted(df)
    fmt = "".join("r" if _numeric(list(cells[c])) else "l" for c in cells.columns)
    body = pd.DataFrame({tex_escape(c): [tex_escape(v) for v in cells[c]] for c in cells.columns})
    table = body.to_latex(index=False, escape=False, column_format=fmt, caption=(tex_escape(caption),
                          tex_escape(title)), label=f"tab:{name}", position="t")
    return f"% {name}: {title}\n% {source}\n% needs \\usepackage{{booktabs}}\n{table}"


def _svg_with_meta(svg: str, title: str, caption: str, source: str) -> str:
    from xml.sax.saxutils import escape

    meta = f"<title>{escape(title)}</title><desc>{escape(caption + ' ' + source)}</desc>"
    end = svg.index(">", svg.index("<svg")) + 1
    return svg[:end] + meta + svg[end:]


def _png_with_meta(png: bytes, meta: dict[str, str]) -> bytes:
    """The PNG with UTF-8 text chunks (iTXt: Title, Description, Source) before its end chunk."""
    chunks = b""
    for key, text in meta.items():
        body = key.encode("latin-1") + b"\0\0\0\0\0" + text.encode("utf-8")
        chunks += struct.pack(">I", len(body)) + b"iTXt" + body + struct.pack(">I", zlib.crc32(b"iTXt" + body))
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunks + png[end:]


def render(spec: dict, formats: tuple[str, ...], scale: float, meta: dict[str, str]) -> dict[str, bytes]:
    """{format: file bytes}: Vega-Lite drawn once as SVG, the PNG and PDF made from that SVG."""
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(json.dumps(spec))
    out = {}
    for fmt in formats:
        if fmt == "svg":
            out[fmt] = _svg_with_meta(svg, meta["Title"], meta["Description"], meta["Source"]).encode()
        elif fmt == "png":
            out[fmt] = _png_with_meta(vlc.svg_to_png(svg, scale=scale), meta)
        elif fmt == "pdf":
            out[fmt] = vlc.svg_to_pdf(svg)
        else:
            raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    return out


def check_formats(formats) -> tuple[str, ...]:
    """The image formats asked for, each once, in order; UserError for an unknown or none."""
    seen = []
    for fmt in formats:
        fmt = fmt.strip().lower()
        if fmt not in FORMATS:
            raise UserError(f"unknown format '{fmt}'; choose from {', '.join(FORMATS)}")
        if fmt not in seen:
            seen.append(fmt)
    if not seen:
        raise UserError(f"no format asked for; choose from {', '.join(FORMATS)}")
    return tuple(seen)


Progress = Callable[[int, int, str], None]


def build_pack(ref: read.CacheRef, emit: Callable[[str, bytes], None], *, formats=FORMATS, scale: float = 2.0,
               presentation: bool = False, progress: Progress | None = None) -> dict:
    """Draw every figure and table of the cache, handing each file to ``emit(name, bytes)``,
    the manifest last; returns the manifest. ``progress(done, total, figure)`` after each entry.
    A figure that fails raises (with a note naming it): no pack is better than half of one."""
    formats = check_formats(formats)
    if not scale > 0:
        raise UserError(f"the scale must be above 0, got {scale}")
    s = read.summary(ref)
    commit = git_commit()
    entries = figures.available(ref)
    files = []
    for i, fig in enumerate(entries):
        source = source_line(ref, s, fig.name, commit)

        def put(file: str, body: bytes, fmt: str, fig=fig, source=source) -> None:
            emit(file, body)
            files.append({"file": file, "figure": fig.name, "title": fig.title, "caption": fig.caption,
                          "source": source, "format": fmt})

        try:
            chart, frame = fig.build(ref)
            meta = {"Title": fig.title, "Description": fig.caption, "Source": source}
            if chart is None:
                spec = table_spec(frame, fig.caption, source, presentation=presentation)
            else:
                spec = figure_spec(chart, fig.caption, source, presentation=presentation)
            for fmt, body in render(spec, formats, scale, meta).items():
                put(f"{fig.name}.{fmt}", body, fmt)
            if chart is not None:
                put(f"{fig.name}.json", json.dumps(spec, indent=1, allow_nan=False, default=str).encode(), "json")
            put(f"{fig.name}.csv", frame.to_csv(index=False).encode(), "csv")
            if chart is None:
                put(f"{fig.name}.tex", latex(frame, fig.name, fig.title, fig.caption, source).encode(), "tex")
        except Exception as exc:
            exc.add_note(f"while drawing {fig.name} of the cache {ref.name}")
            raise
        if progress is not None:
            progress(i + 1, len(entries), fig.name)
    manifest = {"cache": ref.name, "commit": commit, "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "presentation": bool(presentation), "scale": scale, "formats": list(formats), "files": files}
    emit(MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False).encode())
    return manifest


def open_ref(path: Path, hint: str = "") -> read.CacheRef:
    """The cache at ``path`` to draw from; UserError (one line) when it is missing or does not open."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no cache at '{path}'{hint}")
    ref = read.CacheRef.of(path)
    err = read.open_error(ref)
    if err is not None:
        raise UserError(err.message + (f"; rebuild with: {err.rebuild}" if err.rebuild else ""))
    return ref


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; the figure pack is a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise UserError(f"{out} holds files that are not a figure pack (no {MANIFEST}); choose another --out")


def write_pack(ref: read.CacheRef, out: Path, formats=FORMATS, scale: float = 2.0, presentation: bool = False,
               progress: Progress | None = None) -> dict:
    """Write the pack to the folder ``out`` and return its manifest. The pack is built in a
    temporary folder beside ``out`` and renamed into place, replacing an earlier pack there:
    ``out`` is never half-written (a failure leaves it as it was). A folder that holds other
    files (no manifest) is refused."""
    out = Path(out)
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir()
    try:
        manifest = build_pack(ref, lambda name, body: (tmp / name).write_bytes(body), formats=formats, scale=scale,
                              presentation=presentation, progress=progress)
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.old"
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return manifest


_ZIPS: dict[tuple, bytes] = {}
_ZIP_LOCK = threading.Lock()
ZIPS_KEPT = 4


def pack_zip(ref: read.CacheRef, formats=FORMATS, scale: float = 2.0, presentation: bool = False) -> bytes:
    """The pack as one zip (its files in a folder ``<cache>-figures/``), for the app's download.
    Built once per cache version and settings (the last few kept), one at a time."""
    key = (ref, tuple(formats), float(scale), bool(presentation))
    with _ZIP_LOCK:
        if key not in _ZIPS:
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
                build_pack(ref, lambda name, body: zf.writestr(f"{ref.name}-figures/{name}", body), formats=formats,
                           scale=scale, presentation=presentation)
            _ZIPS[key] = buf.getvalue()
            while len(_ZIPS) > ZIPS_KEPT:
                _ZIPS.pop(next(iter(_ZIPS)))
        return _ZIPS[key]
