"""Logit lens and tuned lens: how well each hidden state already predicts the output (analysis 4).

Belrose et al. 2023 (arXiv 2303.08112). One job per module:

* :mod:`tying.lens.parts`: finding a model's final norm and unembedding, and its hidden
  states before the final norm (:func:`~tying.lens.parts.find_lens_parts`,
  :func:`~tying.lens.parts.residual_stream`);
* :mod:`tying.lens.lenses`: the maths on tensors: :class:`~tying.lens.lenses.LogitLens` and
  :class:`~tying.lens.lenses.TunedLens` (one interface: ``name`` and
  ``logits(parts, h, layer)``) and the KL in bits (:func:`~tying.lens.lenses.kl_bits`);
* :mod:`tying.lens.train`: training a tuned lens on a frozen model, with gradient accumulation;
* :mod:`tying.lens.estimate`: how long that training will take, from a timed micro-batch;
* :mod:`tying.lens.evaluate`: the KL of every hidden state under given lenses, and top-k
  prediction trajectories;
* :mod:`tying.lens.follow`: following a token through the hidden states on arrays (torch-free):
  the commitment hidden state, a pinned token's probability from stored top-k rows;
* :mod:`tying.lens.batches`: token-id batches from text;
* :mod:`tying.lens.run`: running a frozen model (device, autocast, token blocks);
* :mod:`tying.lens.files`: saving and loading a tuned lens (safetensors, fingerprinted);
* :mod:`tying.lens.shards`: a lens over 10 MB, saved in float16 parts of at most 10 MB;
* :mod:`tying.lens.interop`: a tuned lens in the ``tuned-lens`` library's format, out
  (``export-lens``) and in (``--lens-from``).

Whether a training curve has settled is :func:`tying.analysis.convergence.convergence`
(torch-free, for the app).

Why not the ``tuned-lens`` package (AlignmentResearch): its last release, 0.2.0 (July
2023), installs accelerate, datasets, plotly, torchdata, wandb, simple-parsing and
flatten-dict, none of which this project requires (datasets is optional here, for
``hf:<dataset>`` lens text only); its training and evaluation
scripts import torchdata's DataLoader2 and datapipes, which torchdata deprecated in 2024 and
has since removed; it was written against transformers 4 (it asks for transformers >=
4.28.1) and has had no release since, while this project runs transformers 5; and its
lenses are saved and loaded as torch pickles (``torch.save``/``torch.load``), where this
project keeps safetensors only, stored with a fingerprint of the unembedding they were
trained through. What is needed here is small: an affine translator per hidden state and
the KL to the model's own output (:mod:`tying.lens.lenses`, under 200 lines), trained and
evaluated on the model's own final norm and unembedding. The two meet in the lens format:
:mod:`tying.lens.interop` writes our lenses as the library loads them and reads the
library's (``params.pt`` with ``torch.load(weights_only=True)``).

This package's ``__init__`` imports nothing (no torch): importing a submodule imports torch,
but the package itself, and :class:`LensBudget` below, stay usable in the torch-free app.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

LIBRARY_STEPS, LIBRARY_TOKENS_PER_STEP = 250, 2**18
"""The tuned-lens library's default training budget (its ``train`` command: 250 steps of 2^18
tokens, 65.5M tokens): what a lens trained with less is set against. LIBRARY_STEPS is also this
project's default number of steps (``--lens-steps``), declared here once."""


@dataclass(frozen=True)
class LensBudget:
    """What one model's tuned lens trains with: ``steps`` optimiser steps of ``tokens_per_step``
    tokens, each gathered over ``accumulate`` micro-batches of ``batch_size`` x ``seq_len``, on
    ``train_tokens`` tokens of text (``text_tokens``: what the text gave; ``device``: where it ran;
    ``lens_from``: the folder of a lens read rather than trained). The lens stage resolves it once
    per model, trains with it, saves it beside the lens and records it in the cache."""

    steps: int = LIBRARY_STEPS
    tokens_per_step: int = 0
    accumulate: int = 1
    batch_size: int = 8
    seq_len: int = 128
    train_tokens: int = 0
    text_tokens: int | None = None
    device: str | None = None
    lens_from: str | None = None

    @property
    def tokens_seen(self) -> int:
        """Tokens the training read: steps x tokens per step."""
        return int(self.steps) * int(self.tokens_per_step)

    def to_dict(self) -> dict:
        """The budget as the cache and the lens's sidecar record it (unset fields left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> LensBudget:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def recorded(cls, budget: dict | None, role: str) -> LensBudget | None:
        """The budget a cache's lens stage recorded for model ``role`` (its ``budget``
        parameter), None when none. Caches written since issue 18 record one per model,
        ``{role: {steps, tokens_per_step, ...}}`` (the sequence length capped at each model's
        context); older caches one flat budget for both, resolved before the models' contexts
        were known: the one place both shapes are read."""
        if not budget:
            return None
        one = budget if "steps" in budget else budget.get(role)
        return cls.from_dict(one) if one else None


def upper_bound_note(budget: LensBudget | None, role: str) -> str:
    """'' for a lens trained on the library's budget or more (or none); else one sentence: how
    briefly the ``role`` model's tuned lens was trained, against the library's default, and that
    its KL is then an upper bound on what a fully trained lens reads."""
    seen, full = (budget.tokens_seen if budget else 0), LIBRARY_STEPS * LIBRARY_TOKENS_PER_STEP
    if not seen or seen >= full:
        return ""
    return (f"The {role} model's tuned lens trained on {seen:,} tokens ({budget.steps:,} steps x "
            f"{budget.tokens_per_step:,}), {seen / full:.2%} of the tuned-lens library's default budget "
            f"({LIBRARY_STEPS} steps x {LIBRARY_TOKENS_PER_STEP:,} = {full / 1e6:.1f}M tokens): a briefly trained "
            "translator reads the layers less well than a fully trained one, so its KL is an upper bound.")
