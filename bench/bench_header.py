"""Benchmark: reading a safetensors header by hand vs through the safetensors package.

Both give every tensor's name, dtype code and shape without reading tensor data:

* ``hand``: the 8-byte length and the JSON header read with ``json.loads``, with the checks
  of :func:`tying.loading.headers.read_safetensors_header` (lengths, offsets inside the file);
* ``safe_open``: ``safetensors.safe_open(path).keys()`` and ``get_slice(key).get_dtype()`` /
  ``get_shape()``.

The synthetic file (bench/out/, git-ignored) is a valid safetensors file, checked by
safe_open itself: ``--tensors`` float32 tensors (a model's worth of names:
``model.layers.<i>.<part>.weight``) totalling about ``--gib`` GiB, with its data area left
sparse (zeros, no disk blocks), since neither reader touches the data. Each method runs in a
fresh Python process (torch and safetensors imported first, as tying.loading does), which
reads the header ``--repeats`` times; printed: the median time of one read (over the
processes' medians), the first read in a process (as tying.loading reads each file's header
once), and the peak resident memory above the process's baseline (VmHWM reset after
imports; Linux).

Usage: python bench/bench_header.py [--tensors 4000] [--gib 2] [--repeats 25] [--runs 3]

Measured (issue 18; 2 GiB files, 5 processes each, on 2 shared CPU cores at a load of 2.5-4,
so times vary by about 30% between runs; memory is steady):

    tensors  header     hand: median / first read / peak   safe_open: median / first read / peak
        100   11 KiB     0.15 ms /   0.39 ms / +0.20 MiB     0.26 ms /   0.43 ms / +0.12 MiB
        700   78 KiB     1.11 ms /   3.34 ms / +0.79 MiB     1.05 ms /   1.83 ms / +0.91 MiB
      4,000  450 KiB     12.1 ms /    117 ms / +3.85 MiB      8.7 ms /   15.4 ms / +5.09 MiB
     40,000  4.4 MiB      355 ms /    330 ms / +38.3 MiB      151 ms /    280 ms / +52.7 MiB

(The hand parser's slow first read at 4,000 tensors is the garbage collector walking the
objects torch created, set off by the JSON's many small dicts.) safe_open is as fast or
faster from 700 tensors on, but holds more memory there (+15% to +38%), and is slower on a
checkpoint-sized header of 100 tensors: equal or better on neither count throughout, so
tying.loading keeps the hand parser (:mod:`tying.loading.headers`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
         "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm")


def build(path: Path, n_tensors: int, gib: float) -> Path:
    """A valid safetensors file of ``n_tensors`` float32 tensors, about ``gib`` GiB, data area sparse."""
    per = max(1, int(gib * 2**30) // (4 * n_tensors))
    cols = 1024
    rows = max(1, per // cols)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for i in range(n_tensors):
        name = f"model.layers.{i // len(PARTS)}.{PARTS[i % len(PARTS)]}.weight"
        size = 4 * rows * cols
        header[name] = {"dtype": "F32", "shape": [rows, cols], "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the format pads the header to 8 bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        f.truncate(8 + len(blob) + offset)  # sparse: no data written
    return path


CHILD = r"""
import json, statistics, sys, time
import torch  # noqa: F401  imported by tying.loading anyway: not part of either measurement
from safetensors import safe_open

method, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from tying.memory import peak_memory, resident_memory


def hand():  # the parser tying.loading.weights had before issue 18, with all its checks
    import os

    size = os.stat(path).st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise ValueError("shorter than its 8-byte header length")
        n = int.from_bytes(raw, "little")
        if n <= 1 or n > 100 * 2**20 or 8 + n > size:
            raise ValueError(f"bad header length {n}")
        header = json.loads(f.read(n))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    data_bytes = size - 8 - n
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        dtype, shape, (start, stop) = entry["dtype"], entry["shape"], entry["data_offsets"]
        shape = tuple(int(s) for s in shape)
        if not 0 <= start <= stop <= data_bytes:
            raise ValueError(f"tensor '{key}' lies outside the file")
        out[key] = (str(dtype), shape)
    return out


def package():
    with safe_open(path, framework="pt") as f:
        out = {}
        for key in f.keys():
            s = f.get_slice(key)
            out[key] = (s.get_dtype(), tuple(s.get_shape()))
        return out


read = {"hand": hand, "safe_open": package}[method]
reset = peak_memory(reset=True) is not None
base = resident_memory()
times = []
for _ in range(repeats):
    start = time.perf_counter()
    got = read()
    times.append(time.perf_counter() - start)
    del got
print(json.dumps({"median_s": statistics.median(times), "first_s": times[0], "peak_bytes": peak_memory() - base,
                  "reset": reset, "n": len(read())}))
"""


def run(method: str, path: Path, repeats: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, method, str(path), str(repeats), str(ROOT)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tensors", type=int, default=4000)
    p.add_argument("--gib", type=float, default=2.0)
    p.add_argument("--repeats", type=int, default=25, help="header reads per process")
    p.add_argument("--runs", type=int, default=3, help="fresh processes per method")
    args = p.parse_args(argv)

    path = build(OUT / f"header-{args.tensors}.safetensors", args.tensors, args.gib)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:  # the package accepts the file: it is valid
        assert len(list(f.keys())) == args.tensors
    header_bytes = int.from_bytes(path.open("rb").read(8), "little")
    print(f"file: {path.name}: {args.tensors:,} tensors, {path.stat().st_size / 2**30:.2f} GiB, "
          f"header {header_bytes / 2**10:,.0f} KiB; {args.repeats} reads per process, {args.runs} processes")
    results = {}
    for method in ("hand", "safe_open"):
        rows = [run(method, path, args.repeats) for _ in range(args.runs)]
        assert all(r["n"] == args.tensors for r in rows)
        results[method] = rows
        med = statistics.median(r["median_s"] for r in rows)
        first = statistics.median(r["first_s"] for r in rows)
        peak = max(r["peak_bytes"] for r in rows)
        print(f"{method:>10}: median {med * 1e3:8.2f} ms per header (first read in a process {first * 1e3:.2f} ms), "
              f"peak +{peak / 2**20:6.2f} MiB RSS"
              f"{'' if all(r['reset'] for r in rows) else ' (VmHWM not reset: includes imports)'}")
    path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
