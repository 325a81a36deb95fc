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
import os
import sys
import time
from dataclasses import InitVar, asdict, dataclass, fields, replace
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

QUICK = {"widths": [32, 64, 128], "seeds": 2, "steps": 100, "lr_grid": [3e-3]}
FULL = {"widths": [32, 64, 128, 256], "seeds": 3, "steps": TwinSettings.steps, "lr_grid": [1e-3, 3e-3, 1e-2]}

ARMS = {"tied": "tied", "untied": "untied", "tied_matched": "tied"}
"""The models trained in every cell (arm -> the toy lab's variant): the twins, and a tied model of
their depth and width whose feed-forward layers are widened to the untied twin's parameter count
(:func:`S.matched_d_ff`)."""

PROTOCOL = 3
"""The sweep's protocol: 2 added the matched arm, baselines, the budget, epochs and the learning-rate
choice (issue 20); 3 widens the matched arm's feed-forward layers instead of deepening it, stores
every learning-rate probe (``lr_probe``), scores the probes on the validation split, and records
the in-sample linear map, the untied input matrix's cosine to its start and the bigram's training
tokens (issue 29). A cell of another protocol is trained again."""


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
    steps: int | None = option(None, shown=_by_quick("steps"), help="optimiser steps per arm (unless `--tokens` or "
                               "`--tokens-per-param` sets them)")
    tokens: int | None = option(None, help="training tokens per arm in every cell (steps = tokens / (batch size x "
                                "context), rounded up; warm-up and decay scale with them)")
    tokens_per_param: float | None = option(None, help="training tokens per parameter of the untied twin, per "
                                            "width (the arms of a cell read the same tokens); more than the corpus "
                                            "holds is read in epochs, printed and recorded")
    lr_grid: list[float] | None = option(None, shown=_by_quick("lr_grid"), help="peak learning rates to try per "
                                         "width and arm (probe runs of seed 0 scored on the validation split, the "
                                         "last 5 percent of the training tokens; disjoint from the evaluation windows; "
                                         "one value: no probes, that rate everywhere)")
    lr_probe: float = option(0.25, help="share of a cell's steps each learning-rate probe run takes")
    executor: str | None = option(None, choices=("local", "slurm"), shown="none (train here, in this process)",
                                  help="run the grid as a job array through submitit, `--jobs` tasks each "
                                  "training one `--shard i/n`, merged into `cache/<name>.duckdb` at the end")
    jobs: int = option(2, help="tasks of the job array with `--executor`")
    slurm_partition: str | None = option(None, help="SLURM partition with `--executor slurm`")
    cpus_per_task: int = option(2, help="CPU cores per task with `--executor` (torch threads)")
    timeout_min: int = option(120, help="time limit per task in minutes with `--executor`")
    quick: InitVar[bool] = option(False, help="a small sweep for a first look (widths, seeds and steps as said "
                                  "above; within 5 minutes on 2 cores)")
    shard: str | None = option(None, help="`i/n`: train every n-th cell from the i-th (0 <= i < n), into "
                               "`cache/<name>.shard<i>of<n>.duckdb`")
    force: bool = option(False, help="retrain and recompute everything")
    device: str | None = option(None, shown="`cuda` when present, else `cpu`", help="torch device")
    command: str | None = internal(None)
    threads: int | None = internal(None)

    def __post_init__(self, quick: bool) -> None:
        if self.steps is not None and (self.tokens is not None or self.tokens_per_param is not None):
            raise UserError("give --steps or a budget (--tokens, --tokens-per-param), not both")
        budget = self.tokens is not None or self.tokens_per_param is not None
        for key in ("widths", "seeds", "steps", "lr_grid"):
            if getattr(self, key) is None and not (key == "steps" and budget):
                setattr(self, key, copy.copy((QUICK if quick else FULL)[key]))
        self.check()

    def cell_steps(self, d_model: int, vocab_size: int) -> int:
        """Optimiser steps of every arm of a cell: the budget's, or ``--steps``."""
        if self.tokens is not None:
            return S.budget_steps(self.tokens, self.batch_size, self.context)
        if self.tokens_per_param is not None:
            untied = S.llama_params(vocab_size, d_model, self.n_layers, tied=False)
            return S.budget_steps(self.tokens_per_param * untied, self.batch_size, self.context)
        return self.steps

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
        if self.steps is not None and self.steps < 2:
            raise UserError(f"--steps must be at least 2, got {self.steps}")
        if self.tokens is not None and self.tokens_per_param is not None:
            raise UserError("give --tokens or --tokens-per-param, not both")
        if self.tokens is not None and self.tokens < 1:
            raise UserError(f"--tokens must be positive, got {self.tokens}")
        if self.tokens_per_param is not None and not self.tokens_per_param > 0:
            raise UserError(f"--tokens-per-param must be > 0, got {self.tokens_per_param:g}")
        if not self.lr_grid or any(not lr > 0 for lr in self.lr_grid):
            raise UserError("--lr-grid: every rate must be > 0, got " + (",".join(f"{v:g}" for v in self.lr_grid)
                                                                         or "nothing"))
        if len(set(self.lr_grid)) < len(self.lr_grid):
            raise UserError("--lr-grid: a rate is given more than once")
        if not 0 < self.lr_probe <= 1:
            raise UserError(f"--lr-probe must lie in (0, 1], got {self.lr_probe:g}")
        for key in ("jobs", "cpus_per_task", "timeout_min"):
            if getattr(self, key) < 1:
                raise UserError(f"{flag_of(SweepConfig, key)} must be positive, got {getattr(self, key)}")
        if self.executor is not None and self.shard is not None:
            raise UserError("--executor cuts the grid into shards itself: leave out --shard")
        far = [(v, d) for v in self.vocab_sizes for d in self.widths
               if S.match_error(v, d, self.n_layers) > S.MATCH_TOLERANCE]
        if far:
            v, d = far[0]
            raise UserError(f"--d-model {d}: no widened tied model is within {S.MATCH_TOLERANCE:.0%} of the untied "
                            f"twin's parameters at vocabulary {v} (the width is too large for the vocabulary)")

    def training(self) -> dict:
        """The settings every cell shares (a cell's stage is redone when they change)."""
        out = {f.name: getattr(self, f.name) for f in fields(TwinSettings)}
        return dict(out, protocol=PROTOCOL, tokens=self.tokens, tokens_per_param=self.tokens_per_param,
                    lr_grid=list(self.lr_grid), lr_probe=self.lr_probe)


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


