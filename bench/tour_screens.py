"""Every tour step as a slide: a first-screen screenshot per step in headless Chromium, and
whether its chart and verdict lie inside that screen.

    python bench/tour_screens.py [--pair demo] [--size 1920x1080] [--steps 1-9] [--no-presentation]

Starts `streamlit run app.py`, opens /tour?step=N (presentation mode unless told), waits for
the chart, writes bench/out/tour/step-N-<pair>-<w>x<h>.png (the viewport only: what a
projector shows) and prints, per step, the lowest pixel of the chart and of the verdict
against the window's height. Needs Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import ROOT, browser, free_port, start_server

BOTTOMS = """
const bottom = sel => Math.max(0, ...[...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().bottom));
return {chart: bottom('[data-testid="stVegaLiteChart"]'), verdict: bottom('.tour-verdict'),
        next: bottom('.st-key-tour_next'), height: window.innerHeight,
        scroll: (document.querySelector('[data-testid="stMain"]') || document.body).scrollHeight};
"""


def wait_drawn(driver, timeout: float = 60) -> None:
    from selenium.webdriver.common.by import By

    deadline = time.time() + timeout
    while time.time() < deadline:
        heads = driver.find_elements(By.TAG_NAME, "h2")
        charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')
        drawn = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                      '[data-testid="stVegaLiteChart"] svg.marks')
        if heads and charts and len(drawn) >= len(charts):
            return
        time.sleep(0.3)


def steps(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / "cache"))
    ap.add_argument("--pair", default="demo")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--steps", default="1-9")
    ap.add_argument("--no-presentation", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "tour"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    w, h = (int(x) for x in args.size.split("x"))
    port = free_port()
    proc = start_server(args.cache_dir, port)
    driver = browser(w, h)
    try:
        pres = "" if args.no_presentation else "&presentation=on"
        for n in steps(args.steps):
            driver.get(f"http://127.0.0.1:{port}/tour?step={n}&pair={args.pair}{pres}")
            wait_drawn(driver)
            time.sleep(1.5)
            b = driver.execute_script(BOTTOMS)
            path = out / f"step-{n}-{args.pair}-{w}x{h}.png"
            driver.save_screenshot(str(path))
            fits = b["chart"] <= b["height"] and b["verdict"] <= b["height"]
            print(f"step {n}: chart bottom {b['chart']:.0f}px, verdict bottom {b['verdict']:.0f}px, next button "
                  f"{b['next']:.0f}px, window {b['height']}px, page {b['scroll']}px: "
                  f"{'inside the first screen' if fits else 'BELOW THE FIRST SCREEN'}  {path}")
    finally:
        driver.quit()
        proc.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
