"""Time the static site of the demo cache: its build, and its first chart drawn from file://.

    python bench/bench_site.py [--cache demo] [--runs 3] [--formats svg,png] [--page tour/step-2.html]

The build is the command as a user types it (``python -m precompute site``: a fresh process
each run, the readers' caches cold) on a copy of the cache, into a temporary folder. The
first chart is timed in headless Chromium (Debian's chromium and chromium-driver) from the
start of the navigation to the first chart drawn (the page's ``window.SITE_FIRST_CHART``,
set by ``assets/site.js`` when vega-embed's promise resolves), on a tour step and on the
cache's figures page, each in a fresh browser. Printed: each run, the medians against the
targets (build <= 60 s, first chart <= 2 s on 2 cores), the site's size, its largest files,
and the requests each page made (all must be file://).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_TARGET_S = 60.0
FIRST_CHART_TARGET_S = 2.0


def _chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (binary and driver):
        return None
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1920,1080"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def requested_urls(browser) -> list[str]:
    """The URLs the page requested (Chrome's Network.requestWillBeSent events in the performance log)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def first_chart(page: Path) -> tuple[float, float, list[str]]:
    """(seconds to the first chart, seconds to every chart, the URLs requested) in a fresh browser."""
    browser = _chromium()
    if browser is None:
        raise SystemExit("headless Chromium is needed (Debian's chromium and chromium-driver)")
    try:
        browser.get(page.as_uri())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = browser.execute_script("return window.SITE_CHARTS_DONE === true")
            if done:
                break
            time.sleep(0.05)
        first, last = browser.execute_script(
            "var nav = performance.getEntriesByType('navigation')[0];"
            "return [window.SITE_FIRST_CHART, performance.now() - (nav ? nav.startTime : 0)];")
        urls = requested_urls(browser)
        if first is None:
            raise SystemExit(f"no chart drew on {page}")
        return first / 1000, last / 1000, urls
    finally:
        browser.quit()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="demo", help="a cache name in cache/ (default demo)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each measurement (the median is reported)")
    ap.add_argument("--formats", default="svg,png", help="the site's --formats (default: the command's)")
    ap.add_argument("--page", action="append", help="pages to time the first chart on (default: "
                                                     "tour/step-2.html and <cache>/index.html)")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-site-"))
    try:
        cache = Path(shutil.copy2(ROOT / "cache" / f"{args.cache}.duckdb", work / f"{args.cache}.duckdb"))
        if (ROOT / "cache" / "lens" / args.cache).is_dir():  # its translators: the site's text page needs them
            shutil.copytree(ROOT / "cache" / "lens" / args.cache, work / "lens" / args.cache)
        out = work / "site"
        cmd = [sys.executable, "-m", "precompute", "site", str(cache), "--out", str(out), "--formats", args.formats]
        print(f"static site of cache/{args.cache}.duckdb (--formats {args.formats!r}); {args.runs} runs")
        builds = []
        for i in range(args.runs):
            t0 = time.perf_counter()
            run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            builds.append(time.perf_counter() - t0)
            if run.returncode:
                print(run.stderr[-3000:])
                return run.returncode
            print(f"build {i + 1}: {builds[-1]:.1f} s")
        pages = args.page or ["tour/step-2.html", f"{args.cache}/index.html"]
        firsts: dict[str, list[float]] = {}
        requests: dict[str, list[str]] = {}
        for page in pages:
            for i in range(args.runs):
                first, every, urls = first_chart(out / page)
                firsts.setdefault(page, []).append(first)
                requests[page] = urls
                print(f"{page} run {i + 1}: first chart {first:.2f} s, every chart {every:.2f} s, "
                      f"{len(urls)} requests")
        sizes = {p.relative_to(out).as_posix(): p.stat().st_size for p in out.rglob("*") if p.is_file()}
        total = sum(sizes.values())
        median = statistics.median(builds)
        print()
        print(f"{'figure':<40}{'value':>10}{'target':>10}  ok")
        print(f"{'build median s':<40}{median:>10.1f}{'<= ' + f'{BUILD_TARGET_S:g}':>10}  "
              f"{'yes' if median <= BUILD_TARGET_S else 'NO'}")
        for page, values in firsts.items():
            m = statistics.median(values)
            print(f"{'first chart median s, ' + page:<40}{m:>10.2f}{'<= ' + f'{FIRST_CHART_TARGET_S:g}':>10}  "
                  f"{'yes' if m <= FIRST_CHART_TARGET_S else 'NO'}")
        off = {page: [u for u in urls if not u.startswith(("file://", "data:", "blob:"))]
               for page, urls in requests.items()}
        for page, urls in requests.items():
            print(f"{'requests, ' + page:<40}{len(urls):>10}{'file://':>10}  {'yes' if not off[page] else 'NO'}")
        print(f"{'site MB':<40}{total / 1e6:>10.1f}{'<= 45':>10}  {'yes' if total <= 45e6 else 'NO'}")
        print(f"{'pages':<40}{sum(1 for k in sizes if k.endswith('.html')):>10}")
        print("largest: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in
                                      sorted(sizes.items(), key=lambda kv: -kv[1])[:4]))
        if any(off.values()):
            print("requests off file://: " + json.dumps(off))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
