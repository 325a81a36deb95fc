"""A tour step as a full-screen slide, in the app's presentation mode and in the static site.

A slide is laid out once, for a 1920x1080 screen (:data:`DESIGN`): slide text at
:data:`TEXT_PX` or more, chart axis labels at :data:`AXIS_PX`, the chart's plot as tall as the
claim, the verdict and the way on leave room for. On any other screen the whole slide is
zoomed (CSS ``zoom``) by :func:`fit_js` to the largest size at which it fits both the width and
the height of its box: a 1280x720 projector shows the same slide at two thirds, a 1024x768 one
at about half (letterboxed: 4:3 is taller than 16:9), a 4K screen at twice. Nothing is laid out
anew, so what fits at 1920x1080 fits everywhere (the browser tests measure it). A window
narrower than :data:`NARROW_PX` (a phone that opened a step's QR code) gets no slide: the page
lays out for its width as any other page does.
"""

from __future__ import annotations

import time

from explorer.render.style import PRESENTATION_FONT_PX

DESIGN = (1920, 1080)  # the screen a slide is laid out for (CSS px)
SHAPES = {"wide": DESIGN, "tall": (1500, 1080)}
"""The two screens a slide is laid out for: 16:9 (and anything wider than 3:2), and 4:3 (3:2 and
narrower: a school's projector, 1024x768). A 4:3 screen shown the 16:9 slide would scale it to
its width (about half at 1024x768, the lower third empty); laid out at 1500x1080 (its chart
shorter: :data:`TALL_CHART`) it is zoomed to 0.67 there: its text at 18.8 px, its claim at 24.2,
its axis labels at 14.8."""
TALL_CHART = 0.8  # a tall slide's chart height, a share of a wide one's
TALL_PANELS = 0.92  # a tall slide's map panels (side by side, each keeping its shape), a share of a wide one's
TALL_QUERY = "(max-aspect-ratio: 3/2)"  # the screens that get the tall slide (CSS and matchMedia)
TEXT_PX = 28  # slide text at 1920x1080: verdict, how to read it, the buttons
CLAIM_PX = 36  # the claim
TALL_CLAIM_PX = 38  # the claim on a tall slide (24 px or more on a 1024x768 projector)
TITLE_PX = 48
VERDICT_PX = 52  # the verdict's one word
AXIS_PX = PRESENTATION_FONT_PX  # chart axis labels at 1920x1080 (the charts' presentation font)
NARROW_PX = 900  # a window narrower than this (a phone) is no projector: no slide, no zoom
SNAP = 0.002  # a zoom this close to 1 is drawn at 1


