"""Every tour step as a slide: a first-screen screenshot per step and window size in headless
Chromium, and where its claim, chart, verdict and Next button end against that screen.

    python bench/tour_screens.py [--pair demo] [--sizes 1920x1080,1280x720,1024x768] [--steps 1-11]
                                 [--no-presentation] [--site DIR]

Starts `streamlit run app.py` and opens /tour?step=N (presentation mode unless told), or with
``--site`` opens the static site's DIR/tour/step-N.html; waits for the chart, writes
bench/out/tour/<app|site>-step-N-<w>x<h>.png (the viewport only: what a projector shows) and
prints, per step and size, the lowest pixel of the claim, the chart, the verdict and Next, the
slide's zoom and the slide text's size on screen. Each step loads once; the window is resized
for the other sizes (the slide zooms to each). Needs Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import ROOT, browser, free_port, start_server

from explorer.render.slide import MEASURE_JS as BOTTOMS
from explorer.render.slide import screen


def wait_drawn(driver, n: int, site: bool, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    done = ("return window.SITE_CHARTS_DONE === true" if site else
            "const c = document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]');"
            "return c.length > 0 && document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
            "[data-testid=\"stVegaLiteChart\"] svg.marks').length >= c.length;")
    while time.time() < deadline:
        if driver.execute_script(BOTTOMS)["step"].startswith(f"Step {n} of") and driver.execute_script(done):
            return
        time.sleep(0.3)


def resize(driver, w: int, h: int) -> None:
    """The window's page sized ``w`` x ``h`` (a screen that size, its scroll bar in it)."""
    if not screen(driver, w, h):
        raise SystemExit(f"the window's page never reads {w}x{h}")


def steps(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def measure(driver, url_of, numbers, sizes, site: bool, out: Path, label: str) -> list[dict]:
    rows = []
    for n in numbers:
        resize(driver, *sizes[0])
        driver.get(url_of(n))
        wait_drawn(driver, n, site)
        for w, h in sizes:
            resize(driver, w, h)
            time.sleep(1.5)  # the slide zooms on resize, Vega lays out again
            b = driver.execute_script(BOTTOMS)
            path = out / f"{label}-step-{n}-{w}x{h}.png"
            driver.save_screenshot(str(path))
            low = max(b["claim"], b["chart"], b["verdict"], b["next"])
            fits = low <= b["height"] and b["next"] > 0
            print(f"{label} step {n:2d} {w}x{h}: claim {b['claim']:4.0f}  chart {b['chart']:4.0f}  verdict "
                  f"{b['verdict']:4.0f}  next {b['next']:4.0f}  of {b['height']} px; zoom {b['zoom']:.3f}, text "
                  f"{b['text']:.1f} px, chart {b['fill']:.0%} of its column, sidebar {b['sidebar']:.0f} px: {'fits' if fits else 'BELOW THE FIRST SCREEN'}",
                  flush=True)
            rows.append({"step": n, "size": f"{w}x{h}", **b, "fits": fits})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / "cache"))
    ap.add_argument("--pair", default="demo")
    ap.add_argument("--sizes", default="1920x1080,1280x720,1024x768")
    ap.add_argument("--steps", default="1-11")
    ap.add_argument("--no-presentation", action="store_true")
    ap.add_argument("--site", help="a static site's folder (python -m precompute site): measure its tour instead")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "tour"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    driver = browser(*sizes[0])
    proc = None
    try:
        if args.site:
            root = Path(args.site).resolve()
            rows = measure(driver, lambda n: (root / "tour" / f"step-{n}.html").as_uri(), steps(args.steps), sizes,
                           True, out, "site")
        else:
            port = free_port()
            proc = start_server(args.cache_dir, port)
            pres = "" if args.no_presentation else "&presentation=on"
            rows = measure(driver, lambda n: f"http://127.0.0.1:{port}/tour?step={n}&pair={args.pair}{pres}",
                           steps(args.steps), sizes, False, out, "app")
    finally:
        driver.quit()
        if proc is not None:
            proc.terminate()
    print(f"{sum(r['fits'] for r in rows)} of {len(rows)} slides fit their first screen")
    return 0 if all(r["fits"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
