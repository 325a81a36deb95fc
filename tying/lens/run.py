"""Running a frozen model for a lens: its device, eval mode without parameter gradients, bf16 autocast, token blocks."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from tying.device import as_device
from tying.lens.parts import LensParts, find_lens_parts, model_device

CHUNK_TOKENS = 2048
"""Tokens per vocabulary-sized block: memory for logits stays at a few (chunk x vocab) arrays."""


@contextmanager
def frozen(model: nn.Module):
    """Eval mode and no parameter gradients inside the block; the previous state restored after."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    was_training = model.training
    model.eval()
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)


def autocast(device: torch.device, enabled: bool | None):
    """bf16 autocast on CUDA (``enabled`` None: on CUDA only; the CPU computes in the model's dtype)."""
    use = device.type == "cuda" if enabled is None else bool(enabled and device.type == "cuda")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use)


def prepare(model: nn.Module, device, parts: LensParts | None) -> tuple[torch.device, LensParts]:
    """(device, parts): the model moved to ``device`` (default: where it is) and its parts found."""
    dev = as_device(device) if device is not None else model_device(model)
    if model_device(model) != dev:
        model.to(dev)
    return dev, parts if parts is not None else find_lens_parts(model)


def chunks(n: int, size: int):
    """Slices of 0..n-1 of at most ``size`` elements each."""
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))
