"""A tour step as a slide on three screens (the app's and the static site's browser tests): the
window set to an exact inner size, the slide's measure (explorer.render.slide.MEASURE_JS) once it
holds still, and what a projector must show of it."""

from __future__ import annotations

import time

from explorer.render import slide

SIZES = ((1920, 1080), (1280, 720), (1024, 768))


def inner_size(driver, width: int, height: int) -> None:
    """The window's page sized ``width`` x ``height`` (slide.screen), or the test fails; nothing to
    do where it already is (a walk that stays at a size: slide.screen measures the window's frame,
    0.1 s or more, before it sets a size)."""
    assert (driver.execute_script(slide.PAGE_SIZE_JS) == [width, height]
            or slide.screen(driver, width, height)), f"the window's page never reads {width}x{height}"


STILL_JS = """return !document.querySelector('[data-stale="true"], [data-testid="stStatusWidget"]')"""
"""Whether the app has no script run under way: no element of the last run still waiting for this
one's (Streamlit marks each ``data-stale`` from a run's first message to its last) and no status
widget. A step reached in the app (Next, a key) keeps the last step's slide on the page until its
run replaces it; the static site has neither, so it is always still."""


def steady(driver, timeout: float = 20) -> dict:
    """The slide's measure once two readings 0.3 s apart agree (the slide zooms on a resize, Vega
    lays out again), each taken with no script run under way (:data:`STILL_JS`)."""
    last, deadline = None, time.time() + timeout
    while time.time() < deadline:
        m = driver.execute_script(slide.MEASURE_JS) if driver.execute_script(STILL_JS) else None
        if m is not None and m == last and m["next"] > 0:
            return m
        last = m
        time.sleep(0.3)
    raise AssertionError(f"the slide did not hold still: {last}")


def shape(size: tuple[int, int]) -> str:
    """The slide's shape a screen of ``size`` gets (slide.SHAPES, slide.TALL_QUERY: 3:2 and narrower, tall)."""
    return "tall" if size[0] / size[1] <= 1.5 else "wide"


def walk(steps: int, sizes=SIZES) -> list[tuple[int, tuple[int, int]]]:
    """Every (step, size) pair once, in the order a walk through the tour in one window meets them
    with the fewest layouts: forward through the steps at the wide screens (each step starting at
    the size the last one ended at: one resize a step, a zoom, no layout), then back at the tall
    ones (the slide laid out anew once, at the last step; each step after it arrives tall)."""
    wide = [s for s in sizes if shape(s) == "wide"]
    tall = [s for s in sizes if shape(s) == "tall"]
    order = []
    for n in range(1, steps + 1):
        order += [(n, s) for s in (wide if n % 2 else wide[::-1])]
    for n in range(steps, 0, -1):
        order += [(n, s) for s in (tall if (steps - n) % 2 == 0 else tall[::-1])]
    return order


def check(m: dict, size: tuple[int, int], *, claim: bool, verdict: bool, panels: bool = False) -> None:
    """Claim, chart, verdict and Next inside the first screen; the chart filling its column; at
    1920x1080 the slide unzoomed (its text at slide.TEXT_PX), elsewhere zoomed near the screen's
    share of the slide's design (slide.SHAPES: 4:3 screens get the tall one); at 1024x768 every
    text of the slide 18 px or more on screen, the claim 24, the chart's text 14."""
    where = (size, m)
    # a vertical scroll bar comes and goes as the slide zooms: the width within its breadth
    assert abs(m["width"] - size[0]) <= 20 and m["height"] == size[1], where
    parts = ["chart", "next"] + ["claim"] * claim + ["verdict"] * verdict
    for part in parts:
        assert 0 < m[part] <= m["height"], (part, where)
    # the chart as wide as its column, not a zoomed-twice strip (a map's square panels, alone across a tall
    # slide, keep their own sizes: two thirds of it or more; a label by a panel's edge may reach into the
    # 32 px gap beside the column)
    assert (0.6 if panels and m["shape"] == "tall" else 0.75) <= m["fill"] <= (1.03 if panels else 1.02), where
    wanted = shape(size)
    assert m["shape"] in (None, wanted), where  # the app's slide laid out for the screen's shape (the site's: CSS)
    design = slide.SHAPES[wanted]
    share = min(size[0] / design[0], size[1] / design[1])
    if size == slide.DESIGN:
        assert abs(m["zoom"] - 1) < 0.01 and m["text"] >= slide.TEXT_PX - 0.01, where
    else:
        assert 0.9 * share <= m["zoom"] <= share + 0.01, where
    if size == (1024, 768):  # a school's 4:3 projector: every text of the slide large enough to read
        assert m["least"] >= 18 - 0.01, where
        assert m["claimPx"] >= 24 - 0.01 or not claim, where
        assert m["chartText"] == 0 or m["chartText"] >= 14 - 0.01, where


PHONE = (390, 844)


def check_phone(m: dict) -> None:
    """A phone (one that opened a step's QR code) gets the page's own layout: no zoom, nothing
    wider than the screen, the chart inside its column."""
    assert abs(m["zoom"] - 1) < 0.001 and m["overflow"] <= 1 and 0.5 <= m["fill"] <= 1.02 and m["next"] > 0, m