def cell_row(cell: S.Cell, results: dict, cfg: SweepConfig, steps: int | None = None, extra: dict | None = None) -> dict:
    """The headline numbers of one cell from its trained twins (``results``: "tied", "untied" and,
    optionally, "tied_matched"); ``extra``: baselines, budget and learning rates to add."""
    steps = steps or cfg.steps
    tied, untied = results["tied"], results["untied"]
    T = tied.checkpoints[max(tied.checkpoints)][0]
    I, O = untied.checkpoints[max(untied.checkpoints)]
    from tying.toylab.train import mean_row_cosine

    m = compare_tied_to_twin(T, I, O, cell.seed, device=cfg.device)
    I0 = untied.checkpoints[0][0]
    early = early_steps_for(steps)
    log = tied.log
    share = output_share(log["step"], log["grad_input_norm"], log["grad_output_norm"], early_steps=early)
    proxy = output_share(log["step"], log["grad_input_proxy_norm"], log["grad_output_norm"], early_steps=early)
    n_tied, n_untied = count_params(tied.model), count_params(untied.model)
    rows = tied.checkpoints[0][0].shape[0] * cell.d_model
    row = {"d_model": cell.d_model, "vocab_size": cell.vocab_size, "seed": cell.seed, "n_layers": cfg.n_layers,
           "steps": steps, "linear_o_t": m["O->T linear held-out"], "linear_i_t": m["I->T linear held-out"],
           "linear_o_t_in": m["O->T linear in-sample"], "linear_i_t_in": m["I->T linear in-sample"],
           "cos_start_input_untied": mean_row_cosine(I, I0), "d_ff": int(tied.settings["d_ff"] or 4 * cell.d_model),
           "overlap_t_o": m["overlap@10 T~O"], "overlap_t_i": m["overlap@10 T~I"],
           "output_share_early": share["early"], "output_share_early_proxy": proxy["early"],
           "eval_loss_tied": float(tied.eval_loss), "eval_loss_untied": float(untied.eval_loss),
           "params_tied": n_tied, "params_untied": n_untied, "embedding_share_tied": rows / n_tied,
           "embedding_share_untied": 2 * rows / n_untied,
           "seconds": float(sum(r.seconds for r in results.values()))}
    matched = results.get("tied_matched")
    if matched is not None:
        row |= {"params_tied_matched": count_params(matched.model),
                "n_layers_matched": int(matched.settings["n_layers"]),
                "d_ff_matched": int(matched.settings["d_ff"] or 4 * cell.d_model),
                "eval_loss_tied_matched": float(matched.eval_loss)}
    return row | dict(extra or {})


