"""The tour as a printed handout (`precompute site --handout` writes it as `handout.pdf`): a cover
with the site's address and its QR code, then one page per step, every page the same landscape
sheet (A4, or US Letter with ``paper="letter"``).

A step's page: its number and title on top, its chart (the tour's own) under it, then two
columns, the evidence (the claim, the verdict computed from the cache with its numbers, how to
read the chart) and the speaker's notes (tinted), and the source line at the foot. The words are
set here (:func:`wrap`, with the font's own widths) into one SVG of the sheet with the chart's SVG
inside it, and vl-convert turns that into a PDF page, every word PDF text (selectable,
searchable, its font embedded) and the chart vectors; a chart whose vectors are too heavy (the
map's thousands of points) goes in as a picture, and so does the cover's QR code (segno), its
modules never smoothed. pypdf joins the pages.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from explorer.render import figures, provenance, read, setup_diagram, tour
from explorer.render.spec import vega_lite_spec
from explorer.render.style import MUTED_TEXT
from explorer.render.typesetting import drawable
from tying.cache.claims import STATEMENTS

PAPERS = {"a4": (842.0, 595.0), "letter": (792.0, 612.0)}
"""Landscape sheets in points: A4 (297 x 210 mm) and US Letter (11 x 8.5 in)."""

MARGIN = 36.0  # half an inch: inside every printer's unprintable edge
GUTTER = 24.0  # between the two text columns
TITLE_SIZE = 18.0
BODY_SIZES = tuple(10.5 - 0.25 * i for i in range(11))  # 10.5 to 8 points; a page takes the one that makes its
# smallest text, the body's or the chart's labels, the largest
CHART_LABEL = 12  # the chart's axis and legend labels, in its own pixels (explorer.render.style, not presentation)
MAX_CHART_SCALE = 1.15
SOURCE_SIZE = 7.0
LEAD = 1.3  # line height over font size
TEXT_COLOUR = "#222222"
NOTES_TINT = "#f1f3f4"  # the notes' column: a light grey that prints and photocopies
NOTES_PAD = 8.0

MAX_VECTOR_BYTES = 2_000_000  # a chart whose vector PDF is larger (the map's thousands of points) is drawn as pixels
RASTER_SCALE = 3  # pixels per drawn pixel of such a chart: 216 dpi at its drawn size, sharp on paper
QR_MODULE_PX = 10  # pixels per module of the cover's QR picture
QR_SIDE = 200.0  # points, 7 cm: a phone reads it at arm's length, or from a photocopy

FONT = "Liberation Sans, Arial, Helvetica, sans-serif"
"""The handout's font: Liberation Sans, the sans-serif vl-convert draws with where it is installed
(Debian's Chromium depends on it), or a font of the same widths (:data:`WIDTHS`)."""

_ASCII = {False: (278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, *(556,) * 10, 278,
                  278, 584, 584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722,
                  778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556,
                  500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500,
                  722, 500, 500, 500, 334, 260, 334, 584),
          True: (278, 333, 474, 556, 556, 889, 722, 238, 333, 333, 389, 584, 278, 333, 278, 278, *(556,) * 10, 333,
                 333, 584, 584, 584, 611, 975, 722, 722, 722, 722, 667, 611, 778, 722, 278, 556, 722, 611, 833, 722,
                 778, 667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 333, 278, 333, 584, 556, 333, 556, 611,
                 556, 611, 556, 333, 611, 611, 278, 278, 556, 278, 889, 611, 611, 611, 611, 389, 556, 333, 611, 556,
                 778, 556, 556, 500, 389, 280, 389, 584)}
WIDTHS = {bold: {chr(32 + i): w for i, w in enumerate(ws)} | {c: 1000 for c in "→—…"} | {c: 549 for c in "±≤≥≈"}
          | {"–": 556, "×": 584, "−": 584, "·": 278, "“": 333 + 167 * bold, "”": 333 + 167 * bold,
             "‘": 222 + 56 * bold, "’": 222 + 56 * bold} for bold, ws in _ASCII.items()}
"""Advance widths (thousandths of the font size) of the handout's font, Arial's metrics, which
Liberation Sans shares: a line is set to its column's width (another character counts 0.6 em,
a wide one 1 em)."""


def text_width(text: str, size: float, *, bold: bool = False) -> float:
    """The width of ``text`` in points at ``size`` in :data:`FONT`."""
    import unicodedata

    table = WIDTHS[bold]
    return size / 1000 * sum(table.get(c) or (1000 if unicodedata.east_asian_width(c) in "WF" else 600) for c in text)


MISSING = {"mark": "text", "data": {"values": [{}]}, "width": 500, "height": 60,
           "encoding": {"text": {"value": "No cache given holds this step's data."}}}


@dataclass(frozen=True)
class Para:
    """A paragraph: a bold run-in ``label`` ("Claim:") and its ``text``."""

    label: str
    text: str


# -- words -----------------------------------------------------------------------------------------


def step_paragraphs(step: tour.Step, ref: read.CacheRef | None) -> tuple[list[Para], list[Para]]:
    """What a step's page says under its chart: (the evidence, the speaker's notes)."""
    evidence = []
    if step.claim is not None:
        evidence.append(Para("Claim:", STATEMENTS[step.claim]))
        if ref is not None:
            claim = tour.claim_for(step, ref)
            evidence.append(Para("Verdict:", f"{claim.verdict}. {claim.ours}"))
            evidence += [Para("Also:", f"{more.verdict}. {STATEMENTS[k]}") for k in step.also
                         for more in [tour.one_claim(k, read.summary(ref))]]
        else:
            evidence.append(Para("Verdict:", "no cache given holds this step's data."))
    evidence.append(Para("How to read it:", step.read))
    notes = step.notes
    return evidence, [Para("Say:", notes.say), Para("They ask:", notes.ask), Para("Caveat:", notes.caveat)]


def wrap(text: str, width: float, size: float, *, bold: bool = False, first: float = 0.0) -> list[str]:
    """``text`` broken at spaces into lines at most ``width`` points wide at ``size``
    (:func:`text_width`), the first line ``first`` points
    narrower (a run-in label's room); a word wider than a line is broken where it must."""
    lines: list[str] = []
    line = ""
    for word in drawable(text).split():
        room = width - (first if not lines else 0.0)
        trial = f"{line} {word}" if line else word
        if text_width(trial, size, bold=bold) <= room:
            line = trial
            continue
        if line:
            lines.append(line)
            room = width
        while text_width(word, size, bold=bold) > room:  # a long address or number: broken anywhere
            cut = max(1, int(len(word) * room / text_width(word, size, bold=bold)))
            lines.append(word[:cut])
            word, room = word[cut:], width
        line = word
    return lines + [line] if line else lines or [""]


class Sheet:
    """A page as one SVG of the sheet's size in points (y down from the top): words, boxes and
    pictures where they are put; vl-convert turns it into a one-page PDF, its words PDF text."""

    def __init__(self, width: float, height: float):
        self.width, self.height = width, height
        self.parts: list[str] = [f"<rect width='{width}' height='{height}' fill='#ffffff'/>"]

    def text(self, x: float, y: float, text: str, size: float, *, bold: bool = False, colour: str = TEXT_COLOUR,
             align: str = "left") -> None:
        """A line of ``text``, its baseline at ``y``, starting (``align``: ending, centred) at ``x``."""
        anchor = {"left": "start", "center": "middle", "right": "end"}[align]
        self.parts.append(f"<text x='{x:.2f}' y='{y:.2f}' font-size='{size}' fill='{colour}' text-anchor='{anchor}'"
                          + (" font-weight='bold'" if bold else "") + f">{escape(drawable(text))}</text>")

    def box(self, x: float, y: float, width: float, height: float, fill: str) -> None:
        self.parts.append(f"<rect x='{x:.2f}' y='{y:.2f}' width='{width:.2f}' height='{height:.2f}' fill='{fill}'/>")

    def svg(self, svg: str, x: float, y: float, scale: float) -> None:
        """A drawing (an SVG document: a chart) with its top-left corner at (x, y), ``scale`` times its size."""
        inner = svg[svg.index("<svg"):]  # without an XML declaration
        self.parts.append(f"<g transform='translate({x:.2f} {y:.2f}) scale({scale:.4f})'>{inner}</g>")

    def png(self, png: bytes, x: float, y: float, width: float, height: float, *, pixelated: bool = False) -> None:
        """A picture filling the box at (x, y) of ``width`` and ``height`` (``pixelated``: its pixels
        drawn as squares, never smoothed: a QR code's modules)."""
        data = base64.b64encode(png).decode("ascii")
        self.parts.append(f"<image x='{x:.2f}' y='{y:.2f}' width='{width:.2f}' height='{height:.2f}' "
                          f"preserveAspectRatio='none'" + (" image-rendering='optimizeSpeed'" if pixelated else "")
                          + f" href='data:image/png;base64,{data}'/>")

    def paragraphs(self, paras: Sequence[Para], x: float, y: float, width: float, size: float,
                   draw: bool = True) -> float:
        """``paras`` set from the top ``y`` in a column ``width`` wide; returns the y under them."""
        lead = size * LEAD
        for i, p in enumerate(paras):
            label_w = text_width(p.label + " ", size, bold=True) if p.label else 0.0
            for j, line in enumerate(wrap(p.text, width, size, first=label_w)):
                y += lead
                if draw:
                    if j == 0 and p.label:
                        self.text(x, y, p.label, size, bold=True)
                    self.text(x + (label_w if j == 0 else 0.0), y, line, size)
            y += 0.45 * lead if i < len(paras) - 1 else 0.0
        return y + 0.3 * size  # the last line's descenders

    def pdf(self) -> bytes:
        import vl_convert as vlc

        w, h = self.width, self.height
        return vlc.svg_to_pdf(f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' viewBox='0 0 {w} {h}' "
                              f"font-family='{FONT}'>{''.join(self.parts)}</svg>")


# -- the chart -------------------------------------------------------------------------------------


def chart_svg(spec: dict) -> tuple[str, bytes | None, float, float]:
    """A chart as ``(svg, png, width, height)``: its SVG, and where its vector PDF would be too
    heavy (thousands of points) a picture of it at :data:`RASTER_SCALE` (else None)."""
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(json.dumps(spec))
    width, height = (float(v) for v in re.search(r"<svg[^>]*?width=\"([\d.]+)\"[^>]*?height=\"([\d.]+)\"", svg).groups())
    png = vlc.svg_to_png(svg, scale=RASTER_SCALE) if len(vlc.svg_to_pdf(svg)) > MAX_VECTOR_BYTES else None
    return svg, png, width, height


# -- the pages -------------------------------------------------------------------------------------


def _footer(sheet: Sheet, source: str, right: str) -> float:
    """The source line (grey, small) at the sheet's foot and ``right`` beside it; returns its top."""
    right_w = text_width(right, SOURCE_SIZE) + 12
    lines = wrap(source, sheet.width - 2 * MARGIN - right_w, SOURCE_SIZE)
    lead = SOURCE_SIZE * LEAD
    top = sheet.height - MARGIN - lead * len(lines)
    for i, line in enumerate(lines):
        sheet.text(MARGIN, top + lead * (i + 1), line, SOURCE_SIZE, colour=MUTED_TEXT)
    sheet.text(sheet.width - MARGIN, top + lead * len(lines), right, SOURCE_SIZE, colour=MUTED_TEXT, align="right")
    return top


def step_chart(step: tour.Step, ref: read.CacheRef | None) -> dict:
    """The chart of a step's page as a Vega-Lite spec (a note where no cache holds its data)."""
    if step.figure is None:
        return json.loads(vega_lite_spec(setup_diagram.setup_diagram()))
    if ref is None:
        return dict(MISSING)
    return json.loads(vega_lite_spec(tour.step_figure(step, ref, view_size=260)[0]))


def step_page(step: tour.Step, refs: Sequence[read.CacheRef], commit: str, paper: str = "a4", foot: str = "") -> bytes:
    """One step's sheet as a one-page PDF; ``foot``: what its foot says beside the source line."""
    ref = tour.source_for(step, refs)
    if ref is not None and step.figure is not None:
        source = provenance.source_line(ref, read.summary(ref), figures.BY_NAME[step.figure].stages, commit)
    else:
        source = f"Source: weight-tying explorer @ {commit}."
    sheet = Sheet(*PAPERS[paper])
    inner = sheet.width - 2 * MARGIN
    y = MARGIN
    for line in wrap(f"Step {step.number} of {len(tour.STEPS)}. {step.title}", inner, TITLE_SIZE, bold=True):
        y += TITLE_SIZE * 1.2
        sheet.text(MARGIN, y, line, TITLE_SIZE, bold=True)
    y += 0.5 * TITLE_SIZE
    sheet.box(MARGIN, y, inner, 0.75, MUTED_TEXT)
    y += 10
    bottom = _footer(sheet, source, foot) - 10

    svg, png, cw, ch = chart_svg(step_chart(step, ref))
    evidence, notes = step_paragraphs(step, ref if step.claim else None)
    col = (inner - GUTTER) / 2
    best = None
    for size in BODY_SIZES:  # the smallest text of the page, body or chart, as large as it can be
        text_h = max(sheet.paragraphs(evidence, 0, 0, col, size, draw=False),
                     sheet.paragraphs(notes, 0, 0, col - 2 * NOTES_PAD, size, draw=False)) + 2 * NOTES_PAD
        fit = min(inner / cw, (bottom - y - 12 - text_h) / ch, MAX_CHART_SCALE)
        if best is None or min(size, CHART_LABEL * fit) > best[0]:
            best = (min(size, CHART_LABEL * fit), size, max(fit, 0.3))
    _, size, scale = best
    x = MARGIN + (inner - cw * scale) / 2
    if png is None:
        sheet.svg(svg, x, y, scale)
    else:
        sheet.png(png, x, y, cw * scale, ch * scale)
    y += ch * scale + 12
    sheet.paragraphs(evidence, MARGIN, y + NOTES_PAD, col, size)
    x = MARGIN + col + GUTTER
    notes_bottom = sheet.paragraphs(notes, x + NOTES_PAD, y + NOTES_PAD, col - 2 * NOTES_PAD, size, draw=False)
    sheet.box(x, y, col, notes_bottom + NOTES_PAD - y, NOTES_TINT)
    sheet.paragraphs(notes, x + NOTES_PAD, y + NOTES_PAD, col - 2 * NOTES_PAD, size)
    return sheet.pdf()


def qr_png(url: str) -> tuple[bytes, int]:
    """The QR code of ``url`` as a black-and-white picture (error correction M, a quiet zone of 4
    modules, :data:`QR_MODULE_PX` pixels a module), and its width in modules."""
    import segno

    code = segno.make(url, error="m", micro=False)
    out = io.BytesIO()
    code.save(out, kind="png", scale=QR_MODULE_PX, border=4)
    return out.getvalue(), code.symbol_size(border=4)[0]


def cover_page(title: str, address: str | None, steps: Sequence[tour.Step], names: Sequence[str], commit: str,
               paper: str = "a4") -> bytes:
    """The cover as a one-page PDF: the title, what the handout holds, the steps with their pages,
    and the site's address with its QR code (or, made without one, a plain line that it has none)."""
    sheet = Sheet(*PAPERS[paper])
    inner = sheet.width - 2 * MARGIN
    left = inner * 0.56
    y = MARGIN + 30
    for line in wrap(title, left, 30, bold=True):
        sheet.text(MARGIN, y, line, 30, bold=True)
        y += 36
    y = sheet.paragraphs([Para("", f"The tour in {len(steps)} steps, a page each: the chart, the paper's claim, "
                                   "the verdict the data give, how to read the chart, and the speaker's notes.")],
                         MARGIN, y - 6, left, 13)
    sheet.text(MARGIN, y + 18, "Contents", 12, bold=True)
    y += 24
    for i, step in enumerate(steps):
        y += 11 * 1.45
        sheet.text(MARGIN, y, f"{step.number}.", 11)
        sheet.text(MARGIN + 22, y, step.title, 11)
        sheet.text(MARGIN + left, y, f"page {i + 2}", 11, colour=MUTED_TEXT, align="right")

    x = MARGIN + left + GUTTER * 1.5
    col = sheet.width - MARGIN - x
    top = MARGIN + 40
    if address:
        png, _ = qr_png(address)
        side = min(col, QR_SIDE)
        sheet.png(png, x + (col - side) / 2, top, side, side, pixelated=True)
        y = top + side + 14
        sheet.text(x + col / 2, y, "Scan to open the site", 11, colour=MUTED_TEXT, align="center")
        y += 22
        for line in wrap(address, col, 13, bold=True):
            y += 16
            sheet.text(x + col / 2, y, line, 13, bold=True, align="center")
    else:
        said = [Para("No address.", "This handout was made without the site's address (precompute site "
                                    "--base-url), so it has no QR code.")]
        bottom = sheet.paragraphs(said, x + NOTES_PAD, top + NOTES_PAD, col - 2 * NOTES_PAD, 12, draw=False)
        sheet.box(x, top, col, bottom + NOTES_PAD - top, NOTES_TINT)
        sheet.paragraphs(said, x + NOTES_PAD, top + NOTES_PAD, col - 2 * NOTES_PAD, 12)
    made = (f"Made by weight-tying explorer @ {commit} (python -m precompute site --handout) from the "
            f"{'cache' if len(names) == 1 else 'caches'} {', '.join(repr(n) for n in names)}.")
    _footer(sheet, made, f"page 1 of {len(steps) + 1}")
    return sheet.pdf()


def handout_pdf(refs: Sequence[read.CacheRef], progress: Callable[[int, int], None] | None = None,
                steps: Sequence[tour.Step] = tour.STEPS, *, title: str = "Weight-tying explorer",
                address: str | None = None, paper: str = "a4",
                step_url: Callable[[int], str] | None = None) -> bytes:
    """The tour (``steps``: all of them) as one PDF: a cover with ``title`` and the site's
    ``address`` (its QR code), then a page per step, each the ``paper``'s landscape sheet
    (:data:`PAPERS`), with the step's own address (``step_url(number)``) at its foot;
    ``progress(done, total)`` after each page."""
    import pypdf

    if paper not in PAPERS:
        raise ValueError(f"paper must be one of {', '.join(PAPERS)}, got {paper!r}")
    commit = provenance.git_commit()
    writer = pypdf.PdfWriter()
    writer.append(io.BytesIO(cover_page(title, address, steps, [r.name for r in refs], commit, paper)))
    for i, step in enumerate(steps):
        foot = " · ".join(filter(None, [step_url(step.number) if step_url else "", f"page {i + 2} of {len(steps) + 1}"]))
        writer.append(io.BytesIO(step_page(step, refs, commit, paper, foot)))
        if progress is not None:
            progress(i + 1, len(steps))
    writer.add_metadata({"/Title": f"{title}: the tour (handout)", "/Creator": "weight-tying explorer"})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
