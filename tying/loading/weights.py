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
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from tying.errors import UserError

SAFE_SINGLE = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
BIN_SINGLE = "pytorch_model.bin"
BIN_INDEX = "pytorch_model.bin.index.json"
CONFIG = "config.json"

# Files a tokenizer may need; remote code (*.py) is added only with trust_remote_code.
TOKENIZER_PATTERNS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "*.model",
    "*.tiktoken",
)

# Bytes of stored tensor data read per chunk. The checkpoint is reopened for every chunk so
# that the memory map (whose touched pages count as resident memory) is released each time.
CHUNK_BYTES = 32 * 2**20

# safetensors dtype codes -> torch dtypes for the floating types an embedding can have.
_FLOAT_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}
if hasattr(torch, "float8_e4m3fn"):
    _FLOAT_DTYPES["F8_E4M3"] = torch.float8_e4m3fn
    _FLOAT_DTYPES["F8_E5M2"] = torch.float8_e5m2

_MAX_HEADER_BYTES = 100 * 2**20  # the safetensors format's own limit


@dataclass
class ModelMatrices:
    """The input and output matrices of one model, with what is known about where they came from.

    ``input`` and ``output`` are float32 arrays of shape (n_vocab, d_model); row i belongs to
    token id i. When the model is tied, ``output is input`` (one array, not a copy).
    """

    source: str  # the id or path as given
    revision: str | None  # the revision as given (hub only)
    local_dir: str  # folder holding config and tokenizer (a cache snapshot for hub ids)
    commit: str | None  # hub commit sha the revision resolved to; None for local folders
    model_type: str  # config.model_type
    tied: bool  # decided from the weights, not the config
    input: np.ndarray  # float32, shape (n_vocab, d_model)
    output: np.ndarray  # float32, shape (n_vocab, d_model); `is input` when tied
    input_key: str  # tensor name of the input matrix in the checkpoint
    output_key: str | None  # tensor name of a separately stored output matrix, else None
    d_model: int
    n_rows_stored: int  # rows of the stored input matrix, padding rows included
    n_vocab: int  # len(tokenizer); rows beyond it are dropped
    n_params: int  # parameters in the checkpoint (from headers; buffers and tied copies excluded)
    n_embedding_params: int  # stored input rows*cols, plus output rows*cols when untied
    embedding_share: float  # n_embedding_params / n_params
    tokens: list[str]  # raw token strings of ids 0..n_vocab-1 ("" where the id has none)
    token_texts: list[str]  # decoded display string of each id
    fingerprint: dict[str, str]  # sha256 hex of the float32 bytes: {"input": ..., "output": ...}
    files: list[dict] = field(default_factory=list)  # files read: name, size, blob_id/sha256 when known
    dtype: str = "float32"  # stored dtype of the input matrix, e.g. "bfloat16"
    seconds: float = 0.0  # wall time of the load


class _Tensor(NamedTuple):
    """One tensor as described by a checkpoint header: which file, its dtype code and shape."""

    file: str
    dtype: str
    shape: tuple[int, ...]


# --------------------------------------------------------------------------------------
# Where the files are: a local folder or a Hugging Face Hub repository.


@dataclass
class _Checkpoint:
    """A model's files: a local folder for config and tokenizer, and a way to get the rest."""

    source: str
    local_dir: Path
    commit: str | None
    names: set[str]  # relative names of the files the checkpoint has
    fetch: Callable[[str], Path]  # local path of a file, downloading it first if needed
    info: dict[str, dict]  # name -> size and hashes, where known
    headers: Callable[[str], dict[str, _Tensor]] | None = None  # remote header reader (hub)

    def record(self, name: str) -> dict:
        """What is known about file ``name``, for ModelMatrices.files."""
        entry = dict(self.info.get(name) or {"name": name})
        if entry.get("size") is None:
            path = self.local_dir / name
            if path.is_file():
                entry["size"] = path.stat().st_size
        return entry


def _looks_like_path(source: str) -> bool:
    """Whether ``source`` can only be a path: Hub ids are "name" or "owner/name"."""
    return (
        source.startswith((".", "/", "~"))
        or source.endswith("/")
        or source.count("/") > 1
        or "\\" in source
    )


