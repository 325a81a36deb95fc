"""Fault injection: `precompute pair` killed at random moments, and reads during replaces.

A killed run must leave a cache that opens, and every stage it records as finished must
hold the rows of a finished stage with those parameters; a rerun must then complete.

To spend the trials on the run itself rather than on importing torch, the killed runs are
forked from a small server process that has already imported the CLI: each trial is a
fresh child process running ``precompute.cli.main([...])`` and is ended with SIGKILL.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from precompute.fixtures import build_synthetic_cache
from tests.stage_lists import MATRICES_ONLY, SKIPPED
from tying.cache.schema import STAGE_TABLES
from tying.cache.store import finished_stages, open_cache
from tying.cache.writer import CacheWriter
from tying.registry import PAIR_STAGES

ROOT = Path(__file__).resolve().parent.parent
BASE = ["--skip", MATRICES_ONLY, "--spectral-components", "8", "--neighbours-k", "10"]
VARIANT = ["--skip", MATRICES_ONLY, "--spectral-components", "8", "--neighbours-k", "12", "--force"]
N_TRIALS = 12

# Reads one JSON argv per line from stdin; forks a child that runs the CLI with its output
# sent to /dev/null; answers "pid <pid>" at once and "status <wait status> <seconds>" when
# the child is gone.
SERVER = r"""
import json, os, sys, time
import precompute.cli, precompute.pair, precompute.lens  # the heavy imports, done once
import tying.analysis.align, tying.analysis.align_table, tying.device, tying.analysis.neighbours, tying.analysis.spectral, tying.loading.weights, tying.cache.summary
import faiss, transformers  # imported lazily by a run
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
import transformers.models.llama.modeling_llama
print("ready", flush=True)
for line in sys.stdin:
    argv = json.loads(line)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        code = 70
        try:
            code = precompute.cli.main(argv)
        finally:
            os._exit(code)
    print(f"pid {pid}", flush=True)
    _, status = os.waitpid(pid, 0)
    print(f"status {status} {time.perf_counter() - t0:.3f}", flush=True)
