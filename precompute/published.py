"""The paper's published real-model measurements as caches: importers and `precompute paper`.

The authors released, with their code (Apache-2.0; ``published/README.md``), per-step
gradient norms of an OLMo-1B tied run (Figure 4) and the embedding evolution of three
untied models (Figures 3, 8, 9). With the figures of the paper's tables
(:mod:`tying.cache.reference`) they make a real-model cache of kind ``published``:

* ``precompute evolution-json --json FILE [--json FILE ...] --name N``: evolution files
  (keys ``model_id``, ``steps``, ``input_vs_init``, ``output_vs_init``,
  ``input_consecutive``, ``output_consecutive``) into the ``runs`` and ``evolution``
  tables of an ``evolution`` cache;
* ``precompute grads``: a provenance CSV (see :mod:`precompute.dynamics`);
* ``precompute paper``: everything in ``published/`` plus the paper's tables into
  ``cache/paper.duckdb``. Every row says where it comes from (``runs.source``,
  ``runs.settings``, and ``meta.sources``).

Bad files give one line ``error: ...`` and write nothing.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from precompute.options import cache_dir_option, internal, option
from tying.analysis.share import DEFAULT_EARLY_STEPS, with_output_share
from tying.cache import reference
from tying.cache.store import cache_path, check_name
from tying.cache.writer import CacheWriter
from tying.errors import UserError, first_line
from tying.loading.gradlog import read_provenance_csv

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED_DIR = ROOT / "published"
AUTHORS_REPO = "github.com/AntonioLopardo/weight-tying-bias"
AUTHORS_COMMIT = "d94ddeef29af9a6b5c3fef471b07f4365db298cc"
LICENSE = "Apache-2.0 (published/LICENSE-Apache-2.0.txt)"

# file in published/ -> its path in the authors' repository
FILES = {
    "olmo-1b-tied-gradient-provenance.csv":
        "experiments/5_gradient_flow/OLMo-1B-tied-no-scale-10000/gradient_provenance.csv",
    "evolution_OLMo-1B-0724-hf.json": "experiments/3_embedding_evolution/",
    "evolution_OLMo-7B-0424-hf.json": "experiments/3_embedding_evolution/",
    "evolution_pythia-1b.json": "experiments/3_embedding_evolution/",
}
FIGURES = {"evolution_OLMo-1B-0724-hf.json": "Figure 3", "evolution_OLMo-7B-0424-hf.json": "Figure 8",
           "evolution_pythia-1b.json": "Figure 9", "olmo-1b-tied-gradient-provenance.csv": "Figure 4"}

EVOLUTION_KEYS = ("steps", "input_vs_init", "output_vs_init", "input_consecutive", "output_consecutive")


def _shown_path(path: Path) -> str:
    """A file of this project as a path relative to its root (the same in every checkout), else as given."""
    try:
        return str(path.resolve().relative_to(PUBLISHED_DIR.resolve().parent))
    except ValueError:
        return str(path)


def source_of(path: Path) -> dict:
    """Where a published file comes from: the file, the authors' repository, commit and path."""
    name = Path(path).name
    return {"file": _shown_path(Path(path)), "repository": AUTHORS_REPO, "commit": AUTHORS_COMMIT,
            "path": FILES.get(name), "figure": FIGURES.get(name), "license": LICENSE}


def _source_text(src: dict) -> str:
    where = f"{src['repository']}@{src['commit'][:12]}" + (f":{src['path']}" if src.get("path") else "")
    return f"{Path(src['file']).name} ({where})"


