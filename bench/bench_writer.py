"""Benchmark: the cache writer's cost per stage written (tying/cache/writer.py).

    python bench/bench_writer.py [--rounds 5] [--tokens 600]

Builds the synthetic cache the tests build (precompute/fixtures.py: every table filled, one
stage write each, from an empty file) ``--rounds`` times into a temporary folder, then rewrites
one small stage of it ``--rounds`` x 10 times (a stage rewritten into a cache that is there: the
copy, the open, the checks and the checkpoint, which every stage of ``precompute pair`` and each
sweep cell pays). Prints the median of each and the stage count. For a before/after figure run
it in both trees under ``farm-bench --vs``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from precompute.fixtures import build_synthetic_cache
from tying.cache.schema import STAGE_TABLES
from tying.cache.store import open_cache
from tying.cache.writer import CacheWriter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=600)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        builds = []
        for i in range(args.rounds):
            start = time.perf_counter()
            path = build_synthetic_cache(Path(tmp) / f"r{i}", n_tokens=args.tokens)
            builds.append(time.perf_counter() - start)
        writer = CacheWriter(path, meta={"name": "synthetic"})
        finished = writer._finished_stages()
        stages = len(finished)
        with open_cache(path) as con:  # the smallest stage, its rows as they are
            sizes = {stage: sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
                     for stage, tables in STAGE_TABLES.items() if stage in finished}
            stage = min(sizes, key=sizes.get)
            rows = {t: con.execute(f"SELECT * FROM {t}").df() for t in STAGE_TABLES[stage]}
        rewrites = []
        for i in range(args.rounds * 10):
            start = time.perf_counter()
            writer.write_stage(stage, {"round": i}, rows, seconds=0.0)
            rewrites.append(time.perf_counter() - start)
    print(f"synthetic cache ({args.tokens} tokens, {stages} stages) built from empty: "
          f"median {statistics.median(builds):.3f} s over {args.rounds}")
    print(f"its smallest stage ({stage}, {sizes[stage]} rows) rewritten into it: median "
          f"{1000 * statistics.median(rewrites):.1f} ms over {len(rewrites)}")


if __name__ == "__main__":
    main()
