"""A model's parameter names, without the model: a skeleton on the meta device, matched to checkpoint keys.

:func:`build_skeleton` builds the model from its config on the meta device (no memory, no
initialisation) and reads off the names of its input and output embeddings, every
parameter and module, and how transformers renames checkpoint keys when it loads them.
:func:`embedding_keys` finds the two matrices' keys among a checkpoint's, and
:func:`count_parameters` counts the stored parameters (buffers saved by older code left
out) from the headers alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from tying.errors import UserError, first_line
from tying.loading.checkpoint import Checkpoint
from tying.loading.headers import TensorInfo


def load_config(ckpt: Checkpoint, trust_remote_code: bool):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(ckpt.local_dir, trust_remote_code=trust_remote_code)
    except Exception as exc:  # unknown model type, bad JSON, remote code refused
        hint = "" if trust_remote_code else " (if the model ships its own code, pass trust_remote_code)"
        raise UserError(f"cannot read the config of '{ckpt.source}': {first_line(exc, typed=True, limit=160)}{hint}") from None


@dataclass
class Skeleton:
    """What the meta-device model says about names: embedding parameters, all parameters, modules."""

    input_name: str
    output_name: str
    ties: bool  # the skeleton shares one Parameter between input and output
    params: set[str]
    modules: set[str]
    base_prefix: str  # e.g. "transformer", "model", "gpt_neox"; "" when none
    rename: Callable[[list[str]], dict[str, str]]  # checkpoint keys -> model names


def _weight_name(model: torch.nn.Module, module: torch.nn.Module) -> str:
    for name, candidate in model.named_modules(remove_duplicate=False):
        if candidate is module:
            return f"{name}.weight" if name else "weight"
    raise LookupError("embedding module not found among the model's modules")


def _key_renamer(model) -> Callable[[list[str]], dict[str, str]]:
    """A function mapping checkpoint keys to the model's own names, as transformers' loader does.

    transformers 5 renames some checkpoint keys while loading (GPT-NeoX's ``embed_out`` becomes
    ``lm_head``; old ``gamma``/``beta`` become ``weight``/``bias``) and adds or strips the
    base-model prefix (``transformer.``). Those rules live in semi-private modules, so when they
    cannot be imported the keys are returned unchanged and suffix matching takes over.
    """
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (
            WeightConverter,
            WeightRenaming,
            dot_natural_key,
            rename_source_key,
        )
    except ImportError:
        return lambda keys: {k: k for k in keys}
    state_names = dict.fromkeys(model.state_dict(), True)
    prefix = getattr(model, "base_model_prefix", None) or None

    def rename(keys: list[str]) -> dict[str, str]:
        try:
            mapping = get_model_conversion_mapping(model)
            renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
            converters = [m for m in mapping if isinstance(m, WeightConverter)]
            names = {}
            for key in sorted(keys, key=dot_natural_key):  # some renamings depend on key order
                name, _ = rename_source_key(key, renamings, converters, prefix, state_names)
                if name not in state_names and key in state_names:
                    name = key
                names[key] = name
            return names
        except Exception:  # an internal API that changed shape: fall back to plain names
            return {k: k for k in keys}

    return rename


def build_skeleton(config, source: str, trust_remote_code: bool) -> Skeleton:
    """Build the model on the meta device (no memory, no init) and read off parameter names."""
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception as exc:  # architecture unknown to this transformers, remote code refused
        raise UserError(
            f"cannot build '{source}' ({config.model_type}) as a causal language model: {first_line(exc, typed=True, limit=160)}"
        ) from None
    inp = model.get_input_embeddings()
    out = model.get_output_embeddings()
    if inp is None or out is None or getattr(out, "weight", None) is None:
        raise UserError(f"'{source}' has no input or output embedding module (not a causal language model?)")
    return Skeleton(
        input_name=_weight_name(model, inp),
        output_name=_weight_name(model, out),
        ties=inp.weight is out.weight,
        params={n for n, _ in model.named_parameters(remove_duplicate=False)},
        modules={n for n, _ in model.named_modules(remove_duplicate=False)},
        base_prefix=getattr(model, "base_model_prefix", "") or "",
        rename=_key_renamer(model),
    )


def _match_key(name: str, names: dict[str, str]) -> str | None:
    """The checkpoint key whose model name is ``name``.

    ``names`` maps checkpoint keys to model names (after transformers' renaming). When no key
    maps to ``name`` exactly, a key that differs only by a leading prefix (``transformer.``,
    ``model.``) is accepted.
    """
    exact = sorted(k for k, n in names.items() if n == name)
    if exact:
        return name if name in exact else exact[0]
    hits = [
        k
        for k, n in names.items()
        if "." in n and (n.endswith("." + name) or name.endswith("." + n))
    ]
    if len(hits) > 1:
        raise UserError(f"cannot tell which tensor is '{name}': candidates {', '.join(sorted(hits)[:4])}")
    return hits[0] if hits else None


def embedding_keys(names: dict[str, str], skeleton: Skeleton, source: str) -> tuple[str, str | None]:
    """Checkpoint keys of the input matrix and of a separately stored output matrix (or None)."""
    input_key = _match_key(skeleton.input_name, names)
    if input_key is None:
        raise UserError(f"'{source}' has no input embedding tensor ('{skeleton.input_name}') in its weights")
    output_key = _match_key(skeleton.output_name, names)
    if output_key == input_key:
        output_key = None
    if output_key is None and not skeleton.ties:
        raise UserError(
            f"'{source}' has no output embedding tensor ('{skeleton.output_name}') in its weights "
            "although its config does not tie embeddings"
        )
    return input_key, output_key


def count_parameters(tensors: dict[str, TensorInfo], names: dict[str, str], skeleton: Skeleton) -> int:
    """Elements of every stored tensor that is a parameter.

    A key is left out when it is not a skeleton parameter but its parent module exists in the
    skeleton: such tensors are buffers saved by older code (attention masks, rotary inv_freq).
    Keys the skeleton does not know at all (layouts transformers converts on load) are counted.
    """
    prefix = skeleton.base_prefix + "." if skeleton.base_prefix else None
    total = 0
    for key, t in tensors.items():
        name = names.get(key, key)
        candidates = [name]
        if prefix:
            candidates.append(name.removeprefix(prefix) if name.startswith(prefix) else prefix + name)
        if not any(c in skeleton.params for c in candidates):
            parents = [c.rsplit(".", 1)[0] if "." in c else "" for c in candidates]
            if any(p in skeleton.modules for p in parents):
                continue
        total += int(np.prod(t.shape, dtype=np.int64))
    return total
