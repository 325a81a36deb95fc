"""Where a model's files are: a local folder, or a Hugging Face Hub repository (with an offline fallback).

:func:`open_checkpoint` resolves a source (a path or a Hub id with a revision) to a
:class:`Checkpoint`: a local folder holding the config and tokenizer files, the names of
every file the checkpoint has, and a way to get any other file (downloading it from the Hub
only when it is needed). For a Hub id only the config, the tokenizer files, the shard index
and the shard(s) actually read are downloaded; safetensors headers are read remotely. When
the Hub cannot be reached, a snapshot already in the local Hugging Face cache is used.
:func:`weight_files` says which files hold the weights: safetensors whenever present, else
pytorch_model*.bin (read by :mod:`tying.loading.binfiles`).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tying.errors import UserError, first_line
from tying.loading.headers import TensorInfo

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


@dataclass
class Checkpoint:
    """A model's files: a local folder for config and tokenizer, and a way to get the rest."""

    source: str
    local_dir: Path
    commit: str | None
    names: set[str]  # relative names of the files the checkpoint has
    fetch: Callable[[str], Path]  # local path of a file, downloading it first if needed
    info: dict[str, dict]  # name -> size and hashes, where known
    headers: Callable[[str], dict[str, TensorInfo]] | None = None  # remote header reader (hub)

    def record(self, name: str) -> dict:
        """What is known about file ``name``, for ModelMatrices.files: its name, size and sha256
        (the Hub's, or hashed here for a file on this disk), never where it lies here."""
        from tying.loading.model_matrices import file_sha256

        entry = dict(self.info.get(name) or {"name": name})
        path = self.local_dir / name
        if path.is_file():
            if entry.get("size") is None:
                entry["size"] = path.stat().st_size
            if not entry.get("sha256"):
                entry["sha256"] = file_sha256(path)
        return entry


def _looks_like_path(source: str) -> bool:
    """Whether ``source`` can only be a path: Hub ids are "name" or "owner/name"."""
    return (
        source.startswith((".", "/", "~"))
        or source.endswith("/")
        or source.count("/") > 1
        or "\\" in source
    )


def _local_checkpoint(source: str, folder: Path, commit: str | None = None) -> Checkpoint:
    if not folder.exists():
        raise UserError(f"'{source}': path does not exist")
    if not folder.is_dir():
        raise UserError(f"'{source}' is not a model directory (it is a file, not a folder)")
    if not (folder / CONFIG).is_file():
        raise UserError(f"'{source}' is not a model directory (no {CONFIG})")
    names = {p.name for p in folder.iterdir() if p.is_file()}
    return Checkpoint(
        source=source,
        local_dir=folder,
        commit=commit,
        names=names,
        fetch=lambda name: folder / name,
        info={},
    )


def _hub_checkpoint(
    repo_id: str, revision: str | None, cache_dir: str | None, trust_remote_code: bool
) -> Checkpoint:
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
        why = first_line(exc, typed=True, limit=160)
        raise fail(f"the Hub cannot be reached and the model is not in the local cache ({why})") from None

    commit = info.sha
    siblings = {s.rfilename: s for s in (info.siblings or [])}
    if CONFIG not in siblings:
        raise fail(f"the repository has no {CONFIG}")

    def fetch(name: str) -> Path:
        try:
            return Path(hf_hub_download(repo_id, name, revision=commit, cache_dir=cache_dir))
        except Exception as exc:  # network or disk trouble while downloading
            raise fail(f"downloading {name} failed ({first_line(exc, typed=True, limit=160)})") from None

    def headers(name: str) -> dict[str, TensorInfo]:
        try:
            meta = api.parse_safetensors_file_metadata(repo_id, name, revision=commit)
        except Exception as exc:  # unreadable header or network trouble
            raise fail(f"reading the header of {name} failed ({first_line(exc, typed=True, limit=160)})") from None
        return {
            key: TensorInfo(name, t.dtype, tuple(int(n) for n in t.shape))
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

    return Checkpoint(
        source=repo_id,
        local_dir=local_dir,
        commit=commit,
        names=set(siblings),
        fetch=fetch,
        info=file_info,
        headers=headers,
    )


def _cached_snapshot(repo_id: str, revision: str | None, cache_dir: str | None) -> Checkpoint | None:
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


def open_checkpoint(
    source: str, revision: str | None, cache_dir: str | None, trust_remote_code: bool
) -> Checkpoint:
    folder = Path(source).expanduser()
    if folder.exists() or _looks_like_path(source):
        if revision is not None:
            raise UserError(
                f"a revision ('{revision}') applies only to Hugging Face ids, not to the local path '{source}'"
            )
        return _local_checkpoint(source, folder)
    return _hub_checkpoint(source, revision, cache_dir, trust_remote_code)


def weight_files(ckpt: Checkpoint) -> tuple[str, list[str], str | None]:
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
                raise UserError(f"unreadable shard index '{path}': {first_line(exc, typed=True, limit=160)}") from None
            return kind, files, index
        if kind == "safetensors":
            stray = sorted(n for n in ckpt.names if n.endswith(".safetensors") and "/" not in n)
            if stray:
                return kind, stray, None
    raise UserError(
        f"'{ckpt.source}' has no weights ({SAFE_SINGLE}, {SAFE_INDEX}, {BIN_SINGLE} or {BIN_INDEX})"
    )
