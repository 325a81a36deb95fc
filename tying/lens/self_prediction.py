"""Self-prediction: how often a lens reads back the token that was typed.

At every hidden state, a lens turns the state into logits over the vocabulary; its top-1 is the
token the lens "reads". At hidden state 0 (the embedding of the input token) a tied model's
logit lens multiplies the input token's own row of T by T, and the largest product is, for rows
of similar norms, that row with itself: the lens returns the typed token, not a guess at the
next one. That is why a tied model's early layers look hard to read through the logit lens.

:func:`self_prediction` counts, per lens (logit, tuned), readout matrix and hidden state, the
positions whose top-1 is the input token itself. An untied model is read through its output
matrix O (its own readout) and, with the logit lens, through its input matrix I as well (a
lens through each matrix); a tied model through T. A tuned lens is read through its model's own
readout only (its translators were trained for it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd
import torch
from torch import nn

from tying.lens.lenses import LogitLens
from tying.lens.parts import LensParts, find_lens_parts, residual_stream
from tying.lens.run import CHUNK_TOKENS, chunks, frozen, prepare

COLUMNS = ("lens", "matrix", "layer", "share", "n_positions")


def readouts(model: nn.Module, parts: LensParts, tied: bool) -> dict[str, LensParts]:
    """The readout matrices a model is read through: ``{"T": parts}`` for a tied model, ``{"O":
    parts, "I": parts reading through the input embedding}`` for an untied one."""
    if tied:
        return {"T": parts}
    through_input = nn.Linear(parts.d_model, model.get_input_embeddings().weight.shape[0], bias=False)
    through_input.weight = model.get_input_embeddings().weight
    return {"O": parts, "I": replace(parts, unembed=through_input)}


def self_prediction(model: nn.Module, batches: Sequence[torch.Tensor], *, tied: bool, tuned=None, device=None,
                    parts: LensParts | None = None, chunk_tokens: int = CHUNK_TOKENS) -> pd.DataFrame:
    """Share of positions whose top-1 under each lens and readout is the input token itself, per
    hidden state (0 = the embedding output). ``batches``: token ids (batch, seq); ``tuned``: the
    model's tuned lens, or None (the logit lens alone). Columns :data:`COLUMNS`."""
    dev, parts = prepare(model, device, parts if parts is not None else find_lens_parts(model))
    reads = readouts(model, parts, tied)
    lenses = [("logit", LogitLens(), name, p) for name, p in reads.items()]
    if tuned is not None:
        own = "T" if tied else "O"
        lenses.append(("tuned", tuned.to(dev), own, reads[own]))
    hits = torch.zeros((len(lenses), parts.n_hidden), dtype=torch.float64)
    n = 0
    with frozen(model), torch.no_grad():
        for ids in batches:
            ids = ids.to(dev)
            hs = [h.reshape(-1, h.shape[-1]) for h in residual_stream(model, parts, ids)]
            typed = ids.reshape(-1)
            n += typed.numel()
            for rows in chunks(typed.numel(), chunk_tokens):
                for k, (_, lens, _, p) in enumerate(lenses):
                    for layer in range(parts.n_hidden):
                        top = lens.logits(p, hs[layer][rows], layer).argmax(dim=-1)
                        hits[k, layer] += (top == typed[rows]).sum().item()
    return pd.DataFrame([(name, matrix, layer, float(hits[k, layer] / max(n, 1)), n)
                         for k, (name, _, matrix, _) in enumerate(lenses) for layer in range(parts.n_hidden)],
                        columns=list(COLUMNS))
