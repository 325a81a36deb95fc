"""Benchmark: reading only the embedding matrices vs loading the whole model.

Builds once (into bench/out/, git-ignored) a llama-style float32 safetensors checkpoint,
24 layers, d=1024, vocabulary 50,000, untied, sharded; then, each in a fresh Python
process, measures

* ``load_model_matrices``: wall time and peak resident memory above the process's
  baseline after imports and a warm-up on a tiny model, against the float32 bytes returned
  (target: at most 1.5x) and against the time to read that many bytes from disk;
* ``np.fromfile`` of exactly the two tensors' bytes: the floor for reading them;
* ``AutoModelForCausalLM.from_pretrained``: the same two figures for a full load.

"Warm" runs read from the page cache; "cold" runs first evict the checkpoint's files from
it (posix_fadvise DONTNEED, no root needed).

Usage: python bench/bench_load.py [--layers 24] [--d 1024] [--vocab 50000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
MIB = 2**20


# ----------------------------------------------------------------------------- building


def _word_tokenizer(out_dir: Path, vocab: int):
    """A word-level tokenizer with exactly ``vocab`` entries (BPE training cannot reach 50k here)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<|endoftext|>"] + [f"w{i}" for i in range(vocab - 2)]
    model = models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>")
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|endoftext|>")
    fast.save_pretrained(out_dir)


def build(out_dir: Path, *, layers: int, d: int, vocab: int, shard: str) -> Path:
    """Write the checkpoint unless a complete one with the same sizes is there."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    done = out_dir / "BUILT"
    spec = json.dumps({"layers": layers, "d": d, "vocab": vocab, "shard": shard})
    if done.exists() and done.read_text() == spec:
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*"):
        old.unlink()
    start = time.perf_counter()
    _word_tokenizer(out_dir, vocab)
    heads = max(1, d // 64)
    config = AutoConfig.for_model("llama", vocab_size=vocab, hidden_size=d, num_hidden_layers=layers,
                                  num_attention_heads=heads, num_key_value_heads=heads, head_dim=d // heads,
                                  intermediate_size=2 * d, max_position_embeddings=128, tie_word_embeddings=False,
                                  bos_token_id=0, eos_token_id=0, pad_token_id=1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out_dir, max_shard_size=shard)
    del model
    done.write_text(spec)
    print(f"built {out_dir} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return out_dir


# ----------------------------------------------------------------------------- children


def _evict(paths) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _tensor_spans(folder: Path, keys) -> list[tuple[Path, int, int]]:
    """(file, absolute offset, byte count) of each named tensor's data."""
    index_file = folder / "model.safetensors.index.json"
    if index_file.exists():
        index = json.loads(index_file.read_text())["weight_map"]
    else:
        index = dict.fromkeys(keys, "model.safetensors")
    spans = []
    for key in keys:
        path = folder / index[key]
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        start, stop = header[key]["data_offsets"]
        spans.append((path, 8 + n + start, stop - start))
    return spans


def child(mode: str, folder: Path, tiny: Path, cold: bool) -> dict:
    """One measurement in this (fresh) process; returns a JSON-able dict."""
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    sys.path.insert(0, str(ROOT))
    from tying.loading.weights import load_model_matrices
    from tying.memory import peak_memory, resident_memory

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    # Warm-up on a tiny model of the same family: lazy imports and first-call costs land
    # in the baseline, not in the measurement.
    if mode == "from_pretrained":
        AutoModelForCausalLM.from_pretrained(tiny)
    else:
        load_model_matrices(str(tiny))
    if cold:
        _evict(sorted(folder.glob("*.safetensors")))

    base = resident_memory()
    reset = peak_memory(reset=True) is not None  # from here the peak is this measurement's
    start = time.perf_counter()
    if mode == "matrices":
        m = load_model_matrices(str(folder), role="untied")
        returned = m.input.nbytes + m.output.nbytes
        extra = {"n_vocab": m.n_vocab, "d": m.d_model, "n_params": m.n_params, "share": m.embedding_share}
    elif mode == "fromfile":
        arrays = [
            np.fromfile(path, dtype=np.uint8, count=count, offset=offset)
            for path, offset, count in _tensor_spans(folder, ["model.embed_tokens.weight", "lm_head.weight"])
        ]
        returned = sum(a.nbytes for a in arrays)
        extra = {}
    elif mode == "from_pretrained":
        # transformers 5 memory-maps float32 safetensors on CPU: parameters become resident
        # only when touched. Time three stages: the call itself, copying out the two matrices
        # as float32 arrays (what load_model_matrices returns), and touching every parameter.
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        stages = {"call": (time.perf_counter() - start, peak_memory() - base)}
        with torch.no_grad():
            inp = model.get_input_embeddings().weight.numpy().copy()
            out = model.get_output_embeddings().weight.numpy().copy()
        stages["matrices"] = (time.perf_counter() - start, peak_memory() - base)
        with torch.no_grad():
            for p in model.parameters():
                p.sum()
        stages["touch_all"] = (time.perf_counter() - start, peak_memory() - base)
        returned = inp.nbytes + out.nbytes
        extra = {"stages": stages, "n_params": sum(p.numel() for p in model.parameters())}
    else:
        raise ValueError(mode)
    seconds = time.perf_counter() - start
    peak = peak_memory()
    return {
        "mode": mode,
        "seconds": seconds,
        "peak_extra": peak - base,
        "returned": returned,
        "hwm_reset": reset,
        **extra,
    }


