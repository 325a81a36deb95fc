"""Loading a whole causal language model and its tokenizer from a local folder, to run it.

The analyses of the two matrices never load a model (:mod:`tying.loading.weights` reads the
matrices alone); the lens stage and the trajectory command run the model, and load it here.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import torch

from tying.device import as_device
from tying.errors import UserError, first_line
from tying.layout import gguf_path


def _where(folder: str) -> tuple[str, dict]:
    """The folder and the keyword that name a model to transformers: a GGUF file (or a folder
    holding one) is read with ``gguf_file`` (transformers' GGUF support, through accelerate)."""
    path = gguf_path(folder)
    return (folder, {}) if path is None else (str(path.parent), {"gguf_file": path.name})


@contextlib.contextmanager
def _gguf_read_once():
    """Within the block, each GGUF file is parsed once, and gguf's tensor-name map built once.

    transformers parses a GGUF file's every metadata field anew for the config, for the weights
    and for the tokenizer (SmolLM2's 49,152 tokens and merges, three times), and builds gguf's
    tensor-name map once per tensor (397 times for SmolLM2): about half of its load. The reader
    is a read-only memory map and the map is only read, so one of each serves every call. A gguf
    package without these names is left as it is."""
    try:
        import gguf
    except ImportError:
        yield
        return
    reader, name_map = getattr(gguf, "GGUFReader", None), getattr(gguf, "get_tensor_name_map", None)
    if reader is None or name_map is None:
        yield
        return
    readers = {}

    def read_once(path, mode="r"):
        key = (str(path), mode)
        if key not in readers:
            readers[key] = reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = read_once, functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def load_tokenizer(folder: str, *, trust_remote_code: bool = False):
    """The tokenizer of a model folder or GGUF file; UserError (one line) when there is none."""
    from transformers import AutoTokenizer

    where, kw = _where(folder)
    try:
        return AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code, **kw)
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"cannot load the tokenizer of '{folder}': {first_line(exc)}") from None


LOAD_STEPS = ("its configuration", "its weights", "its tokenizer")
"""What :func:`load_causal_lm` says it is loading, in order (its ``progress``)."""


def load_causal_lm(folder: str, device=None, *, trust_remote_code: bool = False,
                   progress: Callable[[int, str], None] | None = None):
    """(model, tokenizer) of the Hugging Face model saved in ``folder`` (or a GGUF file, or a folder
    holding one, dequantised), in eval mode on ``device``.

    device: a torch.device or its name (default: CUDA when available, else the CPU). The
    weights are loaded in bfloat16 on a CUDA device and in float32 elsewhere. Remote code is
    run only with ``trust_remote_code``. ``progress``: called ``(i, LOAD_STEPS[i])`` as each
    step starts (a GGUF file's configuration is read on its own first: parsing the file is a
    third of its load). Raises UserError (one line) when the folder holds no loadable model or
    tokenizer.
    """
    device = as_device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    say = progress or (lambda i, what: None)
    where, kw = _where(folder)
    try:
        with _gguf_read_once() if kw else contextlib.nullcontext():
            say(0, LOAD_STEPS[0])
            config = {"config": AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code, **kw)} \
                if kw else {}
            say(1, LOAD_STEPS[1])
            model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype, trust_remote_code=trust_remote_code,
                                                         **config, **kw)
            say(2, LOAD_STEPS[2])
            tok = AutoTokenizer.from_pretrained(where, trust_remote_code=trust_remote_code, **kw)
    except (OSError, ValueError, KeyError) as exc:  # GGUF: an architecture transformers cannot read says so
        raise UserError(f"cannot load the model in '{folder}': {first_line(exc)}") from None
    return model.to(device).eval(), tok
