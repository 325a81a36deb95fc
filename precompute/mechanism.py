"""`precompute mechanism`: why does T turn output-like? Tied twins that separate the output-side
gradient's size from its reach (and AdamW from plain SGD), measured against an untied twin.

Every arm's run is the demo's tied twin T of a seed (same corpus, tokenizer, size, initialisation
and batch order: :func:`tying.toylab.train.train_twins`) with one change, an arm of
:data:`tying.analysis.mechanism.ARMS`; the null arm is the baseline recipe from another start and
batch order (the toy lab's T'). Per seed the untied twin is trained once from its own seed
(independent twins; ``--shared-start``: T's), and once more by SGD for the SGD arm. Each run is
written to ``cache/<name>.duckdb`` (kind ``mechanism``) as soon as it is done, its row and its
curve together (one stage per arm and seed): a killed run resumes without retraining finished
arms. The SGD runs take ``--sgd-steps`` steps at the rate of ``--sgd-lr-grid`` with the lowest
validation loss after a probe run of seed 0 (stored, so a rerun reads it back).
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.options import cache_dir_option, check_positive, device_option, internal, option
from precompute.toylab import TwinSettings, check_shape
from tying import layout
from tying.analysis import mechanism as M
from tying.cache.store import cache_path, check_name, params_hash
from tying.cache.writer import CacheWriter
from tying.errors import UserError

PROTOCOL = 2
"""The lab's protocol: a run of another protocol is trained again. 2 (issue 48): the null and
update-balanced arms, the SGD arm against SGD twins for ``--sgd-steps``, the unigram baseline and
T's raw-row cosine with O in every row."""

BUDGET_MIN = 90
"""The training budget the shipped cache keeps to, in minutes on 2 CPU cores (the estimate is
printed before training starts and compared with it)."""


@dataclass
class MechanismConfig(TwinSettings):
    """What `precompute mechanism` does: each option field is the CLI option of its name, checked
    when the config is built."""

    name: str = option("mechanism", help="cache name")
    cache_dir: str = cache_dir_option()
    work_dir: str | None = option(None, shown="`<cache-dir>/toylab/<name>`", help="where the tokenizer and the "
                                  "untied twins' snapshots go")
    seeds: int = option(3, help="seeds per arm (at least 2: the verdicts need an interval over seeds)")
    arms: list[str] = option(list(M.ARMS), help="arms to train, comma-separated: " + ", ".join(M.ARMS))
    vocab_size: int = option(4096, help="BPE vocabulary (the demo's)")
    d_model: int = option(128, help="model width (the demo's)")
    checkpoints: int = option(12, help="log-spaced snapshots per run (the bias curve's points)")
    sgd_lr_grid: list[float] = option([0.3, 1.0, 3.0], help="peak learning rates the SGD arm's probes try "
                                      "(seed 0, scored on the validation split; one value: no probes)")
    sgd_steps: int | None = option(None, shown="2 x `--steps`", help="optimiser steps of the SGD arm, its twin and "
                                   "its probes (SGD learns slower than AdamW: its claim reads 'no claim "
                                   "(undertrained)' unless it gets as far below the unigram as AdamW does)")
    force: bool = option(False, help="retrain and recompute everything")
    device: str | None = device_option()
    command: str | None = internal(None)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        check_name(self.name)
        self.arms = M.parse_arms(self.arms)
        if self.seeds < 2:
            raise UserError(f"--seeds must be at least 2 (an interval over seeds needs two), got {self.seeds}")
        self.check_twins()
        check_positive(self, "vocab_size", "d_model", "checkpoints")
        check_shape(self)
        if not self.sgd_lr_grid or any(not v > 0 for v in self.sgd_lr_grid):
            raise UserError("--sgd-lr-grid: every rate must be > 0")
        if self.sgd_steps is not None and self.sgd_steps < 2:
            raise UserError(f"--sgd-steps must be at least 2, got {self.sgd_steps}")

    @property
    def steps_sgd(self) -> int:
        """The SGD runs' steps: ``--sgd-steps``, or twice ``--steps``."""
        return self.sgd_steps or 2 * self.steps

    def steps_of(self, run: str) -> int:
        """The steps of a run (an arm or an untied twin): the SGD runs' or ``--steps``."""
        return self.steps_sgd if M.by_sgd(run) else self.steps

    def training(self) -> dict:
        """What every run shares (a run's stage is redone when it changes)."""
        keep = self.twin_params(("corpus", "max_chars", "n_layers", "n_heads", "context", "batch_size", "steps", "lr",
                                 "vocab_size", "d_model", "checkpoints", "shared_start"))
        return dict(keep, protocol=PROTOCOL, sgd_steps=self.steps_sgd)


