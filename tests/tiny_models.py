"""Tiny random-weight models and tokenizers, built offline, for tests and benchmarks.

``make_tokenizer`` trains a small byte-level BPE on Python's own help texts
(``pydoc_data.topics``, always installed); ``make_tiny_model`` builds a random model of one
of the families the paper compares from a tiny config and saves it as a Hugging Face model
folder. Nothing here touches the network.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import torch

FAMILIES = ("llama", "gpt2", "gpt_neo", "gpt_neox", "olmo", "qwen3")

SPECIAL_TOKENS = ("<|endoftext|>", "<pad>")


def _corpus(seed: int, n_topics: int = 40) -> list[str]:
    """A few dozen of Python's help topics, chosen and ordered by ``seed``."""
    from pydoc_data.topics import topics

    texts = [topics[name] for name in sorted(topics)]
    random.Random(seed).shuffle(texts)
    return texts[:n_topics]


def make_tokenizer(out_dir, vocab_size: int, corpus_seed: int = 0):
    """Train a byte-level BPE with ``vocab_size`` entries and save it to ``out_dir``.

    Returns the PreTrainedTokenizerFast. Different ``corpus_seed`` values train on different
    texts and so give different merges (the 256 byte tokens and specials are always shared).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(corpus_seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[0],
        pad_token=SPECIAL_TOKENS[1],
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def tiny_config(family: str, *, vocab_size: int, d: int, n_layers: int, tied: bool, n_heads: int = 4):
    """A tiny AutoConfig of ``family`` with the given sizes and tying."""
    from transformers import AutoConfig

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {FAMILIES}")
    ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=1)
    if family == "gpt2":
        sizes = dict(n_embd=d, n_layer=n_layers, n_head=n_heads, n_positions=128)
    elif family == "gpt_neo":
        pattern = [[["global", "local"], n_layers // 2]] if n_layers % 2 == 0 else [[["global"], n_layers]]
        sizes = dict(
            hidden_size=d,
            num_layers=n_layers,
            num_heads=n_heads,
            attention_types=pattern,
            max_position_embeddings=128,
            window_size=32,
        )
    else:
        sizes = dict(
            hidden_size=d,
            num_hidden_layers=n_layers,
            num_attention_heads=n_heads,
            intermediate_size=2 * d,
            max_position_embeddings=128,
        )
        if family in ("llama", "olmo", "qwen3"):
            sizes.update(num_key_value_heads=n_heads, head_dim=d // n_heads)
    return AutoConfig.for_model(family, vocab_size=vocab_size, tie_word_embeddings=tied, **sizes, **ids)


def make_tiny_model(
    family: str,
    out_dir,
    *,
    tied: bool,
    vocab_size: int = 300,
    d: int = 32,
    n_layers: int = 2,
    seed: int = 0,
    tokenizer_dir=None,
    safe_serialization: bool = True,
    pad_rows: int = 0,
    max_shard_size: str | int | None = None,
    dtype: torch.dtype | None = None,
    edit: Callable[[torch.nn.Module], None] | None = None,
) -> Path:
    """Build a random-weight ``family`` model and save it (weights, config, tokenizer) to ``out_dir``.

    Args:
        family: one of FAMILIES.
        tied: tie_word_embeddings in the config (one shared matrix) or not.
        vocab_size: size of the BPE tokenizer trained when ``tokenizer_dir`` is None.
        d, n_layers: width and depth.
        seed: torch seed for the random weights.
        tokenizer_dir: reuse a tokenizer saved there instead of training one.
        safe_serialization: False writes pytorch_model.bin (the full state dict, tied copy
            included, as older checkpoints have it) instead of model.safetensors.
        pad_rows: extra embedding rows beyond the tokenizer (like OLMo's 50,304 for 50,280).
        max_shard_size: e.g. "20KB" to write a sharded checkpoint with an index.
        dtype: store the weights in this dtype (e.g. torch.bfloat16) instead of float32.
        edit: called on the model before saving (to plant NaNs, copy input into output...).

    Returns:
        ``out_dir`` as a Path.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is None:
        make_tokenizer(out_dir, vocab_size)
        tokenizer = AutoTokenizer.from_pretrained(out_dir)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        tokenizer.save_pretrained(out_dir)
    config = tiny_config(
        family, vocab_size=len(tokenizer) + pad_rows, d=d, n_layers=n_layers, tied=tied
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    if edit is not None:
        with torch.no_grad():
            edit(model)
    if dtype is not None:
        model = model.to(dtype)
    kwargs = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(out_dir, **kwargs)
    if not safe_serialization:
        for path in out_dir.glob("model*.safetensors*"):
            path.unlink()
        torch.save(model.state_dict(), out_dir / "pytorch_model.bin")
    return out_dir


def load_tiny_model(path):
    """Load a saved tiny model in full (for comparing against the cheap loader)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path)
