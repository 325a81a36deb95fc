"""A byte-level BPE trained on the toy corpus, and the corpus as one array of token ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tying.errors import UserError
from tying.loading.corpus import PARAGRAPH_BREAK

EOS = "<|endoftext|>"
"""The one special token: ends every document (paragraph) of the encoded corpus."""

N_BYTES = 256
"""Byte-level BPE always holds the 256 byte tokens."""


def train_bpe(text: str, vocab_size: int, out_dir):
    """Train a byte-level BPE of ``vocab_size`` entries on ``text`` and save it to ``out_dir``.

    The vocabulary is the 256 byte tokens, the special token :data:`EOS` (also used as
    bos, eos and pad) and the merges learnt from ``text`` (paragraphs trained as separate
    sequences). The folder loads with ``AutoTokenizer.from_pretrained(out_dir)``.

    Returns:
        The ``PreTrainedTokenizerFast``.

    Raises:
        UserError: ``vocab_size`` below 257, or more merges asked than the corpus has pairs
            to merge ("vocabulary of N tokens asked, the corpus supports only M").
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    smallest = N_BYTES + 1
    if vocab_size < smallest:
        raise UserError(f"vocabulary size must be at least {smallest} (256 bytes and {EOS}), got {vocab_size}")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(text.split(PARAGRAPH_BREAK), trainer=trainer)
    got = bpe.get_vocab_size(with_added_tokens=True)
    if got < vocab_size:
        raise UserError(f"vocabulary of {vocab_size} tokens asked, the corpus supports only {got}")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=EOS, eos_token=EOS, pad_token=EOS)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def encode_corpus(tokenizer, text: str) -> np.ndarray:
    """All token ids of ``text``: its paragraphs encoded separately, each followed by the eos token.

    Returns:
        int32 array of shape (n_tokens,).
    """
    eos = tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no eos token to separate documents")
    docs = [p for p in text.split(PARAGRAPH_BREAK) if p]
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is not None:
        encoded = [e.ids for e in backend.encode_batch(docs, add_special_tokens=False)]
    else:
        encoded = [tokenizer.encode(d, add_special_tokens=False) for d in docs]
    n = sum(len(ids) for ids in encoded) + len(encoded)
    out = np.empty(n, dtype=np.int32)
    pos = 0
    for ids in encoded:
        out[pos : pos + len(ids)] = ids
        out[pos + len(ids)] = eos
        pos += len(ids) + 1
    return out