def fit_js(selector: str) -> str:
    """JavaScript that makes the element ``selector`` a slide: laid out at the width its parent's
    content box has on a 1920x1080 screen (CSS variable ``--slide-width``), and zoomed (CSS
    variable ``--slide-zoom``, for the stylesheet's ``zoom``) to the largest size at which it fits
    that box's width and the window's height below the box's top. At 1920x1080 a slide laid out
    to fit is drawn at zoom 1; any slide too tall for its screen is shrunk until it fits. Runs
    again on every resize, whenever the slide's height changes (a chart drawn, a Streamlit rerun)
    and once a second (a rerun may replace the slide's element). Below :data:`NARROW_PX` it
    takes both variables away (the stylesheet's slide rules apply from that width up) and shrinks
    a chart wider than its column (the app gives a slide's chart the slide's width) to the column.

    The slide's shape (:data:`SHAPES`) follows the screen's (:data:`TALL_QUERY`). The app lays a
    slide out on the server, for one shape: its slide carries ``data-slide-shape``, and where the
    screen wants the other the script presses the hidden button ``slide_<shape>`` (a rerun lays it
    out anew). The site's stylesheet follows the same media query by itself."""
    width, height = DESIGN
    tall = SHAPES["tall"][0]
    return f"""(function () {{
  // the slide: laid out {width} px wide less its box's paddings, zoomed to fit the window
  function fit() {{
    var el = document.querySelector({selector!r});
    if (!el || !el.parentElement) {{ return; }}
    var narrow = document.documentElement.clientWidth < {NARROW_PX};
    // a chart drawn at the slide's width (the app's) shrinks to a phone's column, its height with it
    Array.prototype.forEach.call(el.querySelectorAll(".vega-embed"), function (v) {{
      v.style.zoom = "";
      if (narrow && v.scrollWidth > v.parentElement.clientWidth + 1) {{
        v.style.zoom = String(v.parentElement.clientWidth / v.scrollWidth);
      }}
    }});
    if (narrow) {{  // a phone: the page's own layout, unzoomed
      el.style.removeProperty("--slide-width");
      el.style.removeProperty("--slide-zoom");
      return;
    }}
    var box = el.parentElement, cs = getComputedStyle(box);
    var padX = parseFloat(cs.paddingLeft) + parseFloat(cs.paddingRight);
    // a scroll bar takes its width from the box's as it comes and goes: the slide's width gives it up too,
    // so the zoom does not change with it (no zoom that stays a hair short of 1, no zoom that swings)
    var sc = box.parentElement;
    while (sc && !/(auto|scroll)/.test(getComputedStyle(sc).overflowY)) {{ sc = sc.parentElement; }}
    // (the page's own bar: the root's box, not its clientWidth, gives up a gutter kept for it)
    var bar = sc ? sc.offsetWidth - sc.clientWidth : window.innerWidth - document.documentElement.getBoundingClientRect().width;
    var wanted = window.matchMedia("{TALL_QUERY}").matches ? "tall" : "wide";
    var marker = el.querySelector("[data-slide-shape]"), shape = marker ? marker.getAttribute("data-slide-shape") : wanted;
    if (shape !== wanted && !(window.slideAskedAt > Date.now() - 3000)) {{  // the app: lay it out anew, once
      var ask = document.querySelector(".st-key-slide_" + wanted + " button");  // (again 3 s on: a lost click)
      if (ask) {{ window.slideAskedAt = Date.now(); ask.click(); }}
    }}
    var design = (shape === "tall" ? {tall} : {width}) - padX - bar, w = box.clientWidth - padX;
    var top = box.getBoundingClientRect().top + window.scrollY + parseFloat(cs.paddingTop);
    var h = document.documentElement.clientHeight - top - parseFloat(cs.paddingBottom);
    var was = parseFloat(el.style.getPropertyValue("--slide-zoom")) || 1;
    // the slide's own height, unzoomed: down to its lowest part (the element itself may be stretched to
    // its box's height, which would make any zoom look right)
    var top0 = el.getBoundingClientRect().top, low = top0;
    for (var i = 0; i < el.children.length; i++) {{
      var r = el.children[i].getBoundingClientRect();
      if (r.height > 0) {{ low = Math.max(low, r.bottom); }}
    }}
    var tall = (low - top0) / was;
    // to a thousandth: a pixel's rounding in a measure (1 in 1,872) is no reason for a slide short of zoom 1
    var zoom = Math.round(Math.min(w / design, tall > 0 ? h / tall : 1) * 1000) / 1000;
    if (!(zoom > 0)) {{ return; }}
    // within {SNAP} of 1 a slide is drawn at 1 (its text at its own size; a pixel or two over at most), and 1
    // always replaces what a frame of a layout in motion left (a sidebar closing: 0.999, kept for good by the
    // rule below, which holds a zoom still against a pixel's jitter)
    if (zoom < 1 && zoom >= 1 - {SNAP}) {{ zoom = 1; }}
    el.style.setProperty("--slide-width", design + "px");
    if (Math.abs(zoom - was) > 0.0015 || (zoom === 1 && was !== 1)) {{
      el.style.setProperty("--slide-zoom", String(zoom));
    }}
    if (window.slideSeen !== el && window.ResizeObserver) {{  // a new slide element: watch its height
      window.slideSeen = el;
      new ResizeObserver(function () {{ window.requestAnimationFrame(fit); }}).observe(el);
    }}
  }}
  fit();
  if (!window.slideFit) {{
    window.slideFit = fit;
    window.addEventListener("resize", fit);
    window.setInterval(fit, 1000);
  }}
}})();
"""


