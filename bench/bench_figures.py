"""Time the figure pack of the demo cache: ``python -m precompute figures`` in every format.

    python bench/bench_figures.py [--cache demo] [--runs 3] [--format svg,pdf,png] [--scale 2] [--presentation]

Each run is the command as a user types it (a fresh process, so the data readers' caches
start cold), on a copy of the cache, into a temporary folder. Printed: each run's wall time,
the median against the target (30 s on 2 cores), the number of files and the pack's size,
and its largest files.

Measured (2 cores shared with a sweep training run, load average 4-6): runs of 27.1, 14.9
and 16.4 s, median 16.4 s; 56 files (11 figures and tables) and 32.6 MiB, of which the
PDFs 16.4 MiB (the 12,288-point projection and norm scatters are 8 MiB each as vector
paths), SVG 7.8, PNG 4.5, Vega-Lite JSON 3.2. The same pack in-process (the test, no
Python start-up) took 10-11 s.
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
TARGET_S = 30.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default="demo", help="a cache name in cache/ (default demo)")
    ap.add_argument("--runs", type=int, default=3, help="runs (the median is reported)")
    ap.add_argument("--format", default="svg,pdf,png")
    ap.add_argument("--scale", default="2")
    ap.add_argument("--presentation", action="store_true")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-figures-"))
    try:
        cache = Path(shutil.copy2(ROOT / "cache" / f"{args.cache}.duckdb", work / f"{args.cache}.duckdb"))
        out = work / "pack"
        cmd = [sys.executable, "-m", "precompute", "figures", str(cache), "--out", str(out), "--format", args.format,
               "--scale", args.scale] + (["--presentation"] if args.presentation else [])
        print(f"figure pack of cache/{args.cache}.duckdb: {args.format} at scale {args.scale}"
              f"{', presentation' if args.presentation else ''}; {args.runs} runs")
        seconds = []
        for i in range(args.runs):
            t0 = time.perf_counter()
            run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            seconds.append(time.perf_counter() - t0)
            if run.returncode:
                print(run.stderr[-3000:])
                return run.returncode
            print(f"run {i + 1}: {seconds[-1]:.1f} s")
        manifest = json.loads((out / "manifest.json").read_text())
        sizes = {f["file"]: (out / f["file"]).stat().st_size for f in manifest["files"]}
        median = statistics.median(seconds)
        print()
        print(f"{'figure':<28}{'value':>10}{'target':>10}  ok")
        print(f"{'pack median s':<28}{median:>10.1f}{'<= ' + f'{TARGET_S:g}':>10}  {'yes' if median <= TARGET_S else 'NO'}")
        print(f"{'files':<28}{len(sizes) + 1:>10}")
        print(f"{'figures and tables':<28}{len({f['figure'] for f in manifest['files']}):>10}")
        print(f"{'pack MiB':<28}{sum(sizes.values()) / 2**20:>10.1f}")
        by_format: dict[str, int] = {}
        for f in manifest["files"]:
            by_format[f["format"]] = by_format.get(f["format"], 0) + sizes[f["file"]]
        print("MiB by format: " + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in sorted(by_format.items())))
        print("largest: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in
                                      sorted(sizes.items(), key=lambda kv: -kv[1])[:3]))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
