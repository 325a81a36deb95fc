"""Loading a whole causal language model and its tokenizer from a local folder, to run it.

The analyses of the two matrices never load a model (:mod:`tying.loading.weights` reads the
matrices alone); the lens stage and the trajectory command run the model, and load it here.
"""

from __future__ import annotations

import torch

from tying.device import as_device
from tying.errors import UserError, first_line
from tying.layout import gguf_path


def _where(folder: str) -> tuple[str, dict]:
    """The folder and the keyword that name a model to transformers: a GGUF file (or a folder
    holding one) is read with ``gguf_file`` (transformers' GGUF support, through accelerate)."""
    path = gguf_path(folder)
    return (folder, {}) if path is None else (str(path.parent), {"gguf_file": path.name})


def load_tokenizer(folder: str, *, trust_remote_code: bool = False):
    """The tokenizer of a model folder or GGUF file; UserError (one line) when there is none."""
    from transformers import AutoTokenizer

    where, kw = _where(folder)
    try:
        return AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code, **kw)
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"cannot load the tokenizer of '{folder}': {first_line(exc)}") from None


def load_causal_lm(folder: str, device=None, *, trust_remote_code: bool = False):
    """(model, tokenizer) of the Hugging Face model saved in ``folder`` (or a GGUF file, or a folder
    holding one, dequantised), in eval mode on ``device``.

    device: a torch.device or its name (default: CUDA when available, else the CPU). The
    weights are loaded in bfloat16 on a CUDA device and in float32 elsewhere. Remote code is
    run only with ``trust_remote_code``. Raises UserError (one line) when the folder holds
    no loadable model or tokenizer.
    """
    device = as_device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, kw = _where(folder)
    try:
        model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, trust_remote_code=trust_remote_code, **kw)
        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code, **kw)
    except (OSError, ValueError, KeyError) as exc:  # GGUF: an architecture transformers cannot read says so
        raise UserError(f"cannot load the model in '{folder}': {first_line(exc)}") from None
    return model.to(device).eval(), tok
