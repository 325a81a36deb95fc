"""Where a figure of the figure pack comes from: the source line under every image.

:func:`source_line` names the cache, its models (or the published data it was built from),
this repository's commit (:func:`git_commit`, read from ``.git`` directly: nothing here starts
a process, tests/test_layers.py) and the recorded parameters of the stages behind the figure
(:func:`stage_params`). :mod:`explorer.render.pack` writes it under the plot and into each
file's metadata and the manifest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from explorer.render import identity, read
from tying.cache import summary_types
from tying.cache.summary_types import Summary, model_label, stored_as

ROOT = Path(__file__).resolve().parents[2]

HIDDEN_PARAMS = {"inputs", "stage", "corpus_sha256", "tied", "untied", "tied_revision", "untied_revision"}
"""Stage parameters a source line leaves out: hashes, and the models (named once already)."""


def git_commit(root: Path = ROOT) -> str:
    """The short commit of the checkout at ``root`` (what ``git rev-parse --short HEAD`` says
    for an unambiguous 7-digit prefix), read from ``.git``; "unknown" outside a checkout."""
    git = root / ".git"
    try:
        if git.is_file():  # a worktree or a submodule: "gitdir: <path>"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        common = git
        if (git / "commondir").is_file():  # a worktree keeps its branches in the main .git
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head[:7] if re.fullmatch(r"[0-9a-f]{40}", head) else "unknown"
        name = head[4:].strip()
        for base in (git, common):
            if (base / name).is_file():
                return (base / name).read_text().strip()[:7]
        for base in (git, common):
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    sha, _, ref_name = line.partition(" ")
                    if ref_name == name and re.fullmatch(r"[0-9a-f]{40}", sha):
                        return sha[:7]
    except (OSError, IndexError):
        pass
    return "unknown"


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if summary_types.is_local_path(v):
        try:  # a path under the repository reads the same on every machine
            inside = Path(v).relative_to(ROOT)
        except ValueError:  # one elsewhere on the builder's disk: its name only
            return summary_types.path_name(v)
        return summary_types.path_name(v) if "site-packages" in inside.parts else str(inside)
    return str(v)


def stage_params(stages: dict, wanted: tuple[str, ...] | None) -> str:
    """The recorded parameters of the wanted stages, briefly: ``alignment: held_out=0.2, seed=0``.
    Stages ``<name>:<cell>`` (a sweep's) are one group, a parameter that differs between
    them listed as its values (``d_model=32/64/128``)."""
    groups: dict[str, dict[str, list]] = {}
    for stage, info in stages.items():
        group = stage.split(":", 1)[0]
        if wanted is not None and group not in wanted:
            continue
        params = groups.setdefault(group, {})
        for key, v in ((info or {}).get("params") or {}).items():
            if key in HIDDEN_PARAMS or v is None or isinstance(v, dict):
                continue
            text = ",".join(_value(x) for x in v) if isinstance(v, list) else _value(v)
            if text and text not in params.setdefault(key, []):
                params[key].append(text)
    parts = []
    for group, params in groups.items():
        def order(x: str):
            try:
                return (0, float(x), x)
            except ValueError:
                return (1, 0.0, x)
        cells = [f"{k}={'/'.join(sorted(vs, key=order))}" for k, vs in params.items() if vs]
        if cells:
            parts.append(f"{group}: {', '.join(cells)}")
    return "; ".join(parts)


def _where_from(s: Summary) -> str:
    """The models of a cache (source@revision), or the published data it was built from."""
    models = s.models
    named = [f"{role} {model_label(m)}" + (f"@{m['revision']}" if m.get("revision") else "")
             for role, m in models.items() if m and m.get("source")]
    if named:
        return "models: " + ", ".join(named)
    repos = []
    for src in s.sources or []:
        text = f"{src.get('repository')}@{str(src.get('commit') or '')[:7]}".rstrip("@")
        if src.get("repository") and text not in repos:
            repos.append(text)
    if repos:
        licence = next((src.get("license", "").split(" (")[0] for src in s.sources if src.get("license")), "")
        return "data: " + ", ".join(repos) + (f" ({licence})" if licence else "")
    return ""


def source_line(ref: read.CacheRef, s: Summary, stages: tuple[str, ...], commit: str) -> str:
    """Where a figure comes from: the cache, its models (or data), this repository's commit and
    the parameters of the stages behind it (a figure's ``stages``; none named: every stage)."""
    parts = [f"weight-tying explorer @ {commit}, cache '{ref.name}' ({s.kind or 'pair'})"]
    where = _where_from(s)
    if where:
        parts.append(where)
    params = stage_params(s.stages, stages or None)
    if params:
        parts.append(params)
    return "Source: " + "; ".join(parts) + "."


@read.memo(16)
def build_tables(ref: read.CacheRef) -> tuple[pd.DataFrame, pd.DataFrame]:
    """How a cache was built, as the Overview's provenance tables (once per cache, read-only):
    its meta rows (key, value) and one row per stage (stage, seconds, finished, parameters),
    every path on the builder's disk as its file or folder name."""
    meta = read.table(ref, "meta").sort_values("key")[["key", "value"]].reset_index(drop=True)
    meta["value"] = [_published_text(v) for v in meta["value"]]
    stages = pd.DataFrame([{"stage": k, "seconds": v["seconds"], "finished": v["finished_at"],
                            "parameters": json.dumps(summary_types.without_local_paths(v["params"]))}
                           for k, v in read.summary(ref).stages.items()],
                          columns=["stage", "seconds", "finished", "parameters"])
    return meta, stages


def _published_text(value):
    """A meta value (text, often JSON) with the builder's paths as their names."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return json.dumps(summary_types.without_local_paths(parsed)) if isinstance(parsed, (dict, list)) \
        else summary_types.without_local_paths(value)


@identity.per_object
def models_table(s: Summary) -> pd.DataFrame:
    """The Overview's table of a cache's models, one row per role (tied, untied): where it came
    from (a local model's file: its name, size and sha256), its revision and commit, its shape
    and how its matrix was stored."""
    rows = []
    models = s.models or {}
    local = any(m and summary_types.is_local_source(str(m.get("source") or "")) for m in models.values())
    for role in ("tied", "untied"):
        m = models.get(role)
        if not m:
            continue
        rows.append({"role": role, "model": model_label(m),
                     **({"file": summary_types.model_source(m)
                         if summary_types.is_local_source(str(m.get("source") or "")) else ""}
                        if local else {}),
                     "revision": m.get("revision") or "",
                     "commit": (m.get("commit_sha") or "")[:12], "type": m.get("model_type"),
                     "tied in weights": "yes" if m.get("tied_in_weights") else "no", "d": m.get("d_model"),
                     "vocab": m.get("n_vocab"), "parameters": f"{m.get('n_params', 0):,}",
                     "embedding share": f"{m.get('embedding_share', 0):.1%}", "stored as": stored_as(m.get("dtype"))})
    return pd.DataFrame(rows)
