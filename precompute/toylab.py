"""`precompute demo`: the toy lab. Train tied and untied twins here, analyse them like a real pair.

Steps: corpus -> byte-level BPE -> for each seed: the tied model T, its untied twin (I, O) from
an initial draw and a batch order of its own (the paper's independently trained pairs), T with
the input-side gradient scaled (T's start and batches: an intervention on that run), a second
independent tied run T' (the ceiling: how alike two runs of T are) and, with ``--control``, an
untied twin from T's start and batches (the shared-start control) -> `precompute pair` on
(tied, untied) of the first seed, with token frequencies from the corpus -> the training stage
(gradient provenance, embedding evolution, input-gradient scaling, and per seed every headline
number: alignment, overlap@10, CKA, spectral distance, tuned-lens KL, against I, O and T').
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import InitVar, asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.lens import LensOptions
from precompute.options import cache_dir_option, check_positive, device_option, internal, nested, option
from precompute.pair import OPTIONAL_STAGES, PairConfig, PairRun
from tying import layout
from tying.analysis.share import TOYLAB_EARLY_FRACTION, early_steps_for, output_share
from tying.analysis.twins import compare_tied_to_twin, positions
from tying.cache.reference import TABLE2_METHOD
from tying.cache.store import cache_path, check_name, params_hash
from tying.cache.summary_types import EARLY_LAYERS, SHARED_START
from tying.cache.writer import CacheWriter, forced_path, publish
from tying.errors import UserError
from tying.loading.corpus import load_corpus
from tying.toylab.tokenizer import encode_corpus, train_bpe


@dataclass
class TwinSettings:
    """How a pair of twins is trained, shared by `precompute demo` and `precompute sweep`."""

    corpus: str = option("python-docs", help="`python-docs` (offline: Python's own documentation), a text file, "
                         "or `hf:<dataset>` (online)")
    max_chars: int = option(1_200_000, help="corpus size cap in characters")
    n_layers: int = option(4, help="transformer blocks")
    n_heads: int = option(4, help="attention heads; the width must divide by it")
    context: int = option(64, help="tokens per training sequence")
    batch_size: int = option(16, help="sequences per step")
    steps: int = option(250, help="optimiser steps per twin")
    lr: float = option(3e-3, help="peak AdamW learning rate")
    shared_start: bool = option(False, help="train the untied twin from the tied model's initial weights and "
                                "batch order (the shared-start control) rather than from its own seed")

    def twin_params(self, names) -> dict:
        """The settings ``names`` as a run's hash covers them; ``shared_start`` only where it is off (a
        cache written before the twins had seeds of their own shared the start, and a rerun with
        ``--shared-start`` reuses it)."""
        return {f: getattr(self, f) for f in names if not (f == "shared_start" and self.shared_start)}

    def check_twins(self) -> None:
        check_positive(self, "max_chars", "n_layers", "n_heads", "context", "batch_size", "steps")


@dataclass
class DemoConfig(TwinSettings):
    """What `precompute demo` does: each option field is the CLI option of its name, checked when
    the config is built."""

    name: str = option("demo", help="cache name")
    cache_dir: str = cache_dir_option()
    work_dir: str | None = option(None, shown="`<cache-dir>/toylab/<name>`", help="where models and tokenizer go")
    vocab_size: int = option(4096, help="BPE vocabulary")
    d_model: int = option(128, help="model width")
    input_grad_scale: list[float] = option([5.0], help="factor(s) on the input-side gradient of the scaled tied "
                                           "twin, e.g. 5 or 2,5,10")
    seeds: int = option(1, help="independent runs; every claim is decided over them (one run: no claim)")
    control: bool = option(False, help="also train, per seed, an untied twin from the tied model's start and "
                           "batches: the shared-start control beside the independent twins")
    checkpoints: int = option(12, help="log-spaced snapshots per run")
    skip: list[str] = option([], help="pair stages to skip: `" + ",".join(OPTIONAL_STAGES) + "`")
    skip_lens: InitVar[bool] = option(False, help="skip the lens stage (same as `--skip lens`)")
    force: bool = option(False, help="retrain and recompute everything")
    device: str | None = device_option()
    command: str | None = internal(None)
    lens: LensOptions = nested(LensOptions, prefix="lens-", only=("steps", "tokens_per_step"),
                               defaults={"steps": 100, "tokens_per_step": 2048, "eval_tokens": 16_384})
    """The tuned lens of each twin, trained on the demo's own corpus at its context (set by the
    run); 2,048 tokens per step are 4 micro-batches of 8 x 64 tokens: 100 steps take about 50 s
    per toy model on 2 CPU cores."""
    early_steps: int | None = option(None, shown=f"the first {TOYLAB_EARLY_FRACTION:.0%} of `--steps`",
                                     help="the early output share is over steps <= this")

    def __post_init__(self, skip_lens: bool) -> None:
        if skip_lens and "lens" not in self.skip:
            self.skip = [*self.skip, "lens"]
        self.check()

    @property
    def trains_control(self) -> bool:
        """Whether a shared-start control twin is trained beside the independent one (with
        ``--shared-start`` the untied twin is that control already)."""
        return self.control and not self.shared_start

    def early(self) -> int:
        return self.early_steps or early_steps_for(self.steps)

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        check_name(self.name)
        if not self.input_grad_scale or any(not f > 0 for f in self.input_grad_scale):
            raise UserError("--input-grad-scale must be > 0, got "
                            f"{','.join(f'{f:g}' for f in self.input_grad_scale) or 'nothing'}")
        self.check_twins()
        check_positive(self, "vocab_size", "d_model", "seeds", "checkpoints", "lens.steps", "lens.tokens_per_step")
        if self.early_steps is not None and self.early_steps < 1:
            raise UserError(f"--early-steps must be a positive step number, got {self.early_steps}")
        check_shape(self)
        unknown = set(self.skip) - set(OPTIONAL_STAGES)
        if unknown:
            raise UserError(f"unknown stage(s) to skip: {', '.join(sorted(unknown))} "
                            f"(choose from {', '.join(OPTIONAL_STAGES)})")


def check_shape(cfg) -> None:
    """UserError for a vocabulary, width or snapshot count the twins cannot have (`demo`, `mechanism`)."""
    if cfg.vocab_size <= 256:
        raise UserError(f"--vocab-size must exceed the 256 byte tokens, got {cfg.vocab_size}")
    if cfg.d_model % cfg.n_heads:
        raise UserError(f"--d-model {cfg.d_model} is not divisible by --n-heads {cfg.n_heads}")
    if cfg.checkpoints + 1 > cfg.steps:
        raise UserError(f"--steps {cfg.steps} is too few for {cfg.checkpoints} log-spaced checkpoints")


def validate(cfg: DemoConfig) -> None:
    """The checks of :meth:`DemoConfig.check` again, for a config changed after it was built."""
    cfg.check()


CONTROL = "untied_shared_start"
"""The run name of the shared-start control twin (``--control``)."""


def run_id(variant: str, scale: float, seed: int) -> str:
    name = f"tied_scaled_x{scale:g}" if variant == "tied_scaled" else variant
    return f"{name}/seed{seed}"


def planned_runs(cfg, scales: list[float]) -> list[str]:
    """Every run the demo trains, in training order: per seed T, the untied twin, the scaled T's,
    T' and, with ``--control`` (and independent twins), the shared-start control."""
    control = [CONTROL] if cfg.trains_control else []
    return [run_id(v, f, s) for s in range(cfg.seeds) for v, f in
            [("tied", 1.0), ("untied", 1.0)] + [("tied_scaled", f) for f in scales] + [("tied_rerun", 1.0)]
            + [(c, 1.0) for c in control]]