MEASURE_JS = """
const box = e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 ? r : null; };
const bottom = sel => Math.max(0, ...[...document.querySelectorAll(sel)].map(box).filter(Boolean).map(r => r.bottom));
const next = [...document.querySelectorAll('.st-key-tour_next button, .tour .pager a.button')]
  .filter(e => /^(Next|Done)/.test(e.textContent.trim())).map(box).filter(Boolean);
const slide = document.querySelector('.tour, .stMainBlockContainer > [data-testid="stVerticalBlock"]');
const zoom = slide ? parseFloat(getComputedStyle(slide).zoom) || 1 : 1;
const text = document.querySelector('.tour-read, p.read');
const side = document.querySelector('[data-testid="stSidebar"]');
const px = e => parseFloat(getComputedStyle(e).fontSize) * zoom;
const own = e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
const texts = slide ? [...slide.querySelectorAll('*')].filter(e => !(e instanceof SVGElement) && own(e) && box(e)) : [];
const marks = slide ? [...slide.querySelectorAll('svg.marks text')].filter(e => own(e) && box(e)) : [];
const claimEl = document.querySelector('.tour-claim, p.claim');
const drawn = document.querySelector('[data-testid="stVegaLiteChart"] canvas, '
  + '[data-testid="stVegaLiteChart"] svg.marks, .tour-chart canvas');
const col = drawn && (drawn.closest('[data-testid="stColumn"], .tour-chart') || slide);  // the chart's column
return {fill: col && drawn ? drawn.getBoundingClientRect().width / col.getBoundingClientRect().width : 0,
        claim: bottom('.tour-claim, p.claim'), chart: bottom('[data-testid="stVegaLiteChart"], .tour-chart .chart'),
        verdict: bottom('.tour-verdict'), next: next.length ? Math.max(...next.map(r => r.bottom)) : 0,
        height: document.documentElement.clientHeight, width: document.documentElement.clientWidth,
        zoom: zoom, text: text ? parseFloat(getComputedStyle(text).fontSize) * zoom : 0,
        sidebar: side ? Math.max(0, side.getBoundingClientRect().right) : 0,
        overflow: Math.max(...[document.documentElement, document.querySelector('[data-testid="stMain"]')]
          .filter(Boolean).map(e => e.scrollWidth - e.clientWidth)),
        step: (document.querySelector('.tour-head .n, .step-no') || {}).textContent || '',
        least: texts.length ? Math.min(...texts.map(px)) : 0,
        smallest: texts.length ? texts.reduce((a, e) => px(e) < px(a) ? e : a).textContent.trim().slice(0, 30) : '',
        claimPx: claimEl && box(claimEl) ? px(claimEl) : 0,
        chartText: marks.length ? Math.min(...marks.map(px)) : 0,
        shape: (document.querySelector('[data-slide-shape]') || {getAttribute: () => null}).getAttribute('data-slide-shape')};
"""
"""What a projector shows of a slide, in the app or the site (the browser tests and
bench/tour_screens.py measure with it): the lowest visible pixel of the claim, the chart, the
verdict and the Next button, the window's size, the slide's zoom, the slide text's size on
screen, how far the sidebar reaches, the step's label, the share of its column's width the
chart takes, how far the page overflows its width; the smallest text of the slide on screen
(``least``, and which: ``smallest``), the claim's size, the smallest text the app's SVG charts
draw (``chartText``; 0 for a canvas), and the shape the app laid the slide out for."""


PAGE_SIZE_JS = "return [window.innerWidth, window.innerHeight]"  # the page's size in CSS px, its scroll bar in it


def screen(driver, width: int, height: int) -> bool:
    """A browser window (a Selenium driver) sized so its page is ``width`` x ``height`` CSS px, its
    scroll bar in it, as a full-screen browser on a projector has it: what the browser tests and
    bench/tour_screens.py measure at. The window's frame (its outer size less the page's) is
    measured, then given back; the page's size is read until it is the one asked for (read at
    once, it is the old one). False where it never is."""
    for _ in range(3):
        frame = None
        for _ in range(25):  # the frame, once two readings agree
            size = driver.get_window_size()
            w, h = driver.execute_script(PAGE_SIZE_JS)
            now = (size["width"] - w, size["height"] - h)
            if now == frame:
                break
            frame = now
            time.sleep(0.1)
        driver.set_window_size(width + frame[0], height + frame[1])
        for _ in range(50):
            if driver.execute_script(PAGE_SIZE_JS) == [width, height]:
                return True
            time.sleep(0.1)
    return False
