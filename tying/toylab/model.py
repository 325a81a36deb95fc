"""Toy Llama models and their tied/untied twins.

Models built from one seed share everything but the tying: the same architecture, the same
initial value of every non-embedding parameter, and one initial embedding matrix ``W0`` that is
the tied model's matrix *and* both the untied model's input matrix ``I0`` and output matrix
``O0``. The toy lab's comparisons build the untied twin (and the second tied run, the ceiling)
from a seed of its own (:func:`tying.toylab.train.variant_seeds`): independently trained models,
as the paper compares; one seed for all is the shared-start control.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from tying.errors import UserError

TIED_VARIANTS = ("tied", "tied_scaled", "tied_rerun")
"""Variants whose input and output matrices are one shared matrix."""

VARIANTS = ("tied", "untied", "tied_scaled", "tied_rerun")
"""Every variant the toy lab trains: tied, untied, tied with a scaled input-side gradient, and a
second tied run T' (the tied recipe from another start and batch order: the ceiling, how alike
two runs of T are)."""


SEED_OFFSETS = {"tied": 0, "tied_scaled": 0, "untied": 1_000_003, "tied_rerun": 2_000_003}
"""What each variant adds to a run's seed for its own initial draw and batch order
(:func:`variant_seeds`): far apart, so that no seed of one variant is another's in any sweep."""

def check_variant(name: str) -> bool:
    """True if ``name`` is a tied variant, False if untied; UserError for an unknown name."""
    if name not in VARIANTS:
        raise UserError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    return name in TIED_VARIANTS


def toy_config(
    vocab_size: int,
    d_model: int = 128,
    n_layers: int = 4,
    n_heads: int = 4,
    d_ff: int | None = None,
    context: int = 64,
    tied: bool = True,
):
    """A small ``LlamaConfig`` (pre-norm, RoPE, SwiGLU, no biases, no dropout).

    Args:
        vocab_size: rows of the embedding matrix.
        d_model: residual width; must be divisible by ``n_heads``.
        n_layers, n_heads: depth and attention heads (no grouped-query attention).
        d_ff: width of the feed-forward layer; default ``4 * d_model``.
        context: the longest sequence the model is used on (``max_position_embeddings``).
        tied: ``tie_word_embeddings``: one matrix for input and output.
    """
    from transformers import LlamaConfig

    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=d_model,
        intermediate_size=d_ff or 4 * d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        head_dim=d_model // n_heads,
        max_position_embeddings=context,
        initializer_range=0.02,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tied,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=None,
        use_cache=False,
    )


def build_twins(config_kwargs: dict, seed: int, variants=("tied", "untied"),
                draw_d_ff: int | None = None) -> dict[str, torch.nn.Module]:
    """Build one ``LlamaForCausalLM`` per variant, all with the same initial weights.

    Initialisation: with ``torch.manual_seed(seed)`` one untied model is built by the
    library's own initialiser (normal, std 0.02). Its input matrix becomes ``W0``. Every
    variant then gets a copy of every non-embedding parameter and of ``W0`` as its input
    matrix; untied variants also get a *copy of* ``W0`` *as the output matrix* (rather than
    a second independent draw), so at step 0 ``T = I = O`` and the untied output matrix
    starts no nearer to or farther from the tied matrix than the untied input matrix does:
    whatever separates them later is training alone. It also makes the twins compute the
    very same function at step 0.

    Args:
        config_kwargs: keyword arguments of :func:`toy_config` other than ``tied``.
        seed: seed of the shared initialisation.
        variants: names from :data:`VARIANTS`.
        draw_d_ff: the feed-forward width the initial weights are drawn at (default the
            model's): a wider model (the sweep's parameter-matched arm) then starts from the
            very draw of the twins of width ``draw_d_ff`` (:func:`widen_feed_forward`).

    Returns:
        ``{variant: model}``, models on the CPU in training mode.
    """
    from transformers import LlamaForCausalLM

    kwargs = {k: v for k, v in config_kwargs.items() if k != "tied"}
    tied_flags = {name: check_variant(name) for name in variants}
    torch.manual_seed(seed)
    drawn = dict(kwargs, d_ff=draw_d_ff) if draw_d_ff else kwargs
    source = LlamaForCausalLM(toy_config(tied=False, **drawn))
    w0 = source.get_input_embeddings().weight.detach().clone()
    body = {
        name: p.detach()
        for name, p in source.named_parameters()
        if p is not source.get_input_embeddings().weight and p is not source.get_output_embeddings().weight
    }
    models: dict[str, torch.nn.Module] = {}
    for name, tied in tied_flags.items():
        model = LlamaForCausalLM(toy_config(tied=tied, **kwargs))
        inp = model.get_input_embeddings().weight
        out = model.get_output_embeddings().weight
        if (inp is out) != tied:
            raise RuntimeError(f"variant {name}: tying of the built model does not match (tied={tied})")
        with torch.no_grad():
            inp.copy_(w0)
            if not tied:
                out.copy_(w0)
            for pname, p in model.named_parameters():
                if p is inp or p is out:
                    continue
                p.copy_(body[pname] if body[pname].shape == p.shape else
                        widen_feed_forward(pname, body[pname], p.shape, seed))
        model.train()
        models[name] = model
    return models


def widen_feed_forward(name: str, drawn: torch.Tensor, shape, seed: int) -> torch.Tensor:
    """A feed-forward weight of a wider model made from one drawn at a narrower width: the drawn
    units first, unchanged, then new units drawn like them (normal, std 0.02, from ``seed``).

    ``gate_proj``/``up_proj`` (d_ff x d) gain rows; ``down_proj`` (d x d_ff) gains columns and is
    then scaled by sqrt(drawn d_ff / wider d_ff): the output sums over the hidden units, so its
    variance at step 0 is the narrow model's. A tensor of another kind raises ValueError."""
    shape = tuple(shape)
    down = name.endswith("down_proj.weight")
    axis = 1 if down else 0
    if not name.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight")) or \
            shape[1 - axis] != drawn.shape[1 - axis] or shape[axis] < drawn.shape[axis]:
        raise ValueError(f"{name}: cannot widen {tuple(drawn.shape)} to {shape}")
    gen = torch.Generator().manual_seed(int(seed) + sum(map(ord, name)))  # a stream per tensor, fixed by name
    extra = list(shape)
    extra[axis] = shape[axis] - drawn.shape[axis]
    out = torch.cat([drawn.detach().cpu().float(), torch.randn(extra, generator=gen) * 0.02], dim=axis)
    if down:
        out = out * math.sqrt(drawn.shape[1] / shape[1])
    return out.to(drawn.dtype)


def embedding_matrices(model) -> tuple[torch.Tensor, torch.Tensor]:
    """The (input, output) matrices of a causal LM, each of shape (n_vocab, d); one tensor twice when tied."""
    return model.get_input_embeddings().weight, model.get_output_embeddings().weight


def variant_seeds(seed: int, variants: Sequence[str], shared_start: bool = False) -> dict[str, int]:
    """``{variant: seed of its initial weights and batch order}`` for a run of seed ``seed``:
    ``seed`` plus the variant's :data:`SEED_OFFSETS` (independent twins), or ``seed`` for every
    variant with ``shared_start`` (same start, same batches)."""
    for name in variants:
        check_variant(name)
    return {name: int(seed) if shared_start else int(seed) + SEED_OFFSETS[name] for name in variants}
