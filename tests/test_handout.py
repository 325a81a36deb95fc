"""The tour as a PDF handout (explorer/render/handout.py, `precompute site --handout`): one page per
step, each with its title, verdict and speaker notes; a page too heavy for vectors drawn as pixels."""

from __future__ import annotations

import io

import pypdf
import pytest

from explorer.render import handout, read, tour
from tests.conftest import SITE_NAMES as NAMES


@pytest.fixture
def handout_site(synthetic_site):
    """The shared site of the synthetic folder's caches (conftest), built with its handout."""
    out, stdout, _ = synthetic_site
    assert "handout.pdf" in stdout
    return out


@pytest.mark.slow
def test_one_page_per_step_with_its_title_verdict_and_notes(handout_site, synthetic_caches):
    refs = [read.CacheRef.of(synthetic_caches / f"{n}.duckdb") for n in NAMES]  # the site's order
    pages = pypdf.PdfReader(handout_site / "handout.pdf").pages
    assert len(pages) == len(tour.STEPS)
    for step, page in zip(tour.STEPS, pages):
        text = " ".join(page.extract_text().split())
        assert f"Step {step.number} of {len(tour.STEPS)}." in text, step.slug
        assert "Caveat:" in text and step.notes.caveat.split()[0] in text, step.slug
        if step.claim is not None:  # every step's cache is in the folder: a computed verdict, not a gap
            source = tour.source_for(step, refs)
            assert f"Verdict: {tour.claim_for(step, source).verdict}." in text, step.slug
        assert float(page.mediabox.width) > float(page.mediabox.height) * 0.9  # landscape-ish, not a long strip


@pytest.mark.slow
def test_every_step_links_the_handout(handout_site):
    for number in range(1, len(tour.STEPS) + 1):
        assert "href='../handout.pdf'" in (handout_site / "tour" / f"step-{number}.html").read_text()


@pytest.mark.slow
def test_a_heavy_page_is_drawn_as_pixels(synthetic_caches, monkeypatch):
    monkeypatch.setattr(handout, "MAX_VECTOR_BYTES", 0)  # every page over the limit
    refs = [read.CacheRef.of(synthetic_caches / "mechanism.duckdb")]
    steps = (tour.BY_SLUG["setup"], tour.BY_SLUG["why"])
    pages = pypdf.PdfReader(io.BytesIO(handout.handout_pdf(refs, steps=steps))).pages
    assert len(pages) == 2
    for page in pages:
        assert not page.extract_text().strip() and len(page.images) == 1
