"""The lens stage: tuned- and logit-lens KL per hidden state for both models of a pair.

Text: the toy corpus (Python's documentation) by default, a text file, or ``hf:<dataset>``
(WikiText, as the paper used, when online). Paragraphs are split once: the first part
trains the tuned lens, the rest evaluates it, so training and evaluation text are
disjoint. Trained lens weights are saved beside the cache with a fingerprint of the
unembedding they belong to, and reused on a rerun when it matches.

Training budget: each optimiser step sees ``tokens_per_step`` tokens, gathered by gradient
accumulation over micro-batches of ``batch_size`` x ``seq_len`` tokens (so memory stays that
of one micro-batch). The default is 2**18 = 262,144 tokens per step on a CUDA device (about
the tuned-lens library's budget; the paper's authors used 131,072) and 8,192 on a CPU (or any
other device), where the larger budget would take hours. The training text is, by default,
steps x tokens_per_step tokens, as far as the lens text allows; a shorter text is cycled.
The resolved budget (:func:`resolve_budget`) is saved in each lens's JSON sidecar.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tying.errors import UserError, first_line

EVAL_FRACTION = 0.2

CUDA_TOKENS_PER_STEP = 2**18
"""Default tokens per optimiser step on a CUDA device (262,144; about the tuned-lens library's)."""

CPU_TOKENS_PER_STEP = 8_192
"""Default tokens per optimiser step on a CPU or any other non-CUDA device."""


@dataclass
class LensOptions:
    """Options of the lens stage (CLI: --lens-*).

    tokens_per_step: tokens per optimiser step, reached by gradient accumulation over
        micro-batches of batch_size x seq_len tokens; None = the device's default, 262,144
        (2**18) on a CUDA device and 8,192 on a CPU.
    train_tokens: tokens of training text; None = steps x tokens_per_step, as far as the lens
        text allows (training cycles through a shorter text).
    See :func:`resolve_budget`.
    """

    text: str = "python-docs"  # 'python-docs', a text file, or 'hf:<dataset>'
    steps: int = 250  # tuned-lens training steps per model
    batch_size: int = 8  # sequences per micro-batch
    seq_len: int = 128  # capped at the model's context length
    tokens_per_step: int | None = None  # None: 262,144 on CUDA, 8,192 on CPU
    train_tokens: int | None = None  # None: steps x tokens_per_step, as far as the text allows
    eval_tokens: int = 65_536
    samples: int = 3  # sample texts for prediction trajectories
    top_k: int = 5
    max_chars: int = 1_200_000

    def params(self) -> dict:
        return dict(self.__dict__)


def _device_type(device) -> str:
    kind = getattr(device, "type", None)
    return str(kind if kind is not None else device or "cpu").split(":")[0]


def resolve_budget(opts: LensOptions, device, seq_len: int | None = None) -> tuple[int, int, int]:
    """(tokens_per_step, accumulate, train_tokens) of the lens stage on ``device``.

    device: a torch.device or its name ("cuda", "cuda:1", "cpu", ...). seq_len: the sequence
    length actually used (``opts.seq_len`` capped at the model's context; default
    ``opts.seq_len``). The target tokens per step is ``opts.tokens_per_step``, or
    CUDA_TOKENS_PER_STEP (262,144) on a CUDA device and CPU_TOKENS_PER_STEP (8,192) on any
    other. accumulate = ceil(target / (batch_size x seq_len)), at least 1, micro-batches per
    step; the returned tokens_per_step is the effective accumulate x batch_size x seq_len
    (the target when it divides evenly). train_tokens is ``opts.train_tokens``, or
    steps x tokens_per_step.
    """
    seq = int(opts.seq_len if seq_len is None else seq_len)
    for name, value in (("steps", opts.steps), ("batch_size", opts.batch_size), ("seq_len", seq)):
        if int(value) < 1:
            raise UserError(f"lens {name} must be positive, got {value}")
    target = opts.tokens_per_step
    if target is None:
        target = CUDA_TOKENS_PER_STEP if _device_type(device) == "cuda" else CPU_TOKENS_PER_STEP
    if int(target) < 1:
        raise UserError(f"lens tokens per step must be positive, got {target}")
    micro = int(opts.batch_size) * seq
    accumulate = max(1, math.ceil(int(target) / micro))
    tokens_per_step = accumulate * micro
    if opts.train_tokens is not None and int(opts.train_tokens) < 1:
        raise UserError(f"lens train tokens must be positive, got {opts.train_tokens}")
    train_tokens = int(opts.train_tokens) if opts.train_tokens is not None else int(opts.steps) * tokens_per_step
    return tokens_per_step, accumulate, train_tokens


def lens_text(spec: str, max_chars: int) -> tuple[list[str], list[str]]:
    """Training and evaluation paragraphs (disjoint) of the lens text."""
    from tying.toylab.corpus import load_corpus

    text = load_corpus(spec, max_chars)
    paras = [p for p in text.split("\n\n") if p.strip()]
    if len(paras) < 5:
        raise UserError("no text to evaluate the lens on: the lens text has fewer than 5 paragraphs")
    cut = max(1, int(len(paras) * (1 - EVAL_FRACTION)))
    return paras[:cut], paras[cut:]


def _load_model(local_dir: str, device, trust_remote_code: bool):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(local_dir, dtype=dtype, trust_remote_code=trust_remote_code)
        tok = AutoTokenizer.from_pretrained(local_dir, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the model in '{local_dir}' for the lens: {first_line(exc)}") from None
    return model.to(device).eval(), tok


def lens_tables(models: dict[str, str], opts: LensOptions, *, lens_dir: Path, device, trust_remote_code: bool = False,
                progress: Callable[[str], None] = lambda m: None) -> dict[str, pd.DataFrame]:
    """Tables lens_kl, lens_curve and lens_trajectory for ``{role: local model folder}``.

    The tuned lens trains with the budget of :func:`resolve_budget` (gradient accumulation
    up to the tokens per step); the budget is saved under "budget" in the lens sidecar.
    """
    from tying import lens as L

    train_paras, eval_paras = lens_text(opts.text, opts.max_chars)
    kl, curves, trajs = [], [], []
    for role, local_dir in models.items():
        progress(f"{role}: loading the model")
        model, tok = _load_model(local_dir, device, trust_remote_code)
        ctx = getattr(model.config, "max_position_embeddings", None) or opts.seq_len
        seq = min(opts.seq_len, int(ctx))
        tokens_per_step, accumulate, train_tokens = resolve_budget(opts, device, seq)
        train = L.text_batches(tok, train_paras, seq_len=seq, batch_size=opts.batch_size, max_tokens=train_tokens)
        evals = L.text_batches(tok, eval_paras, seq_len=seq, batch_size=opts.batch_size, max_tokens=opts.eval_tokens)
        parts = L.find_lens_parts(model)
        fp = L.unembedding_fingerprint(parts)
        budget = {"steps": int(opts.steps), "tokens_per_step": tokens_per_step, "accumulate": accumulate,
                  "batch_size": int(opts.batch_size), "seq_len": seq, "train_tokens": train_tokens,
                  "text_tokens": int(sum(b.numel() for b in train))}
        text_key = hashlib.sha256(repr((opts.params(), len(train_paras), budget)).encode()).hexdigest()[:12]
        path = lens_dir / f"{role}-{text_key}.safetensors"
        lens = L.load_lens(path, fp, device=device) if path.exists() else None
        if lens is None:
            def report(step, steps, loss, role=role):
                if step % 10 == 0 or step == steps:
                    progress(f"{role}: tuned lens step {step}/{steps}, KL {loss:.2f}")

            progress(f"{role}: training the tuned lens, {opts.steps} steps x {tokens_per_step:,} tokens "
                     f"({accumulate} micro-batch{'es' if accumulate > 1 else ''} of {opts.batch_size} x {seq}) "
                     f"on {budget['text_tokens']:,} tokens of text")
            lens, curve = L.train_tuned_lens(model, train, steps=opts.steps, device=device, parts=parts,
                                             progress=report, accumulate=accumulate)
            L.save_lens(lens, path, fp, {"role": role, "model": local_dir, "options": opts.params(),
                                         "budget": budget, "curve": curve.to_dict("list")})
        else:
            progress(f"{role}: reusing the tuned lens in {path.name} (same unembedding)")
            curve = pd.DataFrame(L.read_lens_meta(path).get("meta", {}).get("curve") or
                                 {"step": [], "layer": [], "kl_bits": []})
        progress(f"{role}: evaluating")
        tuned = L.evaluate_lens(model, evals, lens, device=device, parts=parts)
        kl.append(tuned.assign(model=role))
        curves.append(curve.assign(model=role))
        for i, text in enumerate(eval_paras[: opts.samples]):
            t = L.prediction_trajectory(model, tok, text, lens, top_k=opts.top_k, device=device, parts=parts)
            trajs.append(t.assign(model=role, sample=i))
        del model
    lens_kl = pd.concat(kl, ignore_index=True)
    if "lens" not in lens_kl.columns:
        raise UserError("lens evaluation returned no lens column")
    return {"lens_kl": lens_kl, "lens_curve": pd.concat(curves, ignore_index=True),
            "lens_trajectory": pd.concat(trajs, ignore_index=True)}
