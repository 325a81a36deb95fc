"""Benchmark: `precompute pair` on a real-model-shaped pair, every stage but the lens, time and
peak memory per stage (issue 19, items 3 and 4).

    python bench/bench_pair_stages.py [--shape olmo|qwen3] [--before DIR] [--keep DIR]

Builds two Hugging Face model folders offline (tests/tiny_models.py's loaders read them as any
checkpoint): one tied and one untied model of the shape's vocabulary and widths, one thin
block each (the embedding matrices are what the stages read), sharing a word-level tokenizer
of exactly V tokens. The matrices are not plain noise: tokens fall into 1,000 clusters of
varied sizes; O is cluster centres plus noise, T is O turned by a random rotation (or mapped
by a random projection when the widths differ) plus noise, I a different clustering, so the
k-NN graphs, the spectral solver and UMAP meet structure, as on a trained model. Seeded.

Then runs ``python -m precompute pair --tied ... --untied ... --skip lens`` (the README's
command) as a child process and reads the per-stage lines it prints (wall seconds and peak
resident memory of each stage, precompute/pair.py), plus the child's whole wall time and
peak. With ``--before DIR`` (a checkout of the code before a change, e.g. a ``git worktree``
of an older commit) the same command runs there first, on the same model folders, and the
table gives both, the ratio, and how far the results moved (alignment means, overlap@k,
spectral distances, and the umap stage's placement quality).

Shapes: ``olmo`` V=50,304, d=2,048 tied and untied (OLMo-1B); ``qwen3`` V=151,936, tied
d=2,560 against untied d=4,096 (Qwen3-4B against Qwen3-8B, the ``qwen3`` preset).
Target (item 3): the OLMo shape in at most 8 minutes on 2 idle cores (measured: 6 min 16 s).
The qwen3 shape took 35 min 45 s, peak 10.4 GB (README, Benchmarks).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPES = {"olmo": (50_304, 2048, 2048), "qwen3": (151_936, 2560, 4096)}
TARGET_S = {"olmo": 8 * 60}
STAGES = ("load", "alignment", "neighbours", "spectral", "umap")
STAGE_LINE = re.compile(r"^stage (\w+): ([0-9.]+) s, peak memory ([0-9.]+) GB", re.M)


def tokenizer(out: Path, n: int) -> None:
    """A word-level tokenizer of exactly ``n`` tokens (``w0`` ... plus the specials)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, "<pad>": 1} | {f"w{i}": i for i in range(2, n)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>")
    fast.save_pretrained(out)


def matrices(n: int, d_tied: int, d_untied: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Clustered T, I, O (float32, n rows): see the module's docstring."""
    rng = np.random.default_rng(seed)
    weights = rng.pareto(1.2, 1000) + 0.1
    label = rng.choice(1000, size=n, p=weights / weights.sum())
    other = rng.choice(1000, size=n)  # I's own clusters
    o = (rng.standard_normal((1000, d_untied), dtype=np.float32)[label]
         + 0.8 * rng.standard_normal((n, d_untied), dtype=np.float32)) * 0.02
    if d_tied == d_untied:
        q, _ = np.linalg.qr(rng.standard_normal((d_untied, d_untied)))
        t = o @ q.astype(np.float32)
    else:
        t = o @ (rng.standard_normal((d_untied, d_tied), dtype=np.float32) / np.sqrt(d_untied))
    t += 0.01 * rng.standard_normal((n, d_tied), dtype=np.float32)
    i = (rng.standard_normal((1000, d_untied), dtype=np.float32)[other] * 0.5
         + 0.3 * rng.standard_normal((1000, d_untied), dtype=np.float32)[label]
         + 0.8 * rng.standard_normal((n, d_untied), dtype=np.float32)) * 0.02
    return {"T": t, "I": i.astype(np.float32), "O": o}


def model(out: Path, tok_dir: Path, n: int, d: int, tied: bool, rows: dict[str, np.ndarray]) -> None:
    """An OLMo model of one thin block with the given embedding rows, saved as safetensors."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    cfg = AutoConfig.for_model("olmo", vocab_size=n, hidden_size=d, num_hidden_layers=1, num_attention_heads=8,
                               num_key_value_heads=8, intermediate_size=64, max_position_embeddings=128,
                               tie_word_embeddings=tied, bos_token_id=0, eos_token_id=0, pad_token_id=1)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    m = m.to_empty(device="cpu")
    if tied:
        m.tie_weights()  # to_empty leaves the output layer its own (empty) matrix
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.02)
        m.model.embed_tokens.weight.copy_(torch.from_numpy(rows["T"] if tied else rows["I"]))
        if not tied:
            m.lm_head.weight.copy_(torch.from_numpy(rows["O"]))
    m.save_pretrained(out)
    AutoTokenizer.from_pretrained(tok_dir).save_pretrained(out)


def build(folder: Path, shape: str) -> tuple[Path, Path]:
    n, d_tied, d_untied = SHAPES[shape]
    tied, untied = folder / "tied", folder / "untied"
    if (tied / "config.json").exists() and (untied / "config.json").exists():
        return tied, untied
    t0 = time.perf_counter()
    tokenizer(folder / "tok", n)
    rows = matrices(n, d_tied, d_untied)
    model(tied, folder / "tok", n, d_tied, True, rows)
    model(untied, folder / "tok", n, d_untied, False, rows)
    print(f"two {shape}-shaped models written in {time.perf_counter() - t0:.0f} s: V={n:,}, tied d={d_tied:,}, "
          f"untied d={d_untied:,}", flush=True)
    return tied, untied


def run_pair(code: Path, tied: Path, untied: Path, cache_dir: Path, extra: list[str]) -> dict:
    """The README's pair command in checkout ``code``: per-stage seconds and peaks, whole wall and peak."""
    import resource

    cmd = [sys.executable, "-m", "precompute", "pair", "--tied", str(tied), "--untied", str(untied), "--name", "b",
           "--cache-dir", str(cache_dir), "--skip", "lens", "--force", *extra]
    env = dict(os.environ, PYTHONPATH=str(code), HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # stage lines are echoed as they come: a run stopped halfway (an hour for the qwen3 shape)
    # still shows what its finished stages took
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if STAGE_LINE.match(line):
            print(f"  {line.rstrip()}", flush=True)
    proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stderr = "".join(lines)
    if proc.returncode:
        raise SystemExit(f"error: the pair command failed in {code}:\n{stderr[-3000:]}")
    stages = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in STAGE_LINE.finditer(stderr)}
    if not stages:  # a checkout that prints no stage lines: the cache's own seconds
        stages = {s: (sec, float("nan")) for s, sec in cache_seconds(cache_dir / "b.duckdb").items()}
    # the whole run's peak: the highest stage's (each stage restarts the kernel's peak count, so the
    # child's ru_maxrss holds only the last stage's); without stage lines, ru_maxrss
    peaks = [gb for _, gb in stages.values() if gb == gb]
    return {"wall": wall, "peak_gb": max(peaks) if peaks else after.ru_maxrss / 2**20,
            "cpu": (after.ru_utime + after.ru_stime)
            - (before.ru_utime + before.ru_stime), "stages": stages, "results": results(cache_dir / "b.duckdb")}


def cache_seconds(path: Path) -> dict[str, float]:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT stage, seconds FROM stages").fetchall())
    finally:
        con.close()


def results(path: Path) -> dict:
    """The numbers a change must keep: alignment means, overlap@k, spectral distances, placement quality."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        align = {f"{c} {m} {s}": v for c, m, s, v in con.execute(
            "SELECT comparison, method, split, mean FROM alignment_summary WHERE applicable").fetchall()}
        overlap = {f"{p} @{k}": v for p, k, v in con.execute(
            "SELECT pair, k, mean_overlap FROM overlap_curve WHERE k IN (1, 10, 50)").fetchall()}
        spectral = dict(con.execute("SELECT pair, distance FROM spectral").fetchall())
        umap_params = json.loads(con.execute("SELECT params FROM stages WHERE stage = 'umap'").fetchone()[0])
    finally:
        con.close()
    quality = (umap_params.get("ran") or {}).get("placement") or {}
    return {"alignment": align, "overlap": overlap, "spectral": spectral, "placement": quality}


def quality_line(q: dict) -> str:
    """Mean over T, I, O of trustworthiness@10 and the nearest-drawn-neighbour share (fitted, placed)."""
    def mean(part, key):
        vals = [v[part][key] for v in q.values() if isinstance(v, dict) and part in v and key in v[part]]
        return float(np.mean(vals)) if vals else float("nan")

    return (f"trustworthiness@10 fitted {mean('fitted', 'trustworthiness'):.3f} placed "
            f"{mean('placed', 'trustworthiness'):.3f}; nearest drawn neighbour among the 10 nearest: fitted "
            f"{mean('fitted', 'nn_share'):.3f} placed {mean('placed', 'nn_share'):.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="olmo")
    ap.add_argument("--before", help="a checkout of the code before the change: run there first, same models")
    ap.add_argument("--keep", help="folder for the model folders (reused when present) and the caches")
    ap.add_argument("--extra", default="", help="more options for the pair command (both runs), e.g. '--umap-epochs 100'")
    args = ap.parse_args(argv)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-pair-"))
    folder.mkdir(parents=True, exist_ok=True)
    tied, untied = build(folder / "models", args.shape)
    runs = {}
    for label, code in (("before", args.before), ("after", str(ROOT))):
        if code is None:
            continue
        print(f"running {label} ({code}) ...", flush=True)
        runs[label] = run_pair(Path(code).resolve(), tied, untied, folder / f"cache-{label}", args.extra.split())
    load = os.getloadavg()[0]
    n, d_tied, d_untied = SHAPES[args.shape]
    print(f"\n{args.shape} shape: V={n:,}, tied d={d_tied:,}, untied d={d_untied:,}; every stage but the lens; "
          f"{os.cpu_count()} cores, load average {load:.1f} at the end")
    head = f"{'stage':<12}" + "".join(f"{label + ' s':>12}{label + ' GB':>12}" for label in runs)
    print(head + ("  ratio" if len(runs) == 2 else ""))
    for s in STAGES:
        cells = [runs[label]["stages"].get(s, (float("nan"), float("nan"))) for label in runs]
        line = f"{s:<12}" + "".join(f"{sec:12.1f}{gb:12.2f}" for sec, gb in cells)
        if len(runs) == 2 and cells[1][0] > 0:
            line += f"  {cells[0][0] / cells[1][0]:5.2f}x"
        print(line)
    line = f"{'whole run':<12}" + "".join(f"{runs[label]['wall']:12.1f}{runs[label]['peak_gb']:12.2f}" for label in runs)
    if len(runs) == 2:
        line += f"  {runs['before']['wall'] / runs['after']['wall']:5.2f}x"
    print(line)
    for label in runs:
        print(f"umap placement {label}: {quality_line(runs[label]['results']['placement'])}")
    if len(runs) == 2:
        a, b = runs["before"]["results"], runs["after"]["results"]
        for part in ("alignment", "overlap", "spectral"):
            moved = max((abs(a[part][k] - b[part][k]) for k in a[part] if k in b[part]), default=float("nan"))
            print(f"largest change, {part} ({len(a[part])} values)  {moved:.2e}  <= 1e-3  "
                  f"{'yes' if moved <= 1e-3 else 'NO'}")
    after = runs["after"]
    if args.shape in TARGET_S:
        ok = after["wall"] <= TARGET_S[args.shape]
        print(f"whole run, s  {after['wall']:.1f}  <= {TARGET_S[args.shape]}  {'yes' if ok else 'NO'}")
    print(json.dumps({label: {k: v for k, v in r.items() if k != "results"} for label, r in runs.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