def _local_checkpoint(source: str, folder: Path, commit: str | None = None) -> _Checkpoint:
    if not folder.exists():
        raise UserError(f"'{source}': path does not exist")
    if not folder.is_dir():
        raise UserError(f"'{source}' is not a model directory (it is a file, not a folder)")
    if not (folder / CONFIG).is_file():
        raise UserError(f"'{source}' is not a model directory (no {CONFIG})")
    names = {p.name for p in folder.iterdir() if p.is_file()}
    return _Checkpoint(
        source=source,
        local_dir=folder,
        commit=commit,
        names=names,
        fetch=lambda name: folder / name,
        info={},
    )


def _short_reason(exc: BaseException) -> str:
    """The first line of an exception's message, prefixed with its class name."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 160:
        first = first[:157] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _hub_checkpoint(
    repo_id: str, revision: str | None, cache_dir: str | None, trust_remote_code: bool
) -> _Checkpoint:
    """Resolve ``repo_id`` on the Hub; download config and tokenizer files (weights come later)."""
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    def fail(reason: str) -> UserError:
        return UserError(f"cannot fetch '{repo_id}' from the Hugging Face Hub: {reason}")

    api = HfApi()
    try:
        info = api.model_info(repo_id, revision=revision, files_metadata=True)
    except HFValidationError:
        raise fail("not a local path and not a valid Hub id") from None
    except GatedRepoError:
        raise fail("the repository is gated; accept its terms on the Hub and log in") from None
    except RepositoryNotFoundError:
        raise fail("no such repository (or it is private)") from None
    except RevisionNotFoundError:
        raise fail(f"no revision '{revision}'") from None
    except Exception as exc:  # offline mode, DNS failure, refused connection, timeout, HTTP error
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(exc, HfHubHTTPError) and status is not None and status < 500:
            raise fail(f"HTTP {status}") from None
        cached = _cached_snapshot(repo_id, revision, cache_dir)
        if cached is not None:  # the Hub is out of reach but the model was fetched before
            return cached
        if isinstance(exc, OfflineModeIsEnabled):
            raise fail("offline mode is on (HF_HUB_OFFLINE) and the model is not in the local cache") from None
        why = _short_reason(exc)
        raise fail(f"the Hub cannot be reached and the model is not in the local cache ({why})") from None

    commit = info.sha
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    if CONFIG not in siblings:
        raise fail(f"the repository has no {CONFIG}")

    def fetch(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name, revision=commit, cache_dir=cache_dir))
        except Exception as exc:  # network or disk trouble while downloading
            raise fail(f"downloading {name} failed ({_short_reason(exc)})") from None

    def headers(name: str) -> dict[str, _Tensor]:
        try:
            meta = api.parse_safetensors_file_metadata(repo_id, name, revision=commit)
        except Exception as exc:  # unreadable header or network trouble
            raise fail(f"reading the header of {name} failed ({_short_reason(exc)})") from None
        return {
            key: _Tensor(name, t.dtype, tuple(int(n) for n in t.shape))
            for key, t in meta.tensors.items()
        }

    local_dir = fetch(CONFIG).parent
    wanted = TOKENIZER_PATTERNS + (("*.py",) if trust_remote_code else ())
    for name in siblings:
        if "/" not in name and any(fnmatch.fnmatch(name, pat) for pat in wanted):
            fetch(name)

    file_info = {}
    for name, s in siblings.items():
        entry = {"name": name, "size": s.size}
        if s.blob_id:
            entry["blob_id"] = s.blob_id
        if s.lfs is not None:
            entry["sha256"] = s.lfs.sha256
        file_info[name] = entry

    return _Checkpoint(
        source=repo_id,
        local_dir=local_dir,
        commit=commit,
        names=set(siblings),
        fetch=fetch,
        info=file_info,
        headers=headers,
    )


def _cached_snapshot(repo_id: str, revision: str | None, cache_dir: str | None) -> _Checkpoint | None:
    """The snapshot of ``repo_id`` already in the local Hub cache, or None (offline fallback)."""
    from huggingface_hub import hf_hub_download

    try:
        config = Path(
            hf_hub_download(
                repo_id, CONFIG, revision=revision, cache_dir=cache_dir, local_files_only=True
            )
        )
    except Exception:  # not cached (or not a valid id): the caller reports the original error
        return None
    return _local_checkpoint(repo_id, config.parent, commit=config.parent.name)


def _open_checkpoint(
    source: str, revision: str | None, cache_dir: str | None, trust_remote_code: bool
) -> _Checkpoint:
    folder = Path(source).expanduser()
    if folder.exists() or _looks_like_path(source):
        if revision is not None:
            raise UserError(
                f"a revision ('{revision}') applies only to Hugging Face ids, not to the local path '{source}'"
            )
        return _local_checkpoint(source, folder)
    return _hub_checkpoint(source, revision, cache_dir, trust_remote_code)


# --------------------------------------------------------------------------------------
# Config, model skeleton and tokenizer.


def _load_config(ckpt: _Checkpoint, trust_remote_code: bool):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(ckpt.local_dir, trust_remote_code=trust_remote_code)
    except Exception as exc:  # unknown model type, bad JSON, remote code refused
        hint = "" if trust_remote_code else " (if the model ships its own code, pass trust_remote_code)"
        raise UserError(f"cannot read the config of '{ckpt.source}': {_short_reason(exc)}{hint}") from None


@dataclass
class _Skeleton:
    """What the meta-device model says about names: embedding parameters, all parameters, modules."""

    input_name: str
    output_name: str
    ties: bool  # the skeleton shares one Parameter between input and output
    params: set[str]
    modules: set[str]
    base_prefix: str  # e.g. "transformer", "model", "gpt_neox"; "" when none
    rename: Callable[[list[str]], dict[str, str]]  # checkpoint keys -> model names


def _weight_name(model: torch.nn.Module, module: torch.nn.Module) -> str:
    for name, candidate in model.named_modules(remove_duplicate=False):
        if candidate is module:
            return f"{name}.weight" if name else "weight"
    raise LookupError("embedding module not found among the model's modules")


def _key_renamer(model) -> Callable[[list[str]], dict[str, str]]:
    """A function mapping checkpoint keys to the model's own names, as transformers' loader does.

    transformers 5 renames some checkpoint keys while loading (GPT-NeoX's ``embed_out`` becomes
    ``lm_head``; old ``gamma``/``beta`` become ``weight``/``bias``) and adds or strips the
    base-model prefix (``transformer.``). Those rules live in semi-private modules, so when they
    cannot be imported the keys are returned unchanged and suffix matching takes over.
    """
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (
            WeightConverter,
            WeightRenaming,
            dot_natural_key,
            rename_source_key,
        )
    except ImportError:
        return lambda keys: {k: k for k in keys}
    state_names = dict.fromkeys(model.state_dict(), True)
    prefix = getattr(model, "base_model_prefix", None) or None

    def rename(keys: list[str]) -> dict[str, str]:
        try:
            mapping = get_model_conversion_mapping(model)
            renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
            converters = [m for m in mapping if isinstance(m, WeightConverter)]
            names = {}
            for key in sorted(keys, key=dot_natural_key):  # some renamings depend on key order
                name, _ = rename_source_key(key, renamings, converters, prefix, state_names)
                if name not in state_names and key in state_names:
                    name = key
                names[key] = name
            return names
        except Exception:  # an internal API that changed shape: fall back to plain names
            return {k: k for k in keys}

    return rename


def _build_skeleton(config, source: str, trust_remote_code: bool) -> _Skeleton:
    """Build the model on the meta device (no memory, no init) and read off parameter names."""
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception as exc:  # architecture unknown to this transformers, remote code refused
        raise UserError(
            f"cannot build '{source}' ({config.model_type}) as a causal language model: {_short_reason(exc)}"
        ) from None
    inp = model.get_input_embeddings()
    out = model.get_output_embeddings()
    if inp is None or out is None or getattr(out, "weight", None) is None:
        raise UserError(f"'{source}' has no input or output embedding module (not a causal language model?)")
    return _Skeleton(
        input_name=_weight_name(model, inp),
        output_name=_weight_name(model, out),
        ties=inp.weight is out.weight,
        params={n for n, _ in model.named_parameters(remove_duplicate=False)},
        modules={n for n, _ in model.named_modules(remove_duplicate=False)},
        base_prefix=getattr(model, "base_model_prefix", "") or "",
        rename=_key_renamer(model),
    )


def _load_tokenizer(ckpt: _Checkpoint, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(ckpt.local_dir, trust_remote_code=trust_remote_code)
    except Exception as exc:  # no tokenizer files, unreadable files, missing sentencepiece
        raise UserError(f"no usable tokenizer for '{ckpt.source}': {_short_reason(exc)}") from None
    if tok is None or not hasattr(tok, "convert_ids_to_tokens"):
        raise UserError(f"no usable tokenizer for '{ckpt.source}'")
    return tok


def _token_strings(tok, n_vocab: int) -> tuple[list[str], list[str]]:
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


# --------------------------------------------------------------------------------------
# Tensor headers and readers.


def _corrupt(path: Path | str, why: str) -> UserError:
    return UserError(f"corrupt safetensors file '{path}': {why}")


def read_safetensors_header(path: Path) -> dict[str, _Tensor]:
    """Tensor names, dtypes and shapes of one safetensors file, from its header alone.

    The file starts with an 8-byte little-endian header length and a JSON header; no tensor
    data is read.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise _corrupt(path, "shorter than its 8-byte header length")
        n = int.from_bytes(raw, "little")
        if n <= 1 or n > _MAX_HEADER_BYTES or 8 + n > size:
            raise _corrupt(path, f"bad header length {n}")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _corrupt(path, f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "header is not a JSON object")
    data_bytes = size - 8 - n
    tensors = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (start, stop) = entry["dtype"], entry["shape"], entry["data_offsets"]
            shape = tuple(int(s) for s in shape)
        except (KeyError, TypeError, ValueError):
            raise _corrupt(path, f"bad header entry for '{key}'") from None
        if not 0 <= start <= stop <= data_bytes:
            raise _corrupt(path, f"tensor '{key}' lies outside the file (truncated?)")
        tensors[key] = _Tensor(path.name, str(dtype), shape)
    return tensors


