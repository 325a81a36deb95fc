"""Run every benchmark in bench/ and print one table of their key figures.

    python bench/run_all.py [--only NAME[,NAME...]] [--quick] [--full] [--timeout S]

Each benchmark runs as its own subprocess (``sys.executable bench/<script>``); its printed
table is parsed into rows ``benchmark, figure, value, target, ok``. Where a line cannot be
parsed, the benchmark's last lines are shown instead, so nothing is silently dropped.

Names: load, overlap, demo, lens, app, concurrency, figures, site, projection_webgl, umap_place,
pair_stages.
``bench_overlap.py`` runs with ``--quick`` (10,000 tokens) unless ``--full`` is given.
``--quick`` shrinks the others too: load (one repeat, warm cache only), lens (5 steps, 2
evaluation batches), app (10,000 tokens, one repeat), concurrency (5 sessions for 10 s),
figures, site and projection_webgl (one run). The demo has no smaller form that keeps its
meaning and runs in full either way (about 5 minutes on 2 cores).
``umap_place`` with ``--quick`` places 7,000 rows of a 12,000-row matrix, once.
``pair_stages`` runs ``precompute pair`` on the OLMo-shaped pair (every stage but the lens) and
has no smaller form either (6 to 13 minutes on 2 cores; ``bench/bench_pair_stages.py --shape
qwen3`` alone for the Qwen3 shape, about 36 minutes).
Exit code: 0 when every benchmark exited 0 and no figure with a target missed it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
NUM = r"(-?[0-9][0-9,]*\.?[0-9]*|nan)"


def _f(text: str) -> float:
    return float(text.replace(",", ""))


# ------------------------------------------------------------------------------ parsers
# Each takes the benchmark's stdout and returns rows (figure, value, target, ok); ok is
# True/False where the benchmark has a target, None where it reports a figure only.


def parse_load(out: str):
    rows = []
    for line in out.splitlines():
        m = re.match(rf"^(warm|cold)\s+(load_model_matrices|np\.fromfile, same bytes|from_pretrained \(lazy\)|"
                     rf" \+ copy 2 matrices| \+ touch all params)\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s*$", line)
        if not m:
            continue
        cache, method, sec, peak, x_ret, x_floor = m.groups()
        method = method.strip()
        rows.append((f"{cache} {method}: wall s", _f(sec), "", None))
        if method == "load_model_matrices":
            rows.append((f"{cache} {method}: peak x returned", _f(x_ret), "<= 1.5", _f(x_ret) <= 1.5))
            rows.append((f"{cache} {method}: time x fromfile", _f(x_floor), "near 1", None))
    return rows


def parse_overlap(out: str):
    rows = []
    m = re.search(rf"^k-NN overlap total\s+{NUM}\s+{NUM}\s*$", out, flags=re.M)
    if m:
        rows.append(("k-NN overlap total s", _f(m.group(1)), "", None))
        rows.append(("k-NN overlap x floor", _f(m.group(2)), "<= 2", _f(m.group(2)) <= 2.0))
    m = re.search(r"^n=([0-9,]+) d=([0-9,]+)", out, flags=re.M)
    if m and rows:
        rows.insert(0, ("matrix size", f"{m.group(1)} x {m.group(2)}", "", None))
    return rows


def parse_demo(out: str):
    rows = []
    m = re.search(r"demo wall time: ([0-9.]+) s \(target <= ([0-9.]+) s\)", out)
    if m:
        rows.append(("demo wall s", _f(m.group(1)), f"<= {m.group(2)}", _f(m.group(1)) <= _f(m.group(2))))
    for name in ("O->T linear, held-out", "I->T linear, held-out", "overlap@10 T~O", "overlap@10 T~I",
                 "output share, first 10% of steps"):
        m = re.search(rf"^{re.escape(name)}\s+{NUM}\s", out, flags=re.M)
        if m:
            rows.append((name, _f(m.group(1)), "", None))
    for name, verdict in re.findall(r"^check (.+): (reproduced|NOT reproduced)$", out, flags=re.M):
        rows.append((f"check {name}", verdict, "reproduced", verdict == "reproduced"))
    return rows


def parse_lens(out: str):
    rows = []
    for line in out.splitlines():
        m = re.match(rf"^(forward only \(hidden states\)|train tuned lens|evaluate tuned \+ logit lens|"
                     rf"evaluate logit lens only)\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}", line)
        if m:
            rows.append((f"{m.group(1)}: tokens/s", _f(m.group(4)), "", None))
    m = re.search(r"step 0 ([0-9.]+) -> step \d+ ([0-9.]+)", out)
    if m:
        rows.append(("training KL falls (bits)", f"{m.group(1)} -> {m.group(2)}", "falls",
                     _f(m.group(2)) < _f(m.group(1))))
    return rows


def parse_app(out: str):
    rows = []
    for line in out.splitlines():
        m = re.match(rf"^(page \w+|token change \(neighbours\))\s+{NUM}\s+{NUM}\s+(yes|NO)\s*$", line)
        if m:
            rows.append((f"{m.group(1)} median s", _f(m.group(2)), f"<= {m.group(3)}", m.group(4) == "yes"))
    return rows


def parse_concurrency(out: str):
    rows = []
    m = re.search(r"^(\d+) sessions x (\d+) s", out, flags=re.M)
    if m:
        rows.append(("sessions x seconds", f"{m.group(1)} x {m.group(2)}", "", None))
    m = re.search(r"^all pages\s+(\d+)\s+", out, flags=re.M)
    if m:
        rows.append(("page runs", int(m.group(1)), "", None))
    m = re.search(rf"^p50 page s\s+{NUM}\s*$", out, flags=re.M)
    if m:
        rows.append(("p50 page s", _f(m.group(1)), "", None))
    m = re.search(rf"^p95 page s\s+{NUM}\s+{NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("p95 page s", _f(m.group(1)), f"<= {m.group(2)}", m.group(3) == "yes"))
    m = re.search(r"^errors\s+(\d+)\s+(\d+)\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("errors", int(m.group(1)), "0", m.group(3) == "yes"))
    return rows


def parse_figures(out: str):
    rows = []
    m = re.search(rf"^pack median s\s+{NUM}\s+<= {NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("figure pack median s", _f(m.group(1)), f"<= {m.group(2)}", m.group(3) == "yes"))
    for name in ("files", "pack MiB"):
        m = re.search(rf"^{re.escape(name)}\s+{NUM}\s*$", out, flags=re.M)
        if m:
            rows.append((name, _f(m.group(1)), "", None))
    return rows


def parse_site(out: str):
    rows = []
    m = re.search(rf"^build median s\s+{NUM}\s+<= {NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("site build median s", _f(m.group(1)), f"<= {m.group(2)}", m.group(3) == "yes"))
    for page, value, target, ok in re.findall(rf"^first chart median s, (\S+)\s+{NUM}\s+<= {NUM}\s+(yes|NO)", out,
                                              flags=re.M):
        rows.append((f"first chart s, {page}", _f(value), f"<= {target}", ok == "yes"))
    for page, count, ok in re.findall(rf"^requests, (\S+)\s+{NUM}\s+file://\s+(yes|NO)", out, flags=re.M):
        rows.append((f"requests, {page}", _f(count), "file:// only", ok == "yes"))
    m = re.search(rf"^site MB\s+{NUM}\s+< {NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("site MB", _f(m.group(1)), f"< {m.group(2)}", m.group(3) == "yes"))
    return rows


def parse_projection_webgl(out: str):
    rows = []
    m = re.search(rf"^three views drawn, median s\s+{NUM}\s+<= {NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("three WebGL views drawn, median s", _f(m.group(1)), f"<= {m.group(2)}", m.group(3) == "yes"))
    for view, sent, png, cells in re.findall(rf"^bytes per view (\w)\s+{NUM} \([0-9,]+ points: a PNG of {NUM} bytes, "
                                             rf"{NUM} click cells", out, flags=re.M):
        rows.append((f"bytes per view {view}", _f(sent), "", None))
        rows.append((f"PNG bytes {view}", _f(png), "", None))
        rows.append((f"click cells {view}", _f(cells), "", None))
    return rows


def parse_umap_place(out: str):
    rows = []
    m = re.search(rf"^place \+ measure, 1 matrix \(median\)\s+{NUM}\s+{NUM}\s*$", out, flags=re.M)
    if m:
        rows.append(("place + measure, 1 matrix, median s", _f(m.group(1)), "", None))
        rows.append(("peak extra MiB", _f(m.group(2)), "", None))
    m = re.search(rf"^added time, 3 matrices = {NUM} s: \w+ the target of <= {NUM} s", out, flags=re.M)
    if m:
        rows.append(("added to the umap stage, s", _f(m.group(1)), f"<= {m.group(2)}", _f(m.group(1)) <= _f(m.group(2))))
    m = re.search(r"load average ([0-9.]+)", out)
    if m:
        rows.insert(0, ("load average (1 min)", _f(m.group(1)), "", None))
    return rows


def parse_pair_stages(out: str):
    rows = []
    head = re.search(r"^stage\s+(.*)$", out, flags=re.M)
    last = len(head.group(1).split()) // 4 if head else 1  # columns: "<label> s  <label> GB" per run
    for stage in ("load", "alignment", "neighbours", "spectral", "umap", "whole run"):
        m = re.search(rf"^{stage}\s+((?:{NUM}\s+)*{NUM})(?:\s+[0-9.]+x)?\s*$", out, flags=re.M)
        if m:
            cells = m.group(1).split()
            sec, gb = cells[2 * (last - 1)], cells[2 * (last - 1) + 1]
            rows.append((f"{stage}: s", _f(sec), "", None))
            rows.append((f"{stage}: peak GB", _f(gb), "< 24", _f(gb) < 24))
    m = re.search(rf"^whole run, s\s+{NUM}\s+<= {NUM}\s+(yes|NO)", out, flags=re.M)
    if m:
        rows.append(("whole run vs target, s", _f(m.group(1)), f"<= {m.group(2)}", m.group(3) == "yes"))
    return rows


# name -> (script, default args, quick args, full args, parser)
BENCHMARKS = {
    "load": ("bench_load.py", [], ["--repeats", "1", "--no-cold"], None, parse_load),
    "overlap": ("bench_overlap.py", ["--quick"], ["--quick"], [], parse_overlap),
    "demo": ("bench_demo.py", [], [], None, parse_demo),
    "lens": ("bench_lens.py", [], ["--steps", "5", "--eval-batches", "2"], None, parse_lens),
    "app": ("bench_app.py", [], ["--tokens", "10000", "--repeats", "1"], None, parse_app),
    "concurrency": ("bench_concurrency.py", [], ["--sessions", "5", "--seconds", "10"], None, parse_concurrency),
    "figures": ("bench_figures.py", [], ["--runs", "1"], None, parse_figures),
    "site": ("bench_site.py", [], ["--runs", "1"], None, parse_site),
    "projection_webgl": ("bench_projection_webgl.py", [], ["--runs", "1"], None, parse_projection_webgl),
    "umap_place": ("bench_umap_place.py", [], ["--quick"], None, parse_umap_place),
    "pair_stages": ("bench_pair_stages.py", [], [], None, parse_pair_stages),
}


def run_one(name: str, quick: bool, full: bool, timeout: float | None):
    script, default, quick_args, full_args, parser = BENCHMARKS[name]
    args = default
    if quick:
        args = quick_args
    if full and full_args is not None:
        args = full_args
    cmd = [sys.executable, str(BENCH / script), *args]
    print(f"[{name}] {' '.join(['python', f'bench/{script}', *args])}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = "timeout"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - t0
    print(f"[{name}] exit {code} after {seconds:.0f} s", flush=True)
    try:
        rows = parser(out)
    except Exception as exc:
        rows = [("parse error", repr(exc)[:60], "", None)]
    rows.append(("exit code", code, "0", code == 0))
    rows.append(("wall s (whole script)", round(seconds, 1), "", None))
    if len(rows) <= 2:  # nothing parsed: show the tail of what it printed
        tail = [ln for ln in (out + "\n" + err).strip().splitlines() if ln.strip()][-5:]
        rows[:0] = [("output", ln[:70], "", None) for ln in tail]
    return rows


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    return str(value)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help=f"comma-separated names among: {', '.join(BENCHMARKS)}")
    ap.add_argument("--quick", action="store_true", help="smaller runs where a benchmark allows")
    ap.add_argument("--full", action="store_true", help="bench_overlap.py at full size (50,000 tokens)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed per benchmark (default none)")
    args = ap.parse_args(argv)

    names = list(BENCHMARKS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCHMARKS]
        if unknown:
            ap.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    table = []
    for name in names:
        for figure, value, target, ok in run_one(name, args.quick, args.full, args.timeout):
            table.append((name, figure, fmt(value), target, {True: "yes", False: "NO", None: ""}[ok]))

    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in
              enumerate(("benchmark", "figure", "value", "target", "ok"))]
    header = ("benchmark", "figure", "value", "target", "ok")
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(c.rjust(w) if i == 2 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    missed = [r for r in table if r[4] == "NO"]
    print(f"\n{len(names)} benchmark(s); {len(missed)} figure(s) missed their target")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
