"""`precompute sweep`: tied and untied twins over a grid of widths, vocabulary sizes and seeds.

The toy lab's code path (same corpus, tokenizer training, twins with one shared
initialisation and one batch order, same held-out text) in every cell, and the headline
numbers of each cell written to ``cache/<name>.duckdb`` (kind ``sweep``) as soon as the
cell is done: a killed sweep restarts where it stopped. ``--shard i/n`` trains every n-th
cell (for a job array); ``precompute sweep-merge`` joins the shard caches into one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
import time
from dataclasses import InitVar, asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.options import flag_of, internal, option
from precompute.toylab import TwinSettings
from tying.analysis import sweep as S
from tying.analysis.share import early_steps_for, output_share
from tying.analysis.twins import compare_tied_to_twin
from tying.cache.store import (
    CacheWriter,
    cache_path,
    check_name,
    open_cache,
    params_hash,
    query_df,
    read_meta,
    table_exists,
)
from tying.errors import UserError
from tying.toylab.corpus import load_corpus
from tying.toylab.tokenizer import encode_corpus, train_bpe

QUICK = {"widths": [32, 64, 128], "seeds": 2, "steps": 100}
FULL = {"widths": [32, 64, 128, 256], "seeds": 3, "steps": TwinSettings.steps}


def _by_quick(key: str) -> str:
    """How a default that --quick changes reads: "3; `--quick`: 2"."""
    show = lambda v: ",".join(map(str, v)) if isinstance(v, list) else str(v)
    return f"{show(FULL[key])}; `--quick`: {show(QUICK[key])}"


@dataclass
class SweepConfig(TwinSettings):
    """What `precompute sweep` does: each option field is the CLI option of its name (or of its
    ``flag``), checked when the config is built. Widths, seeds and steps left unset are FULL's,
    or QUICK's with ``quick=True``."""

    name: str = option("sweep", help="cache name")
    cache_dir: str = option("cache", help="folder of the caches")
    work_dir: str | None = option(None, shown="`<cache-dir>/toylab/<name>`", help="where the tokenizers go")
    widths: list[int] | None = option(None, flag="--d-model", shown=_by_quick("widths"), help="widths, comma-separated")
    vocab_sizes: list[int] = option([4096], flag="--vocab-size", help="BPE vocabulary sizes, comma-separated "
                                    "(one BPE per size)")
    seeds: int | None = option(None, shown=_by_quick("seeds"), help="seeds per cell")
    steps: int | None = option(None, shown=_by_quick("steps"), help="optimiser steps per twin")
    quick: InitVar[bool] = option(False, help="a small sweep for a first look (widths, seeds and steps as said "
                                  "above; within 5 minutes on 2 cores)")
    shard: str | None = option(None, help="`i/n`: train every n-th cell from the i-th (0 <= i < n), into "
                               "`cache/<name>.shard<i>of<n>.duckdb`")
    force: bool = option(False, help="retrain and recompute everything")
    device: str | None = option(None, shown="`cuda` when present, else `cpu`", help="torch device")
    command: str | None = internal(None)

    def __post_init__(self, quick: bool) -> None:
        for key in ("widths", "seeds", "steps"):
            if getattr(self, key) is None:
                setattr(self, key, copy.copy((QUICK if quick else FULL)[key]))
        self.check()

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        check_name(self.name)
        for key in ("widths", "vocab_sizes"):
            values, flag = getattr(self, key), flag_of(SweepConfig, key)
            if any(v < 1 for v in values):
                raise UserError(f"{flag}: every value must be positive, got {','.join(map(str, values))}")
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise UserError(f"{flag}: {','.join(map(str, twice))} given more than once")
        S.check_grid(self.widths, self.vocab_sizes, self.seeds, self.n_heads)
        S.parse_shard(self.shard)
        self.check_twins()
        if self.steps < 2:
            raise UserError(f"--steps must be at least 2, got {self.steps}")

    def training(self) -> dict:
        """The settings every cell shares (a cell's stage is redone when they change)."""
        return {f.name: getattr(self, f.name) for f in fields(TwinSettings)}


def validate(cfg: SweepConfig) -> None:
    """The checks of :meth:`SweepConfig.check` again, for a config changed after it was built."""
    cfg.check()


