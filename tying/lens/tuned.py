"""Logit lens and tuned lens: how well each hidden state already predicts the output (analysis 4).

Belrose et al. 2023 (arXiv 2303.08112). A causal language model with L blocks has
``n_hidden = L + 1`` hidden states: hidden state 0 is the embedding output ("input"),
hidden state l (1..L) the output of block l. Each is read out through the model's *own*
final norm and unembedding:

* **logit lens**: ``logits_l = unembed(final_norm(h_l))``;
* **tuned lens**: ``logits_l = unembed(final_norm(h_l + A_l h_l + b_l))``, one affine
  translator per hidden state, initialised to the identity (A = 0, b = 0) and trained to
  minimise KL(p_final || p_lens), where p_final is the model's own output distribution at
  the same position.

The score of a hidden state is the mean KL(p_final || p_lens) over tokens, in **bits**.

Hidden states are always taken *before* the final norm. Hugging Face models return the
last entry of ``hidden_states`` with the final norm already applied (in transformers 5 for
every family we use; ``LensParts.final_hidden_is_normed`` records it), so
:func:`residual_stream` replaces that entry with the input of the final norm, captured by
a hook. Then the logit lens of the last hidden state *is* the model's output (KL = 0; the
training and evaluation loops, which compute KL as sum p log p - sum p log q, report it
as ~1e-6 bits of float32 rounding) and every hidden state is read out the same way.

Training budget: :func:`train_tuned_lens` takes ``accumulate`` micro-batches per optimiser
step (gradient accumulation), so the tokens per step are not bounded by memory; the
tuned-lens library uses about 2^18 tokens per step. :func:`convergence` says from a training
curve whether it has settled (relative change of the KL over the last steps).

Pure maths (:func:`kl_bits`, :func:`lens_logits`, :class:`TunedLens`) works on tensors and
:func:`convergence` on a DataFrame; the functions that take a model run it; file I/O lives
only in :func:`save_lens` and :func:`load_lens` (safetensors, never pickle).
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import warnings
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from tying.analysis.convergence import convergence  # noqa: F401 - part of this module's API
from tying.cache.store import atomic_write
from tying.loading.device import as_device

LENSES = ("tuned", "logit")
"""Values of the ``lens`` column."""

LN2 = math.log(2.0)

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

CHUNK_TOKENS = 2048
"""Tokens per vocabulary-sized block: memory for logits stays at a few (chunk x vocab) arrays."""

_HASH_CHUNK = 1 << 22
"""Elements hashed at a time by :func:`unembedding_fingerprint`."""

_LENS_FORMAT = "tying-tuned-lens/1"


# --------------------------------------------------------------------------- model parts


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


def _model_device(model: nn.Module) -> torch.device:
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

    ids = torch.zeros((1, 1), dtype=torch.long, device=_model_device(model))
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


def _check_layer(layer, n_hidden: int) -> int:
    if isinstance(layer, bool):
        raise ValueError(f"layer must be an integer, got {layer!r}")
    try:
        idx = operator.index(layer)
    except TypeError:
        raise ValueError(f"layer must be an integer, got {layer!r}") from None
    if not 0 <= idx < n_hidden:
        raise ValueError(f"layer {idx} out of range: the model has {n_hidden} hidden states (0..{n_hidden - 1})")
    return idx


def _check_layers(layers, n_hidden: int) -> list[int]:
    if layers is None:
        return list(range(n_hidden))
    out = [_check_layer(layer, n_hidden) for layer in layers]
    if not out:
        raise ValueError("no layers selected")
    return out


def layer_label(layer: int) -> str:
    """Display name of hidden state ``layer``: "input" for 0, else the block number."""
    return "input" if layer == 0 else str(layer)


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


# --------------------------------------------------------------------------- maths on tensors


def _kl_nats_from_logprobs(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats over the last axis, from float32 log-probabilities (..., V) -> (...)."""
    p = logp.exp()
    terms = torch.where(p > 0, p * (logp - logq), torch.zeros((), dtype=p.dtype, device=p.device))
    return terms.sum(-1).clamp_min(0.0)