def read_evolution_json(path) -> tuple[str, pd.DataFrame]:
    """One evolution file as (model id, evolution rows: step, matrix, cos_init, cos_prev).

    The file holds ``model_id`` and five lists of one length: ``steps`` (increasing,
    non-negative integers) and the mean per-token cosines of the input (I) and output (O)
    matrices to the first checkpoint and to the previous one (each in [-1, 1]). The
    first checkpoint has no previous one: its ``cos_prev`` is stored as NaN.
    """
    p = Path(path)
    if not p.is_file():
        raise UserError(f"evolution file '{path}' does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"'{path}' is not a JSON file: {first_line(exc)}") from None
    if not isinstance(data, dict):
        raise UserError(f"'{path}' must hold a JSON object with the keys {', '.join(EVOLUTION_KEYS)}")
    missing = [k for k in EVOLUTION_KEYS if k not in data]
    if missing:
        raise UserError(f"'{path}' has no key(s) {', '.join(missing)}; it has {', '.join(map(str, data))}")
    lists = {k: data[k] for k in EVOLUTION_KEYS}
    if not all(isinstance(v, list) for v in lists.values()):
        raise UserError(f"'{path}': {', '.join(EVOLUTION_KEYS)} must be lists")
    lengths = {len(v) for v in lists.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise UserError(f"'{path}': the lists must be non-empty and of one length, got "
                        + ", ".join(f"{k} {len(v)}" for k, v in lists.items()))
    try:
        steps = np.array([_whole(x) for x in lists["steps"]], dtype=np.int64)
        values = {k: np.array([float(x) for x in lists[k]], dtype=np.float64) for k in EVOLUTION_KEYS[1:]}
    except (TypeError, ValueError):
        raise UserError(f"'{path}': steps must be whole numbers and cosines numbers") from None
    if (steps < 0).any() or (np.diff(steps) <= 0).any():
        raise UserError(f"'{path}': steps must be non-negative and increasing")
    for k, v in values.items():
        if not np.isfinite(v).all() or (np.abs(v) > 1 + 1e-6).any():
            raise UserError(f"'{path}': {k} must hold cosines between -1 and 1")
    model = str(data.get("model_id") or p.stem)
    rows = []
    for i, step in enumerate(steps):
        for matrix, side in (("I", "input"), ("O", "output")):
            rows.append({"step": int(step), "label": f"step {int(step)}", "matrix": matrix,
                         "cos_init": values[f"{side}_vs_init"][i],
                         "cos_prev": math.nan if i == 0 else values[f"{side}_consecutive"][i]})
    return model, pd.DataFrame(rows)


def _whole(x) -> int:
    if isinstance(x, bool) or float(x) != int(float(x)):
        raise ValueError(x)
    return int(float(x))


def evolution_tables(paths) -> dict[str, pd.DataFrame]:
    """runs and evolution rows for several evolution files (one run per model)."""
    runs, evo = [], []
    for path in paths:
        model, rows = read_evolution_json(path)
        if any(r["run"] == model for r in runs):
            raise UserError(f"two evolution files for {model}")
        src = source_of(Path(path))
        runs.append({"run": model, "variant": "checkpoints", "seed": None, "input_grad_scale": None,
                     "steps": int(rows["step"].max()), "final_loss": None, "eval_loss": None, "seconds": None,
                     "source": _source_text(src), "settings": json.dumps({"source": src}), "early_steps": None,
                     "input_norm": None})
        evo.append(rows.assign(run=model))
    if not runs:
        raise UserError("no evolution file given")
    return {"runs": pd.DataFrame(runs), "evolution": pd.concat(evo, ignore_index=True)}


@dataclass
class EvolutionJsonConfig:
    """What `precompute evolution-json` does."""

    json: list[str] = option(repeat=True, help="an evolution file; repeat for several models")
    name: str = option(help="cache name")
    cache_dir: str = cache_dir_option()
    force: bool = option(False, help="replace a cache of another kind that has this name")
    command: str | None = internal(None)

    def __post_init__(self) -> None:
        check_name(self.name)


def import_evolution(cfg: EvolutionJsonConfig) -> Path:
    """`precompute evolution-json`: evolution files into an ``evolution`` cache."""
    name = check_name(cfg.name)
    tables = evolution_tables(cfg.json)  # every file is checked before anything is written
    path = cache_path(cfg.cache_dir, name)
    writer = CacheWriter(path, force=True, replace=cfg.force, meta={"name": name, "kind": "evolution", "command": cfg.command,
                                                  "sources": [source_of(Path(p)) for p in cfg.json]})
    writer.write_stage("training", {"files": [str(p) for p in cfg.json]}, tables, seconds=0.0)
    return path


# -- the paper's real-model cache --------------------------------------------------------


@dataclass
class PaperConfig:
    """What `precompute paper` does; checked when built."""

    data_dir: str = option(str(PUBLISHED_DIR), shown="the project's `published/`",
                           help="folder of the published files")
    name: str = option("paper", help="cache name")
    cache_dir: str = cache_dir_option()
    force: bool = option(False, help="replace a cache of another kind that has this name")
    early_steps: int = option(DEFAULT_EARLY_STEPS, help="the early output share is over logged steps <= this")
    command: str | None = internal(None)
    files: dict = internal(default_factory=lambda: dict(FILES))

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.early_steps < 1:
            raise UserError(f"--early-steps must be a positive step number, got {self.early_steps}")


def paper_tables(cfg: PaperConfig) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame], list[dict]]:
    """(training tables, lens tables, sources) of the paper's cache, every file checked first."""
    data = Path(cfg.data_dir)
    missing = [f for f in cfg.files if not (data / f).is_file()]
    if missing:
        raise UserError(f"'{data}' lacks {', '.join(missing)} (the published files: see published/README.md)")
    csv = data / "olmo-1b-tied-gradient-provenance.csv"
    log, how = read_provenance_csv(csv)
    log = with_output_share(log)
    src = source_of(csv)
    run = "OLMo-1B tied (published run)"
    grads_run = {"run": run, "variant": "imported", "seed": None, "input_grad_scale": 1.0,
                 "steps": int(log["step"].max()), "final_loss": None, "eval_loss": None, "seconds": None,
                 "source": _source_text(src), "settings": json.dumps(how | {"source": src}),
                 "early_steps": int(cfg.early_steps), "input_norm": how["input_norm"]}
    evolution = evolution_tables(sorted(data / f for f in cfg.files if f.endswith(".json")))
    scaling = [{"run": f"OLMo-1B tied, {steps} steps, input x{scale:g} (Table {table})", "seed": None,
                "input_grad_scale": scale,
                "target": target, "method": "paper", "mean_cosine": value}
               for table, steps, cells in (("2", "10k", reference.TABLE2), ("6", "1k", reference.TABLE6))
               for scale, row in cells.items() for target, value in row.items()]
    training = {"runs": pd.concat([pd.DataFrame([grads_run]), evolution["runs"]], ignore_index=True),
                "train_log": log.assign(run=run, grad_input_proxy_norm=np.nan),
                "evolution": evolution["evolution"], "scaling": pd.DataFrame(scaling)}
    lens = {"lens_kl": pd.DataFrame([{"model": model, "lens": "tuned", "layer": layer, "kl_mean": value,
                                      "kl_std": None, "n_tokens": None}
                                     for model, series in reference.TUNED_LENS_KL["olmo"].items()
                                     for layer, value in enumerate(series)])}
    sources = [source_of(data / f) for f in cfg.files] + [
        {"figure": name, "source": f"{reference.PAPER}, {name}", "values": "tying/cache/reference.py"}
        for name in ("Table 1", "Table 2", "Table 5", "Table 6", "tuned-lens KL per layer (OLMo)")]
    return training, lens, sources


def build_paper(cfg: PaperConfig) -> Path:
    """`precompute paper`: cache/paper.duckdb from the published files and the paper's tables."""
    name = check_name(cfg.name)
    t0 = time.perf_counter()
    training, lens, sources = paper_tables(cfg)
    path = cache_path(cfg.cache_dir, name)
    meta = {"name": name, "kind": "published", "preset": "olmo", "command": cfg.command or
            "python -m precompute paper", "sources": sources,
            "about": "published measurements of the paper's authors (real models), and the paper's tables"}
    writer = CacheWriter(path, force=True, replace=cfg.force, meta=meta)
    writer.write_stage("training", {"data_dir": cfg.data_dir, "early_steps": cfg.early_steps}, training,
                       seconds=time.perf_counter() - t0)
    writer.write_stage("lens", {"source": "paper"}, lens, seconds=0.0)
    return path
