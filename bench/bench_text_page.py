"""Time the static site's text page: a visitor's text through both twins, in Chromium from file://.

    python bench/bench_text_page.py [--runs 3] [--tokens 64]

Builds the site of a copy of the demo cache (with its translators) into a temporary folder,
then opens ``demo/text.html#text=...`` with a text of ``--tokens`` tokens (cut to the twins'
context of 64) in a fresh headless Chromium per run (Debian's chromium and chromium-driver)
and reads two figures the page sets: the first result, from the start of the navigation to
the trajectories of both twins drawn (``data-first``: loading and decoding the weights
included), and the computation alone (``data-computed``). Printed: each run, the medians
against the target (first result <= 3 s on 2 cores, issue 31), the size of every file of the
page, and the requests it made (all must be file://).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
FIRST_RESULT_TARGET_S = 3.0
TEXT = ("Tied weights share one matrix between the input embedding and the output unembedding. "
        "def tie(model):\n    model.lm_head.weight = model.embed.weight  # élan, naïve, 🙂\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=64, help="tokens of text (the page reads at most 64)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_site import _chromium, requested_urls

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        print("error: Debian's chromium and chromium-driver are needed")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        caches = Path(tmp) / "caches"
        caches.mkdir()
        shutil.copy(ROOT / "cache" / "demo.duckdb", caches / "demo.duckdb")
        shutil.copytree(ROOT / "cache" / "lens" / "demo", caches / "lens" / "demo")
        site = Path(tmp) / "site"
        subprocess.run([sys.executable, "-m", "precompute", "site", "demo", "--cache-dir", str(caches), "--out",
                        str(site), "--formats", "svg"], check=True, capture_output=True, cwd=ROOT)
        page = site / "demo" / "text.html"
        files = sorted((site / "demo" / "text").glob("*.js"))
        text = TEXT * (1 + args.tokens // 30)
        firsts, computes = [], []
        for run in range(args.runs):
            driver = _chromium()
            try:
                t0 = time.perf_counter()
                driver.get(page.as_uri() + "#text=" + quote(text))
                while not driver.execute_script("return document.body.getAttribute('data-first')"):
                    if time.perf_counter() - t0 > 120:
                        raise SystemExit("error: no result within 120 s")
                    time.sleep(0.05)
                first = float(driver.execute_script("return document.body.getAttribute('data-first')"))
                compute = float(driver.execute_script("return document.body.getAttribute('data-computed')"))
                note = driver.find_element("id", "note").text
                urls = requested_urls(driver)
            finally:
                driver.quit()
            firsts.append(first)
            computes.append(compute)
            print(f"run {run + 1}: first result {first:.2f} s (computing {compute:.2f} s); {note}")
        off = [u for u in urls if not u.startswith(("file://", "data:", "blob:"))]
        print(f"\nfiles of the page: {len(files)} scripts, largest {max(f.stat().st_size for f in files) / 1e6:.1f} MB, "
              f"together {sum(f.stat().st_size for f in files) / 1e6:.1f} MB; site {sum(p.stat().st_size for p in site.rglob('*') if p.is_file()) / 1e6:.1f} MB")
        print(f"requests off file://: {len(off)}")
        first = statistics.median(firsts)
        print(f"\n{'figure':<28}{'value':>10}{'target':>10}  ok")
        print(f"{'first result s (median)':<28}{first:>10.2f}{FIRST_RESULT_TARGET_S:>10.1f}  "
              f"{'yes' if first <= FIRST_RESULT_TARGET_S else 'NO'}")
        print(f"{'computing s (median)':<28}{statistics.median(computes):>10.2f}")
        return 0 if first <= FIRST_RESULT_TARGET_S and not off else 1


if __name__ == "__main__":
    sys.exit(main())