def _target_distribution(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, sum p log p) of the target: logits (n, V) -> float32 (n, V) and (n,)."""
    with torch.autocast(device_type=logits.device.type, enabled=False):
        logp = F.log_softmax(logits.float(), dim=-1)
        p = logp.exp()
        neg_entropy = torch.where(p > 0, p * logp, torch.zeros((), dtype=p.dtype, device=p.device)).sum(-1)
    return p, neg_entropy


def _kl_nats_to_target(p: torch.Tensor, neg_entropy: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """KL(p || softmax(logits)) in nats: p (n, V), neg_entropy (n,), logits (n, V) -> (n,).

    KL = sum p log p - sum p log q, with sum p log p computed once per target; this runs
    once per hidden state, so it is kept to a log_softmax and one product-sum.
    """
    with torch.autocast(device_type=logits.device.type, enabled=False):  # float32 throughout
        logq = F.log_softmax(logits.float(), dim=-1)
        return (neg_entropy - (p * logq).sum(-1)).clamp_min(0.0)


def kl_bits(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in bits at every position, from logits.

    p_logits, q_logits: tensors of shape (..., vocab). Returns a float32 tensor of shape
    (...). Computed in float32 through log_softmax; rounding below zero is clipped to 0.
    """
    if p_logits.shape != q_logits.shape:
        raise ValueError(f"logits of different shapes: {tuple(p_logits.shape)} and {tuple(q_logits.shape)}")
    logp = F.log_softmax(p_logits.float(), dim=-1)
    logq = F.log_softmax(q_logits.float(), dim=-1)
    return _kl_nats_from_logprobs(logp, logq) / LN2


