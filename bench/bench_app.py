"""Server-side render time of every app page on a synthetic 50k-token cache.

    python bench/bench_app.py [--tokens 50000] [--repeats 3]

Targets: each page under 0.5 s after warm-up; a token change under 0.2 s. Times are the
script run as AppTest measures it (server side: queries, numerics, chart specs), not the
browser's drawing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAGES = ["overview", "alignment", "neighbours", "projection", "lens", "dynamics"]  # the measured set, fixed so runs compare


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=50_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    import logging

    logging.getLogger("streamlit").setLevel(logging.ERROR)
    from streamlit.testing.v1 import AppTest

    from precompute.fixtures import build_synthetic_cache

    tmp = Path(tempfile.mkdtemp(prefix="bench-app-"))
    t0 = time.perf_counter()
    build_synthetic_cache(tmp, "bench", n_tokens=args.tokens, d=args.d, k=50)
    print(f"synthetic cache: {args.tokens:,} tokens, d={args.d}, K=50, built in {time.perf_counter() - t0:.1f} s")
    os.environ["TYING_CACHE_DIR"] = str(tmp)

    rows = []
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["pair"] = "bench"
    at.run()
    for page in PAGES:
        at.switch_page(f"views/{page}.py")
        at.run()  # warm-up: fills the query caches
        assert not at.exception, [e.value for e in at.exception]
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - t)
        rows.append((f"page {page}", statistics.median(times), 0.5))

    at.switch_page("views/neighbours.py")
    at.run()
    times = []
    for token in (1000, 2000, 3000, 4000, 5000)[: max(3, args.repeats)]:
        at.session_state["token"] = token
        t = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t)
        assert not at.exception
    rows.append(("token change (neighbours)", statistics.median(times), 0.2))

    print(f"\n{'what':<28}{'median s':>10}{'target s':>10}  ok")
    for what, sec, target in rows:
        print(f"{what:<28}{sec:>10.3f}{target:>10.1f}  {'yes' if sec <= target else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
