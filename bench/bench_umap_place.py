"""Benchmark: placing every common token into a UMAP map fitted on a sample (the umap stage's
added cost, issue 19).

Builds one OLMo-shaped matrix (default 50,304 x 2,048 random normal float32 rows, seeded),
reduces a 20,000-row sample with PCA as the umap stage does (a cost the stage had before;
timed apart), stands in a map for the fit (the sample's first two principal components:
the cost of placing does not depend on the map) and times what the stage now does after the
fit, for one matrix and for three (the stage has T, I and O):

* reducing the other rows with the sample's PCA, placing them from their 10 nearest fitted
  rows (FAISS, exact), the quality measures (trustworthiness@10 and the nearest-drawn-
  neighbour share on 2,000-token samples) and the hold-out check (5% of the fitted rows).

Each run is timed ``--repeats`` times (median reported) with peak resident memory above the
matrix itself. The target: at most 120 s more for the stage, three matrices, on 2 idle cores.
The machine's load average is printed: on shared cores the figures are noisy.

Usage: python bench/bench_umap_place.py [--n 50304] [--d 2048] [--fit 20000] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tying.analysis.projection import complete_projection, reduce_fitted
from tying.memory import peak_memory, resident_memory

TARGET_SECONDS = 120.0
MATRICES = 3


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=50_304, help="tokens (rows) of the matrix (default 50,304, OLMo's)")
    p.add_argument("--d", type=int, default=2048, help="width (default 2,048, OLMo-1B's)")
    p.add_argument("--fit", type=int, default=20_000, help="fitted (sampled) tokens (default 20,000, --umap-tokens)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs; the median is reported (default 3)")
    p.add_argument("--quick", action="store_true", help="n = 12,000, fit = 5,000, one run")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    n, fit_n, repeats = (12_000, 5_000, 1) if args.quick else (args.n, args.fit, args.repeats)

    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((n, args.d), dtype=np.float32)
    fit = np.sort(rng.choice(n, size=fit_n, replace=False))
    load = os.getloadavg()
    print(f"n={n:,} d={args.d:,} fitted={fit_n:,} placed={n - fit_n:,} repeats={repeats} "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")

    t0 = time.perf_counter()
    reduced, transforms = reduce_fitted([X], fit, seed=args.seed)
    pca_seconds = time.perf_counter() - t0
    fitted = [np.ascontiguousarray(reduced[0][:, :2] * 10, dtype=np.float32)]  # a stand-in map

    times, peaks, result = [], [], None
    for _ in range(max(1, repeats)):
        reset = peak_memory(reset=True) is not None
        base = resident_memory()
        t0 = time.perf_counter()
        result = complete_projection([X], fit, reduced, transforms, fitted, seed=args.seed)
        times.append(time.perf_counter() - t0)
        peaks.append(peak_memory() - base if reset else float("nan"))
    one = statistics.median(times)
    q = result.quality["0"]
    print()
    print(f"{'step':<44}{'seconds':>10}{'peak extra MiB':>16}")
    print(f"{'PCA of the sample (as before, 1 matrix)':<44}{pca_seconds:>10.2f}{'':>16}")
    print(f"{'place + measure, 1 matrix (median)':<44}{one:>10.2f}{max(peaks) / 2**20:>16.0f}")
    print(f"{'place + measure, 3 matrices (3 x median)':<44}{MATRICES * one:>10.2f}{'':>16}")
    print()
    print(f"runs (s): {', '.join(f'{t:.2f}' for t in times)}")
    if q["placed"] is not None:
        print(f"placed: trustworthiness@10 {q['placed']['trustworthiness']:.3f}, nearest drawn neighbour among the "
              f"10 nearest {q['placed']['nn_share']:.1%} (random rows and a stand-in map: cost only)")
    verdict = "meets" if MATRICES * one <= TARGET_SECONDS else "misses"
    print(f"added time, 3 matrices = {MATRICES * one:.1f} s: {verdict} the target of <= {TARGET_SECONDS:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
