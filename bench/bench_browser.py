"""How long a warm page takes to be fully drawn in a real browser (headless Chromium).

    python bench/bench_browser.py [--cache-dir cache] [--pair demo] [--rounds 3] [--size 1440x900]

Starts ``streamlit run app.py`` on the demo cache, opens every page once (cold: the server
builds and caches its figures), then for ``--rounds`` rounds moves between the pages as
a user does, by clicking the sidebar's links. Each time counts from the click until, in
the page itself (polled every animation frame): the new page's title is shown, Streamlit
has finished the run (no status widget, no stale element) and every chart of the page has
drawn its canvas or SVG marks. Target (issue 11): a warm page fully drawn within 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import ROOT, browser, free_port, start_server

from explorer.render import pages

PAGES = {"overview": "Overview"} | {p.path: p.title for p in pages.PAGES if p.needs or p.folder}
TARGET_S = 1.0

# Click the link, then poll every frame until the page is complete; resolves with milliseconds.
CLICK_AND_WAIT = """
const [path, title, charts, done] = arguments;
const link = [...document.querySelectorAll('[data-testid="stSidebar"] a[href]')]
    .find(a => new URL(a.href).pathname.replace(/\\/$/, '').endsWith('/' + path) ||
               (path === '' && new URL(a.href).pathname === '/'));
if (!link) { done(-1); return; }
const t0 = performance.now();
link.click();
function complete() {
  const h1 = document.querySelector('h1');
  if (!h1 || !h1.textContent.startsWith(title)) return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  const found = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  if (found.length < charts) return false;
  return found.every(c => { const m = c.querySelector('canvas, svg.marks');
                            return m && m.getBoundingClientRect().width > 0; });
}
function poll() {
  if (complete()) { done(performance.now() - t0); return; }
  if (performance.now() - t0 > 60000) { done(-2); return; }
  requestAnimationFrame(poll);
}
requestAnimationFrame(poll);
"""


def chart_count(driver) -> int:
    """Charts on the page once it has settled (a cold visit)."""
    last, stable = -1, 0
    deadline = time.time() + 90
    while time.time() < deadline and stable < 6:
        n = len(driver.find_elements("css selector", '[data-testid="stVegaLiteChart"] canvas, '
                                                     '[data-testid="stVegaLiteChart"] svg.marks'))
        running = driver.find_elements("css selector", '[data-testid="stStatusWidget"]')
        stable = stable + 1 if n == last and not running else 0
        last = n
        time.sleep(0.5)
    return last


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / "cache"))
    ap.add_argument("--pair", default="demo")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="1440x900")
    args = ap.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    port = free_port()
    proc = start_server(args.cache_dir, port)
    driver = browser(w, h)
    driver.set_script_timeout(90)
    try:
        charts = {}
        for page in PAGES:  # cold visits: figures built and cached, chart counts noted
            driver.get(f"http://127.0.0.1:{port}/{'' if page == 'overview' else page}?pair={args.pair}")
            charts[page] = chart_count(driver)
        times: dict[str, list[float]] = {p: [] for p in PAGES}
        order = list(PAGES)
        for _ in range(args.rounds):
            for page in order[1:] + order[:1]:  # start away from the page the cold visits ended on
                ms = driver.execute_async_script(CLICK_AND_WAIT, "" if page == "overview" else page, PAGES[page],
                                                 charts[page])
                if ms < 0:
                    print(f"error: {page} did not finish drawing ({'no link' if ms == -1 else 'timeout'})")
                    return 1
                times[page].append(ms / 1000)
                time.sleep(0.3)
    finally:
        driver.quit()
        proc.terminate()
    print(f"warm pages in Chromium {w}x{h}, cache {args.pair}, {args.rounds} rounds, by sidebar click")
    print(f"{'page':<12}{'charts':>7}{'median s':>10}{'max s':>8}")
    every = []
    for page, t in times.items():
        every += t
        print(f"{page:<12}{charts[page]:>7}{statistics.median(t):>10.3f}{max(t):>8.3f}")
    worst_median = max(statistics.median(t) for t in times.values())
    print(f"\nall pages: median {statistics.median(every):.3f} s, max {max(every):.3f} s; slowest page's median "
          f"{worst_median:.3f} s (target <= {TARGET_S:.1f} s: {'yes' if worst_median <= TARGET_S else 'NO'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
