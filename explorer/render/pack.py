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
every other file with its figure, title, caption, source and format, and the cache's models
(a local model by its file's name, size and sha256, never the builder's path).

Nothing here needs a Streamlit server, and nothing starts a process (the app imports this
module; tests/test_layers.py): the commit is read from ``.git`` directly.

This module assembles the pack; its parts live beside it: the source line and the commit in
:mod:`explorer.render.provenance`, the caption, source line and tables drawn as charts in
:mod:`explorer.render.typesetting`, the image files, their metadata and the LaTeX in
:mod:`explorer.render.formats`.
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from explorer.render import figures, read
from explorer.render.formats import FORMATS, check_formats, latex, render
from explorer.render.provenance import git_commit, source_line
from explorer.render.typesetting import figure_spec, table_spec
from tying.cache.summary_types import model_source
from tying.errors import UserError

MANIFEST = "manifest.json"

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
        source = source_line(ref, s, fig.stages, commit)

        def put(file: str, body: bytes, fmt: str, fig=fig, source=source) -> None:
            emit(file, body)
            files.append({"file": file, "figure": fig.name, "title": fig.title, "caption": fig.caption,
                          "source": source, "format": fmt})

        try:
            chart, frame = fig.build(ref)
            meta = {"Title": fig.title, "Description": fig.caption, "Source": source}
            if chart is None:
                spec = table_spec(frame, fig.caption, source, presentation=presentation, heading=fig.title)
            else:
                spec = figure_spec(chart, fig.caption, source, presentation=presentation, heading=fig.title)
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
                "models": {role: model_source(m) for role, m in (s.models or {}).items() if m},  # name, size, sha256
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
    from tying.cache.writer import folder_written  # whole or not at all; a killed run's leftovers removed

    out = Path(out)
    _check_out(out)
    with folder_written(out) as tmp:
        manifest = build_pack(ref, lambda name, body: (tmp / name).write_bytes(body), formats=formats, scale=scale,
                              presentation=presentation, progress=progress)
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
