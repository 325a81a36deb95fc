"""Full-page screenshots of the app's pages in headless Chromium, to look at them as a user would.

    python bench/screenshots.py [--cache-dir cache] [--pair demo] [--sizes 1440x900,1920x1080]
                                [--pages overview,dynamics] [--query "&presentation=1"]

Starts `streamlit run app.py` on a free local port, opens every page at every window size,
waits for the charts to draw and writes bench/out/screenshots/<page>-<width>x<height>.png
(the whole page height). Needs Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from explorer.render import pages

PAGES = ("overview", *(p.path for p in pages.PAGES if p.needs))  # a cache's pages, from the registry


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(cache_dir: str, port: int) -> subprocess.Popen:
    env = dict(os.environ, TYING_CACHE_DIR=str(Path(cache_dir).resolve()),
               STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("streamlit did not start")


def browser(width: int, height: int):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    # WebGL in software (SwiftShader), for the Projection page's deck.gl views of a large vocabulary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--enable-unsafe-swiftshader", "--use-gl=angle", "--use-angle=swiftshader",
                 f"--window-size={width},{height}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def decks_painted(driver) -> bool:
    """Every deck.gl view (the Projection page's WebGL views) has painted its canvas."""
    try:
        return bool(driver.execute_script("""
            return [...document.querySelectorAll('[data-testid="stDeckGlJsonChart"]')].every(el => {
              const c = el.querySelector('canvas');
              if (!c || !c.width) return false;
              const s = document.createElement('canvas'); s.width = 32; s.height = 32;
              const g = s.getContext('2d'); g.drawImage(c, 0, 0, 32, 32);
              const px = g.getImageData(0, 0, 32, 32).data;
              for (let i = 3; i < px.length; i += 4) if (px[i] > 0) return true;
              return false;
            });"""))
    except Exception:  # the page is busy parsing a deck
        return False


def shoot(driver, url: str, path: Path, height: int) -> None:
    from selenium.webdriver.common.by import By

    driver.get(url)
    deadline = time.time() + 180
    while time.time() < deadline:
        h1 = driver.find_elements(By.TAG_NAME, "h1")
        charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"]')
        drawn = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stVegaLiteChart"] canvas, '
                                                      '[data-testid="stVegaLiteChart"] svg.marks')
        running = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')
        if h1 and len(drawn) >= len(charts) and not running and decks_painted(driver):
            break
        time.sleep(0.5)
    time.sleep(2.0)
    full = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMain\"]') || document.body;"
        "return Math.max(m.scrollHeight, document.body.scrollHeight);")
    width = driver.execute_script("return window.outerWidth")
    driver.set_window_size(width, max(height, int(full) + 200))
    time.sleep(1.5)
    deadline = time.time() + 180
    while time.time() < deadline and not decks_painted(driver):  # WebGL views draw again at the new size
        time.sleep(0.5)
    for attempt in range(3):  # a page still drawing WebGL in software can keep the renderer busy for a while
        try:
            driver.save_screenshot(str(path))
            break
        except Exception:
            if attempt == 2:
                raise
            time.sleep(10)
    driver.set_window_size(width, height)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", default=str(ROOT / "cache"))
    ap.add_argument("--pair", default="demo")
    ap.add_argument("--sizes", default="1440x900,1920x1080")
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--query", default="", help="extra URL parameters, e.g. '&token=300'")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "screenshots"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = start_server(args.cache_dir, port)
    try:
        for size in args.sizes.split(","):
            w, h = (int(x) for x in size.split("x"))
            driver = browser(w, h)
            try:
                for page in args.pages.split(","):
                    path = "" if page == "overview" else page
                    target = out / f"{page}-{w}x{h}.png"
                    shoot(driver, f"http://127.0.0.1:{port}/{path}?pair={args.pair}{args.query}", target, h)
                    print(target)
            finally:
                driver.quit()
    finally:
        proc.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
