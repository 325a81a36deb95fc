"""Training a tuned lens: the model frozen, each translator fitted to minimise KL(p_final || p_lens).

Budget: :func:`train_tuned_lens` takes ``accumulate`` micro-batches per optimiser step
(gradient accumulation), so the tokens per step are not bounded by memory; the tuned-lens
library uses about 2^18 tokens per step. :func:`tying.analysis.convergence.convergence`
says from the returned training curve whether it has settled.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import pandas as pd
import torch
from torch import nn

from tying.lens import LIBRARY_STEPS
from tying.lens.batches import check_batches
from tying.lens.lenses import LN2, LogitLens, TunedLens, kl_nats_to_target, target_distribution
from tying.lens.parts import LensParts, residual_stream
from tying.lens.run import CHUNK_TOKENS, autocast, chunks, frozen, prepare


def _micro_batches(accumulate) -> int:
    try:
        n_micro = None if isinstance(accumulate, bool) else operator.index(accumulate)
    except TypeError:
        n_micro = None
    if n_micro is None or n_micro < 1:
        raise ValueError(f"accumulate must be an integer of at least 1, got {accumulate!r}")
    return n_micro


def train_tuned_lens(
    model: nn.Module,
    batches: Sequence[torch.Tensor],
    *,
    steps: int = LIBRARY_STEPS,
    lr: float | None = None,
    device=None,
    progress: Callable[[int, int, float], None] | None = None,
    optimizer: str = "sgd",
    momentum: float = 0.9,
    weight_decay: float = 1e-3,
    max_grad_norm: float = 1.0,
    lens: TunedLens | None = None,
    parts: LensParts | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    bf16: bool | None = None,
    accumulate: int = 1,
) -> tuple[TunedLens, pd.DataFrame]:
    """Train a tuned lens for ``model`` on ``batches``; the model stays frozen.

    batches: LongTensors of token ids, each of shape (batch, seq) (see
        :func:`~tying.lens.batches.text_batches`); taken in order, ``accumulate`` per step,
        and cycled when the steps need more.
    steps: optimiser steps. lr: peak learning rate (default 1.0 for "sgd", 1e-3 for "adam"),
        decayed linearly to 0 over the steps.
    accumulate: micro-batches per optimiser step (gradient accumulation). Each micro-batch's
        loss is weighted by its share of the step's tokens, so the accumulated gradient is
        that of one step on all of the step's tokens together (the mean KL over them); then
        one clip and one optimiser step. Only one micro-batch's activations are held at a time.
    optimizer: "sgd" (Nesterov momentum, learning rate scaled by 1 - momentum, as Belrose
        et al.) or "adam". The loss is the sum over hidden states of the mean
        KL(p_final || p_lens) in nats; gradients are clipped to ``max_grad_norm``. The last
        hidden state's translator is not trained (it stays the identity, KL = 0).
    device: where to run (default: the model's device; the model is moved there).
    progress: called after each step as ``progress(step, steps, mean_kl_bits)``.
    lens: continue training this tuned lens (default: a fresh identity lens).
    chunk_tokens: tokens per vocabulary-sized block; memory is bounded by the batch's hidden
        states plus a few (chunk_tokens x vocab) float32 arrays.
    bf16: bf16 autocast (default: on CUDA only; the CPU always computes in the model's dtype).

    Returns (lens, curve): the trained lens and a DataFrame with columns step, layer,
    kl_bits (mean KL of each hidden state over all of that step's tokens, before the update).
    """
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    accumulate = _micro_batches(accumulate)
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"unknown optimizer '{optimizer}' (choose sgd or adam)")
    batches = check_batches(batches)
    dev, parts = prepare(model, device, parts)
    lens = TunedLens.for_parts(parts) if lens is None else lens
    lens.check(parts)
    lens = lens.to(dev)
    # The last hidden state read through the identity *is* the model's output (KL = 0), so its
    # translator stays the identity: its gradient is rounding noise, which Adam would amplify.
    params = [q for layer in range(parts.n_hidden - 1) for q in lens.translators[layer].parameters()]
    if optimizer == "sgd":
        peak = 1.0 if lr is None else float(lr)
        opt = torch.optim.SGD(
            params, lr=peak * (1 - momentum), momentum=momentum, nesterov=momentum > 0, weight_decay=weight_decay
        )
    else:
        peak = 1e-3 if lr is None else float(lr)
        opt = torch.optim.Adam(params, lr=peak, betas=(momentum, 0.999), weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    n_hidden, last = parts.n_hidden, parts.n_hidden - 1
    logit = LogitLens()

    curve_step, curve_layer, curve_kl = [], [], []
    with frozen(model):
        lens.train()
        for step in range(steps):
            micro = [batches[(step * accumulate + i) % len(batches)] for i in range(accumulate)]
            n_tok = sum(ids.numel() for ids in micro)  # every token of the step weighs the same
            kl_sum = torch.zeros(n_hidden, dtype=torch.float64, device=dev)
            opt.zero_grad(set_to_none=True)
            for ids in micro:
                with autocast(dev, bf16):
                    hs = [h.reshape(-1, h.shape[-1]) for h in residual_stream(model, parts, ids.to(dev))]
                for rows in chunks(hs[0].shape[0], chunk_tokens):
                    with torch.no_grad(), autocast(dev, bf16):
                        p, neg_entropy = target_distribution(logit.logits(parts, hs[last][rows], last))
                    for layer in range(n_hidden):
                        trained = layer < last
                        with autocast(dev, bf16), torch.set_grad_enabled(trained):
                            logits = lens.logits(parts, hs[layer][rows], layer)
                            kl = kl_nats_to_target(p, neg_entropy, logits)
                        if trained:
                            (kl.sum() / n_tok).backward()
                        kl_sum[layer] += kl.detach().sum().double()
                        del logits, kl
                    del p, neg_entropy
                del hs
            if max_grad_norm and max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            schedule.step()
            kl_step = (kl_sum / n_tok / LN2).cpu().numpy()
            curve_step += [step] * n_hidden
            curve_layer += list(range(n_hidden))
            curve_kl += kl_step.tolist()
            if progress is not None:
                progress(step + 1, steps, float(kl_step.mean()))
    lens.eval()
    curve = pd.DataFrame({"step": curve_step, "layer": curve_layer, "kl_bits": curve_kl})
    return lens, curve