def run_stage(arm: str, seed: int) -> str:
    return f"mechanism:{arm}:s{seed}"


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def output_share_applied(log: pd.DataFrame, early: int) -> float:
    """Mean over steps <= ``early`` of output / (input + output) with the output side as applied
    after the surgery (the natural output side where the run has none)."""
    out = log["grad_output_applied_norm"] if "grad_output_applied_norm" in log else log["grad_output_norm"]
    first = log["step"] <= early
    both = log["grad_input_norm"][first] + out[first]
    return float((out[first] / both.where(both > 0)).mean())


class MechanismRun:
    def __init__(self, cfg: MechanismConfig):
        cfg.check()
        self.cfg = cfg
        self.path = cache_path(cfg.cache_dir, cfg.name)
        self.work = Path(cfg.work_dir or layout.work_dir(cfg.cache_dir, cfg.name))

    def params(self, arm: str, seed: int, digest: str, lr: float) -> dict:
        return {"stage": run_stage(arm, seed), "corpus_sha256": digest, **self.cfg.training(), "arm": arm,
                "seed": seed, "lr": lr}

    # -- training -----------------------------------------------------------------------------

    def _train(self, ids, n_vocab: int, arm: str, seed: int, steps: int | None = None, lr: float | None = None,
               progress=None, checkpoints: int | None = None):
        """One run of seed ``seed``: an untied twin (``arm`` = "untied" or "untied_sgd") or a tied
        arm (T's start and batches; the null arm's from T''s seed)."""
        from tying.toylab.optim import UpdateBalance
        from tying.toylab.surgery import Surgery
        from tying.toylab.train import train_twins

        cfg = self.cfg
        spec = M.ARMS.get(arm)
        variant = ("untied" if spec is None else "tied_rerun" if spec.rerun else
                   "tied_scaled" if spec.input_grad_scale != 1 else "tied")
        surgery = (None if spec is None else UpdateBalance() if spec.update else
                   Surgery(size=spec.size, reach=spec.reach))
        return train_twins(
            ids, variants=(variant,), input_grad_scale=spec.input_grad_scale if spec else 1.0, vocab_size=n_vocab,
            d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads, context=cfg.context,
            batch_size=cfg.batch_size, steps=steps or cfg.steps_of(arm), lr=lr or cfg.lr,
            seed=seed, checkpoint_steps=cfg.checkpoints if checkpoints is None else checkpoints, device=cfg.device,
            optimizer="sgd" if M.by_sgd(arm) else "adamw", surgery=None if surgery is None or surgery.identity else surgery,
            shared_start=cfg.shared_start, progress=progress)[variant]

    def estimate(self, ids, n_vocab: int, todo: list[str], probes: int) -> float:
        """Seconds the training should take: each run's steps at the speed of a timed 4-step run
        of its kind (untied, tied with a gradient surgery, update-balanced, plain tied; start-up
        included)."""
        cfg = self.cfg
        kind = lambda arm: ("untied" if arm in (M.UNTIED, M.UNTIED_SGD) else "size" if arm in ("size", "reach", "both")
                            else "size_update" if arm == "size_update" else "baseline")
        rate = {}
        for k in {kind(a) for a in todo} | ({"baseline"} if probes else set()):
            rate[k] = self._train(ids, n_vocab, k, 0, steps=4, checkpoints=[4]).seconds / 4
        return sum(rate[kind(a)] * cfg.steps_of(a) for a in todo) + probes * cfg.steps_sgd * rate.get("baseline", 0.0)

    def sgd_lr(self, ids, n_vocab: int, writer: CacheWriter, digest: str, log) -> float:
        """The SGD arm's peak learning rate: the grid's rate whose probe (seed 0, ``--sgd-steps``,
        trained on the training tokens less the validation split) scores the lowest validation loss."""
        from tying.cache.store import open_cache, query_df
        from tying.toylab.train import split_eval

        cfg = self.cfg
        if len(cfg.sgd_lr_grid) == 1:
            return float(cfg.sgd_lr_grid[0])
        params = {"stage": "mechanism:lr", "corpus_sha256": digest, **cfg.training(), "grid": list(cfg.sgd_lr_grid)}
        if writer.is_done("mechanism:lr", params_hash(params)):
            con = open_cache(writer.path)
            try:
                probes = query_df(con, "SELECT * FROM mechanism_probe ORDER BY lr")
            finally:
                con.close()
        else:
            train, _ = split_eval(ids, cfg.context)  # train_twins holds out its last 5%: the validation split
            bar = tqdm(total=cfg.steps_sgd * len(cfg.sgd_lr_grid), desc="SGD probes", unit="step", file=sys.stderr,
                       disable=None)
            try:
                probes = pd.DataFrame([{"lr": float(lr), "steps": cfg.steps_sgd, "loss": float(self._train(
                    train, n_vocab, "sgd", 0, lr=lr, progress=lambda *_: bar.update(1), checkpoints=[cfg.steps_sgd])
                    .eval_loss)}
                    for lr in cfg.sgd_lr_grid])
            finally:
                bar.close()
            writer.write_cell("mechanism:lr", params, "mechanism_probe", probes, {"steps": cfg.steps_sgd}, seconds=0.0)
        best = float(probes.loc[probes["loss"].idxmin(), "lr"])
        edge = best in (min(cfg.sgd_lr_grid), max(cfg.sgd_lr_grid))
        log("SGD learning rate: validation loss " + ", ".join(f"{v:.3f} at {lr:g}" for lr, v in
                                                             zip(probes["lr"], probes["loss"]))
            + f" -> {best:g}" + (" (the grid's edge: widen --sgd-lr-grid)" if edge else ""))
        return best

    def untied(self, ids, n_vocab: int, twin: str, seed: int, lr: float, progress) -> tuple[dict, object | None]:
        """The untied twin ``twin`` ("untied" or "untied_sgd") of ``seed``: its snapshots
        ``{step: (I, O)}`` (saved beside the cache, read back on a rerun) and the trained result
        (None when read back)."""
        snap = self.work / f"{twin}-seed{seed}.npz"
        if snap.is_file():
            with np.load(snap, allow_pickle=False) as z:
                steps = sorted({int(k.split("_")[1]) for k in z.files})
                return {s: (z[f"I_{s}"], z[f"O_{s}"]) for s in steps}, None
        res = self._train(ids, n_vocab, twin, seed, lr=lr, progress=progress)
        self.work.mkdir(parents=True, exist_ok=True)
        tmp = snap.with_suffix(".tmp.npz")
        np.savez(tmp, **{f"{m}_{s}": pair[k] for s, pair in res.checkpoints.items() for k, m in ((0, "I"), (1, "O"))})
        tmp.replace(snap)
        return res.checkpoints, res

    # -- measures -------------------------------------------------------------------------------

    def measure(self, arm: str, seed: int, res, untied: dict, lr: float, unigram: float) -> tuple[dict, pd.DataFrame]:
        """The run's row (:data:`M.RUN_COLUMNS`) and curve (:data:`M.CURVE_COLUMNS`), against the
        snapshots ``untied`` of its twin (:func:`M.twin_of`)."""
        from tying.analysis.align import alignment_cosines
        from tying.analysis.share import early_steps_for, output_share
        from tying.analysis.twins import compare_tied_to_twin
        from tying.toylab.train import mean_row_cosine

        cfg = self.cfg
        last = max(untied)
        I, O = untied[last]
        T = res.checkpoints[max(res.checkpoints)][0]
        m = compare_tied_to_twin(T, I, O, seed, device=cfg.device)
        steps = int(res.settings["steps"])
        early = early_steps_for(steps)
        log = res.log
        share = output_share(log["step"], log["grad_input_norm"], log["grad_output_norm"], early_steps=early)
        proxy = output_share(log["step"], log["grad_input_proxy_norm"], log["grad_output_norm"], early_steps=early)
        gap = None
        if "update_input_norm" in log:
            ins, outs = log["update_input_norm"].to_numpy(), log["update_output_norm"].to_numpy()
            gap = float(np.max(np.abs(outs - ins) / np.where(ins > 0, ins, 1.0)))
        row = {"arm": arm, "seed": seed, "optimizer": M.ARMS[arm].optimizer, "lr": lr, "steps": steps,
               "linear_o_t_in": m["O->T linear in-sample"], "linear_i_t_in": m["I->T linear in-sample"],
               "linear_o_t": m["O->T linear held-out"], "linear_i_t": m["I->T linear held-out"],
               "overlap_t_o": m["overlap@10 T~O"], "overlap_t_i": m["overlap@10 T~I"],
               "output_share_early": share["early"], "output_share_early_proxy": proxy["early"],
               "output_share_applied_early": output_share_applied(log, early),
               "cos_start_tied": mean_row_cosine(T, res.checkpoints[0][0]),
               "cos_start_input_untied": mean_row_cosine(I, untied[0][0]), "eval_loss": float(res.eval_loss),
               "seconds": float(res.seconds), "identity_raw_o_t": mean_row_cosine(T, O), "unigram_loss": unigram,
               "update_norm_gap": gap}
        row["bias"] = row["linear_o_t_in"] - row["linear_i_t_in"]
        row["bias_overlap"] = row["overlap_t_o"] - row["overlap_t_i"]
        curve = []
        for step, (t, _) in sorted(res.checkpoints.items()):
            if step not in untied:
                continue
            i_s, o_s = untied[step]
            o_t = float(np.mean(alignment_cosines(o_s, t, "linear", device=cfg.device)))
            i_t = float(np.mean(alignment_cosines(i_s, t, "linear", device=cfg.device)))
            curve.append({"arm": arm, "seed": seed, "step": int(step), "linear_o_t_in": o_t, "linear_i_t_in": i_t,
                          "bias": o_t - i_t})
        return row, pd.DataFrame(curve, columns=list(M.CURVE_COLUMNS))

    def untied_row(self, twin: str, seed: int, res, untied: dict, lr: float, unigram: float) -> dict:
        from tying.toylab.train import mean_row_cosine

        I = untied[max(untied)][0]
        row = dict.fromkeys(M.RUN_COLUMNS)
        row |= {"arm": twin, "seed": seed, "optimizer": "sgd" if M.by_sgd(twin) else "adamw", "lr": lr,
                "steps": int(res.settings["steps"]), "cos_start_input_untied": mean_row_cosine(I, untied[0][0]),
                "eval_loss": float(res.eval_loss), "seconds": float(res.seconds), "unigram_loss": unigram}
        return row

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Path:
        from tying.analysis.sweep import unigram_loss, window_pairs
        from tying.loading.corpus import load_corpus
        from tying.toylab.tokenizer import encode_corpus, train_bpe
        from tying.toylab.train import split_eval

        cfg = self.cfg
        log = lambda msg: tqdm.write(msg, file=sys.stderr)
        writer = CacheWriter(self.path, force=cfg.force, meta={"kind": "mechanism", "name": cfg.name,
                                                               "command": cfg.command, "mechanism": asdict(cfg)})
        if cfg.force:
            for old in self.work.glob("untied*-seed*.npz"):
                old.unlink()
        text = load_corpus(cfg.corpus, cfg.max_chars)
        digest = hashlib.sha256(text.encode()).hexdigest()
        tokenizer = train_bpe(text, cfg.vocab_size, self.work / "tokenizer")
        ids, n_vocab = encode_corpus(tokenizer, text), len(tokenizer)
        train, held = split_eval(ids, cfg.context)
        unigram = unigram_loss(train, window_pairs(held, cfg.context)[1], n_vocab)
        done = lambda arm, seed, lr: writer.is_done(run_stage(arm, seed), params_hash(self.params(arm, seed, digest, lr)))
        probing = "sgd" in cfg.arms and len(cfg.sgd_lr_grid) > 1 and not writer.is_done(
            "mechanism:lr", params_hash({"stage": "mechanism:lr", "corpus_sha256": digest, **cfg.training(),
                                         "grid": list(cfg.sgd_lr_grid)}))
        sgd_rates = lambda a: cfg.sgd_lr_grid if M.by_sgd(a) else [cfg.lr]
        # the SGD runs' rate is known only after the probes: count one as to do unless its stage is
        # done at some rate of the grid
        todo = [(a, s) for s in range(cfg.seeds) for a in cfg.arms if not any(done(a, s, lr) for lr in sgd_rates(a))]
        seeds_todo = sorted({s for _, s in todo})
        twins = lambda s: sorted({M.twin_of(a) for a, t in todo if t == s})
        twins_todo = [(w, s) for s in seeds_todo for w in twins(s)
                      if not (self.work / f"{w}-seed{s}.npz").is_file()
                      or not any(done(w, s, lr) for lr in sgd_rates(w))]
        log(f"mechanism {cfg.name}: {len(cfg.arms)} arms x {cfg.seeds} seeds on {len(ids):,} tokens "
            f"({cfg.steps} steps each, {cfg.steps_sgd} for SGD); {len(cfg.arms) * cfg.seeds - len(todo)} runs "
            f"already in {self.path}; the unigram scores {unigram:.3f} nats on the evaluation windows")
        if not todo and not twins_todo:
            return self.path
        eta = self.estimate(ids, n_vocab, [a for a, _ in todo + twins_todo], len(cfg.sgd_lr_grid) if probing else 0)
        log(f"estimated training time: about {_fmt(eta)} for {len(todo)} arm runs, {len(twins_todo)} untied twins"
            + (f" and {len(cfg.sgd_lr_grid)} SGD probes" if probing else "")
            + f" (from timed 4-step runs; the shipped cache's budget is {BUDGET_MIN} min on 2 cores)")
        lr_sgd = self.sgd_lr(ids, n_vocab, writer, digest, log) if "sgd" in cfg.arms else None
        rate = lambda a: lr_sgd if M.by_sgd(a) else cfg.lr
        bar = tqdm(total=sum(cfg.steps_of(a) for a, _ in todo + twins_todo), desc="mechanism", unit="step", file=sys.stderr,
                   disable=None)
        t_start = time.perf_counter()
        try:
            for seed in seeds_todo:
                progress = lambda *_: bar.update(1)
                snaps = {}
                for twin in twins(seed):
                    snaps[twin], res = self.untied(ids, n_vocab, twin, seed, rate(twin), progress)
                    if res is not None or not done(twin, seed, rate(twin)):
                        if res is None:  # snapshots read back, the row lost: train again for its loss
                            (self.work / f"{twin}-seed{seed}.npz").unlink()
                            snaps[twin], res = self.untied(ids, n_vocab, twin, seed, rate(twin), progress)
                        row = self.untied_row(twin, seed, res, snaps[twin], rate(twin), unigram)
                        writer.write_cells(run_stage(twin, seed), self.params(twin, seed, digest, rate(twin)),
                                           {"mechanism": pd.DataFrame([row])}, {"arm": twin, "seed": seed},
                                           seconds=res.seconds)
                for arm in [a for a, s in todo if s == seed]:
                    bar.set_postfix_str(f"{arm} seed {seed}")
                    t0 = time.perf_counter()
                    res = self._train(ids, n_vocab, arm, seed, lr=rate(arm), progress=progress)
                    row, curve = self.measure(arm, seed, res, snaps[M.twin_of(arm)], rate(arm), unigram)
                    writer.write_cells(run_stage(arm, seed), self.params(arm, seed, digest, rate(arm)),
                                       {"mechanism": pd.DataFrame([row]), "mechanism_curve": curve},
                                       {"arm": arm, "seed": seed}, seconds=time.perf_counter() - t0)
                    log(f"{arm} seed {seed}: bias {row['bias']:+.3f} (O→T {row['linear_o_t_in']:.3f}, I→T "
                        f"{row['linear_i_t_in']:.3f}), eval loss {row['eval_loss']:.3f}; "
                        f"{_fmt(time.perf_counter() - t_start)} so far")
        finally:
            bar.close()
        log(f"mechanism finished in {_fmt(time.perf_counter() - t_start)} (estimated {_fmt(eta)})")
        return self.path