def _fmt_time(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class SweepRun:
    def __init__(self, cfg: SweepConfig):
        validate(cfg)
        self.cfg = cfg
        shard = S.parse_shard(cfg.shard)
        self.name = cfg.name if shard is None else f"{cfg.name}.shard{shard[0]}of{shard[1]}"
        self.path = cache_path(cfg.cache_dir, self.name)
        self.work = Path(cfg.work_dir or Path(cfg.cache_dir) / "toylab" / cfg.name)
        self.cells = S.shard_cells(S.grid(cfg.widths, cfg.vocab_sizes, cfg.seeds), shard)

    def arm_shapes(self, n_vocab: int, d_model: int) -> dict[str, int]:
        """Feed-forward width of each arm: the twins' 4 d; the matched tied model's from the counts
        (every arm has the twins' ``--n-layers`` blocks)."""
        return {"tied": 4 * d_model, "untied": 4 * d_model,
                "tied_matched": S.matched_d_ff(n_vocab, d_model, self.cfg.n_layers)}

    def _train(self, ids, n_vocab: int, d: int, arm: str, d_ff: int, steps: int, lr: float, seed: int,
               progress=None):
        from tying.toylab.train import train_twins

        cfg = self.cfg
        return train_twins(ids, variants=(ARMS[arm],), vocab_size=n_vocab, d_model=d, n_layers=cfg.n_layers,
                           n_heads=cfg.n_heads, d_ff=d_ff, context=cfg.context, batch_size=cfg.batch_size,
                           steps=steps, lr=lr, seed=seed, checkpoint_steps=[steps], device=cfg.device,
                           order="epochs", num_threads=cfg.threads, progress=progress)[ARMS[arm]]

    def probe_steps(self, steps: int) -> int:
        return max(2, round(self.cfg.lr_probe * steps))

    def estimate(self, todo: list[S.Cell], tokens: dict) -> float:
        """Seconds the training of ``todo`` should take: every arm's steps (and its probes) at the
        speed of a short timed run of that arm (4 steps, the first one's start-up included)."""
        cfg, rate, total = self.cfg, {}, 0.0
        n_grid = len(cfg.lr_grid) if len(cfg.lr_grid) > 1 else 0
        probed = set()
        for cell in todo:
            n_vocab, ids = tokens[cell.vocab_size]
            steps = cfg.cell_steps(cell.d_model, cell.vocab_size)
            for arm, d_ff in self.arm_shapes(n_vocab, cell.d_model).items():
                key = (cell.vocab_size, cell.d_model, arm)
                if key not in rate:
                    rate[key] = self._train(ids, n_vocab, cell.d_model, arm, d_ff, 4, cfg.lr, 0).seconds / 4
                extra = n_grid * self.probe_steps(steps) if key not in probed else 0
                probed.add(key)
                total += rate[key] * (steps + extra)
        return total

    def probe_stage(self, vocab_size: int, d: int) -> str:
        return f"sweep:lr:d{d}:v{vocab_size}"

    def choose_lrs(self, ids, n_vocab: int, d: int, vocab_size: int, steps: int, log, writer=None,
                   params: dict | None = None) -> dict[str, float]:
        """Each arm's peak learning rate at this width: the ``--lr-grid`` value with the lowest loss
        on the validation split after a probe run of ``--lr-probe`` x ``steps`` steps (seed 0).

        The probes train on the training tokens less their last 5% and score that 5%, the
        validation split (:func:`validation_split`; the bigram's smoothing is chosen on the same
        tokens); the evaluation windows lie after all of it. With a ``writer`` every probe is
        stored in the ``lr_probe`` table (stage ``sweep:lr:d<d>:v<V>``) and a rerun reads them back."""
        cfg = self.cfg
        if len(cfg.lr_grid) == 1:
            return dict.fromkeys(ARMS, cfg.lr_grid[0])
        stage = self.probe_stage(vocab_size, d)
        if writer is not None and params is not None and writer.is_done(stage, params_hash(params)):
            probes = read_probes(writer.path, d, vocab_size)
        else:
            from tying.toylab.train import split_eval

            train, _ = split_eval(ids, cfg.context)  # train_twins holds out its last 5%: the validation split
            n = self.probe_steps(steps)
            rows = [{"d_model": d, "vocab_size": vocab_size, "arm": arm, "lr": float(lr), "seed": 0, "steps": n,
                     "loss": float(self._train(train, n_vocab, d, arm, d_ff, n, lr, 0).eval_loss)}
                    for arm, d_ff in self.arm_shapes(n_vocab, d).items() for lr in cfg.lr_grid]
            probes = pd.DataFrame(rows, columns=list(S.PROBE_COLUMNS))
            if writer is not None and params is not None:
                writer.write_cell(stage, params, "lr_probe", probes, {"d_model": d, "vocab_size": vocab_size},
                                  seconds=0.0)
        chosen = S.chosen_rates(probes)
        for arm, g in probes.groupby("arm", sort=False):
            edge = chosen[arm] in (min(cfg.lr_grid), max(cfg.lr_grid))
            log(f"  d={d} {arm}: validation loss " + ", ".join(f"{v:.3f} at {lr:g}" for lr, v in zip(g["lr"], g["loss"]))
                + f" -> lr {chosen[arm]:g}" + (" (the grid's edge: a better rate may lie beyond it; widen "
                                                 "--lr-grid)" if edge else ""))
        return chosen

    def baselines(self, ids, n_vocab: int) -> dict:
        """Unigram (add-one) and bigram (Dirichlet-interpolated with the unigram, strength chosen on
        the validation split) losses on the evaluation windows, counts from the training tokens."""
        from tying.toylab.train import split_eval

        cfg = self.cfg
        train, held = split_eval(ids, cfg.context)
        fit, valid = split_eval(train, cfg.context)
        vprev, vtgt = S.window_pairs(valid, cfg.context)
        beta = S.fit_beta(fit, vprev, vtgt, n_vocab)
        prev, tgt = S.window_pairs(held, cfg.context)
        return {"unigram_loss": S.unigram_loss(train, tgt, n_vocab), "bigram_loss": S.bigram_loss(
            train, prev, tgt, n_vocab, beta), "bigram_beta": beta, "bigram_train_tokens": int(len(train))}

    def run(self, on_cell=None) -> Path:
        """Train every cell not yet in the cache; ``on_cell(cell)`` is called after each is written.
        With ``--executor``, submit the grid as a job array and merge the shards."""
        cfg = self.cfg
        if cfg.executor is not None:
            return run_on_executor(cfg, make_executor(cfg, Path(cfg.cache_dir) / "submitit" / cfg.name))
        from tying.toylab.train import split_eval

        log = lambda msg: tqdm.write(msg, file=sys.stderr)
        stale = not cfg.force and self.path.is_file() and not has_columns(self.path, S.THIRD_METRICS)
        if stale:
            log(f"{self.path} was written by an earlier protocol (no widened matched arm, no stored probes): "
                "starting it afresh")
        writer = CacheWriter(self.path, force=cfg.force or stale, meta={"kind": "sweep", "name": self.name,
                                                                "command": cfg.command, "sweep": asdict(cfg)})
        text = load_corpus(cfg.corpus, cfg.max_chars)
        digest = hashlib.sha256(text.encode()).hexdigest()
        todo = [c for c in self.cells if not writer.is_done(c.stage, params_hash(cell_params(cfg, c, digest)))]
        log(f"sweep {self.name}: {len(self.cells)} cells, {len(self.cells) - len(todo)} already in {self.path}")
        if not todo:
            return self.path
        tokens, base, lrs = {}, {}, {}
        for v in sorted({c.vocab_size for c in todo}):
            tok = train_bpe(text, v, self.work / f"tokenizer-{v}")
            tokens[v] = (len(tok), encode_corpus(tok, text))
            base[v] = self.baselines(tokens[v][1], tokens[v][0])
            n_train = len(split_eval(tokens[v][1], cfg.context)[0])
            log(f"vocabulary {v}: {len(tokens[v][1]):,} tokens, {n_train:,} of them for training; on the evaluation "
                f"windows the unigram scores {base[v]['unigram_loss']:.3f} nats, the bigram "
                f"{base[v]['bigram_loss']:.3f} (beta {base[v]['bigram_beta']:g})")
            for d in sorted({c.d_model for c in todo if c.vocab_size == v}):
                steps = cfg.cell_steps(d, v)
                seen = steps * cfg.batch_size * cfg.context
                epochs = seen / (((n_train - 1) // cfg.context) * cfg.context)
                d_ff = self.arm_shapes(tokens[v][0], d)
                log(f"  d={d}: {steps} steps x {cfg.batch_size * cfg.context} = {seen:,} tokens per arm, "
                    f"{epochs:.2f} epoch(s) of the training text"
                    + (" (read again: more tokens than the corpus holds)" if epochs > 1 else "")
                    + f"; matched tied model: d_ff {d_ff['tied_matched']} (the twins' {d_ff['tied']})")
        eta = self.estimate(todo, tokens)
        log(f"estimated training time: about {_fmt_time(eta)} for {len(todo)} cells (from timed 4-step runs)")
        work = {c: 3 * cfg.cell_steps(c.d_model, c.vocab_size) for c in todo}
        bar = tqdm(total=sum(work.values()), desc="sweep", unit="step", file=sys.stderr, disable=None)
        t_start, done = time.perf_counter(), 0
        try:
            for cell in todo:
                n_vocab, ids = tokens[cell.vocab_size]
                d, v = cell.d_model, cell.vocab_size
                steps = cfg.cell_steps(d, v)
                if (v, d) not in lrs:
                    probe_params = {"stage": self.probe_stage(v, d), "corpus_sha256": digest, **cfg.training(),
                                    "d_model": d, "vocab_size": v}
                    lrs[(v, d)] = self.choose_lrs(ids, n_vocab, d, v, steps, log, writer, probe_params)
                bar.set_postfix_str(f"d={d} V={v} seed={cell.seed}")
                t0 = time.perf_counter()
                results = {arm: self._train(ids, n_vocab, d, arm, d_ff, steps, lrs[(v, d)][arm], cell.seed,
                                            progress=lambda *_: bar.update(1))
                           for arm, d_ff in self.arm_shapes(n_vocab, d).items()}
                settings = results["tied"].settings
                extra = dict(base[v], tokens_seen=int(settings["tokens_seen"]), epochs=float(settings["epochs"]),
                             **{f"lr_{arm}": float(lr) for arm, lr in lrs[(v, d)].items()})
                row = cell_row(cell, results, cfg, steps, extra)
                writer.write_cell(cell.stage, cell_params(cfg, cell, digest), "sweep", pd.DataFrame([row]),
                                  asdict(cell), seconds=time.perf_counter() - t0)
                done += work[cell]
                left = (time.perf_counter() - t_start) / done * (sum(work.values()) - done)
                log(f"cell d={d} V={v} seed={cell.seed} done in {time.perf_counter() - t0:.0f} s "
                    f"({todo.index(cell) + 1}/{len(todo)}); about {left / 60:.1f} min left")
                if on_cell is not None:
                    on_cell(cell)
        finally:
            bar.close()
        return self.path


def has_columns(path: Path, columns) -> bool:
    """Whether the cache at ``path`` has a sweep table with all of ``columns`` (True without one)."""
    con = open_cache(path)
    try:
        if not table_exists(con, "sweep"):
            return True
        have = set(query_df(con, "SELECT * FROM sweep LIMIT 0").columns)
    finally:
        con.close()
    return set(columns) <= have


def read_probes(path: Path, d_model: int, vocab_size: int) -> pd.DataFrame:
    """The stored learning-rate probes of one width and vocabulary."""
    con = open_cache(path)
    try:
        return query_df(con, "SELECT * FROM lr_probe WHERE d_model = ? AND vocab_size = ? ORDER BY arm, lr",
                        [d_model, vocab_size])
    finally:
        con.close()


def validation_split(ids: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(probe training tokens, validation tokens): the training tokens (all but the held-out end)
    split again the same way; the validation tokens end where the held-out tokens begin."""
    from tying.toylab.train import split_eval

    return split_eval(split_eval(ids, context)[0], context)


def make_executor(cfg: SweepConfig, folder: Path):
    """A submitit executor for ``cfg.executor``: "slurm" (a job array on a cluster) or "local"
    (the same path as subprocesses here); logs and pickles go to ``folder``."""
    import submitit

    if cfg.executor == "slurm":
        ex = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        params = {"timeout_min": cfg.timeout_min, "cpus_per_task": cfg.cpus_per_task,
                  "slurm_array_parallelism": cfg.jobs, "name": f"sweep-{cfg.name}"}
        if cfg.slurm_partition:
            params["slurm_partition"] = cfg.slurm_partition
        ex.update_parameters(**params)
        return ex
    ex = submitit.LocalExecutor(folder=str(folder))
    ex.update_parameters(timeout_min=cfg.timeout_min)
    return ex


def run_shard(cfg: SweepConfig) -> str:
    """One task of the job array: train one shard into its own cache; its path."""
    return str(SweepRun(cfg).run())


def run_on_executor(cfg: SweepConfig, executor) -> Path:
    """The grid as a job array of ``cfg.jobs`` tasks (task i trains ``--shard i/n``), then the
    shard caches merged into ``cache/<name>.duckdb``. Any submitit executor (a test passes
    ``submitit.DebugExecutor``)."""
    n = min(cfg.jobs, len(S.grid(cfg.widths, cfg.vocab_sizes, cfg.seeds)))
    threads = cfg.cpus_per_task if cfg.executor == "slurm" else max(1, (os.cpu_count() or 1) // n)
    tasks = [replace(cfg, executor=None, shard=f"{i}/{n}", threads=threads) for i in range(n)]
    jobs = executor.map_array(run_shard, tasks)
    tqdm.write(f"sweep {cfg.name}: submitted {n} tasks ({', '.join(str(j.job_id) for j in jobs)}); waiting",
               file=sys.stderr)
    paths = [j.result() for j in jobs]
    return merge(paths, cfg.name, cfg.cache_dir, force=True)


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