DYNAMICS_VARIANTS = ("tied", "untied", "tied_scaled")
"""The runs whose logs and snapshots the training dynamics show (T' and the control are for the
per-seed comparison only)."""


def scaling_cosines(T: np.ndarray, M: np.ndarray, fit_idx, eval_idx, device=None) -> dict[str, float]:
    """Table 2's cells: mean per-token cosine of the tied matrix ``T`` mapped onto an untied matrix ``M``.

    ``T``, ``M``: (n_tokens, d) arrays, rows the same tokens. TABLE2_METHOD is the paper's column (the
    authors' reproduce_table2.py): orthogonal Procrustes on centred rows, fitted and scored on the
    same rows. The others are labelled extras; the linear map is fitted on ``fit_idx`` and scored on
    ``eval_idx``.
    """
    from tying.analysis.align import alignment_cosines

    values = {
        TABLE2_METHOD: alignment_cosines(T, M, "orthogonal", device=device),
        "identity (raw rows)": alignment_cosines(T, M, "identity_raw", device=device),
        "identity": alignment_cosines(T, M, "identity", device=device),
        "linear held-out": alignment_cosines(T, M, "linear", fit_idx=fit_idx, eval_idx=eval_idx, device=device),
    }
    return {method: float(np.mean(cos)) for method, cos in values.items()}


