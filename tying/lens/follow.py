"""Following a token through the hidden states (pure functions on arrays, no torch, no I/O).

* :func:`commitment`: per position, the first hidden state from which the final top-1
  prediction stays top-1 at every later hidden state;
* :func:`pinned_from_ranked`: a pinned token's probability at each cell from stored top-k rows,
  NaN where the token was outside the top k (with the k-th probability, a bound it stays under);
* :func:`pin_ids`: a pinned text's token id in a vocabulary of decoded texts.
"""

from __future__ import annotations

import numpy as np


def commitment(top1: np.ndarray) -> np.ndarray:
    """The commitment hidden state of each position.

    top1: array of shape (n_states, n_positions), the top-1 prediction (a token id or its text)
    of each hidden state (0 = input embedding, last = the model's output) at each position.
    Returns an int array of shape (n_positions,): for each position the least ``s`` such that
    ``top1[t, p] == top1[-1, p]`` for every ``t >= s``. A position whose top-1 never changes
    commits at 0; one whose top-1 first becomes the final one at the last state commits at
    ``n_states - 1``.
    """
    top1 = np.asarray(top1)
    if top1.ndim != 2 or top1.shape[0] < 1:
        raise ValueError(f"top1 must have shape (n_states >= 1, n_positions), got {top1.shape}")
    same = top1 == top1[-1:]  # (n_states, n_positions): agrees with the final top-1
    # the run of agreement that ends at the last state: its length, counted from the end
    run = np.cumprod(same[::-1], axis=0).sum(axis=0)
    return (top1.shape[0] - run).astype(int)


def pinned_from_ranked(predictions: np.ndarray, probs: np.ndarray, pin) -> tuple[np.ndarray, np.ndarray]:
    """A pinned token's probability in each cell, from that cell's stored top k.

    predictions, probs: arrays of shape (n_cells, k), each cell's top-k predictions (best first)
    and their probabilities; pin: the token (as ``predictions`` holds it). Returns
    ``(prob, bound)``, each of shape (n_cells,): ``prob`` the pin's probability where it is among
    the cell's k, NaN where it is not (unknown, never guessed); ``bound`` the cell's k-th
    probability where it is not (the pin's probability is at most that), NaN where it is.
    """
    predictions, probs = np.asarray(predictions, dtype=object), np.asarray(probs, dtype=float)
    if predictions.shape != probs.shape or predictions.ndim != 2:
        raise ValueError(f"predictions and probs must have one shape (n_cells, k), got {predictions.shape} "
                         f"and {probs.shape}")
    hit = predictions == pin
    found = hit.any(axis=1)
    first = probs[np.arange(len(probs)), hit.argmax(axis=1)] if probs.shape[1] else np.full(len(probs), np.nan)
    prob = np.where(found, first, np.nan)  # its best rank (two tokens that read alike: the likelier)
    bound = np.where(found, np.nan, np.nanmin(probs, axis=1) if probs.shape[1] else np.nan)
    return prob, bound


def pin_ids(vocabulary, pins) -> dict[str, int | None]:
    """Each pinned text's token id: the first id whose decoded text (``vocabulary[i]``) is exactly
    the pin, None for a text that is no single token of this vocabulary."""
    wanted = {str(p): None for p in pins}
    for i, text in enumerate(vocabulary):
        if text in wanted and wanted[text] is None:
            wanted[text] = i
    return wanted