class _Reader:
    """Reads row ranges of named tensors as torch tensors in their stored dtype."""

    tensors: dict[str, _Tensor]

    def chunks(self, key: str, n_rows: int) -> Iterator[tuple[int, int, torch.Tensor]]:
        raise NotImplementedError

    def used_files(self, keys) -> list[str]:
        return sorted({self.tensors[k].file for k in keys if k is not None})


def _rows_per_chunk(t: _Tensor) -> int:
    itemsize = torch.empty((), dtype=_FLOAT_DTYPES.get(t.dtype, torch.float32)).element_size()
    row_bytes = max(1, int(np.prod(t.shape[1:], dtype=np.int64)) * itemsize)
    return max(1, CHUNK_BYTES // row_bytes)


class _SafetensorsReader(_Reader):
    def __init__(self, ckpt: _Checkpoint, files: list[str]):
        self.ckpt = ckpt
        self.tensors: dict[str, _Tensor] = {}
        for name in files:
            if ckpt.headers is not None:
                header = ckpt.headers(name)
            else:
                header = read_safetensors_header(ckpt.fetch(name))
            self.tensors.update(header)
        self._paths: dict[str, Path] = {}

    def _path(self, file: str) -> Path:
        if file not in self._paths:
            self._paths[file] = self.ckpt.fetch(file)
        return self._paths[file]

    def chunks(self, key, n_rows):
        from safetensors import SafetensorError, safe_open

        t = self.tensors[key]
        path = self._path(t.file)
        step = _rows_per_chunk(t)
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            # A fresh handle per chunk: the memory map, and the file pages it made resident,
            # go away when the handle closes and the chunk is dropped.
            try:
                handle = safe_open(str(path), framework="pt")
                part = handle.get_slice(key)[start:stop]
            except (SafetensorError, OSError, ValueError) as exc:
                raise _corrupt(path, _short_reason(exc)) from None
            yield start, stop, part
            del part, handle


class _TorchBinReader(_Reader):
    """Fallback for checkpoints with only pytorch_model*.bin files (memory-mapped where possible)."""

    def __init__(self, ckpt: _Checkpoint, files: list[str]):
        self.ckpt = ckpt
        self.state: dict[str, torch.Tensor] = {}
        self.tensors = {}
        for name in files:
            path = ckpt.fetch(name)
            state = self._load(path)
            for key, value in state.items():
                if isinstance(value, torch.Tensor):
                    self.state[key] = value
                    dtype = next((c for c, d in _FLOAT_DTYPES.items() if d == value.dtype), str(value.dtype))
                    self.tensors[key] = _Tensor(name, dtype, tuple(value.shape))

    @staticmethod
    def _load(path: Path) -> dict:
        try:
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc).lower() and "zip" not in str(exc).lower():
                    raise
                # Legacy (pre-zip) format cannot be memory-mapped.
                return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle, zip or unpickling-policy errors: an unreadable file
            raise UserError(f"corrupt checkpoint file '{path}': {_short_reason(exc)}") from None

    def chunks(self, key, n_rows):
        t = self.tensors[key]
        step = _rows_per_chunk(t)
        value = self.state[key]
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            yield start, stop, value[start:stop]


