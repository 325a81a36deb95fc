"""Load a model's input (embedding) and output (unembedding) matrices without loading the model.

Only the two matrices are read, as float32 numpy arrays of shape (n_vocab, d), together
with the tokenizer's token strings and the facts the analyses need: whether the weights
are tied, the parameter count and a fingerprint of the matrices. The rest of the model is
never materialised:

* tensor names come from a skeleton of the model built on the meta device from its config
  (``get_input_embeddings`` / ``get_output_embeddings``), matched to the checkpoint's keys;
* the parameter count comes from the safetensors headers, no tensor data read;
* the matrices are read from safetensors files in row chunks, each converted to float32
  straight into the returned array, so peak extra memory stays close to the bytes returned;
* for a Hugging Face id, only config, tokenizer files, the shard index and the shard(s)
  holding the two matrices are downloaded.

Every problem a user can fix (a wrong path, an unknown id, a corrupt file, a role mismatch)
is raised as a one-line :class:`~tying.errors.UserError`.

This module puts the steps together (:func:`load_model_matrices`); each step has its own
module in :mod:`tying.loading`: :mod:`~tying.loading.checkpoint` (where the files are, on
disk or on the Hub), :mod:`~tying.loading.skeleton` (parameter names from a meta-device
model, matched to checkpoint keys; the parameter count), :mod:`~tying.loading.tokenizer`,
:mod:`~tying.loading.headers` (safetensors headers), :mod:`~tying.loading.readers` (row
chunks of safetensors tensors), :mod:`~tying.loading.binfiles` (the fallback for pickled
``pytorch_model*.bin`` checkpoints, read with ``torch.load(weights_only=True)``, used only
when a checkpoint has no safetensors file) and :mod:`~tying.loading.matrices` (reading,
comparing and fingerprinting the two matrices); a GGUF file is read by
:mod:`~tying.loading.gguf_file` instead.
"""

from __future__ import annotations

import fnmatch
import time

import numpy as np

from tying.errors import UserError
from tying.layout import gguf_path
from tying.loading.binfiles import TorchBinReader
from tying.loading.checkpoint import CONFIG, TOKENIZER_PATTERNS, open_checkpoint, weight_files
from tying.loading.gguf_file import load_gguf_matrices
from tying.loading.headers import dtype_name
from tying.loading.matrices import check_matrix_tensors, equals, read_matrix
from tying.loading.model_matrices import ModelMatrices, fingerprint
from tying.loading.readers import Reader, SafetensorsReader
from tying.loading.skeleton import build_skeleton, count_parameters, embedding_keys, load_config
from tying.loading.tokenizer import load_tokenizer, token_strings


def load_model_matrices(
    source: str,
    revision: str | None = None,
    *,
    role: str | None = None,
    trust_remote_code: bool = False,
    cache_dir: str | None = None,
) -> ModelMatrices:
    """Load the input and output matrices of a causal language model, cheaply.

    Args:
        source: a local model folder (config.json, tokenizer, weights), a Hugging Face id, or a GGUF
            file (or a folder holding one; see :mod:`tying.loading.gguf_file`).
        revision: branch, tag or commit of a Hub id (e.g. "step10000-tokens20B").
        role: "tied" or "untied" to insist on what the weights must be; None accepts either.
        trust_remote_code: allow the model's own Python code (off unless asked for).
        cache_dir: Hugging Face cache folder for Hub downloads (default: the usual cache).

    Returns:
        ModelMatrices with float32 arrays of shape (n_vocab, d_model), n_vocab = len(tokenizer).

    Raises:
        UserError: for anything the user can fix, with a one-line message.
    """
    if role not in (None, "tied", "untied"):
        raise UserError(f"role must be 'tied', 'untied' or None, not '{role}'")
    start_time = time.perf_counter()
    source = str(source)
    gguf = gguf_path(source)
    if gguf is not None:  # a llama.cpp / Ollama file: its two matrices dequantised, no model loaded
        return load_gguf_matrices(gguf, source, role=role)
    ckpt = open_checkpoint(source, revision, cache_dir, trust_remote_code)
    config = load_config(ckpt, trust_remote_code)
    skeleton = build_skeleton(config, source, trust_remote_code)
    tokenizer = load_tokenizer(ckpt, trust_remote_code)
    n_vocab = len(tokenizer)

    kind, files, index = weight_files(ckpt)
    reader: Reader = (SafetensorsReader if kind == "safetensors" else TorchBinReader)(ckpt, files)
    names = skeleton.rename(list(reader.tensors))
    input_key, output_key = embedding_keys(names, skeleton, source)
    check_matrix_tensors(reader, input_key, output_key, n_vocab, source)
    in_t = reader.tensors[input_key]
    n_rows, d_model = in_t.shape
    if output_key is None and role == "untied":
        raise UserError(f"'{source}' is tied (it stores no separate output matrix); pass an untied model")

    inp = read_matrix(reader, input_key, n_vocab, source)
    if output_key is None or equals(reader, output_key, inp):
        tied, out = True, inp
    else:
        tied = False
        if role == "tied":
            raise UserError(
                f"'{source}' is untied (its output matrix differs from its input matrix); pass a tied model"
            )
        out = read_matrix(reader, output_key, n_vocab, source)
    if tied and role == "untied":
        raise UserError(
            f"'{source}' is tied (its output matrix equals its input matrix); pass an untied model"
        )

    # Parameters from headers: every shard, no data read (hub: remote headers, no download).
    n_params = count_parameters(reader.tensors, names, skeleton)
    n_embedding = n_rows * d_model
    if output_key is not None:
        out_elems = int(np.prod(reader.tensors[output_key].shape, dtype=np.int64))
        if tied:
            n_params -= out_elems  # a stored copy of a tied matrix is not an extra parameter
        else:
            n_embedding += out_elems

    tokens, texts = token_strings(tokenizer, n_vocab)
    used = [CONFIG] + sorted(
        n for n in ckpt.names if "/" not in n and any(fnmatch.fnmatch(n, p) for p in TOKENIZER_PATTERNS)
    )
    used += [index] if index else []
    used += reader.used_files([input_key, output_key])
    fp_in = fingerprint(inp)

    return ModelMatrices(
        source=source,
        revision=revision,
        local_dir=str(ckpt.local_dir),
        commit=ckpt.commit,
        model_type=str(config.model_type),
        tied=tied,
        input=inp,
        output=out,
        input_key=input_key,
        output_key=output_key,
        d_model=int(d_model),
        n_rows_stored=int(n_rows),
        n_vocab=n_vocab,
        n_params=int(n_params),
        n_embedding_params=int(n_embedding),
        embedding_share=float(n_embedding / n_params) if n_params else float("nan"),
        tokens=tokens,
        token_texts=texts,
        fingerprint={"input": fp_in, "output": fp_in if tied else fingerprint(out)},
        files=[ckpt.record(n) for n in used],
        dtype=dtype_name(in_t.dtype),
        seconds=time.perf_counter() - start_time,
    )
