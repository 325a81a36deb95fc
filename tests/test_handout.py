"""The tour as a PDF handout (explorer/render/handout.py, `precompute site --handout`): one page per
step, each with its title, verdict and speaker notes; a page too heavy for vectors drawn as pixels."""

from __future__ import annotations

import io

import pypdf
import pytest

from explorer.render import handout, read, tour
from tests.test_site import _run


@pytest.fixture(scope="module")
def refs(synthetic_caches):
    return [read.CacheRef.of(p) for p in sorted(synthetic_caches.glob("*.duckdb"))]


def test_one_page_per_step_with_its_title_verdict_and_notes(refs):
    pages = pypdf.PdfReader(io.BytesIO(handout.handout_pdf(refs))).pages
    assert len(pages) == len(tour.STEPS)
    for step, page in zip(tour.STEPS, pages):
        text = " ".join(page.extract_text().split())
        assert f"Step {step.number} of {len(tour.STEPS)}." in text, step.slug
        assert "Caveat:" in text and step.notes.caveat.split()[0] in text, step.slug
        if step.claim is not None:  # every step's cache is in the folder: a computed verdict, not a gap
            source = tour.source_for(step, refs)
            assert f"Verdict: {tour.claim_for(step, source).verdict}." in text, step.slug
        assert float(page.mediabox.width) > float(page.mediabox.height) * 0.9  # landscape-ish, not a long strip


def test_a_heavy_page_is_drawn_as_pixels(refs, monkeypatch):
    monkeypatch.setattr(handout, "MAX_VECTOR_BYTES", 0)  # every page over the limit
    pages = pypdf.PdfReader(io.BytesIO(handout.handout_pdf(refs))).pages
    assert len(pages) == len(tour.STEPS)
    for page in pages:
        assert not page.extract_text().strip() and len(page.images) == 1


def test_the_site_writes_and_links_the_handout(synthetic_caches, tmp_path):
    out = tmp_path / "site"
    code, stdout, err = _run("site", "sweep", "mechanism", "--cache-dir", synthetic_caches, "--out", out,
                             "--formats", "", "--handout")
    assert code == 0, err
    assert len(pypdf.PdfReader(out / "handout.pdf").pages) == len(tour.STEPS)
    for number in range(1, len(tour.STEPS) + 1):
        assert "href='../handout.pdf'" in (out / "tour" / f"step-{number}.html").read_text()
    assert "handout.pdf" in stdout
