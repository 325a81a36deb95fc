"""`precompute sweep`: tied and untied twins over a grid of widths, vocabulary sizes and seeds.

The toy lab's code path (same corpus, tokenizer training, independent twins each from its own
seed unless ``--shared-start``, same held-out text) in every cell, and the headline
numbers of each cell written to ``cache/<name>.duckdb`` (kind ``sweep``) as soon as the
cell is done: a killed sweep restarts where it stopped. ``--shard i/n`` trains every n-th
cell (for a job array); ``precompute sweep-merge`` joins the shard caches into one.

Its options are :mod:`precompute.sweep_config`; reading the caches back and merging shards,
:mod:`precompute.sweep_cache`.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.sweep_cache import has_columns, merge, read_probes
from precompute.sweep_config import SweepConfig, validate
from tying import layout
from tying.analysis import sweep as S
from tying.analysis.share import early_steps_for, output_share
from tying.analysis.twins import compare_tied_to_twin
from tying.cache.store import cache_path, params_hash
from tying.cache.writer import CacheWriter
from tying.loading.corpus import load_corpus
from tying.toylab.tokenizer import encode_corpus, train_bpe

ARMS = {"tied": "tied", "untied": "untied", "tied_matched": "tied"}
"""The models trained in every cell (arm -> the toy lab's variant): the twins, and a tied model of
their depth and width whose feed-forward layers are widened to the untied twin's parameter count
(:func:`S.matched_d_ff`). The matched model starts from the tied twin's own draw (its seed, every
tensor they share equal; the widened feed-forward's new units drawn alike and its output scaled to
the twin's: :func:`tying.toylab.model.widen_feed_forward`) and reads the tied twin's batches."""


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
    flops = lambda d_ff: S.train_flops_per_token(cell.vocab_size, cell.d_model, cfg.n_layers, cfg.context, d_ff=d_ff)
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
           "embedding_share_untied": 2 * rows / n_untied, "identity_raw_o_t": mean_row_cosine(T, O),
           "flops_tied": flops(tied.settings["d_ff"]), "flops_untied": flops(untied.settings["d_ff"]),
           "seconds": float(sum(r.seconds for r in results.values()))}
    matched = results.get("tied_matched")
    if matched is not None:
        row |= {"params_tied_matched": count_params(matched.model),
                "n_layers_matched": int(matched.settings["n_layers"]),
                "d_ff_matched": int(matched.settings["d_ff"] or 4 * cell.d_model),
                "eval_loss_tied_matched": float(matched.eval_loss), "flops_tied_matched": flops(matched.settings["d_ff"])}
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
        self.work = Path(cfg.work_dir or layout.work_dir(cfg.cache_dir, cfg.name))
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
                           order="epochs", num_threads=cfg.threads, shared_start=cfg.shared_start,
                           draw_d_ff=4 * d if arm == "tied_matched" else None, progress=progress)[ARMS[arm]]

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
        writer = CacheWriter(self.path, force=cfg.force or stale, replace=cfg.force, meta={"kind": "sweep", "name": self.name,
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
