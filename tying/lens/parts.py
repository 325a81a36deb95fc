"""What a lens needs from a causal language model: its final norm, its unembedding, its hidden states.

A model with L blocks has ``n_hidden = L + 1`` hidden states: hidden state 0 is the
embedding output ("input"), hidden state l (1..L) the output of block l. Hidden states are
always taken *before* the final norm. Hugging Face models return the last entry of
``hidden_states`` with the final norm already applied (in transformers 5 for every family
we use; ``LensParts.final_hidden_is_normed`` records it), so :func:`residual_stream`
replaces that entry with the input of the final norm, captured by a hook. Then the logit
lens of the last hidden state *is* the model's output and every hidden state is read out
the same way.
"""

from __future__ import annotations

import operator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

FINAL_NORM_PATHS = (
    "model.norm",  # Llama, Qwen3, OLMo, Mistral, Gemma
    "transformer.ln_f",  # GPT-2, GPT-Neo, GPT-J, Bloom
    "gpt_neox.final_layer_norm",  # GPT-NeoX, Pythia
    "model.final_layernorm",  # Phi
    "model.final_norm",
    "model.decoder.final_layer_norm",  # OPT
    "model.ln_f",
    "transformer.norm_f",
    "transformer.final_layernorm",
    "transformer.norm",
    "backbone.norm_f",  # Mamba
)
"""Attribute paths (from the CausalLM) where the final norm is looked for, in this order."""


@dataclass(eq=False)
class LensParts:
    """What a lens needs from a model.

    final_norm: the model's final norm (``None`` only for a model without one).
    unembed: the output embedding, (..., d_model) -> (..., vocab).
    n_hidden: hidden states per position (number of blocks + 1).
    d_model: width of the hidden states.
    final_hidden_is_normed: whether the model's own ``hidden_states[-1]`` already has the
        final norm applied (then :func:`residual_stream` replaces it by the norm's input).
    """

    final_norm: nn.Module | None
    unembed: nn.Module
    n_hidden: int
    d_model: int
    final_hidden_is_normed: bool


def _attr_path(root: nn.Module, path: str):
    obj = root
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def _find_final_norm(model: nn.Module) -> nn.Module:
    for path in FINAL_NORM_PATHS:
        found = _attr_path(model, path)
        if isinstance(found, nn.Module):
            return found
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        for name in ("norm", "ln_f", "final_layer_norm", "final_layernorm", "final_norm", "norm_f"):
            found = getattr(base, name, None)
            if isinstance(found, nn.Module):
                return found
    raise ValueError(
        f"cannot find the final norm of {type(model).__name__}; looked for "
        f"{', '.join(FINAL_NORM_PATHS)} (a causal language model with a final norm is needed)"
    )


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (the CPU for a model without parameters)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _first_tensor(args, kwargs):
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    return None