def run_child(mode: str, folder: Path, tiny: Path, cold: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, str(folder), str(tiny)] + (["--cold"] if cold else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--shard", default="500MB", help="max_shard_size for save_pretrained")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per measurement")
    parser.add_argument("--no-cold", action="store_true", help="skip the page-cache-evicted runs")
    parser.add_argument("--no-full", action="store_true", help="skip from_pretrained")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "FOLDER", "TINY"), help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        mode, folder, tiny = args.child
        print(json.dumps(child(mode, Path(folder), Path(tiny), args.cold)))
        return 0

    folder = build(
        OUT / f"llama-L{args.layers}-d{args.d}-v{args.vocab}",
        layers=args.layers,
        d=args.d,
        vocab=args.vocab,
        shard=args.shard,
    )
    tiny = build(OUT / "tiny-llama", layers=2, d=32, vocab=300, shard=args.shard)  # the children's warm-up
    size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    print(f"checkpoint: {folder.relative_to(ROOT)}  {size / MIB:,.0f} MiB of safetensors\n")

    modes = ["matrices", "fromfile"] + ([] if args.no_full else ["from_pretrained"])
    rows = []
    for cold in [False] + ([] if args.no_cold else [True]):
        for mode in modes:
            runs = [run_child(mode, folder, tiny, cold) for _ in range(args.repeats)]
            rows.append((cold, mode, runs))

    first = next(r for _, m, rs in rows for r in rs if m == "matrices")
    returned = first["returned"]
    print(
        f"model: {first['n_params']:,} parameters, embedding share {first['share']:.1%}; "
        f"matrices returned: 2 x ({first['n_vocab']:,} x {first['d']}) float32 = {returned / MIB:,.0f} MiB\n"
    )
    table = []  # (cache, method, median seconds, max peak bytes)
    names = {"matrices": "load_model_matrices", "fromfile": "np.fromfile, same bytes"}
    for cold, mode, runs in rows:
        cache = "cold" if cold else "warm"
        if mode == "from_pretrained":
            for stage, label in (
                ("call", "from_pretrained (lazy)"),
                ("matrices", " + copy 2 matrices"),
                ("touch_all", " + touch all params"),
            ):
                times = [r["stages"][stage][0] for r in runs]
                peaks = [r["stages"][stage][1] for r in runs]
                table.append((cache, label, statistics.median(times), max(peaks)))
        else:
            t = statistics.median(r["seconds"] for r in runs)
            table.append((cache, names[mode], t, max(r["peak_extra"] for r in runs)))
    floor = {cache: t for cache, label, t, _ in table if label.startswith("np.fromfile")}
    header = (
        f"{'cache':<6}{'method':<26}{'wall s (median)':>16}{'peak extra MiB (max)':>22}"
        f"{'x returned':>12}{'x fromfile time':>17}"
    )
    print(header)
    print("-" * len(header))
    for cache, label, t, peak in table:
        print(
            f"{cache:<6}{label:<26}{t:>16.2f}{peak / MIB:>22,.0f}"
            f"{peak / returned:>12.2f}{t / floor[cache]:>17.1f}"
        )
    print(f"\n({args.repeats} fresh processes each; peak = VmHWM minus RSS after imports and warm-up)")
    if not all(r["hwm_reset"] for _, _, rs in rows for r in rs):
        print("\nnote: VmHWM could not be reset; peaks include import-time transients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