"""


class ForkServer:
    def __init__(self):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == "ready"

    def start(self, argv: list[str]) -> int:
        self.proc.stdin.write(json.dumps([str(a) for a in argv]) + "\n")
        self.proc.stdin.flush()
        word, pid = self.proc.stdout.readline().split()
        assert word == "pid"
        return int(pid)

    def wait(self) -> tuple[int, float]:
        word, status, seconds = self.proc.stdout.readline().split()
        assert word == "status"
        return int(status), float(seconds)

    def run(self, argv: list[str]) -> tuple[int, float]:
        self.start(argv)
        return self.wait()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _snapshot(path: Path) -> dict:
    """Finished stages (params) and the row count of every stage table, from one connection."""
    con = open_cache(path)
    try:
        stages = {s: v["params"] for s, v in finished_stages(con).items()}
        counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for tables in STAGE_TABLES.values() for t in tables}
        align = con.execute("SELECT * FROM alignment_summary ORDER BY ALL").df()
    finally:
        con.close()
    return {"stages": stages, "counts": counts, "alignment": align}


def _stage_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _summary_json(path: Path, capsys) -> dict:
    from precompute.cli import main

    capsys.readouterr()
    assert main(["summary", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def models(tiny_model):
    return tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)


@pytest.mark.slow
def test_pair_killed_at_random_moments_leaves_a_usable_cache(models, tmp_path, capsys):
    tied, untied = models
    common = ["pair", "--tied", tied, "--untied", untied, "--cache-dir", tmp_path, "--name", "p"]
    path = tmp_path / "p.duckdb"
    server = ForkServer()
    try:
        status, duration = server.run(common + BASE)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        original = _snapshot(path)
        assert set(original["stages"]) == set(PAIR_STAGES) - SKIPPED  # the registry's, less BASE's skips
        # reference rows for every (stage, params) a finished stage may carry
        expected = {_stage_key(p): {t: original["counts"][t] for t in STAGE_TABLES[s]}
                    for s, p in original["stages"].items()}

        rng = random.Random(1234)
        delays = sorted(rng.uniform(0.02, 1.05) * duration for _ in range(N_TRIALS))
        trials = []
        for delay in delays:
            pid = server.start(common + VARIANT)
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            status, seconds = server.wait()
            killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
            if not killed:
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
            # the cache opens (schema version checked) and is consistent stage by stage
            snap = _snapshot(path)
            trials.append((round(delay, 2), killed, sorted(snap["stages"])))
            for stage, tables in STAGE_TABLES.items():
                if stage not in snap["stages"]:
                    assert all(snap["counts"][t] == 0 for t in tables), (delay, stage, snap["counts"])
            for stage, params in snap["stages"].items():
                if stage == "neighbours" and params.get("k") == 12:
                    continue  # the variant's own rows: checked after the final run
                key = _stage_key(params)
                assert key in expected, (delay, stage, params)
                assert {t: snap["counts"][t] for t in STAGE_TABLES[stage]} == expected[key], (delay, stage)
            assert _summary_json(path, capsys)["kind"] == "pair"
            if "alignment" in snap["stages"]:
                pd.testing.assert_frame_equal(snap["alignment"], original["alignment"])
            neighbour_rows = snap["counts"]["neighbours"] if snap["stages"].get("neighbours", {}).get("k") == 12 else None
            trials[-1] += (neighbour_rows,)
    finally:
        server.close()
    assert sum(t[1] for t in trials) >= N_TRIALS // 2, trials  # most trials really were killed mid-run

    # a final rerun, in a real `python -m precompute` process, completes
    done = subprocess.run([sys.executable, "-m", "precompute", *map(str, common + VARIANT)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    final = _snapshot(path)
    assert final["stages"]["neighbours"]["k"] == 12
    for _, _, _, rows in trials:
        assert rows in (None, final["counts"]["neighbours"])
    assert not list(tmp_path.glob(".p.duckdb.tmp-*"))
    s = _summary_json(path, capsys)
    assert set(s["overlap"]["T~O"]) >= {str(k) for k in range(1, 13)}
    print("fault trials (delay s, killed, finished stages):", trials, f"full run {duration:.2f}s")


@pytest.mark.slow
def test_reads_during_replaces_see_whole_versions(tmp_path):
    path = build_synthetic_cache(tmp_path, "r", n_tokens=200, lens=False, training=False)
    con = duckdb.connect(str(path), read_only=True)
    full = {t: con.execute(f"SELECT * FROM {t}").df() for t in STAGE_TABLES["neighbours"]}
    con.close()
    sizes = [20, 57, 113, 200]  # tokens kept by each version

    def frames(n):
        return {t: df[df["token"] < n] if "token" in df.columns else df.head(n) for t, df in full.items()}

    counts = {n: {t: len(f) for t, f in frames(n).items()} for n in sizes}
    stop = threading.Event()
    errors, seen = [], []

    def reader():
        while not stop.is_set():
            try:
                con = open_cache(path)  # as the app does: a read-only connection per file version
                try:
                    cur = con.cursor()
                    params = json.loads(cur.execute(
                        "SELECT params FROM stages WHERE stage = 'neighbours'").fetchone()[0])
                    got = {t: cur.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in full}
                    cur.close()
                finally:
                    con.close()
                n = params.get("n")
                if n is not None and got != counts[n]:
                    errors.append(f"version n={n} read {got}, expected {counts[n]}")
                seen.append(n)
            except Exception as exc:
                errors.append(repr(exc))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        writer = CacheWriter(path)
        for i in range(12):
            n = sizes[i % len(sizes)]
            writer.write_stage("neighbours", {"n": n}, frames(n), seconds=0.0)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors[:5]
    assert len(seen) > 3
    assert len({n for n in seen if n is not None}) >= 2, seen  # reads did overlap several versions
