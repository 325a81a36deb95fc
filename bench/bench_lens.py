"""Benchmark: tuned-lens training and evaluation, measured on a toy model and estimated for 1B and 8B.

Measured (default: a random-weight Llama with d=128, 4 layers, vocabulary 2,048, built
from its config; or a saved model folder with --model), on random token ids (speed does
not depend on the text):

* the floor: the model's forward pass alone, collecting the hidden states;
* training (tying.lens.train.train_tuned_lens): steps/s and tokens/s;
* evaluation (tying.lens.evaluate.evaluate_lens) of the tuned and the logit lens: tokens/s.

Estimated, for one H100/H200-class GPU, from FLOPs per token (see ``flops_per_token``) at an
assumed achieved matmul rate, plus the memory traffic of the softmax and KL over the
vocabulary at an assumed achieved bandwidth (see ``bytes_per_token``).

Usage: python bench/bench_lens.py [--model DIR] [--d 128] [--n-layers 4] [--vocab 2048]
       [--seq-len 128] [--batch-size 8] [--steps 20] [--eval-batches 8] [--device cpu|cuda]
       [--tflops 400] [--tbs 3.0] [--threads N] [--init 0.2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tying.device import pick_device
from tying.lens.evaluate import evaluate_lens
from tying.lens.lenses import LogitLens
from tying.lens.parts import find_lens_parts, residual_stream
from tying.lens.train import train_tuned_lens

TRAIN_TOKENS = 250 * 8 * 2048
"""Estimated training run: 250 steps of 8 sequences of 2,048 tokens."""

EVAL_TOKENS = 1_000_000
"""Estimated evaluation: one million tokens, tuned and logit lens."""

# (name, d_model, blocks, vocabulary, parameters in the blocks)
ESTIMATED_MODELS = (
    # OLMo-1B: attention 4 d^2 + SwiGLU MLP 3 d 8192, per block
    ("1B (OLMo-1B shape)", 2048, 16, 50_304, 16 * (4 * 2048**2 + 3 * 2048 * 8192)),
    # Llama-3-8B: grouped-query attention (8 key/value heads of 128) 2 d^2 + 2 d 1024, MLP 3 d 14336
    ("8B (Llama-3-8B shape)", 4096, 32, 128_256, 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)),
    # Qwen3-8B: the same attention, MLP 3 d 12288, 36 blocks
    ("8B (Qwen3-8B shape)", 4096, 36, 151_936, 36 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 12288)),
)


def flops_per_token(d: int, n_blocks: int, vocab: int, body_params: int, *, train: bool) -> dict:
    """Matmul FLOPs per token of one lens training step (``train``) or of an evaluation of both lenses.

    forward: 2 x the blocks' parameters (the unembedding is not run by the model: the lens code
             computes the target itself); target: one unembedding of the last hidden state, 2 d V;
    per hidden state (n_blocks + 1 of them):
      training:   forward translator 2 d^2 + unembedding 2 d V; backward through the lens only:
                  unembedding 2 d V (gradient to its input; its weights are frozen) + translator
                  2 d^2 (gradient to its weights; its input needs none) -> 4 d V + 4 d^2;
                  the last hidden state (its translator stays the identity) runs forward only;
      evaluation: logit lens 2 d V + tuned lens 2 d V + 2 d^2 -> 4 d V + 2 d^2.
    """
    n_hidden = n_blocks + 1
    if train:
        lens = (n_hidden - 1) * (4 * d * vocab + 4 * d * d) + 2 * d * vocab + 2 * d * d
    else:
        lens = n_hidden * (4 * d * vocab + 2 * d * d)
    out = {"forward": 2 * body_params, "target": 2 * d * vocab, "lens": lens}
    out["total"] = sum(out.values())
    return out


def bytes_per_token(n_blocks: int, vocab: int, *, train: bool) -> int:
    """Memory traffic of the vocabulary-sized elementwise work per token (not the matmuls).

    Per hidden state and lens, in bytes per vocabulary entry, with bf16 logits and float32
    softmax: forward = write logits 2 + cast to float32 (read 2, write 4) + log_softmax
    (read 4 twice, write 4) + p * log q (read 4 + 4, write 4) + its sum (read 4) = 36;
    backward = gradient of the product (read 4, write 4) + log_softmax backward (read 4 + 4,
    write 4) + cast back (read 4, write 2) = 26. Training runs one lens forward and backward
    (62; the last hidden state forward only, 36); evaluation runs two lenses forward (72). The
    target's softmax (~20) is counted once.
    """
    n_hidden = n_blocks + 1
    lens = (n_hidden - 1) * 62 + 36 if train else n_hidden * 72
    return (lens + 20) * vocab


def _sync(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _toy_model(d: int, n_layers: int, vocab: int, seed: int, init: float):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "llama",
        vocab_size=vocab,
        hidden_size=d,
        intermediate_size=4 * d,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        initializer_range=init,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def _body_params(model) -> int:
    """Parameters outside the input embedding and the unembedding (what the forward pass multiplies by)."""
    skip = {id(p) for p in model.get_input_embeddings().parameters()}
    skip |= {id(p) for p in model.get_output_embeddings().parameters()}
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None, help="a saved model folder (default: a random toy Llama)")
    p.add_argument("--d", type=int, default=128, help="toy model width (default 128)")
    p.add_argument("--n-layers", type=int, default=4, help="toy model blocks (default 4)")
    p.add_argument("--vocab", type=int, default=2048, help="toy model vocabulary (default 2,048)")
    p.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (default 128)")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per batch (default 8)")
    p.add_argument("--steps", type=int, default=20, help="timed training steps (default 20)")
    p.add_argument("--eval-batches", type=int, default=8, help="timed evaluation batches (default 8)")
    p.add_argument("--device", default=None, help="torch device (default: cuda when present, else cpu)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--tflops", type=float, default=400.0,
                   help="assumed achieved bf16 matmul TFLOP/s on the GPU for the estimate (default 400)")
    p.add_argument("--tbs", type=float, default=3.0,
                   help="assumed achieved memory bandwidth in TB/s on the GPU for the estimate (default 3.0)")
    p.add_argument("--init", type=float, default=0.2,
                   help="toy model initializer range (default 0.2: far from uniform outputs, so KLs are not ~0)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)

    if args.model:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.model)
        source = args.model
    else:
        model = _toy_model(args.d, args.n_layers, args.vocab, args.seed, args.init)
        source = "random toy Llama"
    model = model.to(device).eval()
    parts = find_lens_parts(model)
    d, n_hidden = parts.d_model, parts.n_hidden
    vocab = model.get_output_embeddings().weight.shape[0]
    body = _body_params(model)
    gen = torch.Generator().manual_seed(args.seed)
    shape = (args.batch_size, args.seq_len)
    train_batches = [torch.randint(0, vocab, shape, generator=gen) for _ in range(args.steps)]
    eval_batches = [torch.randint(0, vocab, shape, generator=gen) for _ in range(args.eval_batches)]
    tokens_per_batch = args.batch_size * args.seq_len
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"model: {source}: d={d} blocks={n_hidden - 1} vocab={vocab:,} block params={body:,}")
    print(f"device={device} torch_threads={torch.get_num_threads()} load average={load:.2f} "
          f"batch={args.batch_size}x{args.seq_len} ({tokens_per_batch:,} tokens)")

    # warm-up, untimed: thread pools, allocator, lazy imports
    train_tuned_lens(model, train_batches[:1], steps=1, device=device, parts=parts)
    evaluate_lens(model, eval_batches[:1], device=device, parts=parts)

    _sync(device)
    start = time.perf_counter()
    with torch.no_grad():
        for ids in eval_batches:
            residual_stream(model, parts, ids.to(device))
    _sync(device)
    t_forward = time.perf_counter() - start

    start = time.perf_counter()
    lens, curve = train_tuned_lens(model, train_batches, steps=args.steps, device=device, parts=parts)
    _sync(device)
    t_train = time.perf_counter() - start

    start = time.perf_counter()
    table = evaluate_lens(model, eval_batches, [lens, LogitLens()], device=device, parts=parts)
    _sync(device)
    t_eval = time.perf_counter() - start

    start = time.perf_counter()
    evaluate_lens(model, eval_batches, [LogitLens()], device=device, parts=parts)
    _sync(device)
    t_eval_logit = time.perf_counter() - start

    n_eval = args.eval_batches * tokens_per_batch
    n_train = args.steps * tokens_per_batch
    f_train = flops_per_token(d, n_hidden - 1, vocab, body, train=True)["total"]
    f_eval = flops_per_token(d, n_hidden - 1, vocab, body, train=False)["total"]
    rows = [
        ("forward only (hidden states)", t_forward, n_eval, f"{args.eval_batches} batches", 2 * body),
        ("train tuned lens", t_train, n_train, f"{args.steps / t_train:.2f} steps/s", f_train),
        ("evaluate tuned + logit lens", t_eval, n_eval, f"{args.eval_batches} batches", f_eval),
        ("evaluate logit lens only", t_eval_logit, n_eval, f"{args.eval_batches} batches",
         2 * body + 2 * d * vocab + n_hidden * 2 * d * vocab),
    ]
    print()
    print(f"{'stage':<30}{'seconds':>9}{'tokens':>9}{'tokens/s':>11}{'GFLOP/s':>9}  note")
    for name, seconds, n_tok, note, flops in rows:
        rate = flops * n_tok / seconds / 1e9
        print(f"{name:<30}{seconds:>9.2f}{n_tok:>9,}{n_tok / seconds:>11,.0f}{rate:>9.1f}  {note}")
    first = curve[curve.step == 0]["kl_bits"].mean()
    last = curve[curve.step == curve.step.max()]["kl_bits"].mean()
    wide = table.pivot(index="layer", columns="lens", values="kl_mean")
    print(f"\ntraining KL (mean over hidden states, bits): step 0 {first:.3f} -> step {args.steps - 1} {last:.3f}")
    print("evaluation KL by hidden state (bits), tuned / logit: "
          + ", ".join(f"{i}: {r.tuned:.2f}/{r.logit:.2f}" for i, r in wide.iterrows()))

    print(f"\nEstimate for one H100/H200-class GPU: matmuls at an assumed {args.tflops:.0f} TFLOP/s achieved "
          f"(bf16 dense peak ~989), vocabulary-sized elementwise work at {args.tbs:.1f} TB/s "
          f"(HBM peak 3.35 H100, 4.8 H200).")
    print(f"Training {TRAIN_TOKENS:,} tokens (250 steps x 8 x 2,048); evaluation {EVAL_TOKENS:,} tokens, both lenses.")
    for name, dm, nb, v, bp in ESTIMATED_MODELS:
        print(f"\n{name}: d={dm} blocks={nb} hidden states={nb + 1} vocab={v:,} block params={bp / 1e9:.2f}e9")
        for label, n_tok, train in (("train", TRAIN_TOKENS, True), ("eval", EVAL_TOKENS, False)):
            f = flops_per_token(dm, nb, v, bp, train=train)
            b = bytes_per_token(nb, v, train=train)
            t_mm = f["total"] * n_tok / (args.tflops * 1e12)
            t_mem = b * n_tok / (args.tbs * 1e12)
            print(f"  {label}: FLOP/token = forward {f['forward'] / 1e9:.2f}G + target {f['target'] / 1e9:.2f}G "
                  f"+ lens {f['lens'] / 1e9:.2f}G = {f['total'] / 1e9:.1f}G; x {n_tok:,} tokens = "
                  f"{f['total'] * n_tok / 1e15:,.0f} PFLOP -> {t_mm:,.0f} s; elementwise {b / 1e6:,.0f} MB/token -> "
                  f"{t_mem:,.0f} s; total ~{(t_mm + t_mem) / 60:.1f} min")
        states = (nb + 1) * 8 * 2048 * dm * 2
        chunk = 2048 * v * 4 * 5
        print(f"  memory beyond the weights: hidden states of one 8x2,048 batch {states / 2**30:.1f} GiB (bf16), "
              f"vocabulary blocks of 2,048 tokens ~{chunk / 2**30:.1f} GiB (five float32 arrays)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
