"""The tour as a PDF handout (explorer/render/handout.py, `precompute site --handout`): a cover with
the site's address and its QR code, then one page per step, each with its title, verdict and
speaker notes as text; every page the same landscape sheet (A4, or Letter with `--paper letter`);
a chart too heavy for vectors drawn as pixels, its words still text."""

from __future__ import annotations

import io

import numpy as np
import pypdf
import pytest

from explorer.render import handout, read, tour
from precompute import site
from precompute.site import SiteConfig
from tests.conftest import SITE_BASE_URL
from tests.conftest import SITE_NAMES as NAMES
from tying.errors import UserError

A4, LETTER = (842, 595), (792, 612)  # landscape, in points: 297 x 210 mm and 11 x 8.5 in


@pytest.fixture
def handout_site(synthetic_site):
    """The shared site of the synthetic folder's caches (conftest), built with its handout."""
    out, stdout, _ = synthetic_site
    assert "handout.pdf" in stdout
    return out


def flat(page) -> str:
    return " ".join(page.extract_text().split())


def size(page) -> tuple[float, float]:
    return float(page.mediabox.width), float(page.mediabox.height)


def drawn_images(page) -> dict[str, tuple[float, float]]:
    """{image name: (width, height) in points as drawn}: the page's content stream followed
    through its q/Q and cm operators to each image's Do."""
    ctm, stack, out = np.eye(3), [], {}
    for operands, op in pypdf.generic.ContentStream(page.get_contents(), page.pdf).operations:
        if op == b"q":
            stack.append(ctm)
        elif op == b"Q":
            ctm = stack.pop()
        elif op == b"cm":
            a, b, c, d, e, f = (float(v) for v in operands)
            ctm = np.array([[a, b, 0], [c, d, 0], [e, f, 1]]) @ ctm
        elif op == b"Do":
            out[str(operands[0]).lstrip("/")] = (float(np.hypot(*ctm[0, :2])), float(np.hypot(*ctm[1, :2])))
    return out


def decoded(image) -> list[str]:
    import zxingcpp

    return [r.text for r in zxingcpp.read_barcodes(np.asarray(image.convert("L")))]


@pytest.mark.slow
def test_a_cover_then_one_page_per_step_with_its_title_verdict_and_notes(handout_site, synthetic_caches):
    refs = [read.CacheRef.of(synthetic_caches / f"{n}.duckdb") for n in NAMES]  # the site's order
    cover, *pages = pypdf.PdfReader(handout_site / "handout.pdf").pages
    assert len(pages) == len(tour.STEPS)
    assert {size(p) for p in [cover, *pages]} == {A4}  # every sheet A4 landscape, none another size
    for step, page in zip(tour.STEPS, pages):
        text = flat(page)  # text on every page, the map's too (only a chart may be a picture)
        assert f"Step {step.number} of {len(tour.STEPS)}. {step.title}" in text, step.slug
        assert "How to read it:" in text and " ".join(step.read.split()[:6]) in text, step.slug
        assert "Caveat:" in text and " ".join(step.notes.caveat.split()[:6]) in text, step.slug
        assert " ".join(step.notes.say.split()[:6]) in text, step.slug
        if step.claim is not None:  # every step's cache is in the folder: a computed verdict, not a gap
            source = tour.source_for(step, refs)
            assert f"Verdict: {tour.claim_for(step, source).verdict}." in text, step.slug
        assert f"{SITE_BASE_URL}/tour/step-{step.number}.html" in text, step.slug  # its own address at the foot


@pytest.mark.slow
def test_the_cover_gives_the_site_address_and_its_code(handout_site):
    cover = pypdf.PdfReader(handout_site / "handout.pdf").pages[0]
    address = SITE_BASE_URL + "/"
    text = flat(cover)
    assert address in text and "Contents" in text
    assert all(f"{s.number}. {s.title} page {s.number + 1}" in text for s in tour.STEPS)
    [picture] = cover.images  # the code, the cover's only picture
    assert decoded(picture.image) == [address]
    width, height = drawn_images(cover)[picture.name.rsplit(".", 1)[0]]
    assert width == pytest.approx(height) and width >= 5 / 2.54 * 72  # printed at least 5 cm wide


@pytest.mark.slow
def test_every_step_links_the_handout(handout_site):
    for number in range(1, len(tour.STEPS) + 1):
        assert "href='../handout.pdf'" in (handout_site / "tour" / f"step-{number}.html").read_text()


@pytest.mark.slow
def test_letter_sheets_a_cover_without_address_and_a_heavy_chart_drawn_as_pixels(synthetic_caches, monkeypatch):
    monkeypatch.setattr(handout, "MAX_VECTOR_BYTES", 0)  # every chart over the limit
    refs = [read.CacheRef.of(synthetic_caches / "mechanism.duckdb")]
    steps = (tour.BY_SLUG["setup"], tour.BY_SLUG["why"])
    cover, *pages = pypdf.PdfReader(io.BytesIO(handout.handout_pdf(refs, steps=steps, paper="letter"))).pages
    assert {size(p) for p in [cover, *pages]} == {LETTER} and len(pages) == 2
    assert "No address." in flat(cover) and "no QR code" in flat(cover) and not cover.images
    for step, page in zip(steps, pages):
        assert len(page.images) == 1  # the chart, a picture
        assert f"Step {step.number} of {len(tour.STEPS)}. {step.title}" in flat(page)  # its words still text


def test_the_sheet_is_a_site_option():
    from explorer.render import typesetting

    assert set(site.PAPERS) == set(handout.PAPERS)
    assert typesetting._fonts(False)["label"] == handout.CHART_LABEL  # the sizes a page weighs are the chart's own
    assert SiteConfig(caches=["x"], handout=True, paper="letter").paper == "letter"
    with pytest.raises(UserError, match="--paper"):
        SiteConfig(caches=["x"], paper="letter")  # a sheet without a handout: said, not ignored
    with pytest.raises(ValueError, match="paper"):
        handout.handout_pdf([], paper="a5")
