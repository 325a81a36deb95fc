"""Benchmark: a roomful of visitors tracing their own texts on the Lens page, before and after
the warm worker.

    python bench/bench_live.py [--cache cache/demo.duckdb] [--visitors 100] [--seconds 10]
                               [--old 10] [--cold]

After (explorer/live.py as the app runs it): ``--visitors`` threads, each one visitor, submit
a different text each, spread evenly over ``--seconds``, to one warm ``serve-trajectory``
worker (started before, as the page does when it shows the form; its start is timed on its
own), and wait for the trajectory as the page gets it (a DataFrame). Latency: from a
visitor's submit to the DataFrame in hand. Then a text asked again: answered from the kept
answers (timed, and the worker must get no request). ``--cold`` runs the room once more
against a worker that is not started yet (the first visitor starts it).

Before (the app until issue 21): one ``python -m precompute trajectory CACHE --text TEXT``
child process per text, one at a time. ``--old`` texts are run that way and timed; the
queue of the room (the same arrivals) is then replayed with those measured service times,
cycled: visitor i's text starts when it arrives or when the text before it is done,
whichever is later. This is an extrapolation from the ``--old`` runs, said so in the output.

Targets (issue 21): every text answered, p95 <= 3 s, no errors.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer import data, live

P95_TARGET = 3.0

SUBJECTS = ["the cat", "my compiler", "a lecturer", "the model", "our students", "this function", "the river",
            "a tied embedding", "the tokenizer", "every layer"]
VERBS = ["reads", "predicts", "forgets", "returns", "explains", "imports", "sorts", "prints", "learns", "ignores"]
OBJECTS = ["the next token", "a list of numbers", "numpy as np", "the whole room", "its own output", "the weather",
           "a sentence of your own", "two matrices"]


def texts(n: int) -> list[str]:
    """n different texts: sentences, a few of code, a few that start with dashes."""
    out = []
    for i in range(n):
        s, v, o = SUBJECTS[i % len(SUBJECTS)], VERBS[(i // len(SUBJECTS)) % len(VERBS)], OBJECTS[i % len(OBJECTS)]
        if i % 10 == 3:
            out.append(f"def f{i}(x):\n    return x * {i}")
        elif i % 25 == 7:
            out.append(f"-- {s} {v} {o} ({i})")
        elif i == 11:
            out.append("--help")
        else:
            out.append(f"{s.capitalize()} {v} {o}, visitor {i}.")
    assert len(set(out)) == n
    return out


def pct(values: list[float], q: float) -> float:
    """The nearest-rank percentile."""
    values = sorted(values)
    return values[min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))]


def room(tracers: live.Tracers, ref: data.CacheRef, room_texts: list[str], seconds: float) -> dict:
    """Each text submitted by its own thread at i * seconds / n; latencies and errors."""
    n = len(room_texts)
    latencies: list[float | None] = [None] * n
    errors: list[str] = []
    ahead: list[int] = [0] * n
    t0 = time.perf_counter() + 0.2

    def visitor(i: int) -> None:
        time.sleep(max(0.0, t0 + i * seconds / n - time.perf_counter()))
        start = time.perf_counter()
        try:
            job = tracers.submit(ref, room_texts[i])
            ahead[i] = job.ahead()
            rows, _ = job.result(timeout=600)
            if rows.empty:
                raise ValueError("no rows")
            latencies[i] = time.perf_counter() - start
        except Exception as exc:  # a visitor's error, counted
            errors.append(f"{room_texts[i]!r}: {exc}")

    threads = [threading.Thread(target=visitor, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [x for x in latencies if x is not None]
    end = time.perf_counter()
    return {"answered": len(done), "errors": errors, "latencies": done, "total": end - t0,
            "max_ahead": max(ahead)}


def old_way(cache: str, old_texts: list[str]) -> list[float]:
    """Seconds per text of the old path: one `precompute trajectory` child process per text."""
    times = []
    for text in old_texts:
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "precompute", "trajectory", cache, "--text", text],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        times.append(time.perf_counter() - t)
        if done.returncode != 0:
            raise SystemExit(f"the old way failed on {text!r}: {done.stderr.strip().splitlines()[-1:]}")
    return times


def replay(service: list[float], n: int, seconds: float) -> tuple[list[float], float]:
    """Latencies of n visitors arriving at i * seconds / n through a one-at-a-time queue whose
    i-th text takes service[i % len(service)]; and the time until the last answer."""
    free, out = 0.0, []
    for i in range(n):
        arrive = i * seconds / n
        free = max(free, arrive) + service[i % len(service)]
        out.append(free - arrive)
    return out, free


def row(name: str, value: str, target: str = "", ok: bool | None = None) -> None:
    mark = "" if ok is None else ("ok" if ok else "MISSED")
    print(f"{name:<52} {value:>14}  {target:<10} {mark}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", default=str(ROOT / "cache" / "demo.duckdb"))
    p.add_argument("--visitors", type=int, default=100)
    p.add_argument("--seconds", type=float, default=10.0, help="the visitors' texts arrive over this many seconds")
    p.add_argument("--old", type=int, default=10, help="texts run the old way (0: skip the before figures)")
    p.add_argument("--cold", action="store_true", help="also the room against a worker not started yet")
    args = p.parse_args(argv)

    ref = data.CacheRef.of(Path(args.cache).resolve())
    room_texts = texts(args.visitors)
    print(f"cache {ref.path}; {args.visitors} visitors, a different text each, submitted over {args.seconds:g} s")
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} (other work on this machine slows both ways)")
    print()
    print(f"{'figure':<52} {'value':>14}  {'target':<10}")
    ok_all = True

    # -- after: the warm worker -------------------------------------------------------------
    tracers = live.Tracers()
    t = time.perf_counter()
    warmup = tracers.submit(ref, "a warm-up text, before the room")
    warmup.result(timeout=600)
    row("after: worker start + first text (once per server)", f"{time.perf_counter() - t:.2f} s")
    worker = tracers.worker(ref)
    sent0 = worker.sent
    r = room(tracers, ref, room_texts, args.seconds)
    lat = r["latencies"]
    answered_ok = r["answered"] == args.visitors
    p95 = pct(lat, 95) if lat else float("nan")
    row("after: texts answered", f"{r['answered']} / {args.visitors}", "all", answered_ok)
    row("after: errors", str(len(r["errors"])), "0", not r["errors"])
    row("after: latency p50", f"{pct(lat, 50):.3f} s" if lat else "-")
    row("after: latency p95", f"{p95:.3f} s", f"<= {P95_TARGET:g} s", p95 <= P95_TARGET)
    row("after: latency max", f"{max(lat):.3f} s" if lat else "-")
    row("after: total, first submit to last answer", f"{r['total']:.2f} s")
    row("after: most texts ahead of a visitor's", str(r["max_ahead"]))
    row("after: requests to the worker", str(worker.sent - sent0))
    ok_all &= answered_ok and not r["errors"] and p95 <= P95_TARGET
    for e in r["errors"][:5]:
        print("  error:", e)

    sent = worker.sent
    t = time.perf_counter()
    repeat = tracers.submit(ref, room_texts[0])
    repeat.result()
    took = time.perf_counter() - t
    cached = worker.sent == sent
    row("after: a repeated text, from the kept answers", f"{took * 1e3:.3f} ms", "no request", cached)
    ok_all &= cached
    tracers.close()

    if args.cold:
        tracers = live.Tracers()
        r = room(tracers, ref, room_texts, args.seconds)
        lat = r["latencies"]
        row("cold: texts answered (the first visitor starts it)", f"{r['answered']} / {args.visitors}")
        row("cold: errors", str(len(r["errors"])))
        row("cold: latency p50 / p95", f"{pct(lat, 50):.2f} / {pct(lat, 95):.2f} s" if lat else "-")
        row("cold: total, first submit to last answer", f"{r['total']:.2f} s")
        tracers.close()

    # -- before: one child process per text, one at a time ----------------------------------
    if args.old:
        service = old_way(ref.path, room_texts[: args.old])
        row(f"before: one process per text, measured ({args.old} texts)",
            f"{statistics.median(service):.2f} s", "median")
        row("before: ... mean / max", f"{statistics.mean(service):.2f} / {max(service):.2f} s")
        old_lat, old_total = replay(service, args.visitors, args.seconds)
        row(f"before: latency p50 ({args.visitors} visitors, replayed)", f"{pct(old_lat, 50):.1f} s")
        row(f"before: latency p95 ({args.visitors} visitors, replayed)", f"{pct(old_lat, 95):.1f} s",
            f"<= {P95_TARGET:g} s", pct(old_lat, 95) <= P95_TARGET)
        row("before: total, first submit to last answer (replayed)", f"{old_total:.1f} s")
        bad = subprocess.run([sys.executable, "-m", "precompute", "trajectory", ref.path, "--text", "--help"],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        print(f"before: the text '--help' on the old command line -> exit {bad.returncode}: "
              f"{(bad.stderr.strip().splitlines() or [''])[-1]}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
