"""Benchmark: k-NN overlap of two matrices against the cost of their matrix products.

Builds two random float32 matrices (default 50,000 x 1,024, seeded) and times

* ``knn`` (k=10) of each matrix with tying.analysis.neighbours (the backend "auto" picks: torch on
  a GPU, faiss on a CPU), and ``overlap_at_k`` of the two neighbour lists;
* the floor: the float32 products X X^T of each matrix in blocks of rows, with nothing
  else (no normalisation, no top-k), on the same device.

Exact k-NN must compute every cosine, so the products are a lower bound; the target is
k-NN at most 2x the floor. A warm-up on a small matrix runs first (thread pools, GPU
context), untimed.

Usage: python bench/bench_overlap.py [--n 50000] [--d 1024] [--k 10] [--quick]
       [--backend auto|faiss|torch] [--device cpu|cuda] [--block-rows 4096] [--repeats 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tying.analysis.neighbours import knn, overlap_at_k
from tying.device import as_tensor, pick_device

TARGET_RATIO = 2.0


def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def products_floor(X: np.ndarray, device: torch.device, block_rows: int) -> float:
    """Seconds for X X^T (float32) in blocks of rows on ``device``, results discarded."""
    T = as_tensor(X, device)
    _sync(device)
    start = time.perf_counter()
    for first in range(0, T.shape[0], block_rows):
        S = T[first:first + block_rows] @ T.T
        del S
    _sync(device)
    return time.perf_counter() - start


def timed(repeats: int, fn, *args, **kwargs):
    """(fastest seconds over ``repeats`` calls, the last call's result)."""
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=50_000, help="tokens (rows) per matrix (default 50,000)")
    p.add_argument("--d", type=int, default=1024, help="width of each matrix (default 1,024)")
    p.add_argument("--k", type=int, default=10, help="neighbours per token (default 10)")
    p.add_argument("--quick", action="store_true", help="n = 10,000 (overrides --n)")
    p.add_argument("--backend", default="auto", choices=("auto", "faiss", "torch"), help="k-NN backend")
    p.add_argument("--device", default=None, help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--block-rows", type=int, default=4096, help="rows per block (default 4,096)")
    p.add_argument("--repeats", type=int, default=1, help="time each stage this many times, keep the fastest")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    n = 10_000 if args.quick else args.n
    device = pick_device(args.device)
    backend = args.backend
    if backend == "auto":
        backend = "torch" if device.type == "cuda" else "faiss"

    rng = np.random.default_rng(args.seed)
    A = rng.standard_normal((n, args.d), dtype=np.float32)
    B = rng.standard_normal((n, args.d), dtype=np.float32)
    print(f"n={n:,} d={args.d:,} k={args.k} backend={backend} device={device} "
          f"block_rows={args.block_rows} torch_threads={torch.get_num_threads()} repeats={args.repeats}")

    warm = rng.standard_normal((2048, args.d), dtype=np.float32)
    knn(warm, args.k, device=device, block_rows=args.block_rows, backend=backend)
    products_floor(warm, device, args.block_rows)

    r = args.repeats
    floor_a = min(products_floor(A, device, args.block_rows) for _ in range(max(1, r)))
    floor_b = min(products_floor(B, device, args.block_rows) for _ in range(max(1, r)))
    t_a, (ids_a, _) = timed(r, knn, A, args.k, device=device, block_rows=args.block_rows, backend=backend)
    t_b, (ids_b, _) = timed(r, knn, B, args.k, device=device, block_rows=args.block_rows, backend=backend)
    t_ov, overlap = timed(r, overlap_at_k, ids_a, ids_b, args.k)

    floor = floor_a + floor_b
    total = t_a + t_b + t_ov
    gflop = 2.0 * n * n * args.d * 2 / 1e9
    rows = [
        ("floor: X X^T blocks, A", floor_a, floor_a / floor_a),
        ("floor: X X^T blocks, B", floor_b, floor_b / floor_b),
        (f"knn A (k={args.k})", t_a, t_a / floor_a),
        (f"knn B (k={args.k})", t_b, t_b / floor_b),
        ("overlap_at_k", t_ov, t_ov / floor),
        ("k-NN overlap total", total, total / floor),
    ]
    print()
    print(f"{'stage':<26}{'seconds':>10}{'x floor':>10}")
    for name, seconds, ratio in rows:
        print(f"{name:<26}{seconds:>10.3f}{ratio:>10.2f}")
    print()
    print(f"floor throughput: {gflop / floor:,.0f} GFLOP/s; mean overlap@{args.k} = {overlap.mean():.4f} "
          f"(chance {args.k / (n - 1):.4f})")
    verdict = "meets" if total / floor <= TARGET_RATIO else "misses"
    print(f"k-NN overlap / floor = {total / floor:.2f}x: {verdict} the target of <= {TARGET_RATIO:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
