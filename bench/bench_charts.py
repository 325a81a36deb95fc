"""Time drawing every figure's Vega-Lite spec of some caches, in this process (no Vega, no files):
the work the app's pages, the figure pack and the site share before any renderer runs.

    python bench/bench_charts.py [--caches demo,paper,sweep,mechanism] [--rounds 5] [--altair-own]

``--altair-own`` measures with Altair's own ``from_dict`` (explorer/render/altair_lookup.py undone),
so the two runs give the lookup's effect. Prints each round and the median of the rounds after the
first (the first also reads the caches).

Measured figures: docs/benchmarks.md ("Why the app is fast": drawing the charts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caches", default="demo,paper,sweep,mechanism")
    ap.add_argument("--cache-dir", default=str(ROOT / "cache"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--altair-own", action="store_true", help="Altair's own from_dict (the lookup undone)")
    args = ap.parse_args()

    from explorer.render import altair_lookup, figures, read
    from explorer.render.spec import vega_lite_spec

    if args.altair_own:
        altair_lookup.uninstall()
    refs = [read.CacheRef.of(Path(args.cache_dir) / f"{name}.duckdb") for name in args.caches.split(",")]
    times, n = [], 0
    for _ in range(args.rounds):
        t0, n = time.perf_counter(), 0
        for ref in refs:
            for fig in figures.available(ref):
                chart, _ = fig.build(ref)
                if chart is not None:
                    vega_lite_spec(chart)
                    n += 1
        times.append(time.perf_counter() - t0)
    print(f"lookup: {'Altair own' if args.altair_own else 'built once'}; {n} charts of {args.caches}")
    print("rounds (s): " + ", ".join(f"{t:.2f}" for t in times))
    print(f"median after the first: {statistics.median(times[1:] or times):.2f} s")


if __name__ == "__main__":
    main()
