"""Reading a model through lenses: the KL of every hidden state, and top-k prediction trajectories."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from tying.lens.batches import check_batches
from tying.lens.lenses import LN2, Lens, LogitLens, check_lenses, kl_nats_to_target, target_distribution
from tying.lens.parts import LensParts, check_layers, residual_stream
from tying.lens.run import CHUNK_TOKENS, autocast, chunks, frozen, prepare

LOGIT_ONLY = (LogitLens(),)
"""The default lenses: the logit lens alone."""


def evaluate_lens(
    model: nn.Module,
    batches: Sequence[torch.Tensor],
    lenses: Lens | Sequence[Lens] = LOGIT_ONLY,
    *,
    device=None,
    layers: Iterable[int] | None = None,
    parts: LensParts | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
    bf16: bool | None = None,
) -> pd.DataFrame:
    """Mean and spread over tokens of KL(p_final || p_lens) in bits, per hidden state and lens.

    batches: LongTensors of shape (batch, seq). lenses: a lens or several of distinct kinds,
    e.g. ``[tuned, LogitLens()]`` (default: the logit lens alone). layers: hidden states to
    evaluate (default all, 0 = input).

    Returns a DataFrame with columns layer, lens (each lens's ``name``, in the order given),
    kl_mean, kl_std (population standard deviation over tokens), n_tokens.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    batches = check_batches(batches)
    dev, parts = prepare(model, device, parts)
    kinds = [lens.to(dev) for lens in check_lenses(lenses, parts)]
    chosen = check_layers(layers, parts.n_hidden)
    last = parts.n_hidden - 1
    logit = LogitLens()
    sums = torch.zeros((len(kinds), len(chosen), 2), dtype=torch.float64, device=dev)
    n_tok = 0
    with frozen(model), torch.no_grad():
        for ids in batches:
            with autocast(dev, bf16):
                hs = [h.reshape(-1, h.shape[-1]) for h in residual_stream(model, parts, ids.to(dev))]
            n_tok += hs[0].shape[0]
            for rows in chunks(hs[0].shape[0], chunk_tokens):
                with autocast(dev, bf16):
                    p, neg_entropy = target_distribution(logit.logits(parts, hs[last][rows], last))
                    for k, lens in enumerate(kinds):
                        for j, layer in enumerate(chosen):
                            logits = lens.logits(parts, hs[layer][rows], layer)
                            kl = (kl_nats_to_target(p, neg_entropy, logits) / LN2).double()
                            sums[k, j, 0] += kl.sum()
                            sums[k, j, 1] += (kl * kl).sum()
    sums = sums.cpu().numpy()
    mean = sums[..., 0] / n_tok
    std = np.sqrt(np.maximum(sums[..., 1] / n_tok - mean**2, 0.0))
    rows = []
    for k, lens in enumerate(kinds):
        for j, layer in enumerate(chosen):
            rows.append((layer, lens.name, float(mean[k, j]), float(std[k, j]), n_tok))
    return pd.DataFrame(rows, columns=["layer", "lens", "kl_mean", "kl_std", "n_tokens"])


def prediction_trajectory(
    model: nn.Module,
    tokenizer,
    text: str,
    lenses: Lens | Sequence[Lens] = LOGIT_ONLY,
    *,
    top_k: int = 5,
    max_tokens: int = 32,
    device=None,
    layers: Iterable[int] | None = None,
    parts: LensParts | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> pd.DataFrame:
    """Top-k next-token predictions of every hidden state at every position of ``text``.

    The text is tokenized (with the tokenizer's special tokens) and cut to ``max_tokens``, and
    to the model's context (``config.max_position_embeddings``) when it has one.
    lenses: a lens or several of distinct kinds (default: the logit lens alone). Returns a
    DataFrame with columns position, token (the input token there, decoded), layer, lens
    (each lens's ``name``), rank (1 = top), prediction (decoded token) and prob (its
    probability under that lens): one row per position x layer x lens x rank. ``progress``:
    called with (lens name, layer) after each hidden state is read through each lens.
    """
    ids = text_ids(model, tokenizer, text, max_tokens)
    dev, parts = prepare(model, device, parts)
    kinds = [lens.to(dev) for lens in check_lenses(lenses, parts)]
    chosen = check_layers(layers, parts.n_hidden)
    cols = {name: [] for name in ("position", "layer", "lens", "rank", "pred_id", "prob")}
    with frozen(model), torch.no_grad():
        hs = residual_stream(model, parts, torch.tensor([ids], dtype=torch.long, device=dev))
        for lens in kinds:
            for layer in chosen:
                logits = lens.logits(parts, hs[layer][0], layer).float()
                n_vocab = logits.shape[-1]
                if not 1 <= int(top_k) <= n_vocab:
                    raise ValueError(f"top_k must be between 1 and the vocabulary size ({n_vocab}), got {top_k}")
                probs, top = torch.softmax(logits, dim=-1).topk(int(top_k), dim=-1)
                n_pos, k = top.shape
                cols["position"].append(np.repeat(np.arange(n_pos), k))
                cols["layer"].append(np.full(n_pos * k, layer))
                cols["lens"].append(np.full(n_pos * k, lens.name, dtype=object))
                cols["rank"].append(np.tile(np.arange(1, k + 1), n_pos))
                cols["pred_id"].append(top.reshape(-1).cpu().numpy())
                cols["prob"].append(probs.reshape(-1).cpu().numpy().astype(np.float64))
                if progress is not None:
                    progress(lens.name, layer)
    flat = {key: np.concatenate(parts_) for key, parts_ in cols.items()}
    decoded = {}

    def decode(i: int) -> str:
        if i not in decoded:
            decoded[i] = tokenizer.decode([i])
        return decoded[i]

    return trajectory_frame(flat, [decode(i) for i in ids], decode)


def text_ids(model: nn.Module, tokenizer, text: str, max_tokens: int) -> list[int]:
    """The token ids a trajectory reads: ``text`` tokenized (with the tokenizer's special tokens),
    cut to ``max_tokens`` and to the model's context. ValueError for an empty text."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no text to trace predictions on")
    if int(max_tokens) < 1:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    limit = int(max_tokens) if not context else min(int(max_tokens), int(context))
    ids = tokenizer(text, verbose=False)["input_ids"][:limit]
    if not ids:
        raise ValueError("no text to trace predictions on")
    return ids


def pinned_probabilities(
    model: nn.Module,
    tokenizer,
    text: str,
    lenses: Lens | Sequence[Lens],
    token_ids: Sequence[int],
    *,
    max_tokens: int = 32,
    device=None,
    parts: LensParts | None = None,
) -> pd.DataFrame:
    """The probability of each of ``token_ids`` at every hidden state and position of ``text``
    under each lens, read from the full softmax (the same text and cut as
    :func:`prediction_trajectory`, whose ``prob`` it equals where a token is in the top k).

    Returns a DataFrame with columns position, layer, lens, token_id, prob: one row per
    position x layer x lens x token id.
    """
    ids = text_ids(model, tokenizer, text, max_tokens)
    dev, parts = prepare(model, device, parts)
    kinds = [lens.to(dev) for lens in check_lenses(lenses, parts)]
    wanted = torch.tensor([int(i) for i in token_ids], dtype=torch.long, device=dev)
    frames = []
    with frozen(model), torch.no_grad():
        hs = residual_stream(model, parts, torch.tensor([ids], dtype=torch.long, device=dev))
        for lens in kinds:
            for layer in range(parts.n_hidden):
                probs = torch.softmax(lens.logits(parts, hs[layer][0], layer).float(), dim=-1)[:, wanted]
                n_pos, n_pin = probs.shape
                frames.append(pd.DataFrame({
                    "position": np.repeat(np.arange(n_pos), n_pin), "layer": layer, "lens": lens.name,
                    "token_id": np.tile(wanted.cpu().numpy(), n_pos),
                    "prob": probs.reshape(-1).cpu().numpy().astype(np.float64)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["position", "layer", "lens", "token_id", "prob"])


def trajectory_frame(flat: dict, input_tokens: list[str], decode) -> pd.DataFrame:
    """The lens_trajectory rows from flat columns (position, layer, lens, rank, pred_id, prob):
    each position's input token and each prediction decoded to text."""
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
