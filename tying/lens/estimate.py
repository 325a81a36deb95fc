"""How long training a tuned lens will take, before it starts: a timed probe of one micro-batch.

What one micro-batch of :func:`~tying.lens.train.train_tuned_lens` runs, per token: a forward
pass of the frozen model (no backward through it: its parameters need no gradient and the
hidden states none either), about 2 x its parameters in FLOPs; then for every hidden state
the lens reads, the translator (d x d) and the model's unembedding (d x V) forward, and for
every trained one (all but the last) their backward: the translator's weight gradient and the
gradient through the unembedding to its input, 4 d^2 + 4 d V; and once the target
distribution, 2 d V. For a 1B model with a 50k vocabulary the lens's share is about three
times the model's forward. :func:`flops_per_token` writes that out; the estimate itself comes
from timing (:func:`probe_micro_batch`), which sees the machine as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from tying.lens import LensBudget
from tying.lens.parts import LensParts, find_lens_parts
from tying.lens.train import train_tuned_lens

PROBE_MICRO_BATCHES = 4
"""Micro-batches of the timed probe step when the warm-up one is quick."""

QUICK_PROBE_SECONDS = 5.0
"""A warm-up micro-batch slower than this is the probe itself (a large model: nothing more is timed)."""


def flops_per_token(n_params: int, d_model: int, n_vocab: int, n_hidden: int) -> float:
    """Floating-point operations per training token of a tuned lens (see the module docstring):
    2 P (the frozen forward) + (n_hidden - 1) (4 d^2 + 4 d V) (trained translators forward and
    backward, unembedding forward and backward to its input) + 2 d^2 + 2 d V (the last hidden
    state's identity translator, forward only) + 2 d V (the target distribution)."""
    d, v = float(d_model), float(n_vocab)
    return 2.0 * n_params + (n_hidden - 1) * (4 * d * d + 4 * d * v) + 2 * d * d + 4 * d * v


def probe_micro_batch(model: nn.Module, batch: torch.Tensor, *, parts: LensParts | None = None, device=None,
                      micro_batches: int = PROBE_MICRO_BATCHES) -> float:
    """Seconds one micro-batch of tuned-lens training takes on ``model``: a timed
    :func:`~tying.lens.train.train_tuned_lens` on ``batch`` with a fresh lens, thrown away.

    A first step of one micro-batch warms up (allocations, kernels); when it took under
    QUICK_PROBE_SECONDS, one step of ``micro_batches`` micro-batches is timed and its time per
    micro-batch returned (the step's fixed costs, a new lens and optimiser, spread as in
    training); else the first step's time (a large model on a CPU, where more would cost
    minutes and the warm-up is a small share).
    """
    parts = parts if parts is not None else find_lens_parts(model)

    def step(accumulate: int) -> float:
        start = time.perf_counter()
        train_tuned_lens(model, [batch] * accumulate, steps=1, device=device, parts=parts, accumulate=accumulate)
        return time.perf_counter() - start

    first = step(1)
    if first >= QUICK_PROBE_SECONDS or micro_batches < 1:
        return first
    return step(int(micro_batches)) / int(micro_batches)


@dataclass
class LensEstimate:
    """What :func:`estimate_training` found: ``seconds`` for the whole training, from
    ``micro_seconds`` per micro-batch (timed) x ``micro_batches`` (steps x accumulate);
    ``flops_per_token`` and ``tokens`` (steps x tokens per step) for the message and for
    another device's estimate (:meth:`seconds_at`)."""

    seconds: float
    micro_seconds: float
    micro_batches: int
    tokens: int
    flops_per_token: float
    n_params: int

    def seconds_at(self, flops_per_second: float) -> float:
        """The training's time at a sustained ``flops_per_second`` (another device, by FLOPs)."""
        return self.tokens * self.flops_per_token / flops_per_second


def estimate_training(model: nn.Module, batch: torch.Tensor, budget: LensBudget, *, parts: LensParts | None = None,
                      device=None, probe: Callable[..., float] | None = None) -> LensEstimate:
    """The time training a tuned lens with ``budget`` (a :class:`~tying.lens.LensBudget`, as the
    lens stage resolves it for one model) will take:
    ``probe(model, batch, parts=, device=)`` (default :func:`probe_micro_batch`) seconds for one
    micro-batch of the budget's shape (``batch``: token ids (batch_size, seq_len)) times the
    steps' micro-batches."""
    parts = parts if parts is not None else find_lens_parts(model)
    micro = float((probe or probe_micro_batch)(model, batch, parts=parts, device=device))
    micro_batches = int(budget.steps) * int(budget.accumulate)
    unembed = getattr(parts.unembed, "weight", None)
    n_vocab = int(unembed.shape[0]) if unembed is not None else int(getattr(model.config, "vocab_size", 0))
    n_params = int(sum(p.numel() for p in model.parameters()))
    return LensEstimate(seconds=micro * micro_batches, micro_seconds=micro, micro_batches=micro_batches,
                        tokens=budget.tokens_seen,
                        flops_per_token=flops_per_token(n_params, parts.d_model, n_vocab, parts.n_hidden),
                        n_params=n_params)
