"""The figure pack's file formats: images drawn from a Vega-Lite spec, and tables as LaTeX.

:func:`render` draws a spec once as SVG with vl-convert and makes the PNG and PDF from that
SVG; the SVG carries the figure's title, caption and source line in ``<title>``/``<desc>``,
the PNG in UTF-8 text chunks (``iTXt``). :func:`latex` writes a table as booktabs, its cells
as the image shows them (:func:`explorer.render.typesetting.formatted`), escaped
(:func:`tex_escape`). :func:`check_formats` checks the image formats asked for.
"""

from __future__ import annotations

import json
import struct
import zlib

import pandas as pd

from explorer.render.typesetting import formatted, is_numeric
from tying.errors import UserError

FORMATS = ("svg", "pdf", "png")

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
    fmt = "".join("r" if is_numeric(list(cells[c])) else "l" for c in cells.columns)
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
