"""Token-id batches for training and evaluating a lens: text -> (batch, seq) LongTensors."""

from __future__ import annotations

from collections.abc import Iterable

import torch


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


def check_batches(batches) -> list[torch.Tensor]:
    """``batches`` (one tensor or several) as a list of non-empty integer (batch, seq) tensors."""
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
