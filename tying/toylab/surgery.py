"""Gradient surgery on the tied matrix: separate the output side's *size* from its *reach*.

In a tied model the gradient reaching the one matrix ``W`` is ``g_in + g_out``
(:mod:`tying.toylab.provenance`): the input side reaches only the rows of tokens present as
inputs in the batch; the output side (``dlogits^T h``) reaches every row, and is larger. The
mechanism lab (`precompute mechanism`) changes one of these at a time:

* **size balanced**: ``g_out`` rescaled so that its norm equals the input side's (its reach kept);
* **reach matched**: ``g_out`` masked to the rows of tokens present as inputs (its size on
  those rows kept);
* **both**: masked, then rescaled to the input side's norm.

Every function here is pure on tensors and known answers test it: the rescaled output side has
the input side's norm; a masked gradient is zero on rows absent from the batch; with no mask and
a scale of one nothing changes. :func:`apply` edits ``W.grad`` in place after ``backward()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

SURGERIES = ("size", "reach")
"""What an arm may change on the output side: its size (norm), its reach (rows)."""


def present_rows(input_ids: torch.Tensor, n_vocab: int) -> torch.Tensor:
    """Boolean mask of shape (n_vocab,): the rows whose token occurs as an input in the batch
    (the rows the input lookup reaches)."""
    mask = torch.zeros(n_vocab, dtype=torch.bool, device=input_ids.device)
    mask[input_ids.reshape(-1)] = True
    return mask


def masked(g_out: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``g_out`` with every row outside ``rows`` (a boolean mask) set to zero."""
    return g_out * rows.to(g_out.dtype)[:, None]


def balanced(g_out: torch.Tensor, target_norm: float) -> torch.Tensor:
    """``g_out`` rescaled to the Frobenius norm ``target_norm`` (a zero gradient stays zero)."""
    norm = torch.linalg.vector_norm(g_out.double()).item()
    return g_out * (float(target_norm) / norm) if norm > 0 else g_out.clone()


def output_side(g_in: torch.Tensor, g_out: torch.Tensor, rows: torch.Tensor | None, size: bool,
                reach: bool) -> torch.Tensor:
    """The output-side gradient an arm lets through: masked to ``rows`` (``reach``), then rescaled
    to the norm of ``g_in``, the input side as applied (``size``). Neither: ``g_out`` itself."""
    out = masked(g_out, rows) if reach else g_out
    if size:
        out = balanced(out, torch.linalg.vector_norm(g_in.double()).item())
    return out


@dataclass(frozen=True)
class Surgery:
    """What an arm changes on the output side of the tied matrix's gradient."""

    size: bool = False
    reach: bool = False

    @property
    def identity(self) -> bool:
        return not (self.size or self.reach)

    def apply(self, weight: torch.Tensor, g_in: torch.Tensor, g_out: torch.Tensor, input_ids: torch.Tensor) -> float:
        """Edit ``weight.grad`` (= ``g_in + g_out`` after ``backward()``; ``g_in`` as applied, that
        is after any input-side factor) into ``g_in + output_side(...)``; returns the norm of the
        output side let through. Rows that the mask leaves out get exactly zero: the input side
        never reaches them (their token is not in the batch), so their whole gradient was the
        output side's. The identity surgery leaves ``weight.grad`` untouched (bit for bit)."""
        if self.identity:
            return torch.linalg.vector_norm(g_out).item()
        rows = present_rows(input_ids, weight.shape[0]) if self.reach else None
        new = output_side(g_in, g_out, rows, self.size, self.reach)
        grad = weight.grad
        if self.size:
            keep = rows if rows is not None else torch.ones(weight.shape[0], dtype=torch.bool, device=grad.device)
            grad[keep] += (new - g_out)[keep].to(grad.dtype)
        if rows is not None:
            grad[~rows] = 0
        return torch.linalg.vector_norm(new).item()
