"""The tour as a PDF handout (`precompute site --handout` writes it as `handout.pdf`): one page per
step, drawn by vl-convert like the figure pack's PDFs (a page of thousands of points as pixels)
and joined by pypdf. Each page: the step's
number and title on top, its chart (the tour's own), and under it the claim, the verdict computed
from the cache with its numbers, how to read the chart, the speaker notes and the source line."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

from explorer.render import figures, provenance, read, setup_diagram, tour
from explorer.render.spec import vega_lite_spec
from explorer.render.typesetting import with_footer
from tying.cache.claims import STATEMENTS

MAX_VECTOR_BYTES = 2_000_000  # a page whose vector PDF is larger (the map's thousands of points) is drawn as pixels
RASTER_SCALE = 3  # pixels per drawn pixel of such a page: 216 dpi, sharp on paper

MISSING = {"mark": "text", "data": {"values": [{}]}, "width": 500, "height": 60,
           "encoding": {"text": {"value": "No cache given holds this step's data."}}}


def step_text(step: tour.Step, ref: read.CacheRef | None) -> str:
    """What a page says under its chart, one paragraph per line."""
    lines = []
    if step.claim is not None:
        lines.append(f"Claim: {STATEMENTS[step.claim]}")
        if ref is not None:
            claim = tour.claim_for(step, ref)
            lines.append(f"Verdict: {claim.verdict}. {claim.ours}")
            lines += [f"Also: {more.verdict}. {STATEMENTS[k]}" for k in step.also
                      for more in [tour.one_claim(k, read.summary(ref))]]
    lines.append(f"How to read it: {step.read}")
    notes = step.notes
    lines += ["", f"Say: {notes.say}", f"They ask: {notes.ask}", f"Caveat: {notes.caveat}"]
    return "\n".join(lines)


def step_spec(step: tour.Step, refs: Sequence[read.CacheRef], commit: str) -> dict:
    """One page of the handout as a Vega-Lite spec."""
    ref = tour.source_for(step, refs)
    if step.figure is None:
        spec = json.loads(vega_lite_spec(setup_diagram.setup_diagram()))
    elif ref is None:
        spec, ref = dict(MISSING), None
    else:
        spec = json.loads(vega_lite_spec(tour.step_figure(step, ref, view_size=260)[0]))
    if ref is not None and step.figure is not None:
        stages = figures.BY_NAME[step.figure].stages
        source = provenance.source_line(ref, read.summary(ref), stages, commit)
    else:
        source = f"weight-tying explorer @ {commit}"
    return with_footer(spec, step_text(step, ref if step.claim else None), source, presentation=False,
                       heading=f"Step {step.number} of {len(tour.STEPS)}. {step.title}")


def raster_pdf(png: bytes, scale: float) -> bytes:
    """One PDF page holding ``png``, drawn ``scale`` times the page's size in points (its dpi)."""
    from PIL import Image

    out = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").save(out, "PDF", resolution=72.0 * scale)
    return out.getvalue()


def handout_pdf(refs: Sequence[read.CacheRef], progress=None, steps: Sequence[tour.Step] = tour.STEPS) -> bytes:
    """The tour (``steps``: all of them) as one PDF, a page per step; ``progress(done, total)``
    after each page."""
    import pypdf
    import vl_convert as vlc

    commit = provenance.git_commit()
    writer = pypdf.PdfWriter()
    for i, step in enumerate(steps):
        svg = vlc.vegalite_to_svg(json.dumps(step_spec(step, refs, commit)))
        page = vlc.svg_to_pdf(svg)
        if len(page) > MAX_VECTOR_BYTES:
            page = raster_pdf(vlc.svg_to_png(svg, scale=RASTER_SCALE), RASTER_SCALE)
        writer.append(io.BytesIO(page))
        if progress is not None:
            progress(i + 1, len(steps))
    writer.add_metadata({"/Title": "Weight tying: the tour (handout)", "/Creator": "weight-tying explorer"})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
