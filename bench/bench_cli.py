"""Benchmark: how long the light commands take, whole process, and what they load.

``python -m precompute --help``, ``summary <cache>`` and ``summary <cache> --json`` each run
``--runs`` times in a fresh interpreter (the way a user runs them); printed per command: the
median and the range of the wall time, and whether torch, transformers or Streamlit were
imported (they must not be: the CLI loads only the command that runs).

Usage: python bench/bench_cli.py [--cache cache/demo.duckdb] [--runs 7]

Target: ``--help`` under 0.5 s. Measured (issue 30; 2 shared CPU cores, 7 runs, median and
range; before: the commit the issue started from, the same machine and the same run):

    command          before              after
    --help           2.15 s (1.97-2.69)  0.084 s (0.077-0.120)
    summary demo     3.28 s (2.77-3.58)  1.48 s (1.28-1.71); peak memory 410 -> 228 MiB
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "streamlit")
PROBE = ("import json, sys, runpy\nsys.argv = ['precompute', *json.loads(sys.argv[1])]\n"
         "try:\n    runpy.run_module('precompute', run_name='__main__')\nexcept SystemExit:\n    pass\n"
         f"print('LOADED', json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))),"
         " file=sys.stderr)\n")


def timed(argv: list[str]) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    line = next(ln for ln in out.stderr.splitlines() if ln.startswith("LOADED "))
    return seconds, json.loads(line.removeprefix("LOADED "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / "cache" / "demo.duckdb"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    commands = {"--help": ["--help"], "summary": ["summary", args.cache], "summary --json": ["summary", args.cache,
                                                                                              "--json"]}
    print(f"{'command':<16} {'median':>8} {'min':>8} {'max':>8}  loaded")
    for name, argv in commands.items():
        timed(argv)  # warm the file cache
        runs = [timed(argv) for _ in range(args.runs)]
        times = [s for s, _ in runs]
        loaded = sorted({m for _, ms in runs for m in ms})
        print(f"{name:<16} {statistics.median(times):>7.3f}s {min(times):>7.3f}s {max(times):>7.3f}s  "
              f"{', '.join(loaded) or 'none of ' + '/'.join(HEAVY)}")


if __name__ == "__main__":
    main()
