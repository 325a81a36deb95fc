"""The toy lab's optimisers: AdamW (the lab's), SGD with momentum (the mechanism lab's arm without
per-coordinate normalisation), the learning-rate schedule, and the mechanism lab's
**update-balanced** step for the tied matrix.

Rescaling the output side's *gradient* (:mod:`tying.toylab.surgery`, the size-balanced arm) acts
before AdamW divides every coordinate by its own running scale: on rows that only the output side
reaches, AdamW's update barely changes when the gradient is rescaled. :class:`UpdateBalance`
balances what AdamW *applies* instead: it keeps separate moment estimates for the input-side and
output-side parts of the tied matrix's gradient, turns each into its own AdamW direction and
rescales the output side's to the input side's norm before adding them. The two update norms it
applies are equal at every step (each step returns both; the lab logs them).
"""

from __future__ import annotations

import math

import torch

OPTIMIZERS = ("adamw", "sgd")
"""``adamw``: the toy lab's optimiser; ``sgd``: SGD with momentum, no weight decay."""


def lr_factor(step: int, steps: int, warmup: int, min_ratio: float) -> float:
    """Linear warm-up over ``warmup`` updates, then cosine decay to ``min_ratio`` at ``steps``."""
    if warmup and step <= warmup:
        return step / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model: torch.nn.Module, embeddings, lr: float, weight_decay: float, betas, kind: str = "adamw",
                   momentum: float = 0.9, skip: torch.Tensor | None = None) -> torch.optim.Optimizer:
    """AdamW with weight decay on the hidden weight matrices only (not on ``embeddings`` or norms);
    or (``kind="sgd"``) SGD with ``momentum`` and no weight decay. ``skip``: a parameter another
    rule updates (:class:`UpdateBalance`), left out."""
    params = [p for p in model.parameters() if p is not skip]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    emb = {id(p) for p in embeddings}
    decay = [p for p in params if p.ndim >= 2 and id(p) not in emb]
    no_decay = [p for p in params if not (p.ndim >= 2 and id(p) not in emb)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=1e-8)


def adam_direction(m: torch.Tensor, v: torch.Tensor, t: int, betas, eps: float = 1e-8) -> torch.Tensor:
    """AdamW's update direction from its moments after ``t`` steps: m_hat / (sqrt(v_hat) + eps)."""
    b1, b2 = betas
    return (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)


class UpdateBalance:
    """The update-balanced arm's rule for the tied matrix (no weight decay, as AdamW treats the
    embeddings): per side (input, output) AdamW's moments of that side's gradient; per step each
    side's direction (:func:`adam_direction`), the output side's rescaled to the input side's norm,
    the sum applied at the step's rate. The tied matrix is left out of the model's optimiser
    (:func:`make_optimizer`'s ``skip``); the training loop calls :meth:`record` after
    ``backward()`` and :meth:`step` after the optimiser's step."""

    balances_update = True
    identity = False

    def __init__(self, betas=(0.9, 0.95), eps: float = 1e-8):
        self.betas, self.eps, self.t = tuple(betas), eps, 0
        self.moments: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.grads: dict[str, torch.Tensor] = {}

    def apply(self, weight: torch.Tensor, g_in: torch.Tensor, g_out: torch.Tensor, input_ids=None) -> float:
        """Keep this step's two gradient parts (``g_in`` as applied); ``weight.grad`` stays their
        sum, so clipping sees the whole gradient. Returns the output side's gradient norm."""
        self.grads = {"input": g_in.detach().clone(), "output": g_out.detach().clone()}
        return torch.linalg.vector_norm(g_out).item()

    @torch.no_grad()
    def step(self, weight: torch.Tensor, lr: float, clip: float = 1.0) -> tuple[float, float]:
        """Update ``weight`` in place from the recorded parts (each times ``clip``, the factor the
        global clipping applied); returns the (input, output) update norms applied: equal unless
        the input side's update is zero (then the output side's is zero too)."""
        self.t += 1
        b1, b2 = self.betas
        direction = {}
        for side, g in self.grads.items():
            g = g.to(weight.dtype) * clip
            m, v = self.moments.get(side, (torch.zeros_like(g), torch.zeros_like(g)))
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            self.moments[side] = (m, v)
            direction[side] = adam_direction(m, v, self.t, self.betas, self.eps)
        n_in = torch.linalg.vector_norm(direction["input"].double()).item()
        n_out = torch.linalg.vector_norm(direction["output"].double()).item()
        out = direction["output"] * (n_in / n_out) if n_out > 0 else direction["output"]
        weight.sub_(lr * (direction["input"] + out))
        return lr * n_in, lr * torch.linalg.vector_norm(out.double()).item()