@contextmanager
def _capture_norm_input(norm: nn.Module | None):
    """Yield a dict whose "h" becomes the input of ``norm``'s last call inside the block."""
    seen: dict = {}
    if norm is None:
        yield seen
        return

    def hook(_module, args, kwargs):
        seen["h"] = _first_tensor(args, kwargs)

    handle = norm.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def find_lens_parts(model: nn.Module) -> LensParts:
    """The final norm, the unembedding and the hidden-state layout of a causal LM.

    Works for OLMo, GPT-Neo, GPT-NeoX/Pythia, Qwen3, Llama, GPT-2 and any Hugging Face
    CausalLM with ``get_output_embeddings()`` and a final norm at one of
    ``FINAL_NORM_PATHS``. Runs the model once on a single token to count the hidden states,
    to see whether ``hidden_states[-1]`` is already normed, and to check that
    ``unembed(final_norm(h))`` reproduces the model's logits (a model with soft-capped or
    rescaled logits is refused, since the lens could not reproduce them).

    Raises ValueError when the unembedding or the final norm cannot be found.
    """
    get_out = getattr(model, "get_output_embeddings", None)
    unembed = get_out() if callable(get_out) else None
    if not isinstance(unembed, nn.Module):
        raise ValueError(
            f"cannot find the unembedding of {type(model).__name__}; the model has no "
            "get_output_embeddings() module (a causal language model is needed)"
        )
    final_norm = _find_final_norm(model)

    ids = torch.zeros((1, 1), dtype=torch.long, device=model_device(model))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), _capture_norm_input(final_norm) as seen:
            out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    except Exception as exc:  # the model itself failed: say so in one line
        raise ValueError(f"cannot run {type(model).__name__} with output_hidden_states: {exc}") from exc
    finally:
        model.train(was_training)
    hs = getattr(out, "hidden_states", None)
    logits = getattr(out, "logits", None)
    if not hs or logits is None or seen.get("h") is None:
        raise ValueError(
            f"{type(model).__name__} returned no hidden states, no logits, or never called its final norm"
        )
    pre, last = seen["h"], hs[-1]
    with torch.no_grad():
        normed = final_norm(pre)
        final_hidden_is_normed = bool(torch.equal(last, normed) and not torch.equal(last, pre))
        mine = unembed(normed).float()
    ref = logits.float()
    tol = 1e-3 if logits.dtype == torch.float32 and pre.dtype == torch.float32 else 3e-2
    if mine.shape != ref.shape or not torch.allclose(mine, ref, rtol=tol, atol=tol * (1 + ref.abs().max().item())):
        raise ValueError(
            f"the logits of {type(model).__name__} are not unembedding(final_norm(h)) (scaled or capped "
            "logits?); the lens cannot reproduce them"
        )
    return LensParts(
        final_norm=final_norm,
        unembed=unembed,
        n_hidden=len(hs),
        d_model=int(hs[0].shape[-1]),
        final_hidden_is_normed=final_hidden_is_normed,
    )


def check_layer(layer, n_hidden: int) -> int:
    """``layer`` as an int in 0..n_hidden-1; ValueError otherwise."""
    if isinstance(layer, bool):
        raise ValueError(f"layer must be an integer, got {layer!r}")
    try:
        idx = operator.index(layer)
    except TypeError:
        raise ValueError(f"layer must be an integer, got {layer!r}") from None
    if not 0 <= idx < n_hidden:
        raise ValueError(f"layer {idx} out of range: the model has {n_hidden} hidden states (0..{n_hidden - 1})")
    return idx


def check_layers(layers, n_hidden: int) -> list[int]:
    """The chosen hidden states (default all), each checked by :func:`check_layer`."""
    if layers is None:
        return list(range(n_hidden))
    out = [check_layer(layer, n_hidden) for layer in layers]
    if not out:
        raise ValueError("no layers selected")
    return out


def _body(model: nn.Module, parts: LensParts) -> nn.Module:
    """The module to run for hidden states: the base model (no logits computed) when it holds the norm."""
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        if parts.final_norm is None or any(m is parts.final_norm for m in base.modules()):
            return base
    return model


def residual_stream(model: nn.Module, parts: LensParts, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """Every hidden state of ``model`` on ``input_ids``, all before the final norm.

    input_ids: LongTensor of shape (batch, seq), on the model's device. Returns a list of
    ``parts.n_hidden`` tensors of shape (batch, seq, d_model), detached (the model runs
    under ``torch.no_grad``; its logits are not computed).
    """
    body = _body(model, parts)
    with torch.no_grad(), _capture_norm_input(parts.final_norm) as seen:
        out = body(input_ids=input_ids, output_hidden_states=True, use_cache=False)
    hs = list(out.hidden_states)
    if len(hs) != parts.n_hidden:
        raise ValueError(f"the model returned {len(hs)} hidden states, expected {parts.n_hidden}")
    if parts.final_hidden_is_normed:
        hs[-1] = seen["h"]
    return hs
