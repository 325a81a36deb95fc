"""Benchmark: how long the test suite takes, and where the time goes.

Runs the README's test command's pytest (``python -m pytest -q``, two xdist workers as pytest.ini
sets; ``--workers N`` for another count, ``--quick`` for ``-m "not slow"``) once, with a JUnit
report and pytest's own per-phase durations, and prints: the wall time of the whole command, the
test count, the sum of the tests' own times, the slowest ``--top`` items (call, setup or teardown:
a fixture's set-up is charged to the first test that asks for it), the slowest fixture set-ups, and
the time of each worker group (tests/conftest.py's ``worker_group``: what one worker runs as one
unit), the machine's CPU over the run (/proc/stat: the CPU seconds used and the share of the cores
kept busy; a suite whose cores are not kept busy waits somewhere) and each worker's span (from its
first test to its last, by bench/suite_clock.py; a worker that ends early idles a core). A new
test's fixture belongs where the suite's notes say (docs/contributing.md).

Usage: python bench/bench_suite.py [--quick] [--workers 2] [--top 20] [-- PYTEST ARGS]

Measured figures: docs/benchmarks.md ("The test suite").
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASE = re.compile(r"^\s*([0-9.]+)s (call|setup|teardown)\s+(\S+)")


def group_of(nodeid: str) -> str:
    """The worker group of a test, as tests/conftest.py's ``worker_group`` forms it from its
    SHARED_WORKER table (read from the file, not imported: a benchmark does not import the tests)."""
    tables = {}
    for node in ast.parse((ROOT / "tests" / "conftest.py").read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "SHARED_WORKER":
                tables[node.targets[0].id] = ast.literal_eval(node.value)
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return next((g for g, modules in tables.get("SHARED_WORKER", {}).items() if module in modules), module)


def cpu_times() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far (Linux /proc/stat; zeros elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / hz, idle / hz


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help='only the quick loop: -m "not slow"')
    ap.add_argument("--workers", default=None, help="xdist workers (default: pytest.ini's)")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", "--durations=0", "--durations-min=0.5"]
        cmd += ["-m", "not slow"] if args.quick else []
        cmd += ["-n", args.workers] if args.workers else []
        cmd += ["-p", "bench.suite_clock", *args.pytest_args]
        clock = Path(tmp) / "clock.tsv"
        busy0, idle0 = cpu_times()
        t0 = time.perf_counter()
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, SUITE_CLOCK=str(clock)))
        wall = time.perf_counter() - t0
        busy, idle = (a - b for a, b in zip(cpu_times(), (busy0, idle0)))
        spans: dict[str, list[float]] = {}
        for line in clock.read_text().splitlines() if clock.is_file() else []:
            worker, start, end, _ = line.split("\t", 3)
            span = spans.setdefault(worker, [float(start), float(end)])
            span[0], span[1] = min(span[0], float(start)), max(span[1], float(end))
        cases = list(ET.parse(report).getroot().iter("testcase")) if report.is_file() else []
    summary = next((ln for ln in reversed(out.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", ln)), "")
    print(f"command: {' '.join(cmd[2:])}")
    print(f"wall time {wall:.1f} s; {summary.strip('= ')}; exit {out.returncode}")
    own = sum(float(c.get("time", 0)) for c in cases)
    print(f"tests' own time {own:.1f} s over {len(cases)} tests (the workers' time together)")
    if busy + idle:
        print(f"CPU: {busy:.1f} s used, the cores {busy / (busy + idle):.0%} busy ({os.cpu_count()} cores)")
    if spans:
        first = min(s[0] for s in spans.values())
        print("workers, from the first test of the run: " + "; ".join(
            f"{w} {s[0] - first:.1f}-{s[1] - first:.1f} s" for w, s in sorted(spans.items())))
    phases = [(float(m.group(1)), m.group(2), m.group(3)) for ln in out.stdout.splitlines() if (m := PHASE.match(ln))]
    phases.sort(reverse=True)
    print(f"\nslowest {args.top} items:")
    for seconds, phase, nodeid in phases[:args.top]:
        print(f"  {seconds:6.1f} s  {phase:<8} {nodeid}")
    setups = [p for p in phases if p[1] == "setup"][:10]
    print("\nslowest fixture set-ups (charged to the first test that asks):")
    for seconds, _, nodeid in setups:
        print(f"  {seconds:6.1f} s  {nodeid}")
    groups: collections.Counter = collections.Counter()
    for c in cases:
        nodeid = c.get("classname").replace(".", "/") + ".py::" + c.get("name")
        groups[group_of(nodeid)] += float(c.get("time", 0))
    print("\nworker groups (the tests' own time):")
    for g, seconds in groups.most_common(15):
        print(f"  {seconds:6.1f} s  {g}")
    if out.returncode:
        print(out.stdout[-3000:], file=sys.stderr)
        raise SystemExit(out.returncode)


if __name__ == "__main__":
    main()
