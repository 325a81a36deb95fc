"""Tuned lenses in the format of the ``tuned-lens`` library (AlignmentResearch, 0.2.0): out and in.

A lens folder of that library holds ``config.json`` and ``params.pt``, and
``TunedLens.from_model_and_pretrained(model, folder)`` loads it:

* ``config.json``: ``base_model_name_or_path``, ``d_model``, ``num_hidden_layers`` (one
  translator per hidden state but the last, which needs none), ``bias``,
  ``base_model_revision``, ``unembed_hash`` and ``lens_type`` (``"linear_tuned_lens"``);
* ``params.pt``: the translators' state dict, ``"<i>.weight"`` (d_model x d_model) and
  ``"<i>.bias"`` (d_model) for i < num_hidden_layers, saved with ``torch.save``.

Both lenses are the same maths: a translator in residual form, ``h + W h + b``, read out
through the model's final norm and unembedding (:class:`tying.lens.lenses.TunedLens`). Ours
has one more translator, the last hidden state's, kept at the identity; the export leaves it
out and the import puts it back.

The library's ``unembed_hash`` is the SHA-256 of numpy's printed form of the unembedding
matrix at one decimal (``np.array_str(W, precision=1)``: for a large matrix, its corners);
:func:`unembed_hash` computes it the same way, and the import refuses a lens whose hash or
shapes do not fit the model. ``params.pt`` is read with ``torch.load(weights_only=True)``:
tensors only, never code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from tying.cache.writer import folder_written
from tying.errors import UserError
from tying.lens.lenses import TunedLens
from tying.lens.parts import LensParts

CONFIG = "config.json"
PARAMS = "params.pt"
LENS_TYPE = "linear_tuned_lens"


def unembed_hash(parts: LensParts) -> str:
    """The tuned-lens library's hash of the model's unembedding matrix (vocab x d_model)."""
    weight = parts.unembed.weight.detach().to("cpu", torch.float32).numpy()
    return hashlib.sha256(np.array_str(weight, precision=1).encode()).hexdigest()


def library_config(lens: TunedLens, parts: LensParts, base_model: str, revision: str | None = None) -> dict:
    """The ``config.json`` of ``lens`` for the model of ``parts``."""
    return {"base_model_name_or_path": str(base_model), "d_model": int(lens.d_model),
            "num_hidden_layers": int(lens.n_hidden) - 1, "bias": True, "base_model_revision": revision,
            "unembed_hash": unembed_hash(parts), "lens_type": LENS_TYPE}


def library_params(lens: TunedLens) -> dict[str, torch.Tensor]:
    """The translators but the last (the identity), as the library's state dict (float32, CPU)."""
    out = {}
    for i, t in enumerate(lens.translators[: lens.n_hidden - 1]):
        out[f"{i}.weight"] = t.weight.detach().to("cpu", torch.float32).clone()
        out[f"{i}.bias"] = t.bias.detach().to("cpu", torch.float32).clone()
    return out


def write_folder(folder: Path, lens: TunedLens, parts: LensParts, base_model: str,
                 revision: str | None = None) -> Path:
    """Write ``lens`` as a library lens folder: config.json and params.pt, whole or not at all
    (written into a temporary folder beside it, then renamed; an earlier lens folder there is
    replaced)."""
    with folder_written(folder) as tmp:
        (tmp / CONFIG).write_text(json.dumps(library_config(lens, parts, base_model, revision), indent=2) + "\n")
        torch.save(library_params(lens), tmp / PARAMS)
    return folder


def is_lens_folder(folder: Path) -> bool:
    return (Path(folder) / CONFIG).is_file() and (Path(folder) / PARAMS).is_file()