def _final(result) -> tuple[np.ndarray, np.ndarray]:
    return result.checkpoints[max(result.checkpoints)]


class DemoRun:
    def __init__(self, cfg: DemoConfig):
        validate(cfg)
        self.cfg = cfg
        self.path = cache_path(cfg.cache_dir, cfg.name)
        self.work = Path(cfg.work_dir or layout.work_dir(cfg.cache_dir, cfg.name))
        # --force builds the new cache beside the old one and renames it over when complete
        self.staged = forced_path(self.path) if cfg.force else self.path

    def training_params(self, corpus_digest: str) -> dict:
        c = asdict(self.cfg)
        for k in ("name", "cache_dir", "work_dir", "skip", "force", "device", "command", "lens"):
            c.pop(k)
        return {"stage": "training", "corpus_sha256": corpus_digest, **c}

    def run_dir(self, rid: str) -> Path:
        return self.work / rid.replace("/", "-")

    def model_dir(self, variant: str, scale: float, seed: int) -> Path:
        return self.run_dir(run_id(variant, scale, seed))

    def run(self) -> Path:
        from tying.toylab.train import save_model, train_twins

        cfg = self.cfg
        t_start = time.perf_counter()
        log = lambda msg: tqdm.write(msg, file=sys.stderr)
        # checks the cache location before any work, and knows the finished stages
        cached = CacheWriter(self.path, force=cfg.force, meta={"kind": "toylab"})
        text = load_corpus(cfg.corpus, cfg.max_chars)
        digest = hashlib.sha256(text.encode()).hexdigest()
        self.work.mkdir(parents=True, exist_ok=True)
        corpus_file = self.work / "corpus.txt"
        corpus_file.write_text(text, encoding="utf-8")
        log(f"corpus: {len(text):,} characters ({cfg.corpus})")
        tokenizer = train_bpe(text, cfg.vocab_size, self.work / "tokenizer")
        tokens = encode_corpus(tokenizer, text)
        log(f"tokenizer: {len(tokenizer)} tokens; corpus: {len(tokens):,} tokens")

        scales = list(dict.fromkeys(cfg.input_grad_scale))
        phash = params_hash(self.training_params(digest))
        runs = planned_runs(cfg, scales)
        if cached.is_done("training", phash) and all((self.run_dir(r) / "config.json").is_file()
                                                      for r in runs):
            log("training: cached (same corpus and settings); use --force to retrain")
            self.run_pair(corpus_file)
            self.backfill_seed_metrics(self.corpus_counts(corpus_file, len(tokenizer)), self.training_params(digest), log)
            log(f"demo finished in {time.perf_counter() - t_start:.0f} s")
            return self.path
        results: dict[str, object] = {}
        total = cfg.steps * len(runs)
        with tqdm(total=total, desc="training twins", unit="step", file=sys.stderr, disable=None) as bar:
            def progress(variant, step, steps, loss):
                bar.update(1)
                if step % 25 == 0 or step == steps:
                    bar.set_postfix_str(f"{variant} loss {loss:.3f}")

            common = dict(vocab_size=len(tokenizer), d_model=cfg.d_model, n_layers=cfg.n_layers,
                          n_heads=cfg.n_heads, context=cfg.context, batch_size=cfg.batch_size, steps=cfg.steps,
                          lr=cfg.lr, checkpoint_steps=cfg.checkpoints, progress=progress, device=cfg.device)
            for seed in range(cfg.seeds):
                first = train_twins(tokens, variants=("tied", "untied", "tied_scaled"),
                                    input_grad_scale=scales[0], seed=seed, shared_start=cfg.shared_start, **common)
                for variant, res in first.items():
                    results[run_id(variant, res.input_grad_scale, seed)] = res
                for f in scales[1:]:
                    res = train_twins(tokens, variants=("tied_scaled",), input_grad_scale=f, seed=seed,
                                      **common)["tied_scaled"]
                    results[run_id("tied_scaled", f, seed)] = res
                # T' from its own seed even with --shared-start: two runs of one start are one run
                results[run_id("tied_rerun", 1.0, seed)] = train_twins(
                    tokens, variants=("tied_rerun",), seed=seed, **common)["tied_rerun"]
                if cfg.trains_control:
                    results[run_id(CONTROL, 1.0, seed)] = train_twins(
                        tokens, variants=("untied",), seed=seed, shared_start=True, **common)["untied"]
        for rid, res in results.items():
            save_model(res.model, tokenizer, self.run_dir(rid))

        self.run_pair(corpus_file)

        t0 = time.perf_counter()
        tables = self.training_tables(results, scales, corpus_file, self.corpus_counts(corpus_file, len(tokenizer)))
        writer = CacheWriter(self.staged, meta={"kind": "toylab", "toylab": asdict(cfg),
                                                "corpus_chars": len(text), "corpus_tokens": int(len(tokens))})
        writer.write_stage("training", self.training_params(digest), tables,
                           seconds=time.perf_counter() - t0 + sum(r.seconds for r in results.values()))
        if self.staged != self.path:
            publish(self.staged, self.path)
        log(f"demo finished in {time.perf_counter() - t_start:.0f} s")
        return self.path

    def backfill_seed_metrics(self, counts: np.ndarray, params: dict, log) -> None:
        """Per-seed metrics added since the training was cached (today Spearman's rho of log count
        against T's position between I and O), from each seed's saved final twins; the training
        stage is rewritten, its other rows as they were, only when a value is new or changed."""
        from tying.analysis import token_traits as traits
        from tying.cache.store import open_cache, query_df
        from tying.loading.weights import load_model_matrices

        with open_cache(self.path) as con:
            stored = {t: query_df(con, f"SELECT * FROM {t}") for t in ("runs", "train_log", "evolution", "scaling",
                                                                       "seed_metrics")}
            seconds = float(query_df(con, "SELECT seconds FROM stages WHERE stage = 'training'").iloc[0, 0])
        have = stored["seed_metrics"]
        rows = []
        for seed in range(self.cfg.seeds):
            T = load_model_matrices(str(self.model_dir("tied", 1.0, seed)), role="tied").input
            twin = load_model_matrices(str(self.model_dir("untied", 1.0, seed)), role="untied")
            pos = positions(T, twin.input, twin.output, device=self.cfg.device)
            rows.append({"seed": seed, "metric": traits.POSITION_RHO,
                         "value": traits.spearman(traits.log_count(counts), pos)[0]})
        old = have[have["metric"] == traits.POSITION_RHO].set_index("seed")["value"].to_dict()
        if all(abs(old.get(r["seed"], np.inf) - r["value"]) < 1e-9 for r in rows):
            return
        log(f"training: {len(rows)} per-seed value(s) of {traits.POSITION_RHO} from the saved twins")
        stored["seed_metrics"] = pd.concat([have[have["metric"] != traits.POSITION_RHO], pd.DataFrame(rows)],
                                           ignore_index=True)
        CacheWriter(self.path).write_stage("training", params, stored, seconds=seconds)

    def corpus_counts(self, corpus_file: Path, n_vocab: int) -> np.ndarray:
        """Each token's count in the corpus, counted as the pair's load stage counts it (so the per-seed
        figures and the cache's token tables agree)."""
        from precompute.stages import token_frequencies

        folder = self.model_dir("tied", 1.0, 0)
        return token_frequencies(str(folder), str(corpus_file), n_vocab)

    def run_pair(self, corpus_file: Path) -> None:
        """The pair analyses on seed 0's twins and its T' (the ceiling), with token frequencies from the corpus."""
        cfg = self.cfg
        run = PairRun(PairConfig(
            tied=str(self.model_dir("tied", 1.0, 0)), untied=str(self.model_dir("untied", 1.0, 0)), name=cfg.name,
            ceiling=str(self.model_dir("tied_rerun", 1.0, 0)),
            cache_dir=cfg.cache_dir, text=str(corpus_file), text_is_training=True, skip=list(cfg.skip), force=cfg.force,
            device=cfg.device, kind="toylab", command=cfg.command,
            lens=self.lens_options(corpus_file),
        ))
        if self.staged != self.path:
            run.write_path = self.staged  # the training stage follows into the same file, then it is published
        run.run()

    def lens_options(self, corpus_file: Path):
        """The tuned lens of every seed's twins: the demo's own corpus at its context."""
        cfg = self.cfg
        return replace(cfg.lens, text=str(corpus_file), seq_len=cfg.context, max_chars=cfg.max_chars)

    def seed_lens(self, seed: int, corpus_file: Path) -> dict[str, float]:
        """One seed's twins read by a tuned lens each (the pair stage's recipe: seed 0's lenses are
        the pair stage's own files, reused): the mean tuned-lens KL (bits) over the first
        EARLY_LAYERS hidden states, "tuned-lens KL early tied" and "... untied"."""
        from precompute.lens import LensSetup, read_models
        from tying.device import pick_device

        cfg = self.cfg
        lens_dir = layout.lens_dir(cfg.cache_dir, cfg.name) if seed == 0 else self.work / f"lens-seed{seed}"
        lens_dir.mkdir(parents=True, exist_ok=True)
        models = {role: str(self.model_dir(role, 1.0, seed)) for role in ("tied", "untied")}
        tables, _ = read_models(LensSetup(self.lens_options(corpus_file), lens_dir, pick_device(cfg.device)), models)
        kl = tables["lens_kl"]
        tuned = kl[kl["lens"] == "tuned"].sort_values("layer")
        return {f"tuned-lens KL early {role}": float(tuned[tuned["model"] == role]["kl_mean"].head(EARLY_LAYERS).mean())
                for role in models}

    def training_tables(self, results: dict, scales: list[float], corpus_file: Path,
                        counts: np.ndarray) -> dict[str, pd.DataFrame]:
        from tying.analysis.align_protocol import split_tokens
        from tying.toylab.train import embedding_evolution

        cfg = self.cfg
        runs, logs, evo, scaling, metrics = [], [], [], [], []
        for rid, res in results.items():
            seed = res.settings.get("seed", 0)
            shown = res.variant in DYNAMICS_VARIANTS and not rid.startswith(CONTROL)  # T' and the control: not
            runs.append({"run": rid, "variant": res.variant, "seed": seed, "input_grad_scale": res.input_grad_scale,
                         "steps": int(res.settings.get("steps", cfg.steps)),
                         "final_loss": float(res.log["loss"].iloc[-1]), "eval_loss": float(res.eval_loss),
                         "seconds": float(res.seconds), "source": str(self.run_dir(rid)),
                         "settings": json.dumps(res.settings, default=str), "early_steps": cfg.early(),
                         "input_norm": "exact"})
            if not shown:
                continue
            logs.append(res.log.drop(columns=[c for c in res.log.columns if c == "lr"]).assign(run=rid))
            e = embedding_evolution(res.checkpoints)
            evo.append(e.assign(run=rid, label=e["step"].astype(str)))
        for seed in range(cfg.seeds):
            I, O = _final(results[run_id("untied", 1.0, seed)])
            fit, ev = split_tokens(len(I), 0.2, seed)
            tied_runs = [run_id("tied", 1.0, seed)] + [run_id("tied_scaled", f, seed) for f in scales]
            for rid in tied_runs:
                T = _final(results[rid])[0]
                for target, M in (("I", I), ("O", O)):
                    scaling += [{"run": rid, "seed": seed, "input_grad_scale": results[rid].input_grad_scale,
                                 "target": target, "method": method, "mean_cosine": value}
                                for method, value in scaling_cosines(T, M, fit, ev, device=cfg.device).items()]
            T = _final(results[run_id("tied", 1.0, seed)])[0]
            T2 = _final(results[run_id("tied_rerun", 1.0, seed)])[0]
            spectral = "spectral" not in cfg.skip
            m = compare_tied_to_twin(T, I, O, seed, device=cfg.device, T2=T2, spectral=spectral, counts=counts)
            if run_id(CONTROL, 1.0, seed) in results:  # the shared-start control: the same T, its other twin
                Ic, Oc = _final(results[run_id(CONTROL, 1.0, seed)])
                control = compare_tied_to_twin(T, Ic, Oc, seed, device=cfg.device, spectral=spectral)
                m.update({f"{k} ({SHARED_START})": v for k, v in control.items() if "T'" not in k})
            if "lens" not in cfg.skip:
                m.update(self.seed_lens(seed, corpus_file))
            log = results[run_id("tied", 1.0, seed)].log
            share = output_share(log["step"], log["grad_input_norm"], log["grad_output_norm"], early_steps=cfg.early())
            proxy = output_share(log["step"], log["grad_input_proxy_norm"], log["grad_output_norm"],
                                 early_steps=cfg.early())
            m["output share early"], m["output share overall"] = share["early"], share["overall"]
            m["output share early (proxy input)"] = proxy["early"]
            for rid in [run_id("untied", 1.0, seed)] + tied_runs + [run_id("tied_rerun", 1.0, seed)]:
                m[f"eval loss {rid.split('/')[0]}"] = float(results[rid].eval_loss)
            metrics += [{"seed": seed, "metric": k, "value": v} for k, v in m.items()]
        return {
            "runs": pd.DataFrame(runs),
            "train_log": pd.concat(logs, ignore_index=True),
            "evolution": pd.concat(evo, ignore_index=True),
            "scaling": pd.DataFrame(scaling),
            "seed_metrics": pd.DataFrame(metrics),
        }