@dataclass
class MergeConfig:
    """What `precompute sweep-merge` does."""

    shards: list[str] = option(positional=True, help="the shard cache files")
    name: str = option("sweep", help="the merged cache's name")
    cache_dir: str = option("cache", help="folder of the caches")
    force: bool = option(False, help="start the merged cache afresh")

    def __post_init__(self) -> None:
        check_name(self.name)


def cell_params(cfg: SweepConfig, cell: S.Cell, corpus_digest: str) -> dict:
    return {"stage": cell.stage, "corpus_sha256": corpus_digest, **cfg.training(), **asdict(cell)}


def count_params(model) -> int:
    """Parameters of a model, a tied matrix counted once."""
    return int(sum(p.numel() for p in model.parameters()))


def cell_row(cell: S.Cell, results: dict, cfg: SweepConfig) -> dict:
    """The headline numbers of one cell from its trained twins."""
    tied, untied = results["tied"], results["untied"]
    T = tied.checkpoints[max(tied.checkpoints)][0]
    I, O = untied.checkpoints[max(untied.checkpoints)]
    m = compare_tied_to_twin(T, I, O, cell.seed, device=cfg.device)
    early = early_steps_for(cfg.steps)
    log = tied.log
    share = output_share(log["step"], log["grad_input_norm"], log["grad_output_norm"], early_steps=early)
    proxy = output_share(log["step"], log["grad_input_proxy_norm"], log["grad_output_norm"], early_steps=early)
    n_tied, n_untied = count_params(tied.model), count_params(untied.model)
    rows = cell.vocab_size * cell.d_model
    return {"d_model": cell.d_model, "vocab_size": cell.vocab_size, "seed": cell.seed, "n_layers": cfg.n_layers,
            "steps": cfg.steps, "linear_o_t": m["O->T linear held-out"], "linear_i_t": m["I->T linear held-out"],
            "overlap_t_o": m["overlap@10 T~O"], "overlap_t_i": m["overlap@10 T~I"],
            "output_share_early": share["early"], "output_share_early_proxy": proxy["early"],
            "eval_loss_tied": float(tied.eval_loss), "eval_loss_untied": float(untied.eval_loss),
            "params_tied": n_tied, "params_untied": n_untied, "embedding_share_tied": rows / n_tied,
            "embedding_share_untied": 2 * rows / n_untied, "seconds": float(tied.seconds + untied.seconds)}


class SweepRun:
    def __init__(self, cfg: SweepConfig):
        validate(cfg)
        self.cfg = cfg
        shard = S.parse_shard(cfg.shard)
        self.name = cfg.name if shard is None else f"{cfg.name}.shard{shard[0]}of{shard[1]}"
        self.path = cache_path(cfg.cache_dir, self.name)
        self.work = Path(cfg.work_dir or Path(cfg.cache_dir) / "toylab" / cfg.name)
        self.cells = S.shard_cells(S.grid(cfg.widths, cfg.vocab_sizes, cfg.seeds), shard)

    def run(self, on_cell=None) -> Path:
        """Train every cell not yet in the cache; ``on_cell(cell)`` is called after each is written."""
        from tying.toylab.train import train_twins

        cfg = self.cfg
        log = lambda msg: tqdm.write(msg, file=sys.stderr)
        writer = CacheWriter(self.path, force=cfg.force, meta={"kind": "sweep", "name": self.name,
                                                                "command": cfg.command, "sweep": asdict(cfg)})
        text = load_corpus(cfg.corpus, cfg.max_chars)
        digest = hashlib.sha256(text.encode()).hexdigest()
        todo = [c for c in self.cells if not writer.is_done(c.stage, params_hash(cell_params(cfg, c, digest)))]
        log(f"sweep {self.name}: {len(self.cells)} cells, {len(self.cells) - len(todo)} already in {self.path}")
        if not todo:
            return self.path
        tokens = {}
        cost = {c: S.cell_cost(c, cfg.n_layers) for c in todo}
        bar = tqdm(total=sum(cost.values()), desc="sweep", unit="", unit_scale=True, file=sys.stderr, disable=None,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} work [{elapsed}<{remaining}]")
        t_start, done_cost = time.perf_counter(), 0.0
        try:
            for cell in todo:
                if cell.vocab_size not in tokens:
                    tok = train_bpe(text, cell.vocab_size, self.work / f"tokenizer-{cell.vocab_size}")
                    tokens[cell.vocab_size] = (len(tok), encode_corpus(tok, text))
                n_vocab, ids = tokens[cell.vocab_size]
                per_step = cost[cell] / (2 * cfg.steps)
                bar.set_postfix_str(f"d={cell.d_model} V={cell.vocab_size} seed={cell.seed}")
                t0 = time.perf_counter()
                results = train_twins(ids, variants=("tied", "untied"), vocab_size=n_vocab, d_model=cell.d_model,
                                      n_layers=cfg.n_layers, n_heads=cfg.n_heads, context=cfg.context,
                                      batch_size=cfg.batch_size, steps=cfg.steps, lr=cfg.lr, seed=cell.seed,
                                      checkpoint_steps=[cfg.steps], device=cfg.device,
                                      progress=lambda *_, w=per_step: bar.update(w))
                row = cell_row(cell, results, cfg)
                writer.write_cell(cell.stage, cell_params(cfg, cell, digest), "sweep", pd.DataFrame([row]),
                                  asdict(cell), seconds=time.perf_counter() - t0)
                done_cost += cost[cell]
                spent = time.perf_counter() - t_start
                left = spent / done_cost * (sum(cost.values()) - done_cost)
                log(f"cell d={cell.d_model} V={cell.vocab_size} seed={cell.seed} done in "
                    f"{time.perf_counter() - t0:.0f} s ({todo.index(cell) + 1}/{len(todo)}); about "
                    f"{left / 60:.1f} min left")
                if on_cell is not None:
                    on_cell(cell)
        finally:
            bar.close()
        return self.path


