"""Prediction trajectories of a cache's models on any text: ``python -m precompute trajectory``.

The app runs this in a child process when a visitor types their own text on the Lens page
(the app itself never imports torch); it prints JSON. It needs the cache's models on this
machine (always so for the toy lab's twins) and uses the cache's tuned-lens translators when
one fits the model's unembedding; without one, the logit lens only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from precompute.options import check_positive, option
from tying.cache.store import CacheError, finished_stages, open_cache, stage_params
from tying.errors import UserError
from tying.lens import budget_for
from tying.loading.localmodels import lens_files, model_dirs

MAX_TEXT_CHARS = 2000


@dataclass
class TrajectoryConfig:
    """What `precompute trajectory` does; checked when built."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    text: str = option(help=f"the text to trace (at most {MAX_TEXT_CHARS:,} characters)")
    cache_dir: str = option("cache", help="folder of the caches")
    top_k: int = option(5, help="predictions per cell")
    max_tokens: int = option(32, help="the text is cut to this many tokens (at most 256)")
    device: str | None = option(None, shown="`cuda` when present, else `cpu`", help="`cpu`, `cuda`, `cuda:1`, ...")
    trust_remote_code: bool = option(False, help="allow model code from the model's folder (off by default)")

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise UserError("no text: give --text with at least one visible character")
        if len(self.text) > MAX_TEXT_CHARS:
            raise UserError(f"the text has {len(self.text):,} characters; at most {MAX_TEXT_CHARS:,}")
        if not 1 <= self.max_tokens <= 256:
            raise UserError(f"--max-tokens must be between 1 and 256, got {self.max_tokens}")
        check_positive(self, "top_k")


def _stage_params(cache_path: Path) -> tuple[dict, dict]:
    """The load stage's and the lens stage's recorded parameters."""
    try:
        con = open_cache(cache_path)
    except CacheError as exc:
        raise UserError(exc.message) from None
    try:
        stages = finished_stages(con)
    finally:
        con.close()
    return stage_params(stages, "load"), stage_params(stages, "lens")


def run_trajectory(cfg: TrajectoryConfig, cache_path: Path) -> dict:
    """{"models": {role: {"model": folder, "lens": translator file or None}}, "rows": [...]}:
    one row per model x lens x hidden state x position x rank (the lens_trajectory columns)."""

    from tying.lens.evaluate import prediction_trajectory
    from tying.lens.files import load_lens, unembedding_fingerprint
    from tying.lens.lenses import LogitLens
    from tying.lens.parts import find_lens_parts
    from tying.loading.causal_lm import load_causal_lm
    from tying.loading.device import as_device

    text = cfg.text
    if not cache_path.is_file():
        raise UserError(f"no cache at {cache_path}")
    load, lens_stage = _stage_params(cache_path)
    dirs = model_dirs(load, cache_path)
    if not dirs:
        raise UserError(f"the models of {cache_path.name} are not on this machine (the cache records where they "
                        "were when it was built)")
    device = as_device(cfg.device)
    frames, used = [], {}
    for role, folder in dirs.items():
        model, tok = load_causal_lm(str(folder), device, trust_remote_code=cfg.trust_remote_code)
        parts = find_lens_parts(model)
        fp = unembedding_fingerprint(parts)
        lens, lens_file = None, None
        for f in lens_files(cache_path, role, budget_for(lens_stage.get("budget"), role)):
            lens = load_lens(f, fp, device=device)
            if lens is not None:
                lens_file = f
                break
        lenses = [LogitLens()] if lens is None else [lens, LogitLens()]
        try:
            t = prediction_trajectory(model, tok, text, lenses, top_k=cfg.top_k, max_tokens=cfg.max_tokens,
                                      device=device, parts=parts)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        frames.append(t.assign(model=role))
        used[role] = {"model": str(folder), "lens": str(lens_file) if lens_file else None}
        del model
    rows = pd.concat(frames, ignore_index=True)
    return {"models": used, "rows": rows.to_dict("records")}
