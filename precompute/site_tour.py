"""The static site's tour (`tour/step-N.html`): each step of :data:`explorer.render.tour.STEPS`
from the cache that holds its data, its speaker notes for the presenter view, and, with
``--base-url``, a QR code of its own address on the first and the last step."""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

from tying.errors import UserError

HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                  r"(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?")
"""A plain host: DNS labels (or an IPv6 literal in brackets), an optional port; no spaces, no
control characters, no user:password@."""


def check_base_url(url: str) -> str:
    """``url`` without a trailing slash; UserError (one line), before anything is built, unless it is
    an http(s) address with a plain host and no query, fragment, space or control character, short
    enough that a QR code holds every step's address."""
    from explorer.render import qr

    text = url.strip()
    parts = urlsplit(text)
    plain = not any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text)
    if (parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment or not plain
            or not HOST.fullmatch(parts.netloc)):
        raise UserError(f"--base-url must be the site's http(s) address with a plain host, like "
                        f"https://example.org/tour-site, got {url!r}"[:300])
    base = text.rstrip("/")
    longest = step_url(base, 99)
    if not qr.fits(longest):
        raise UserError(f"--base-url is too long for a QR code: a step's address would have {len(longest):,} "
                        f"characters, at most {qr.MAX_URL:,} fit")
    return base


def step_url(base_url: str, number: int) -> str:
    return f"{base_url}/tour/step-{number}.html"


HANDOUT = "handout.pdf"


def write(b, base_url: str | None, handout: bool = False) -> None:
    """Every tour step's page, written by the site's builder ``b`` (precompute.site._Builder), and
    with ``handout`` the whole tour as a PDF (:data:`HANDOUT`: a cover with the site's address and
    its QR code, then a page per step, on the sheet ``b.paper``)."""
    from markupsafe import Markup

    from explorer.render import qr, setup_diagram, tour, tour_notes
    from tying.cache.claims import STATEMENTS

    if handout:
        from explorer.render.handout import handout_pdf

        t0 = time.perf_counter()
        (b.root / HANDOUT).write_bytes(handout_pdf(
            b.refs, title=b.title, address=f"{base_url}/" if base_url else None, paper=b.paper,
            step_url=(lambda number: step_url(base_url, number)) if base_url else None))
        b.progress(f"  the tour's handout: {HANDOUT} ({time.perf_counter() - t0:.0f} s)")

    steps = tour.STEPS
    n = len(steps)
    by_ref = {c.ref: c for c in b.caches}
    for step in steps:
        source = tour.source_for(step, b.refs)
        c = by_ref.get(source)
        key, script = None, None
        if step.figure is None:
            key, script = "tour/setup", "charts/setup.js"
            b.chart_file(f"tour/{script}", key, setup_diagram.setup_diagram(presentation=True), True)
        elif c is not None:
            key, script = f"tour/{step.slug}", f"charts/{step.slug}.js"
            try:
                chart, _ = tour.step_figure(step, source)  # the app's example token on the map step
                b.chart_file(f"tour/{script}", key, chart, True)
            except Exception as exc:
                c.skipped[f"tour step {step.number}"] = f"{type(exc).__name__}: {exc}"
                key = script = None
        claim = tour.claim_for(step, source) if (c is not None and step.claim) else None
        also = [(STATEMENTS[k], tour.one_claim(k, c.summary)) for k in step.also] if claim else []
        rel = f"tour/step-{step.number}.html"
        b.tour_pages.append(rel)
        ahead = tour.step_at(step.number + 1).title if step.number < n else None
        url = step_url(base_url, step.number) if base_url and step.number in (1, n) else None
        b.page(rel, "step.html", current="tour", scripts=[script] * bool(script) + ["../assets/clock.js", "../assets/slide.js",
                                                                                "../assets/follow.js"],
               presenter=Markup(tour_notes.presenter_html(step.notes, step.number, n, ahead)),
               qr=Markup(qr.qr_svg(url)) if url else None, qr_url=url, handout=HANDOUT if handout else None,
               prev=f"step-{step.number - 1}.html" if step.number > 1 else None,
               next=f"step-{step.number + 1}.html" if step.number < n else None,
               step=step, n=n, cache=c, claim=claim, key=key, also=also,
               statement=STATEMENTS[step.claim] if step.claim is not None else None)