def merge(paths: list[str], name: str, cache_dir: str, *, force: bool = False) -> Path:
    """One sweep cache from shard caches: every cell once; cells of different settings refused."""
    check_name(name)
    if not paths:
        raise UserError("give the shard caches to merge")
    cells: dict[tuple, tuple[dict, pd.Series, float]] = {}
    settings, sweep_meta = None, None
    for p in paths:
        if not Path(p).is_file():
            raise UserError(f"no cache at {p}")
        con = open_cache(p)
        try:
            if not table_exists(con, "sweep"):
                raise UserError(f"{p} is not a sweep cache (no sweep table)")
            rows = query_df(con, "SELECT * FROM sweep")
            sweep_meta = sweep_meta or json.loads(read_meta(con).get("sweep") or "null")
            stages = {r["stage"]: r for r in query_df(con, "SELECT stage, params, seconds FROM stages")
                      .to_dict("records")}
        finally:
            con.close()
        for _, row in rows.iterrows():
            cell = S.Cell(int(row["d_model"]), int(row["vocab_size"]), int(row["seed"]))
            st = stages.get(cell.stage)
            if st is None:
                raise UserError(f"{p}: cell {cell.stage} has rows but no finished stage")
            params = json.loads(st["params"])
            shared = {k: v for k, v in params.items() if k not in ("stage", "d_model", "vocab_size", "seed")}
            if settings is None:
                settings = shared
            elif shared != settings:
                differ = sorted(k for k in set(shared) | set(settings) if shared.get(k) != settings.get(k))
                raise UserError(f"{p} was trained with other settings ({', '.join(differ)}): not one sweep")
            key = (cell.d_model, cell.vocab_size, cell.seed)
            if key in cells and not np.allclose(cells[key][1][list(S.METRICS)].astype(float),
                                                row[list(S.METRICS)].astype(float), equal_nan=True):
                raise UserError(f"cell {cell.stage} is in two shards with different numbers")
            cells[key] = (params, row, float(st["seconds"]))
    if not cells:
        raise UserError("the shard caches hold no cells")
    writer = CacheWriter(cache_path(cache_dir, name), force=force,
                         meta={"kind": "sweep", "name": name, "command": f"merged from {len(paths)} shard caches",
                               "sweep": dict(sweep_meta or {}, shard=None, name=name)})
    for (d, v, s), (params, row, seconds) in sorted(cells.items()):
        writer.write_cell(S.Cell(d, v, s).stage, params, "sweep", pd.DataFrame([row.to_dict()]),
                          {"d_model": d, "vocab_size": v, "seed": s}, seconds=seconds)
    return writer.path
