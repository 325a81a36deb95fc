"""Headless Chromium with software WebGL, for the Projection page's deck.gl views in the browser
test (tests/test_projection_webgl.py; bench/bench_projection_webgl.py has its own, from
bench/screenshots.py: bench imports no tests).

Headless Chromium draws WebGL with SwiftShader (on the CPU) only when asked to: without these
flags a deck's canvas stays blank. Whether a view has drawn is read from its canvas's pixels
(copied into a 2-D canvas: deck.gl says nothing to the page when it has drawn).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.appbrowser import CHROMIUM, DRIVER  # noqa: F401 (the tests ask webgl whether Chromium is here)
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent

WEBGL_FLAGS = ("--enable-unsafe-swiftshader", "--use-gl=angle", "--use-angle=swiftshader")
DRAWN_FILL = 0.05
"""A view has drawn when this share of its canvas's pixels is painted (its points)."""
HIGHLIGHT_RGB = (255, 217, 47)  # explorer.render.style.HIGHLIGHT

# Each deck on the page: its element's key (st-key-...), canvas size, the share of painted
# pixels and the colour of the centre pixel (and of the pixels around it).
VIEWS_JS = """
const out = [];
for (const el of document.querySelectorAll('[data-testid="stDeckGlJsonChart"]')) {
  const c = el.querySelector('canvas');
  const box = el.closest('[class*="st-key-"]');
  const key = box ? (box.className.match(/st-key-(\\S+)/) || [])[1] : null;
  if (!c || !c.width || !c.height) { out.push({key: key, filled: 0}); continue; }
  const s = document.createElement('canvas'); s.width = c.width; s.height = c.height;
  const g = s.getContext('2d'); g.drawImage(c, 0, 0);
  const px = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
  const cx = Math.floor(c.width / 2), cy = Math.floor(c.height / 2), j = 4 * (cy * c.width + cx);
  out.push({key: key, width: c.width, height: c.height, filled: n / (c.width * c.height),
            centre: [px[j], px[j + 1], px[j + 2], px[j + 3]]});
}
return out;
"""

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(cache_dir, timeout: float = 90) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` on ``cache_dir`` at a free local port: (process, URL)."""
    port = free_port()
    env = dict(os.environ, TYING_CACHE_DIR=str(Path(cache_dir).resolve()), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def state() -> str | None:
        if proc.poll() is not None:
            return "exited"
        try:
            return "up" if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok" else None
        except OSError:
            return None

    try:
        up = wait_until(state, timeout=timeout, interval=0.5, what="streamlit's health") == "up"
    except AssertionError:
        up = False
    if not up:
        proc.kill()
        raise RuntimeError("streamlit did not start")
    return proc, url


def chromium(width: int = 1440, height: int = 900):
    """Headless Chromium drawing WebGL in software."""
    from tests.appbrowser import chromium as start

    driver = start(width, height, flags=WEBGL_FLAGS)
    driver.set_script_timeout(120)
    return driver


def views(driver) -> list[dict]:
    """``VIEWS_JS`` on the page (an empty list while the page is busy)."""
    try:
        return driver.execute_script(VIEWS_JS) or []
    except Exception:  # a script timeout while the page parses a deck: not drawn yet
        return []


def idle(driver) -> bool:
    from selenium.webdriver.common.by import By

    return not driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]')


def drawn(driver, n: int = 3, token: int | None = None, fill: float = DRAWN_FILL) -> list[dict] | None:
    """The ``n`` views once all are drawn (``fill``: the share of each canvas painted) and the run
    has finished (with ``token``: views drawn for that token, whose keys name it); else None."""
    found = views(driver)
    if len(found) != n or not all(v["filled"] > fill for v in found) or not idle(driver):
        return None
    if token is not None and not all(f"_{token}_" in (v["key"] or "") for v in found):
        return None
    return found


def is_highlight(rgba) -> bool:
    return rgba is not None and rgba[3] > 200 and all(abs(a - b) <= 12 for a, b in zip(rgba[:3], HIGHLIGHT_RGB))
