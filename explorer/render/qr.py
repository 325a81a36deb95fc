"""QR codes of a tour step's address, drawn offline (segno), so a room opens the step on the
speaker's screen on their phones: the app's tour and the static site's first and last steps."""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0", "::1", "[::1]")


def is_public(url: str) -> bool:
    """Whether ``url`` is an http(s) address another device could open (not this machine's)."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and parts.hostname not in LOCAL_HOSTS


MAX_URL = 2331
"""The longest address (bytes) a QR code holds at error correction M (version 40, byte mode)."""


def fits(url: str) -> bool:
    """Whether a QR code at error correction M holds ``url`` (segno decides: it knows every mode)."""
    import segno

    try:
        segno.make(url, error="m", micro=False)
    except segno.DataOverflowError:
        return False
    return True


@functools.lru_cache(maxsize=32)
def qr_svg(url: str, scale: int = 5) -> str:
    """An inline SVG QR code of ``url`` (error correction M: still read from the back of a room
    with a stain on the screen), black on white with its quiet zone, titled with the address."""
    import segno

    code = segno.make(url, error="m", micro=False)
    return code.svg_inline(scale=scale, border=4, dark="#000000", light="#ffffff", title=url, svgclass="qr-code",
                           omitsize=True)  # a viewBox: the page sizes it


def app_step_url(page_url: str, number: int, carried: dict[str, list[str]]) -> str:
    """The app's address of tour step ``number`` from the address a page was opened at
    (``page_url``: scheme, host and any path prefix up to the page), with the URL's other
    parameters ``carried`` (the pair, the token). Not presentation mode: the phone that reads the
    code is the room's, not the projector (a slide's chart, drawn for 1920 px, shrinks on a phone
    to text a third of its size), nor the step or the speaker's notes."""
    from urllib.parse import urlencode

    parts = urlsplit(page_url)
    prefix = parts.path.rsplit("/", 1)[0] if parts.path.rsplit("/", 1)[-1] else parts.path.rstrip("/")
    query = [(k, v) for k, vs in carried.items() if k not in ("step", "notes", "presentation") for v in vs]
    return f"{parts.scheme}://{parts.netloc}{prefix}/tour?" + urlencode(query + [("step", str(number))])


@functools.lru_cache(maxsize=32)
def qr_png_uri(url: str, scale: int = 6) -> str:
    """A QR code of ``url`` as a PNG in a data URI, for an ``<img>`` where inline SVG is not kept
    (the app's ``st.html`` strips it): black on white with its quiet zone, error correction M."""
    import segno

    return segno.make(url, error="m", micro=False).png_data_uri(scale=scale, border=4, dark="#000000",
                                                                light="#ffffff")
