"""A checkpoint's tokenizer and the strings of its token ids (raw and decoded, for display)."""

from __future__ import annotations

from tying.errors import UserError, first_line
from tying.loading.checkpoint import Checkpoint


def load_tokenizer(ckpt: Checkpoint, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(ckpt.local_dir, trust_remote_code=trust_remote_code)
    except Exception as exc:  # no tokenizer files, unreadable files, missing sentencepiece
        raise UserError(f"no usable tokenizer for '{ckpt.source}': {first_line(exc, typed=True, limit=160)}") from None
    if tok is None or not hasattr(tok, "convert_ids_to_tokens"):
        raise UserError(f"no usable tokenizer for '{ckpt.source}'")
    return tok


def token_strings(tok, n_vocab: int) -> tuple[list[str], list[str]]:
    """Raw token strings and decoded display strings of ids 0..n_vocab-1."""
    ids = list(range(n_vocab))
    raw = tok.convert_ids_to_tokens(ids)
    tokens = [t if isinstance(t, str) else "" for t in raw]
    singles = [[i] for i in ids]
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:  # fast tokenizer: decode all ids in one call to the Rust library
        texts = backend.decode_batch(singles, skip_special_tokens=False)
    else:
        texts = tok.batch_decode(singles, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return tokens, [t if isinstance(t, str) else "" for t in texts]
