"""Time the whole default toy-lab demo and print its scientific figures beside the paper's.

    python bench/bench_demo.py [--cache-dir DIR] [demo options...]

Target: the default demo finishes within 5 minutes on a 2-core CPU. The figures are the
scientific check of the toy lab: O->T above I->T (linear, held-out), overlap@10 T~O above
T~I, and the output side's share of the tied matrix's gradient norm above one half early
(the paper's quantity: the mean over steps of output / (input + output)). With --seeds N
it also prints the mean and spread over seeds and whether each direction holds per seed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache-dir", help="where the demo cache goes (default: a temporary folder)")
    args, extra = ap.parse_known_args(argv)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="bench-demo-")
    cmd = [sys.executable, "-m", "precompute", "demo", "--cache-dir", cache_dir, *extra]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if run.returncode:
        print(run.stderr[-3000:])
        return run.returncode
    out = subprocess.run([sys.executable, "-m", "precompute", "summary", str(Path(cache_dir) / "demo.duckdb"),
                          "--json"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    s = json.loads(out)
    al, ov = s["alignment"], s["overlap_at_10"]
    prov = s["gradient_provenance"]["tied/seed0"]
    stages = {k: v["seconds"] for k, v in s["stages"].items()}
    print(f"demo wall time: {seconds:.0f} s (target <= 300 s): {'yes' if seconds <= 300 else 'NO'}")
    print("stage seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in stages.items()))
    rows = [
        ("O->T linear, in-sample", al["O->T"]["linear"]["in_sample"], "0.719 (OLMo)"),
        ("I->T linear, in-sample", al["I->T"]["linear"]["in_sample"], "0.525 (OLMo)"),
        ("O->T linear, held-out", al["O->T"]["linear"]["held_out"], "-"),
        ("I->T linear, held-out", al["I->T"]["linear"]["held_out"], "-"),
        ("O->T orthogonal, in-sample", al["O->T"]["orthogonal"]["in_sample"], "0.669 (OLMo)"),
        ("I->T orthogonal, in-sample", al["I->T"]["orthogonal"]["in_sample"], "0.420 (OLMo)"),
        ("overlap@10 T~O", ov["T~O"], "0.733 (OLMo)"),
        ("overlap@10 T~I", ov["T~I"], "0.496 (OLMo)"),
        ("overlap@10 I~O", ov["I~O"], "0.455 (OLMo)"),
        (f"output share, steps <= {prov['early_steps']} (mean of ratios)", prov["early"],
         "0.7033 (OLMo, steps 1-1,000)"),
        ("output share, all steps (mean of ratios)", prov["overall"], "0.6357 (OLMo, 10,010 steps)"),
        ("output share early, ratio of summed norms", prov["ratio_of_sums"]["early"], "0.7384 (not the paper's)"),
        ("output share early, authors' input proxy", (prov.get("proxy") or {}).get("early"), "0.7033"),
    ]
    for method, cells in (s.get("table2") or {}).items():
        for run_name, c in cells.items():
            rows.append((f"Table 2 {method} {run_name} I / O", None,
                         f"{c.get('I', float('nan')):.3f} / {c.get('O', float('nan')):.3f}"))
    lens = (s.get("lens") or {}).get("gap")
    if lens:
        rows.append(("tuned-lens KL, first 2 hidden states, tied", lens["tied"], "8.86, 9.61 (OLMo)"))
        rows.append(("tuned-lens KL, first 2 hidden states, untied", lens["untied"], "7.01, 6.64 (OLMo)"))
    print(f"\n{'figure':<56}{'toy lab':>10}   paper")
    for name, value, paper in rows:
        v = "" if value is None else f"{value:10.3f}"
        print(f"{name:<56}{v:>10}   {paper}")
    checks = {
        "O->T linear held-out > I->T": al["O->T"]["linear"]["held_out"] > al["I->T"]["linear"]["held_out"],
        "overlap@10 T~O > T~I": ov["T~O"] > ov["T~I"],
        "output share early > 0.5": prov["early"] > 0.5,
    }
    print("\n" + "\n".join(f"check {k}: {'reproduced' if v else 'NOT reproduced'}" for k, v in checks.items()))
    seeds = s.get("seeds") or {}
    if seeds and max(v["n"] for v in seeds.values()) > 1:
        print(f"\n{'across seeds':<48}{'mean':>10}{'std':>10}")
        for metric, v in seeds.items():
            print(f"{metric:<48}{v['mean']:10.3f}{(v['std'] or 0):10.3f}")
        for claim, d in (s.get("directions") or {}).items():
            print(f"direction {claim}: holds in {sum(d['holds'])} of {len(d['holds'])} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