class TunedLens(nn.Module):
    """One affine translator per hidden state, in residual form: h -> h + A_l h + b_l.

    Each translator is an ``nn.Linear(d_model, d_model)`` with zero weight and bias, so an
    untrained lens is exactly the identity (the tuned lens equals the logit lens).
    Parameters are float32. :func:`train_tuned_lens` leaves the last one at the identity:
    the last hidden state already gives the model's output.
    """

    def __init__(self, n_hidden: int, d_model: int):
        super().__init__()
        if n_hidden < 1 or d_model < 1:
            raise ValueError(f"a lens needs n_hidden >= 1 and d_model >= 1, got {n_hidden} and {d_model}")
        self.n_hidden = int(n_hidden)
        self.d_model = int(d_model)
        self.translators = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_hidden))
        with torch.no_grad():
            for t in self.translators:
                t.weight.zero_()
                t.bias.zero_()

    @classmethod
    def for_parts(cls, parts: LensParts) -> TunedLens:
        """An identity lens for the model described by ``parts``."""
        return cls(parts.n_hidden, parts.d_model)

    def forward(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Translate hidden state ``layer``: (..., d_model) -> (..., d_model), float32."""
        idx = _check_layer(layer, self.n_hidden)
        if h.shape[-1] != self.d_model:
            raise ValueError(f"hidden state of width {h.shape[-1]}, the lens expects {self.d_model}")
        translator = self.translators[idx]
        x = h.to(translator.weight.dtype)
        return x + translator(x)


def _module_dtype(module: nn.Module) -> torch.dtype | None:
    for p in module.parameters():
        return p.dtype
    return None


def _check_lens(lens: TunedLens | None, parts: LensParts):
    if lens is not None and (lens.n_hidden != parts.n_hidden or lens.d_model != parts.d_model):
        raise ValueError(
            f"the lens has {lens.n_hidden} translators of width {lens.d_model}, but the model has "
            f"{parts.n_hidden} hidden states of width {parts.d_model}"
        )


def lens_logits(parts: LensParts, h: torch.Tensor, layer: int, lens: TunedLens | None = None) -> torch.Tensor:
    """Logits read from hidden state ``layer``: (..., d_model) -> (..., vocab).

    ``h`` is a hidden state before the final norm (as :func:`residual_stream` gives it).
    With ``lens`` the tuned lens (translator, final norm, unembedding), without it the logit
    lens (final norm, unembedding). Gradients flow to the lens only if the model's
    parameters do not require them.
    """
    _check_layer(layer, parts.n_hidden)
    _check_lens(lens, parts)
    if lens is not None:
        h = lens(h, layer)
    dtype = _module_dtype(parts.unembed)
    if dtype is not None:
        h = h.to(dtype)
    if parts.final_norm is not None:
        h = parts.final_norm(h)
    return parts.unembed(h)


# --------------------------------------------------------------------------- running a model


@contextmanager
def _frozen(model: nn.Module):
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


def _autocast(device: torch.device, enabled: bool | None):
    use = device.type == "cuda" if enabled is None else bool(enabled and device.type == "cuda")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=use)


def _prepare(model: nn.Module, device, parts: LensParts | None) -> tuple[torch.device, LensParts]:
    dev = as_device(device) if device is not None else _model_device(model)
    if _model_device(model) != dev:
        model.to(dev)
    return dev, parts if parts is not None else find_lens_parts(model)


def _check_batches(batches) -> list[torch.Tensor]:
    if isinstance(batches, torch.Tensor):
        batches = [batches]
    batches = list(batches)
    if not batches:
        raise ValueError("no text to evaluate the lens on")
    for b in batches:
        if not isinstance(b, torch.Tensor) or b.ndim != 2 or b.dtype not in (torch.long, torch.int32, torch.int64):
            got = tuple(b.shape) if isinstance(b, torch.Tensor) else type(b).__name__
            raise ValueError(f"a batch must be an integer tensor of shape (batch, seq), got {got}")
        if b.numel() == 0:
            raise ValueError("empty batch: no text to evaluate the lens on")
    return batches


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def train_tuned_lens(
    model: nn.Module,
    batches: Sequence[torch.Tensor],
    *,
    steps: int = 250,
    lr: float | None = None,
    device=None,
    progress: Callable[[int, int, float], None] | None = None,
    optimizer: str = "sgd",
    momentum: float = 0.9,
    weight_decay: float = 1e-3,
    max_grad_norm: float = 1.0,
    lens: TunedLens | None = None,
    parts: LensParts | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    bf16: bool | None = None,
    accumulate: int = 1,
) -> tuple[TunedLens, pd.DataFrame]:
    """Train a tuned lens for ``model`` on ``batches``; the model stays frozen.

    batches: LongTensors of token ids, each of shape (batch, seq) (see :func:`text_batches`);
        taken in order, ``accumulate`` per step, and cycled when the steps need more.
    steps: optimiser steps. lr: peak learning rate (default 1.0 for "sgd", 1e-3 for "adam"),
        decayed linearly to 0 over the steps.
    accumulate: micro-batches per optimiser step (gradient accumulation). Each micro-batch's
        loss is weighted by its share of the step's tokens, so the accumulated gradient is
        that of one step on all of the step's tokens together (the mean KL over them); then
        one clip and one optimiser step. Only one micro-batch's activations are held at a time.
    optimizer: "sgd" (Nesterov momentum, learning rate scaled by 1 - momentum, as Belrose
        et al.) or "adam". The loss is the sum over hidden states of the mean
        KL(p_final || p_lens) in nats; gradients are clipped to ``max_grad_norm``. The last
        hidden state's translator is not trained (it stays the identity, KL = 0).
    device: where to run (default: the model's device; the model is moved there).
    progress: called after each step as ``progress(step, steps, mean_kl_bits)``.
    lens: continue training this lens instead of a fresh identity lens.
    chunk_tokens: tokens per vocabulary-sized block; memory is bounded by the batch's hidden
        states plus a few (chunk_tokens x vocab) float32 arrays.
    bf16: bf16 autocast (default: on CUDA only; the CPU always computes in the model's dtype).

    Returns (lens, curve): the trained lens and a DataFrame with columns step, layer,
    kl_bits (mean KL of each hidden state over all of that step's tokens, before the update).
    """
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    try:
        n_micro = None if isinstance(accumulate, bool) else operator.index(accumulate)
    except TypeError:
        n_micro = None
    if n_micro is None or n_micro < 1:
        raise ValueError(f"accumulate must be an integer of at least 1, got {accumulate!r}")
    accumulate = n_micro
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"unknown optimizer '{optimizer}' (choose sgd or adam)")
    batches = _check_batches(batches)
    dev, parts = _prepare(model, device, parts)
    lens = TunedLens.for_parts(parts) if lens is None else lens
    _check_lens(lens, parts)
    lens = lens.to(dev)
    # The last hidden state read through the identity *is* the model's output (KL = 0), so its
    # translator stays the identity: its gradient is rounding noise, which Adam would amplify.
    params = [q for layer in range(parts.n_hidden - 1) for q in lens.translators[layer].parameters()]
    if optimizer == "sgd":
        peak = 1.0 if lr is None else float(lr)
        opt = torch.optim.SGD(
            params, lr=peak * (1 - momentum), momentum=momentum, nesterov=momentum > 0, weight_decay=weight_decay
        )
    else:
        peak = 1e-3 if lr is None else float(lr)
        opt = torch.optim.Adam(params, lr=peak, betas=(momentum, 0.999), weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / steps))
    n_hidden, last = parts.n_hidden, parts.n_hidden - 1

    curve_step, curve_layer, curve_kl = [], [], []
    with _frozen(model):
        lens.train()
        for step in range(steps):
            micro = [batches[(step * accumulate + i) % len(batches)] for i in range(accumulate)]
            n_tok = sum(ids.numel() for ids in micro)  # every token of the step weighs the same
            kl_sum = torch.zeros(n_hidden, dtype=torch.float64, device=dev)
            opt.zero_grad(set_to_none=True)
            for ids in micro:
                with _autocast(dev, bf16):
                    hs = [h.reshape(-1, h.shape[-1]) for h in residual_stream(model, parts, ids.to(dev))]
                for rows in _chunks(hs[0].shape[0], chunk_tokens):
                    with torch.no_grad(), _autocast(dev, bf16):
                        p, neg_entropy = _target_distribution(lens_logits(parts, hs[last][rows], last))
                    for layer in range(n_hidden):
                        trained = layer < last
                        with _autocast(dev, bf16), torch.set_grad_enabled(trained):
                            logits = lens_logits(parts, hs[layer][rows], layer, lens)
                            kl = _kl_nats_to_target(p, neg_entropy, logits)
                        if trained:
                            (kl.sum() / n_tok).backward()
                        kl_sum[layer] += kl.detach().sum().double()
                        del logits, kl
                    del p, neg_entropy
                del hs
            if max_grad_norm and max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            opt.step()
            schedule.step()
            kl_step = (kl_sum / n_tok / LN2).cpu().numpy()
            curve_step += [step] * n_hidden
            curve_layer += list(range(n_hidden))
            curve_kl += kl_step.tolist()
            if progress is not None:
                progress(step + 1, steps, float(kl_step.mean()))
    lens.eval()
    curve = pd.DataFrame({"step": curve_step, "layer": curve_layer, "kl_bits": curve_kl})
    return lens, curve


def evaluate_lens(
    model: nn.Module,
    batches: Sequence[torch.Tensor],
    lens: TunedLens | None = None,
    *,
    device=None,
    layers: Iterable[int] | None = None,
    parts: LensParts | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    bf16: bool | None = None,
) -> pd.DataFrame:
    """Mean and spread over tokens of KL(p_final || p_lens) in bits, per hidden state and lens.

    batches: LongTensors of shape (batch, seq). lens: a trained TunedLens (rows for both the
    tuned and the logit lens) or None (logit lens only). layers: hidden states to evaluate
    (default all, 0 = input).

    Returns a DataFrame with columns layer, lens ("tuned" | "logit"), kl_mean, kl_std
    (population standard deviation over tokens), n_tokens.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    batches = _check_batches(batches)
    dev, parts = _prepare(model, device, parts)
    _check_lens(lens, parts)
    chosen = _check_layers(layers, parts.n_hidden)
    kinds = [("tuned", lens.to(dev)), ("logit", None)] if lens is not None else [("logit", None)]
    last = parts.n_hidden - 1
    sums = torch.zeros((len(kinds), len(chosen), 2), dtype=torch.float64, device=dev)
    n_tok = 0
    with _frozen(model), torch.no_grad():
        for ids in batches:
            with _autocast(dev, bf16):
                hs = [h.reshape(-1, h.shape[-1]) for h in residual_stream(model, parts, ids.to(dev))]
            n_tok += hs[0].shape[0]
            for rows in _chunks(hs[0].shape[0], chunk_tokens):
                with _autocast(dev, bf16):
                    p, neg_entropy = _target_distribution(lens_logits(parts, hs[last][rows], last))
                    for k, (_, tl) in enumerate(kinds):
                        for j, layer in enumerate(chosen):
                            logits = lens_logits(parts, hs[layer][rows], layer, tl)
                            kl = (_kl_nats_to_target(p, neg_entropy, logits) / LN2).double()
                            sums[k, j, 0] += kl.sum()
                            sums[k, j, 1] += (kl * kl).sum()
    sums = sums.cpu().numpy()
    mean = sums[..., 0] / n_tok
    std = np.sqrt(np.maximum(sums[..., 1] / n_tok - mean**2, 0.0))
    rows = []
    for k, (name, _) in enumerate(kinds):
        for j, layer in enumerate(chosen):
            rows.append((layer, name, float(mean[k, j]), float(std[k, j]), n_tok))
    return pd.DataFrame(rows, columns=["layer", "lens", "kl_mean", "kl_std", "n_tokens"])


def prediction_trajectory(
    model: nn.Module,
    tokenizer,
    text: str,
    lens: TunedLens | None,
    *,
    top_k: int = 5,
    max_tokens: int = 32,
    device=None,
    layers: Iterable[int] | None = None,
    parts: LensParts | None = None,
) -> pd.DataFrame:
    """Top-k next-token predictions of every hidden state at every position of ``text``.

    The text is tokenized (with the tokenizer's special tokens) and cut to ``max_tokens``.
    Returns a DataFrame with columns position, token (the input token there, decoded),
    layer, lens ("tuned" | "logit"; only "logit" when ``lens`` is None), rank (1 = top),
    prediction (decoded token) and prob (its probability under that lens): one row per
    position x layer x lens x rank.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no text to trace predictions on")
    if int(max_tokens) < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    dev, parts = _prepare(model, device, parts)
    _check_lens(lens, parts)
    chosen = _check_layers(layers, parts.n_hidden)
    ids = tokenizer(text, verbose=False)["input_ids"][: int(max_tokens)]
    if not ids:
        raise ValueError("no text to trace predictions on")
    n_vocab = None
    kinds = [("tuned", lens.to(dev)), ("logit", None)] if lens is not None else [("logit", None)]
    cols = {name: [] for name in ("position", "layer", "lens", "rank", "pred_id", "prob")}
    with _frozen(model), torch.no_grad():
        hs = residual_stream(model, parts, torch.tensor([ids], dtype=torch.long, device=dev))
        for name, tl in kinds:
            for layer in chosen:
                logits = lens_logits(parts, hs[layer][0], layer, tl).float()
                n_vocab = logits.shape[-1]
                if not 1 <= int(top_k) <= n_vocab:
                    raise ValueError(f"top_k must be between 1 and the vocabulary size ({n_vocab}), got {top_k}")
                probs, top = torch.softmax(logits, dim=-1).topk(int(top_k), dim=-1)
                n_pos, k = top.shape
                cols["position"].append(np.repeat(np.arange(n_pos), k))
                cols["layer"].append(np.full(n_pos * k, layer))
                cols["lens"].append(np.full(n_pos * k, name, dtype=object))
                cols["rank"].append(np.tile(np.arange(1, k + 1), n_pos))
                cols["pred_id"].append(top.reshape(-1).cpu().numpy())
                cols["prob"].append(probs.reshape(-1).cpu().numpy().astype(np.float64))
    flat = {key: np.concatenate(parts_) for key, parts_ in cols.items()}
    decoded = {}

    def decode(i: int) -> str:
        if i not in decoded:
            decoded[i] = tokenizer.decode([i])
        return decoded[i]

    input_tokens = [decode(i) for i in ids]
    return pd.DataFrame(
        {
            "position": flat["position"],
            "token": [input_tokens[p] for p in flat["position"]],
            "layer": flat["layer"],
            "lens": flat["lens"],
            "rank": flat["rank"],
            "prediction": [decode(int(i)) for i in flat["pred_id"]],
            "prob": flat["prob"],
        }
    )


def text_batches(
    tokenizer,
    texts: str | Iterable[str],
    *,
    seq_len: int = 128,
    batch_size: int = 8,
    max_tokens: int | None = None,
) -> list[torch.Tensor]:
    """Token-id batches for training and evaluating a lens.

    Each text is tokenized (with the tokenizer's special tokens); texts are joined into one
    stream, separated by the end-of-text token when the tokenizer has one, and the stream
    is cut at ``max_tokens``. The stream is split into chunks of ``seq_len`` tokens, stacked
    ``batch_size`` at a time into LongTensors of shape (batch, seq_len); a last partial
    chunk forms its own batch of shape (1, remainder), so no token is dropped.

    Raises ValueError("no text to evaluate the lens on") when the texts hold no tokens.
    """
    if int(seq_len) < 1 or int(batch_size) < 1:
        raise ValueError(f"seq_len and batch_size must be positive, got {seq_len} and {batch_size}")
    if max_tokens is not None and int(max_tokens) < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    if isinstance(texts, str):
        texts = [texts]
    eos = getattr(tokenizer, "eos_token_id", None)
    stream: list[int] = []
    for text in texts:
        if max_tokens is not None and len(stream) >= max_tokens:
            break
        if not isinstance(text, str) or not text.strip():
            continue
        ids = list(tokenizer(text, verbose=False)["input_ids"])
        if not ids:
            continue
        if stream and eos is not None and stream[-1] != eos and ids[0] != eos:
            stream.append(eos)
        stream.extend(ids)
    if max_tokens is not None:
        stream = stream[: int(max_tokens)]
    if not stream:
        raise ValueError("no text to evaluate the lens on")
    tokens = torch.tensor(stream, dtype=torch.long)
    n_full = len(stream) // seq_len
    full = tokens[: n_full * seq_len].reshape(n_full, seq_len)
    batches = [full[i : i + batch_size] for i in range(0, n_full, batch_size)]
    rest = tokens[n_full * seq_len :]
    if rest.numel():
        batches.append(rest.reshape(1, -1))
    return batches


# --------------------------------------------------------------------------- saving and loading


def unembedding_fingerprint(parts: LensParts) -> str:
    """SHA-256 (hex) of the unembedding's and final norm's tensors, as float32 with names and shapes.

    A lens is only meaningful with the unembedding and norm it was trained through; the
    fingerprint is stored with a saved lens and checked on loading. Hashing float32 values
    makes the fingerprint the same whether the model was loaded in float32 or in a wider
    dtype holding the same numbers.
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
            for rows in _chunks(flat.numel(), _HASH_CHUNK):
                digest.update(flat[rows].to(torch.float32).cpu().numpy().tobytes())
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def save_lens(lens: TunedLens, path, fingerprint: str, meta: dict | None = None) -> Path:
    """Save ``lens`` to ``path`` (safetensors) with a JSON sidecar next to it (same name, .json).

    The fingerprint (see :func:`unembedding_fingerprint`) and the shapes go into the
    safetensors header; the sidecar repeats them with ``meta`` (JSON-serialisable: model id,
    training settings, ...). Each file is written to a temporary file and renamed, so a
    crash never leaves a half-written lens. Returns the path.
    """
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {name: t.detach().to("cpu", torch.float32).contiguous() for name, t in lens.state_dict().items()}
    header = {
        "format": _LENS_FORMAT,
        "fingerprint": str(fingerprint),
        "n_hidden": str(lens.n_hidden),
        "d_model": str(lens.d_model),
    }
    sidecar = {
        "format": _LENS_FORMAT,
        "fingerprint": str(fingerprint),
        "n_hidden": lens.n_hidden,
        "d_model": lens.d_model,
        "meta": meta or {},
    }
    try:
        text = json.dumps(sidecar, indent=2, sort_keys=True, default=str)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=header))
        atomic_write(_sidecar(path), lambda tmp: Path(tmp).write_text(text + "\n"))
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
    if header.get("format") != _LENS_FORMAT:
        raise ValueError(f"{path} is not a saved tuned lens")
    return header


def read_lens_meta(path) -> dict:
    """The JSON sidecar of a lens saved at ``path`` (fingerprint, shapes and the saved ``meta``)."""
    path = Path(path)
    _read_header(path)
    try:
        return json.loads(_sidecar(path).read_text())
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
        lens.load_state_dict(load_file(str(path)), strict=True)
    except (RuntimeError, KeyError) as exc:
        raise ValueError(f"the lens at {path} does not match its header: {exc}") from exc
    lens.eval()
    return lens if device is None else lens.to(as_device(device))
