"""The two lenses and the KL that scores them: pure maths on tensors (Belrose et al. 2023, arXiv 2303.08112).

Each hidden state ``h_l`` (before the final norm) is read out through the model's *own*
final norm and unembedding:

* :class:`LogitLens`: ``logits_l = unembed(final_norm(h_l))``;
* :class:`TunedLens`: ``logits_l = unembed(final_norm(h_l + A_l h_l + b_l))``, one affine
  translator per hidden state, initialised to the identity (A = 0, b = 0) and trained to
  minimise KL(p_final || p_lens), where p_final is the model's own output distribution at
  the same position (see :mod:`tying.lens.train`).

Both have one interface (:class:`Lens`): ``name`` (the value of the ``lens`` column) and
``logits(parts, h, layer)``, hidden state ``layer`` -> logits. The score of a hidden state
is the mean KL(p_final || p_lens) over tokens, in **bits** (:func:`kl_bits`).
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from tying.lens.parts import LensParts, check_layer

LN2 = math.log(2.0)


# --------------------------------------------------------------------------- KL in bits and nats


def _kl_nats_from_logprobs(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats over the last axis, from float32 log-probabilities (..., V) -> (...)."""
    p = logp.exp()
    terms = torch.where(p > 0, p * (logp - logq), torch.zeros((), dtype=p.dtype, device=p.device))
    return terms.sum(-1).clamp_min(0.0)


def target_distribution(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, sum p log p) of the target: logits (n, V) -> float32 (n, V) and (n,)."""
    with torch.autocast(device_type=logits.device.type, enabled=False):
        logp = F.log_softmax(logits.float(), dim=-1)
        p = logp.exp()
        neg_entropy = torch.where(p > 0, p * logp, torch.zeros((), dtype=p.dtype, device=p.device)).sum(-1)
    return p, neg_entropy


def kl_nats_to_target(p: torch.Tensor, neg_entropy: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p || softmax(logits)) in nats: p (n, V), neg_entropy (n,), logits (n, V) -> (n,).

    KL = sum p log p - sum p log q, with sum p log p computed once per target
    (:func:`target_distribution`); this runs once per hidden state and lens, so it is kept
    to a log_softmax and one product-sum. For the last hidden state read through the
    identity it gives ~1e-6 bits of float32 rounding.
    """
    with torch.autocast(device_type=logits.device.type, enabled=False):  # float32 throughout
        logq = F.log_softmax(logits.float(), dim=-1)
        return (neg_entropy - (p * logq).sum(-1)).clamp_min(0.0)


def kl_bits(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in bits at every position, from logits.

    p_logits, q_logits: tensors of shape (..., vocab). Returns a float32 tensor of shape
    (...). Computed in float32 through log_softmax; rounding below zero is clipped to 0.
    """
    if p_logits.shape != q_logits.shape:
        raise ValueError(f"logits of different shapes: {tuple(p_logits.shape)} and {tuple(q_logits.shape)}")
    logp = F.log_softmax(p_logits.float(), dim=-1)
    logq = F.log_softmax(q_logits.float(), dim=-1)
    return _kl_nats_from_logprobs(logp, logq) / LN2


# --------------------------------------------------------------------------- the lenses


def _module_dtype(module: nn.Module) -> torch.dtype | None:
    for p in module.parameters():
        return p.dtype
    return None


def _read_out(parts: LensParts, h: torch.Tensor) -> torch.Tensor:
    """unembed(final_norm(h)), with ``h`` cast to the unembedding's dtype."""
    dtype = _module_dtype(parts.unembed)
    if dtype is not None:
        h = h.to(dtype)
    if parts.final_norm is not None:
        h = parts.final_norm(h)
    return parts.unembed(h)


class Lens(Protocol):
    """What :func:`~tying.lens.evaluate.evaluate_lens` and the trajectories need of a lens."""

    name: str
    """The value of the ``lens`` column: "logit" or "tuned"."""

    def check(self, parts: LensParts) -> None:
        """Raise ValueError when the lens does not fit the model described by ``parts``."""

    def logits(self, parts: LensParts, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Logits read from hidden state ``layer`` (before the final norm): (..., d_model) -> (..., vocab)."""

    def to(self, device) -> Lens:
        """The lens on ``device``."""


class LogitLens:
    """The logit lens: hidden state -> ``unembed(final_norm(h))``. No parameters; fits any model."""

    name = "logit"

    def check(self, parts: LensParts) -> None:
        """Every model fits the logit lens."""

    def logits(self, parts: LensParts, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Logits read from hidden state ``layer``: (..., d_model) -> (..., vocab)."""
        check_layer(layer, parts.n_hidden)
        return _read_out(parts, h)

    def to(self, device) -> LogitLens:
        return self

    def __repr__(self) -> str:
        return "LogitLens()"


class TunedLens(nn.Module):
    """One affine translator per hidden state, in residual form: h -> h + A_l h + b_l.

    Each translator is an ``nn.Linear(d_model, d_model)`` with zero weight and bias, so an
    untrained lens is exactly the identity (the tuned lens equals the logit lens).
    Parameters are float32. :func:`~tying.lens.train.train_tuned_lens` leaves the last one
    at the identity: the last hidden state already gives the model's output.
    """

    name = "tuned"

    def __init__(self, n_hidden: int, d_model: int):
        super().__init__()
        if n_hidden < 1 or d_model < 1:
            raise ValueError(f"a lens needs n_hidden >= 1 and d_model >= 1, got {n_hidden} and {d_model}")
        self.n_hidden = int(n_hidden)
        self.d_model = int(d_model)
        self.translators = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_hidden))
        with torch.no_grad():
            for t in self.translators:
                t.weight.zero_()
                t.bias.zero_()

    @classmethod
    def for_parts(cls, parts: LensParts) -> TunedLens:
        """An identity lens for the model described by ``parts``."""
        return cls(parts.n_hidden, parts.d_model)

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Translate hidden state ``layer``: (..., d_model) -> (..., d_model), float32."""
        idx = check_layer(layer, self.n_hidden)
        if h.shape[-1] != self.d_model:
            raise ValueError(f"hidden state of width {h.shape[-1]}, the lens expects {self.d_model}")
        translator = self.translators[idx]
        x = h.to(translator.weight.dtype)
        return x + translator(x)

    def check(self, parts: LensParts) -> None:
        """Refuse a model with another number of hidden states or another width."""
        if self.n_hidden != parts.n_hidden or self.d_model != parts.d_model:
            raise ValueError(
                f"the lens has {self.n_hidden} translators of width {self.d_model}, but the model has "
                f"{parts.n_hidden} hidden states of width {parts.d_model}"
            )

    def logits(self, parts: LensParts, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Logits read from hidden state ``layer`` through its translator: (..., d_model) -> (..., vocab).

        Gradients flow to the translator only if the model's parameters do not require them.
        """
        check_layer(layer, parts.n_hidden)
        self.check(parts)
        return _read_out(parts, self(h, layer))


def check_lenses(lenses, parts: LensParts) -> list[Lens]:
    """``lenses`` (one lens or several) as a list, each checked against ``parts``, names distinct."""
    chosen = [lenses] if hasattr(lenses, "logits") else list(lenses)
    if not chosen:
        raise ValueError("no lens to read the hidden states with")
    names = [lens.name for lens in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"two lenses of one kind: {', '.join(names)}")
    for lens in chosen:
        lens.check(parts)
    return chosen
