"""Training dynamics of real models: `precompute evolution` and `precompute grads`.

* ``evolution``: embedding evolution (the paper's Figure 3) over a model's checkpoints,
  e.g. allenai/OLMo-1B-0724-hf revisions ``step10000-tokens20B`` or EleutherAI/pythia-1b
  revisions ``step1000``. Each checkpoint is read with the same cheap loader as a pair, one
  at a time (only the first and the previous one stay in memory).
* ``grads``: a gradient-provenance log from a real training run (a CSV with one row per
  logged step) imported into a cache, shown by the app like the toy lab's. When the log has
  ``<column>_effective`` columns (the authors' logs: the norms after input-gradient
  scaling, what reached the matrix) those are read; the cache says which
  (``runs.input_norm``: 'effective' or 'plain'). The early output share is over the logged
  steps with step number <= ``early_steps`` (default 1,000, the paper's window).
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.options import cache_dir_option, internal, option
from tying.analysis.align import rowwise_cosine
from tying.analysis.share import DEFAULT_EARLY_STEPS, with_output_share
from tying.cache.store import cache_path, check_name, short_name
from tying.cache.writer import CacheWriter
from tying.errors import UserError
from tying.loading.gradlog import DEFAULT_COLUMNS, read_provenance_csv


def revision_step(revision: str, index: int) -> int:
    """The training step a revision names ('step10000-tokens20B' -> 10000), else its index."""
    m = re.search(r"step[_-]?(\d+)", revision)
    return int(m.group(1)) if m else index


@dataclass
class EvolutionConfig:
    """What `precompute evolution` does; checked when built."""

    model: str = option(help="a Hugging Face id, or a local folder with one subfolder per revision")
    revisions: list[str] = option(help="comma-separated revisions, the first is the reference")
    name: str | None = option(None, shown="`<model>-evolution`", help="cache name")
    cache_dir: str = cache_dir_option()
    force: bool = option(False, help="replace a cache of another kind that has this name")
    trust_remote_code: bool = option(False, help="allow a hub model's own code to run (off by default)")
    command: str | None = internal(None)

    def __post_init__(self) -> None:
        self.revisions = [r.strip() for r in self.revisions if r.strip()]
        if len(self.revisions) < 2:
            raise UserError("--revisions needs at least two checkpoints, separated by commas")
        if self.name is not None:
            check_name(self.name)


def _checkpoint_source(model: str, revision: str) -> tuple[str, str | None]:
    """A local model folder holds one subfolder per revision; a hub id takes the revision."""
    local = Path(model)
    if local.is_dir():
        sub = local / revision
        if not sub.is_dir():
            raise UserError(f"no checkpoint folder '{sub}' for revision '{revision}'")
        return str(sub), None
    return model, revision


def check_distinct(seen: dict[tuple[str, str], str], revision: str, fingerprint: dict[str, str]) -> None:
    """Refuse a revision whose embedding matrices are identical to an earlier one's.

    Some hubs serve the same weights under several revisions (EleutherAI/pythia issue 205: many
    pythia-2.8b step branches hold the final weights), which would draw a flat, false evolution.
    ``seen``: fingerprints ((input, output) sha256) -> revision, updated in place.
    """
    key = (fingerprint.get("input", ""), fingerprint.get("output", ""))
    if key in seen:
        raise UserError(f"revisions '{seen[key]}' and '{revision}' have identical embedding matrices (the same "
                        "weights served twice, as in EleutherAI/pythia issue 205); pick other revisions")
    seen[key] = revision


def run_evolution(cfg: EvolutionConfig) -> Path:
    from tying.loading.weights import load_model_matrices

    revisions = cfg.revisions
    name = check_name(cfg.name or short_name(cfg.model) + "-evolution")
    path = cache_path(cfg.cache_dir, name)
    writer = CacheWriter(path, force=True, replace=cfg.force, meta={"name": name, "kind": "evolution", "command": cfg.command,
                                                  "model": cfg.model, "revisions": revisions})
    t0 = time.perf_counter()
    rows, first, prev, files = [], None, None, []
    seen: dict[tuple[str, str], str] = {}  # the matrices' fingerprints -> the first revision that had them
    for i, rev in enumerate(tqdm(revisions, desc="checkpoints", file=sys.stderr, disable=None)):
        src, hub_rev = _checkpoint_source(cfg.model, rev)
        m = load_model_matrices(src, hub_rev, trust_remote_code=cfg.trust_remote_code)
        check_distinct(seen, rev, m.fingerprint)
        cur = {"T": m.input} if m.tied else {"I": m.input, "O": m.output}
        if first is None:
            first = cur
        if set(cur) != set(first) or any(cur[k].shape != first[k].shape for k in cur):
            raise UserError(f"revision '{rev}' does not match the first checkpoint (tied flag or matrix shape)")
        for key in cur:
            rows.append({
                "run": cfg.model, "step": revision_step(rev, i), "label": rev, "matrix": key,
                "cos_init": float(np.mean(rowwise_cosine(cur[key], first[key]))),
                "cos_prev": float(np.mean(rowwise_cosine(cur[key], prev[key]))) if prev is not None else float("nan"),
            })
        files.append({"revision": rev, "commit": m.commit, "fingerprint": m.fingerprint})
        prev = cur
    evo = pd.DataFrame(rows).sort_values(["step", "matrix"], ignore_index=True)
    runs = pd.DataFrame([{"run": cfg.model, "variant": "checkpoints", "seed": None, "input_grad_scale": None,
                          "steps": int(evo["step"].max()), "final_loss": None, "eval_loss": None,
                          "seconds": time.perf_counter() - t0, "source": cfg.model,
                          "settings": json.dumps({"revisions": files}, default=str)}])
    writer.write_stage("training", {"model": cfg.model, "revisions": revisions}, {"runs": runs, "evolution": evo},
                       seconds=time.perf_counter() - t0)
    return path


@dataclass
class GradsConfig:
    """What `precompute grads` does; checked when built."""

    csv: str = option(help="the CSV file")
    name: str = option(help="cache name")
    run: str | None = option(None, shown="the file name", help="run label")
    cache_dir: str = cache_dir_option()
    force: bool = option(False, help="replace a cache of another kind that has this name")
    step_column: str = option(DEFAULT_COLUMNS["step"], help="column of the step")
    input_column: str = option(DEFAULT_COLUMNS["input"], help="column of the input-side norm; its `_effective` "
                               "twin is read when present")
    output_column: str = option(DEFAULT_COLUMNS["output"], help="column of the output-side norm; its `_effective` "
                                "twin is read when present")
    loss_column: str | None = option(None, help="optional column of the training loss")
    early_steps: int = option(DEFAULT_EARLY_STEPS, help="the early output share is over logged steps <= this "
                              "(the paper's window)")
    command: str | None = internal(None)

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.early_steps < 1:
            raise UserError(f"--early-steps must be a positive step number, got {self.early_steps}")


def run_grads(cfg: GradsConfig) -> Path:
    name = check_name(cfg.name)
    path = cache_path(cfg.cache_dir, name)
    writer = CacheWriter(path, force=True, replace=cfg.force, meta={"name": name, "kind": "provenance", "command": cfg.command,
                                                  "csv": str(cfg.csv)})
    t0 = time.perf_counter()
    log, how = read_provenance_csv(cfg.csv, step_column=cfg.step_column, input_column=cfg.input_column,
                                   output_column=cfg.output_column, loss_column=cfg.loss_column)
    log = with_output_share(log)
    run = cfg.run or Path(cfg.csv).stem
    runs = pd.DataFrame([{"run": run, "variant": "imported", "seed": None, "input_grad_scale": None,
                          "steps": int(log["step"].max()), "final_loss": float(log["loss"].iloc[-1]),
                          "eval_loss": None, "seconds": None, "source": str(cfg.csv),
                          "settings": json.dumps(how), "early_steps": int(cfg.early_steps),
                          "input_norm": how["input_norm"]}])
    writer.write_stage("training", {"csv": str(cfg.csv), "rows": len(log), "early_steps": cfg.early_steps,
                                    "columns": how["columns"]},
                       {"runs": runs, "train_log": log.assign(run=run)}, seconds=time.perf_counter() - t0)
    return path
