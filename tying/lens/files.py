"""Saving and loading a tuned lens: safetensors (never pickle) with the fingerprint of its unembedding.

A lens is only meaningful with the unembedding and final norm it was trained through, so
:func:`save_lens` stores :func:`unembedding_fingerprint` in the safetensors header and a
JSON sidecar beside it (same name, ``.json``: shapes, fingerprint and the caller's ``meta``),
and :func:`load_lens` refuses, with a warning, a lens whose fingerprint differs. A lens whose
float32 file would pass 10 MB is saved in float16 parts of at most 10 MB each
(:mod:`tying.lens.shards`), so that it can ship; :func:`load_lens` reads both.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import torch

from tying.cache.writer import atomic_write
from tying.device import as_device
from tying.lens.lenses import TunedLens
from tying.lens.parts import LensParts
from tying.lens.run import chunks
from tying.lens.shards import HEADER_MARGIN, MAX_FILE_BYTES, clear_parts, read_parts, tensor_bytes, write_parts

LENS_FORMAT = "tying-tuned-lens/1"
"""The ``format`` entry of a saved lens's header and sidecar."""

_HASH_CHUNK = 1 << 22
"""Elements hashed at a time by :func:`unembedding_fingerprint`."""


def unembedding_fingerprint(parts: LensParts) -> str:
    """SHA-256 (hex) of the unembedding's and final norm's tensors, as float32 with names and shapes.

    The fingerprint is stored with a saved lens and checked on loading. Hashing float32
    values makes it the same whether the model was loaded in float32 or in a wider dtype
    holding the same numbers.
    """
    digest = hashlib.sha256()
    for role, module in (("unembed", parts.unembed), ("final_norm", parts.final_norm)):
        if module is None:
            digest.update(f"{role}:none;".encode())
            continue
        for name, tensor in sorted(module.state_dict().items()):
            if not isinstance(tensor, torch.Tensor):
                continue
            digest.update(f"{role}.{name}:{tuple(tensor.shape)};".encode())
            flat = tensor.detach().reshape(-1)
            for rows in chunks(flat.numel(), _HASH_CHUNK):
                digest.update(flat[rows].to(torch.float32).cpu().numpy().tobytes())
    return digest.hexdigest()


def sidecar_path(path) -> Path:
    """The JSON sidecar of a lens saved at ``path``: the same name with ``.json``."""
    return Path(path).with_suffix(".json")


def save_lens(lens: TunedLens, path, fingerprint: str, meta: dict | None = None, *,
              max_bytes: int = MAX_FILE_BYTES) -> Path:
    """Save ``lens`` to ``path`` (safetensors) with a JSON sidecar next to it (same name, .json).

    The fingerprint (see :func:`unembedding_fingerprint`) and the shapes go into the
    safetensors header, with ``meta["budget"]`` when given (the training budget: the file says
    what it was trained with); the sidecar repeats them with ``meta`` (JSON-serialisable: model
    id, training settings, ...). A lens whose float32 data would pass ``max_bytes`` is saved in
    float16 parts of at most ``max_bytes`` each (:func:`tying.lens.shards.write_parts`); the
    sidecar then lists the files and their dtype. Each file is written to a temporary file and
    renamed, so a crash never leaves a half-written lens. Returns the path.
    """
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {name: t.detach().to("cpu", torch.float32).contiguous() for name, t in lens.state_dict().items()}
    header = {
        "format": LENS_FORMAT,
        "fingerprint": str(fingerprint),
        "n_hidden": str(lens.n_hidden),
        "d_model": str(lens.d_model),
    }
    if (meta or {}).get("budget"):
        header["budget"] = json.dumps(meta["budget"], sort_keys=True, default=str)
    sidecar = {
        "format": LENS_FORMAT,
        "fingerprint": str(fingerprint),
        "n_hidden": lens.n_hidden,
        "d_model": lens.d_model,
        "meta": meta or {},
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if tensor_bytes(tensors) + HEADER_MARGIN > max_bytes:
            files = write_parts(tensors, path, header, max_bytes)
            sidecar["dtype"] = _read_header(path).get("dtype")
            sidecar["files"] = [{"name": f.relative_to(path.parent).as_posix(), "bytes": f.stat().st_size}
                                for f in files]
        else:
            atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=header))
            clear_parts(path)
        text = json.dumps(sidecar, indent=2, sort_keys=True, default=str)
        atomic_write(sidecar_path(path), lambda tmp: Path(tmp).write_text(text + "\n"))
    except OSError as exc:
        raise ValueError(f"cannot write the lens to {path}: {exc.strerror or exc}") from exc
    return path


def _read_header(path: Path) -> dict:
    from safetensors import safe_open

    if not path.is_file():
        raise ValueError(f"no saved lens at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
    except Exception as exc:
        raise ValueError(f"cannot read the lens at {path}: {exc}") from exc
    if header.get("format") != LENS_FORMAT:
        raise ValueError(f"{path} is not a saved tuned lens")
    return header


def read_lens_meta(path) -> dict:
    """The JSON sidecar of a lens saved at ``path`` (fingerprint, shapes and the saved ``meta``)."""
    path = Path(path)
    _read_header(path)
    try:
        return json.loads(sidecar_path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the sidecar of the lens at {path}: {exc}") from exc


def load_lens(path, fingerprint: str, *, device=None) -> TunedLens | None:
    """Load a lens saved by :func:`save_lens` (safetensors only, no pickle).

    Returns None, with a warning, when the lens was trained for another unembedding (its
    fingerprint differs from ``fingerprint``). Raises ValueError when the file is missing or
    is not a saved lens.
    """
    from safetensors.torch import load_file

    path = Path(path)
    header = _read_header(path)
    if header.get("fingerprint") != fingerprint:
        warnings.warn(
            f"the lens at {path} was trained for another unembedding (fingerprint "
            f"{header.get('fingerprint', '?')[:12]} vs {str(fingerprint)[:12]}); ignoring it",
            stacklevel=2,
        )
        return None
    lens = TunedLens(int(header["n_hidden"]), int(header["d_model"]))
    try:
        tensors = read_parts(path, header) if "parts" in header else load_file(str(path))
        lens.load_state_dict(tensors, strict=True)
    except (RuntimeError, KeyError) as exc:
        raise ValueError(f"the lens at {path} does not match its header: {exc}") from exc
    lens.eval()
    return lens if device is None else lens.to(as_device(device))
