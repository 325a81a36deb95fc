"""Where tensor work runs: the GPU when one is present, else the CPU."""

from __future__ import annotations

import numpy as np
import torch

from tying.errors import UserError


def pick_device(requested: str | None = None) -> torch.device:
    """Return ``requested`` if given ("cpu", "cuda", "cuda:1"), else CUDA when available, else CPU."""
    if requested:
        try:
            device = torch.device(requested)
        except (RuntimeError, ValueError):
            raise UserError(f"unknown device '{requested}' (use e.g. cpu, cuda or cuda:1)") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise UserError(f"device '{requested}' asked for, but no CUDA GPU is available")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def as_tensor(x, device: torch.device | None = None, dtype=torch.float32) -> torch.Tensor:
    """A float tensor on ``device`` from a numpy array or tensor (no copy when already there)."""
    device = device or pick_device()
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(np.ascontiguousarray(x))
    return x.to(device=device, dtype=dtype)


def as_device(device) -> torch.device:
    """``device`` itself when it is a torch.device, else :func:`pick_device` of it (None: the default)."""
    return device if isinstance(device, torch.device) else pick_device(device)


def to_numpy(x) -> np.ndarray:
    """A numpy array of ``x`` (a tensor is detached and moved to the CPU first)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)
