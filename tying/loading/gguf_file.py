"""A model's input and output matrices read straight from a GGUF file (llama.cpp, Ollama), no
model loaded.

``--tied``/``--untied`` may name a ``.gguf`` file or a folder holding one. The token
embedding (``token_embd.weight``) and, when the model stores one, the output matrix
(``output.weight``; absent in a tied model) are read through the ``gguf`` package's
memory-mapped reader and dequantised to float32 (Q8_0, Q4_1, F16, ...: whatever the file
stores, each tensor's type recorded); the token strings come from the file's own vocabulary
(``tokenizer.ggml.tokens``). The file is recorded by name, size and sha256. Stages that run
the model (the lens, token frequencies) load it through transformers' GGUF support
(:mod:`tying.loading.causal_lm`, which needs accelerate).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tying.errors import UserError, first_line
from tying.layout import SMOLLM2_INSTALL, SMOLLM2_WHEEL, installed_gguf
from tying.loading.model_matrices import ModelMatrices, file_sha256, fingerprint

INPUT_KEY = "token_embd.weight"
OUTPUT_KEY = "output.weight"


def installed_smollm2() -> Path:
    """SmolLM2-135M's GGUF file from the installed wheel; UserError naming the install command."""
    path = installed_gguf(SMOLLM2_WHEEL)
    if path is None:
        raise UserError(f"SmolLM2-135M is not installed: {SMOLLM2_INSTALL}")
    return path


def _has_every_block(reader, arch: str, tensors: dict) -> bool:
    """Whether the file holds a model that runs: every block of its block count with its attention and
    feed-forward weights (a file of the matrices alone, or of a few tensors beside them, does not)."""
    blocks = int(_field(reader, f"{arch}.block_count") or 0)
    return blocks > 0 and all(
        any(f"blk.{i}.{t}" in tensors for t in ("attn_q.weight", "attn_qkv.weight")) and f"blk.{i}.ffn_down.weight"
        in tensors for i in range(blocks))


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _open(path: Path):
    try:
        import gguf
    except ImportError:
        raise UserError(f"reading '{path.name}' needs the gguf package: pip install gguf") from None
    try:
        return gguf.GGUFReader(path)
    except Exception as exc:  # a truncated or foreign file: the reader's own message, in one line
        raise UserError(f"'{path}' is not a readable GGUF file ({first_line(exc) or type(exc).__name__})") from None


def _matrix(tensor, n_vocab: int, d_model: int, path: Path) -> np.ndarray:
    """A tensor dequantised to float32, shape (n_vocab, d_model)."""
    import gguf

    values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    values = np.array(values, dtype=np.float32).reshape(-1, d_model)  # owned, not a view of the mapped file
    if values.shape[0] < n_vocab:
        raise UserError(f"'{path.name}': {tensor.name} has {values.shape[0]} rows for {n_vocab} tokens")
    if not np.isfinite(values).all():
        raise UserError(f"'{path.name}': {tensor.name} holds NaN or infinite values")
    return values[:n_vocab]


def type_name(tensor) -> str:
    """How a tensor is stored: "Q8_0", "Q4_1", "F16", "F32", ..."""
    import gguf

    return gguf.GGMLQuantizationType(int(tensor.tensor_type)).name


def display_texts(tokens: list[str], model: str) -> list[str]:
    """What each raw token string reads as: byte-level BPE (``gpt2``: "Ġking" -> " king") or
    SentencePiece (``llama``: "▁king" -> " king", "<0x0A>" -> "\\n")."""
    if model == "gpt2":
        decode = _byte_decoder()
        out = []
        for t in tokens:
            try:
                out.append(bytes(decode[c] for c in t).decode("utf-8", errors="replace"))
            except KeyError:  # a special token written as plain text
                out.append(t)
        return out
    out = []
    for t in tokens:
        if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            out.append(bytes([int(t[3:5], 16)]).decode("utf-8", errors="replace"))
        else:
            out.append(t.replace("\u2581", " "))
    return out


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte, reversed (character -> byte)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return {c: b for b, c in chars.items()}


def load_gguf_matrices(path: Path, source: str, *, role: str | None = None) -> ModelMatrices:
    """The :class:`~tying.loading.model_matrices.ModelMatrices` of a GGUF file (see the module)."""
    start = time.perf_counter()
    reader = _open(path)
    arch = _field(reader, "general.architecture") or "unknown"
    tokens = list(_field(reader, "tokenizer.ggml.tokens") or [])
    tensors = {t.name: t for t in reader.tensors}
    if INPUT_KEY not in tensors or not tokens:
        raise UserError(f"'{path.name}' holds no token embedding ({INPUT_KEY}) or no vocabulary: not a language model")
    d_model = int(_field(reader, f"{arch}.embedding_length") or int(tensors[INPUT_KEY].shape[0]))
    n_vocab = len(tokens)
    inp = _matrix(tensors[INPUT_KEY], n_vocab, d_model, path)
    out_t = tensors.get(OUTPUT_KEY)
    out = None if out_t is None else _matrix(out_t, n_vocab, d_model, path)
    tied = out is None or np.array_equal(out, inp)
    if tied and role == "untied":
        raise UserError(f"'{source}' is tied (it stores no separate output matrix); pass an untied model")
    if not tied and role == "tied":
        raise UserError(f"'{source}' is untied (its output matrix differs from its input matrix); pass a tied model")
    n_rows = int(tensors[INPUT_KEY].n_elements) // d_model
    n_params = sum(int(t.n_elements) for t in reader.tensors)
    n_embedding = int(tensors[INPUT_KEY].n_elements)
    if out_t is not None:
        n_params -= int(out_t.n_elements) if tied else 0
        n_embedding += 0 if tied else int(out_t.n_elements)
    texts = display_texts(tokens, str(_field(reader, "tokenizer.ggml.model") or "gpt2"))
    fp_in = fingerprint(inp)
    stored = {INPUT_KEY: type_name(tensors[INPUT_KEY])} | ({OUTPUT_KEY: type_name(out_t)} if out_t is not None else {})
    return ModelMatrices(
        source=source, revision=None, local_dir=str(path),  # the file itself: causal_lm loads the model from it
        commit=None, model_type=str(arch), tied=tied,
        input=inp, output=inp if tied else out, input_key=INPUT_KEY,
        output_key=None if out_t is None else OUTPUT_KEY, d_model=d_model, n_rows_stored=n_rows, n_vocab=n_vocab,
        n_params=n_params, n_embedding_params=n_embedding,
        embedding_share=n_embedding / n_params if n_params else float("nan"), tokens=tokens, token_texts=texts,
        fingerprint={"input": fp_in, "output": fp_in if tied else fingerprint(out)},
        files=[{"name": path.name, "size": path.stat().st_size, "sha256": file_sha256(path), "gguf_types": stored}],
        dtype=stored[INPUT_KEY], seconds=time.perf_counter() - start,
        runs=_has_every_block(reader, arch, tensors),
    )