def read_config(folder: Path) -> dict:
    """A library lens folder's config, checked to be a linear tuned lens (UserError: one line)."""
    folder = Path(folder)
    if not is_lens_folder(folder):
        raise UserError(f"{folder} is not a tuned-lens folder: it needs {CONFIG} and {PARAMS}")
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{folder / CONFIG} is not readable JSON: {exc}") from None
    if not isinstance(config, dict) or config.get("lens_type", LENS_TYPE) != LENS_TYPE:
        kind = config.get("lens_type") if isinstance(config, dict) else type(config).__name__
        raise UserError(f"{folder} holds a lens of type {kind!r}; only {LENS_TYPE!r} is read")
    for key in ("d_model", "num_hidden_layers"):
        if type(config.get(key)) is not int or config[key] < 1:
            raise UserError(f"{folder / CONFIG} has no valid {key!r}")
    if config.get("unembed_hash") is not None and not isinstance(config["unembed_hash"], str):
        raise UserError(f"{folder / CONFIG}: unembed_hash is a {type(config['unembed_hash']).__name__}, not a string")
    return config


def read_params(folder: Path, config: dict) -> dict[str, torch.Tensor]:
    """The translators of a library lens folder, checked without a model: ``{i}.weight`` (d, d) and
    ``{i}.bias`` (d,) for every hidden state, real floating-point tensors with finite values only
    (UserError, one line, for anything else: a NaN translator would read as a false zero KL)."""
    folder = Path(folder)
    d, layers = config["d_model"], config["num_hidden_layers"]
    try:
        state = torch.load(folder / PARAMS, map_location="cpu", weights_only=True)
    except Exception as exc:  # a pickle with code, a truncated file: refused, never run
        raise UserError(f"{folder / PARAMS} is not a tensor file torch.load(weights_only=True) reads: "
                        f"{str(exc).splitlines()[0][:160]}") from None
    expected = {f"{i}.{k}" for i in range(layers) for k in ("weight", "bias")}
    if not isinstance(state, dict) or set(state) != expected:
        got = sorted(map(str, state))[:4] if isinstance(state, dict) else type(state).__name__
        raise UserError(f"{folder / PARAMS} does not hold the translators 0..{layers - 1} (weight, bias): {got}")
    for i in range(layers):
        w, b = state[f"{i}.weight"], state[f"{i}.bias"]
        if not isinstance(w, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise UserError(f"{folder / PARAMS}: translator {i} holds a {type(w).__name__} and a "
                            f"{type(b).__name__}, not tensors")
        if not (w.dtype.is_floating_point and b.dtype.is_floating_point):
            raise UserError(f"{folder / PARAMS}: translator {i} is {w.dtype}/{b.dtype}; a lens is real floating point")
        if tuple(w.shape) != (d, d) or tuple(b.shape) != (d,):
            raise UserError(f"{folder / PARAMS}: translator {i} has shapes {tuple(w.shape)} and "
                            f"{tuple(b.shape)}, not ({d}, {d}) and ({d},)")
        if not (torch.isfinite(w).all() and torch.isfinite(b).all()):
            raise UserError(f"{folder / PARAMS}: translator {i} holds NaN or infinite values")
    return state


def check_folder(folder: Path) -> None:
    """A library lens folder read and checked without its model (before any stage runs)."""
    read_params(folder, read_config(folder))


def read_folder(folder: Path, parts: LensParts, model_name: str = "the model") -> TunedLens:
    """The library lens in ``folder`` as our :class:`TunedLens` for the model of ``parts``.

    Refused with one line naming both sides: another width or number of hidden states, another
    unembedding (the config's ``unembed_hash``), or tensors that are not the translators'.
    """
    folder = Path(folder)
    config = read_config(folder)
    d, layers = config["d_model"], config["num_hidden_layers"]
    if d != parts.d_model or layers != parts.n_hidden - 1:
        raise UserError(f"the lens in {folder} has {layers} translators of width {d}; {model_name} needs "
                        f"{parts.n_hidden - 1} of width {parts.d_model}")
    want = config.get("unembed_hash")
    have = unembed_hash(parts) if want else None
    if want and want != have:
        raise UserError(f"the lens in {folder} was trained for another unembedding: its hash {want[:12]}, "
                        f"{model_name}'s {have[:12]}")
    state = read_params(folder, config)
    lens = TunedLens(parts.n_hidden, parts.d_model)
    with torch.no_grad():
        for i in range(layers):
            w, b = state[f"{i}.weight"], state[f"{i}.bias"]
            lens.translators[i].weight.copy_(w.to(torch.float32))
            lens.translators[i].bias.copy_(b.to(torch.float32))
    lens.eval()
    return lens