def _weight_files(ckpt: _Checkpoint) -> tuple[str, list[str], str | None]:
    """The weight format ("safetensors" or "bin"), its files and its index file (or None).

    Safetensors wins whenever present; pytorch_model*.bin is the fallback.
    """
    for kind, single, index in (("safetensors", SAFE_SINGLE, SAFE_INDEX), ("bin", BIN_SINGLE, BIN_INDEX)):
        if single in ckpt.names:
            return kind, [single], None
        if index in ckpt.names:
            path = ckpt.fetch(index)
            try:
                weight_map = json.loads(path.read_text())["weight_map"]
                files = sorted(set(weight_map.values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise UserError(f"unreadable shard index '{path}': {_short_reason(exc)}") from None
            return kind, files, index
        if kind == "safetensors":
            stray = sorted(n for n in ckpt.names if n.endswith(".safetensors") and "/" not in n)
            if stray:
                return kind, stray, None
    raise UserError(
        f"'{ckpt.source}' has no weights ({SAFE_SINGLE}, {SAFE_INDEX}, {BIN_SINGLE} or {BIN_INDEX})"
    )


# --------------------------------------------------------------------------------------
# Matching skeleton names to checkpoint keys; counting parameters.


def _match_key(name: str, names: dict[str, str]) -> str | None:
    """The checkpoint key whose model name is ``name``.

    ``names`` maps checkpoint keys to model names (after transformers' renaming). When no key
    maps to ``name`` exactly, a key that differs only by a leading prefix (``transformer.``,
    ``model.``) is accepted.
    """
    exact = sorted(k for k, n in names.items() if n == name)
    if exact:
        return name if name in exact else exact[0]
    hits = [
        k
        for k, n in names.items()
        if "." in n and (n.endswith("." + name) or name.endswith("." + n))
    ]
    if len(hits) > 1:
        raise UserError(f"cannot tell which tensor is '{name}': candidates {', '.join(sorted(hits)[:4])}")
    return hits[0] if hits else None


def _embedding_keys(names: dict[str, str], skeleton: _Skeleton, source: str) -> tuple[str, str | None]:
    """Checkpoint keys of the input matrix and of a separately stored output matrix (or None)."""
    input_key = _match_key(skeleton.input_name, names)
    if input_key is None:
        raise UserError(f"'{source}' has no input embedding tensor ('{skeleton.input_name}') in its weights")
    output_key = _match_key(skeleton.output_name, names)
    if output_key == input_key:
        output_key = None
    if output_key is None and not skeleton.ties:
        raise UserError(
            f"'{source}' has no output embedding tensor ('{skeleton.output_name}') in its weights "
            "although its config does not tie embeddings"
        )
    return input_key, output_key


def _check_matrix_tensors(
    reader: _Reader, input_key: str, output_key: str | None, n_vocab: int, source: str
) -> None:
    """Refuse matrices that are not 2-D floats with at least n_vocab rows and a common width."""
    for key in (input_key, output_key):
        if key is None:
            continue
        t = reader.tensors[key]
        if len(t.shape) != 2:
            raise UserError(f"'{source}': {key} has shape {list(t.shape)}, not (rows, d)")
        if t.dtype not in _FLOAT_DTYPES:
            raise UserError(f"'{source}': {key} is stored as {t.dtype}; only float checkpoints are supported")
        if t.shape[0] < n_vocab:
            raise UserError(
                f"'{source}': the tokenizer has {n_vocab} tokens but {key} has only {t.shape[0]} rows"
            )
    if output_key is not None and reader.tensors[output_key].shape[1] != reader.tensors[input_key].shape[1]:
        raise UserError(f"'{source}': {input_key} and {output_key} have different widths")


def _count_parameters(tensors: dict[str, _Tensor], names: dict[str, str], skeleton: _Skeleton) -> int:
    """Elements of every stored tensor that is a parameter.

    A key is left out when it is not a skeleton parameter but its parent module exists in the
    skeleton: such tensors are buffers saved by older code (attention masks, rotary inv_freq).
    Keys the skeleton does not know at all (layouts transformers converts on load) are counted.
    """
    prefix = skeleton.base_prefix + "." if skeleton.base_prefix else None
    total = 0
    for key, t in tensors.items():
        name = names.get(key, key)
        candidates = [name]
        if prefix:
            candidates.append(name.removeprefix(prefix) if name.startswith(prefix) else prefix + name)
        if not any(c in skeleton.params for c in candidates):
            parents = [c.rsplit(".", 1)[0] if "." in c else "" for c in candidates]
            if any(p in skeleton.modules for p in parents):
                continue
        total += int(np.prod(t.shape, dtype=np.int64))
    return total


# --------------------------------------------------------------------------------------
# Reading the matrices.


def _all_finite(block: torch.Tensor) -> bool:
    """Whether a float32 block holds no NaN or inf.

    A sum is non-finite whenever an element is, and is far cheaper than an elementwise test
    (no boolean temporary); the exact test runs only to rule out an overflowing sum.
    """
    if torch.isfinite(block.sum()):
        return True
    return bool(torch.isfinite(block).all())


def _read_matrix(reader: _Reader, key: str, n_rows: int, source: str) -> np.ndarray:
    """Rows 0..n_rows-1 of tensor ``key`` as a new float32 array; refuses NaN and inf."""
    d = reader.tensors[key].shape[1]
    out = np.empty((n_rows, d), dtype=np.float32)
    dest = torch.from_numpy(out)
    for start, stop, part in reader.chunks(key, n_rows):
        dest[start:stop].copy_(part)
        del part  # drop the chunk (and its mapped file pages) before the next is read
        if not _all_finite(dest[start:stop]):
            raise UserError(f"'{source}' contains NaN or inf values in {key}")
    return out


def _equals(reader: _Reader, key: str, matrix: np.ndarray) -> bool:
    """Whether tensor ``key`` (first len(matrix) rows) equals ``matrix`` exactly, read in chunks
    and stopping at the first difference."""
    theirs = torch.from_numpy(matrix)
    for start, stop, part in reader.chunks(key, matrix.shape[0]):
        same = torch.equal(part.to(torch.float32), theirs[start:stop])
        del part
        if not same:
            return False
    return True


def _fingerprint(matrix: np.ndarray) -> str:
    return hashlib.sha256(memoryview(np.ascontiguousarray(matrix)).cast("B")).hexdigest()


def _dtype_name(code: str) -> str:
    dtype = _FLOAT_DTYPES.get(code)
    return str(dtype).removeprefix("torch.") if dtype is not None else code.lower()


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
        source: a local model folder (config.json, tokenizer, weights) or a Hugging Face id.
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
    ckpt = _open_checkpoint(source, revision, cache_dir, trust_remote_code)
    config = _load_config(ckpt, trust_remote_code)
    skeleton = _build_skeleton(config, source, trust_remote_code)
    tokenizer = _load_tokenizer(ckpt, trust_remote_code)
    n_vocab = len(tokenizer)

    kind, files, index = _weight_files(ckpt)
    reader: _Reader = (_SafetensorsReader if kind == "safetensors" else _TorchBinReader)(ckpt, files)
    names = skeleton.rename(list(reader.tensors))
    input_key, output_key = _embedding_keys(names, skeleton, source)
    _check_matrix_tensors(reader, input_key, output_key, n_vocab, source)
    in_t = reader.tensors[input_key]
    n_rows, d_model = in_t.shape
    if output_key is None and role == "untied":
        raise UserError(f"'{source}' is tied (it stores no separate output matrix); pass an untied model")

    inp = _read_matrix(reader, input_key, n_vocab, source)
    if output_key is None or _equals(reader, output_key, inp):
        tied, out = True, inp
    else:
        tied = False
        if role == "tied":
            raise UserError(
                f"'{source}' is untied (its output matrix differs from its input matrix); pass a tied model"
            )
        out = _read_matrix(reader, output_key, n_vocab, source)
    if tied and role == "untied":
        raise UserError(
            f"'{source}' is tied (its output matrix equals its input matrix); pass an untied model"
        )

    # Parameters from headers: every shard, no data read (hub: remote headers, no download).
    n_params = _count_parameters(reader.tensors, names, skeleton)
    n_embedding = n_rows * d_model
    if output_key is not None:
        out_elems = int(np.prod(reader.tensors[output_key].shape, dtype=np.int64))
        if tied:
            n_params -= out_elems  # a stored copy of a tied matrix is not an extra parameter
        else:
            n_embedding += out_elems

    tokens, texts = _token_strings(tokenizer, n_vocab)
    used = [CONFIG] + sorted(
        n for n in ckpt.names if "/" not in n and any(fnmatch.fnmatch(n, p) for p in TOKENIZER_PATTERNS)
    )
    used += [index] if index else []
    used += reader.used_files([input_key, output_key])
    fp_in = _fingerprint(inp)

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
        fingerprint={"input": fp_in, "output": fp_in if tied else _fingerprint(out)},
        files=[ckpt.record(n) for n in used],
        dtype=_dtype_name(in_t.dtype),
        seconds=time.perf_counter() - start_time,
    )
