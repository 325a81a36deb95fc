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
Each model's budget is resolved once, with the sequence length capped at its context
(:func:`model_budget`); that budget trains the lens, is saved in the lens's JSON sidecar and
is what the cache records for the stage, per model.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from precompute.options import internal, option
from tying.errors import UserError

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

    text: str = option("python-docs", help="lens text: `python-docs` (the offline corpus), a text file, or "
                       "`hf:<dataset>` such as `hf:wikitext` (WikiText, as the paper)")
    steps: int = option(250, help="tuned-lens optimiser steps per model")
    batch_size: int = option(8, help="sequences per lens micro-batch (bounds memory)")
    seq_len: int = option(128, help="tokens per lens sequence, capped at the model's context")
    tokens_per_step: int | None = option(
        None, shown=f"{CUDA_TOKENS_PER_STEP} on a CUDA GPU, {CPU_TOKENS_PER_STEP} on a CPU",
        help="tokens per tuned-lens optimiser step, by gradient accumulation over ceil(tokens / (batch size x seq "
        "len)) micro-batches; the tuned-lens library trains with about 2^18, the paper's authors with 131,072")
    train_tokens: int | None = option(None, shown="steps x tokens per step", help="tokens of lens training text, "
                                      "as far as the lens text allows (a shorter text is cycled)")
    eval_tokens: int = option(65_536, help="tokens of lens evaluation text (disjoint from training)")
    samples: int = internal(3)  # sample texts for prediction trajectories
    top_k: int = internal(5)
    max_chars: int = internal(1_200_000)

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


def model_budget(opts: LensOptions, device, context: int | None) -> dict:
    """The budget one model's tuned lens trains with: :func:`resolve_budget` with the sequence
    length capped at the model's ``context`` (its max_position_embeddings; None: no cap).

    Returns {"steps", "tokens_per_step", "accumulate" (micro-batches per step), "batch_size",
    "seq_len", "train_tokens"}: what training uses, and so what the cache records.
    """
    seq = int(opts.seq_len) if not context else min(int(opts.seq_len), int(context))
    tokens_per_step, accumulate, train_tokens = resolve_budget(opts, device, seq)
    return {"steps": int(opts.steps), "tokens_per_step": tokens_per_step, "accumulate": accumulate,
            "batch_size": int(opts.batch_size), "seq_len": seq, "train_tokens": train_tokens}


def lens_tables(models: dict[str, str], opts: LensOptions, *, lens_dir: Path, device, trust_remote_code: bool = False,
                progress: Callable[[str], None] = lambda m: None) -> tuple[dict[str, pd.DataFrame], dict[str, dict]]:
    """Tables lens_kl, lens_curve and lens_trajectory for ``{role: local model folder}``, and
    the budget each model's tuned lens trained with.

    Each model's budget is resolved once, by :func:`model_budget` with the model's context,
    and that one budget trains the lens, names its file, goes into its sidecar (under
    "budget") and is returned: ``{role: {steps, tokens_per_step, accumulate, batch_size,
    seq_len, train_tokens, text_tokens, device}}`` (text_tokens: the tokens of training text
    there were; device: where it ran). A lens reused from its file has the same budget: the
    budget is part of the file's name.
    """
    from tying.lens.batches import text_batches
    from tying.lens.evaluate import evaluate_lens, prediction_trajectory
    from tying.lens.files import load_lens, read_lens_meta, save_lens, unembedding_fingerprint
    from tying.lens.lenses import LogitLens
    from tying.lens.parts import find_lens_parts
    from tying.lens.train import train_tuned_lens
    from tying.loading.causal_lm import load_causal_lm

    train_paras, eval_paras = lens_text(opts.text, opts.max_chars)
    kl, curves, trajs, ran = [], [], [], {}
    for role, local_dir in models.items():
        progress(f"{role}: loading the model")
        model, tok = load_causal_lm(local_dir, device, trust_remote_code=trust_remote_code)
        budget = model_budget(opts, device, getattr(model.config, "max_position_embeddings", None))
        seq, accumulate, tokens_per_step = budget["seq_len"], budget["accumulate"], budget["tokens_per_step"]
        train = text_batches(tok, train_paras, seq_len=seq, batch_size=opts.batch_size,
                             max_tokens=budget["train_tokens"])
        evals = text_batches(tok, eval_paras, seq_len=seq, batch_size=opts.batch_size, max_tokens=opts.eval_tokens)
        parts = find_lens_parts(model)
        fp = unembedding_fingerprint(parts)
        budget["text_tokens"] = int(sum(b.numel() for b in train))
        text_key = hashlib.sha256(repr((opts.params(), len(train_paras), budget)).encode()).hexdigest()[:12]
        path = lens_dir / f"{role}-{text_key}.safetensors"
        lens = load_lens(path, fp, device=device) if path.exists() else None
        if lens is None:
            def report(step, steps, loss, role=role):
                if step % 10 == 0 or step == steps:
                    progress(f"{role}: tuned lens step {step}/{steps}, KL {loss:.2f}")

            progress(f"{role}: training the tuned lens, {opts.steps} steps x {tokens_per_step:,} tokens "
                     f"({accumulate} micro-batch{'es' if accumulate > 1 else ''} of {opts.batch_size} x {seq}) "
                     f"on {budget['text_tokens']:,} tokens of text")
            lens, curve = train_tuned_lens(model, train, steps=budget["steps"], device=device, parts=parts,
                                           progress=report, accumulate=accumulate)
            save_lens(lens, path, fp, {"role": role, "model": local_dir, "options": opts.params(),
                                       "budget": budget, "curve": curve.to_dict("list")})
        else:
            progress(f"{role}: reusing the tuned lens in {path.name} (same unembedding)")
            curve = pd.DataFrame(read_lens_meta(path).get("meta", {}).get("curve") or
                                 {"step": [], "layer": [], "kl_bits": []})
        progress(f"{role}: evaluating")
        lenses = [lens, LogitLens()]
        kl.append(evaluate_lens(model, evals, lenses, device=device, parts=parts).assign(model=role))
        curves.append(curve.assign(model=role))
        for i, text in enumerate(eval_paras[: opts.samples]):
            t = prediction_trajectory(model, tok, text, lenses, top_k=opts.top_k, device=device, parts=parts)
            trajs.append(t.assign(model=role, sample=i))
        ran[role] = budget | {"device": _device_type(device)}
        del model
    lens_kl = pd.concat(kl, ignore_index=True)
    if "lens" not in lens_kl.columns:
        raise UserError("lens evaluation returned no lens column")
    tables = {"lens_kl": lens_kl, "lens_curve": pd.concat(curves, ignore_index=True),
              "lens_trajectory": pd.concat(trajs, ignore_index=True)}
    return tables, ran
