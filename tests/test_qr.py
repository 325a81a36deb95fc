"""QR codes of tour steps (explorer/render/qr.py, `precompute site --base-url`): each drawn code
read back by a decoder (zxing-cpp) gives the address it was drawn for."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from explorer.render import qr, tour
from precompute import site_tour
from tests.conftest import SITE_BASE_URL
from tests.test_site import _run
from tying.errors import UserError


def decoded(svg: str) -> list[str]:
    """The texts a QR decoder reads from an inline SVG, drawn to pixels by resvg (vl-convert)."""
    import vl_convert as vlc
    import zxingcpp
    from PIL import Image

    standalone = svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400" ', 1)
    image = Image.open(io.BytesIO(vlc.svg_to_png(standalone, scale=1))).convert("L")
    return [r.text for r in zxingcpp.read_barcodes(np.asarray(image))]


@pytest.mark.parametrize("url", ["https://example.org/tour/step-1.html",
                                 "https://huggingface.co/spaces/someone/weight-tying/resolve/main/tour/step-11.html",
                                 "http://10.0.0.5:8501/tour?step=11&pair=demo&presentation=on"])
def test_a_drawn_code_reads_back_as_its_address(url):
    assert decoded(qr.qr_svg(url)) == [url]


def test_the_address_is_escaped_in_the_svg():
    svg = qr.qr_svg("https://example.org/?a=1&b=<x>")
    assert "<x>" not in svg and "&amp;b=&lt;x&gt;" in svg


def test_only_an_address_another_device_can_open_is_public():
    assert qr.is_public("https://example.org/tour") and qr.is_public("http://10.0.0.5:8501/tour")
    for url in ("http://localhost:8501/tour", "http://127.0.0.1:8501/", "http://[::1]:8501/", "file:///tmp/x",
                "tour/step-1.html", ""):
        assert not qr.is_public(url), url


def test_a_base_url_is_checked():
    assert site_tour.check_base_url(" https://example.org/site/ ") == "https://example.org/site"
    for bad in ("example.org", "ftp://example.org", "https://", "https://example.org/?x=1"):
        with pytest.raises(UserError):
            site_tour.check_base_url(bad)


@pytest.mark.slow
def test_the_sites_first_and_last_steps_carry_their_own_address(synthetic_site, synthetic_caches, tmp_path):
    out, base = synthetic_site[0], SITE_BASE_URL  # the shared site, built with --base-url SITE_BASE_URL/
    n = len(tour.STEPS)
    for number in range(1, n + 1):
        page = (out / "tour" / f"step-{number}.html").read_text()
        svgs = re.findall(r"<svg viewBox.*?</svg>", page, flags=re.S)
        if number in (1, n):
            assert len(svgs) == 1 and decoded(svgs[0]) == [f"{base}/tour/step-{number}.html"], number
        else:
            assert not svgs, number
    code, _, err = _run("site", "sweep", "--cache-dir", synthetic_caches, "--out", tmp_path / "bad",
                        "--base-url", "example.org")
    assert code == 2 and err.startswith("error: --base-url") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()
