"""Loading a whole causal language model and its tokenizer from a local folder, to run it.

The analyses of the two matrices never load a model (:mod:`tying.loading.weights` reads the
matrices alone); the lens stage and the trajectory command run the model, and load it here.
"""

from __future__ import annotations

import torch

from tying.device import as_device
from tying.errors import UserError, first_line


def load_causal_lm(folder: str, device=None, *, trust_remote_code: bool = False):
    """(model, tokenizer) of the Hugging Face model saved in ``folder``, in eval mode on ``device``.

    device: a torch.device or its name (default: CUDA when available, else the CPU). The
    weights are loaded in bfloat16 on a CUDA device and in float32 elsewhere. Remote code is
    run only with ``trust_remote_code``. Raises UserError (one line) when the folder holds
    no loadable model or tokenizer.
    """
    device = as_device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, trust_remote_code=trust_remote_code)
        tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the model in '{folder}': {first_line(exc)}") from None
    return model.to(device).eval(), tok
