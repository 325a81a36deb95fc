"""Command line: ``python -m precompute {pair,summary} ...``.

Every user mistake ends as one line on stderr (``error: ...``) and exit code 2, with no
cache file touched. ``main(argv)`` returns the exit code so tests run commands in-process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path

from tying.errors import UserError, first_line


class _Parser(argparse.ArgumentParser):
    """argparse that raises UserError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str):
        raise UserError(f"{message} (see 'python -m {self.prog} --help')")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _defaults(cls) -> dict:
    """Field defaults of a config dataclass: the one source of the CLI's defaults."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _add_pair_options(pair: argparse.ArgumentParser) -> None:
    from precompute.lens import LensOptions
    from precompute.pair import MATCH_MODES, PairConfig

    d, lens = _defaults(PairConfig), _defaults(LensOptions)
    pair.add_argument("--tied", help="tied model: Hugging Face id or local directory")
    pair.add_argument("--untied", help="untied model: Hugging Face id or local directory")
    pair.add_argument("--preset", help="one of the paper's pairs: olmo, gptneo-pythia, qwen3")
    pair.add_argument("--name", help="cache name (default: derived from the two models)")
    pair.add_argument("--tied-revision", help="hub revision (branch, tag or commit) of the tied model")
    pair.add_argument("--untied-revision", help="hub revision of the untied model")
    pair.add_argument("--cache-dir", default=d["cache_dir"], help="folder of the caches (default: %(default)s)")
    pair.add_argument("--match", choices=MATCH_MODES, default=d["match"],
                      help="how rows of two different tokenizers are paired: by common token strings, or by "
                      "token id (the paper's Table 1 for GPT-Neo vs Pythia) (default: %(default)s)")
    pair.add_argument("--neighbours-k", type=_positive_int, default=d["neighbours_k"],
                      help="neighbours stored per token; overlap@k is available for every k up to it "
                      "(default %(default)s)")
    pair.add_argument("--held-out", type=float, default=d["held_out"],
                      help="fraction of tokens held out to score fitted maps (default %(default)s)")
    pair.add_argument("--spectral-k", type=_positive_int, default=d["spectral_k"],
                      help="k of the k-NN graphs (default %(default)s)")
    pair.add_argument("--spectral-components", type=_positive_int, default=d["spectral_components"],
                      help="dimensions of the adjacency spectral embedding (default %(default)s)")
    pair.add_argument("--spectral-tokens", type=_positive_int, default=d["spectral_tokens"],
                      help="use a seeded random sample of this many tokens for the spectral distance (for CPUs "
                      "and large vocabularies; the result says it is sampled) (default: all common tokens)")
    pair.add_argument("--umap-tokens", type=_positive_int, default=d["umap_tokens"],
                      help="tokens projected by UMAP; a seeded random sample above (default %(default)s)")
    pair.add_argument("--umap-epochs", type=_positive_int, default=d["umap_epochs"],
                      help="UMAP optimisation epochs (default %(default)s)")
    pair.add_argument("--seed", type=int, default=d["seed"], help="seed for splits and samples (default %(default)s)")
    pair.add_argument("--text", help="a text file: token frequencies for the norm-vs-frequency view")
    pair.add_argument("--skip", default="",
                      help="comma-separated stages to skip: alignment,neighbours,spectral,umap,lens")
    pair.add_argument("--force", action="store_true", help="recompute every stage even if cached")
    pair.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    pair.add_argument("--trust-remote-code", action="store_true",
                      help="allow model code from the hub to run (off by default)")

    pair.add_argument("--skip-lens", action="store_true", help="skip the lens stage (same as --skip lens)")
    pair.add_argument("--lens-text", default=lens["text"],
                      help="lens text: 'python-docs' (offline), a text file, or hf:<dataset> such as hf:wikitext "
                      "(default %(default)s)")
    pair.add_argument("--lens-steps", type=_positive_int, default=lens["steps"],
                      help="tuned-lens optimiser steps (default %(default)s)")
    pair.add_argument("--lens-batch-size", type=_positive_int, default=lens["batch_size"],
                      help="sequences per lens micro-batch; bounds memory (default %(default)s)")
    pair.add_argument("--lens-seq-len", type=_positive_int, default=lens["seq_len"],
                      help="tokens per lens sequence, capped at the model's context (default %(default)s)")
    pair.add_argument("--lens-tokens-per-step", type=_positive_int, default=lens["tokens_per_step"],
                      help="tokens per tuned-lens optimiser step, reached by gradient accumulation over "
                      "micro-batches (default: 262144 on a CUDA GPU, 8192 on a CPU)")
    pair.add_argument("--lens-train-tokens", type=_positive_int, default=lens["train_tokens"],
                      help="tokens of lens training text (default: steps x tokens per step, as far as the text "
                      "allows; a shorter text is cycled)")
    pair.add_argument("--lens-eval-tokens", type=_positive_int, default=lens["eval_tokens"],
                      help="tokens of lens evaluation text, disjoint from training (default %(default)s)")


def _add_twin_options(p: argparse.ArgumentParser, d: dict) -> None:
    """The options `demo` and `sweep` share: the corpus and how each pair of twins is trained."""
    p.add_argument("--corpus", default=d["corpus"],
                   help="'python-docs' (offline: Python's own documentation), a text file, or hf:<dataset> "
                   "(default %(default)s)")
    p.add_argument("--max-chars", type=_positive_int, default=d["max_chars"],
                   help="corpus size cap in characters (default %(default)s)")
    p.add_argument("--n-layers", type=_positive_int, default=d["n_layers"], help="transformer blocks (default %(default)s)")
    p.add_argument("--n-heads", type=_positive_int, default=d["n_heads"],
                   help="attention heads; the width must divide by it (default %(default)s)")
    p.add_argument("--context", type=_positive_int, default=d["context"],
                   help="tokens per training sequence (default %(default)s)")
    p.add_argument("--batch-size", type=_positive_int, default=d["batch_size"],
                   help="sequences per step (default %(default)s)")
    p.add_argument("--lr", type=float, default=d["lr"], help="peak AdamW learning rate (default %(default)s)")
    p.add_argument("--force", action="store_true", help="retrain and recompute everything")
    p.add_argument("--device", help="torch device (default: cuda when present, else cpu)")


def build_parser() -> argparse.ArgumentParser:
    from precompute.dynamics import EvolutionConfig, GradsConfig
    from precompute.published import EvolutionJsonConfig, PaperConfig
    from precompute.sweep import QUICK, SweepConfig
    from precompute.toylab import DemoConfig
    from precompute.trajectory import TrajectoryConfig
    from tying.analysis.share import TOYLAB_EARLY_FRACTION

    p = _Parser(prog="precompute", description="Precompute weight-tying analyses into DuckDB caches.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pair = sub.add_parser("pair", help="analyse a tied/untied model pair and write cache/<name>.duckdb",
                          description="Load a tied and an untied model (Hugging Face ids or local directories), "
                          "run alignment, k-NN overlap, spectral distance, UMAP and the lens, and write the pair's cache.")
    _add_pair_options(pair)
    lens = sub.add_parser("lens", help="only the tuned/logit lens stage of a pair (layerwise KL)",
                          description="Train a tuned lens for each model of a pair and store the per-layer KL "
                          "(tuned and logit lens), the training curves and prediction trajectories in its cache.")
    _add_pair_options(lens)

    d = _defaults(DemoConfig)
    demo = sub.add_parser("demo", help="the toy lab: train tied and untied twins here and analyse them",
                          description="Train small tied, untied and input-gradient-scaled twins on an offline "
                          "corpus (CPU is enough), run every analysis on (tied, untied) and write cache/<name>.duckdb.")
    demo.add_argument("--name", default=d["name"], help="cache name (default: %(default)s)")
    demo.add_argument("--cache-dir", default=d["cache_dir"], help="folder of the caches (default: %(default)s)")
    demo.add_argument("--work-dir", help="where models and tokenizer go (default: <cache-dir>/toylab/<name>)")
    demo.add_argument("--vocab-size", type=_positive_int, default=d["vocab_size"],
                      help="BPE vocabulary (default %(default)s)")
    demo.add_argument("--d-model", type=_positive_int, default=d["d_model"], help="model width (default %(default)s)")
    _add_twin_options(demo, d)
    demo.add_argument("--steps", type=_positive_int, default=d["steps"],
                      help="optimiser steps per twin (default %(default)s)")
    demo.add_argument("--input-grad-scale", default=",".join(f"{f:g}" for f in d["input_grad_scale"]),
                      help="factor(s) on the input-side gradient of the scaled tied twin, e.g. 5 or 2,5,10 "
                      "(default %(default)s)")
    demo.add_argument("--seeds", type=_positive_int, default=d["seeds"],
                      help="independent runs; the summary gives mean and spread (default %(default)s)")
    demo.add_argument("--checkpoints", type=_positive_int, default=d["checkpoints"],
                      help="log-spaced snapshots per run (default %(default)s)")
    demo.add_argument("--early-steps", type=_positive_int, default=d["early_steps"],
                      help="the early output share is over steps <= this "
                      f"(default: the first {TOYLAB_EARLY_FRACTION * 100:.0f}%% of --steps)")
    demo.add_argument("--skip", default="", help="pair stages to skip: alignment,neighbours,spectral,umap,lens")
    demo.add_argument("--skip-lens", action="store_true", help="skip the lens stage (same as --skip lens)")
    demo.add_argument("--lens-steps", type=_positive_int, default=d["lens_steps"],
                      help="tuned-lens training steps (default %(default)s)")
    demo.add_argument("--lens-tokens-per-step", type=_positive_int, default=d["lens_tokens_per_step"],
                      help="tokens per tuned-lens optimiser step, by gradient accumulation (default %(default)s)")

    ev_d = _defaults(EvolutionConfig)
    evo = sub.add_parser("evolution", help="embedding evolution over a model's checkpoints (Figure 3)",
                         description="Mean per-token cosine of the input and output matrices to the first "
                         "checkpoint and to the previous one, over a model's revisions.")
    evo.add_argument("--model", required=True,
                     help="a Hugging Face id, or a local folder with one subfolder per revision")
    evo.add_argument("--revisions", required=True, help="comma-separated revisions, first = reference")
    evo.add_argument("--name", help="cache name (default: <model>-evolution)")
    evo.add_argument("--cache-dir", default=ev_d["cache_dir"], help="folder of the caches (default: %(default)s)")
    evo.add_argument("--trust-remote-code", action="store_true", help="allow a hub model's own code to run")

    g = _defaults(GradsConfig)
    grads = sub.add_parser("grads", help="import a gradient-provenance log (CSV) from a real training run",
                           description="One row per logged step with the L2 norms of the gradient reaching the "
                           "embedding matrix through the input lookup and through the output projection. "
                           "'<column>_effective' columns (after input-gradient scaling) are read when present. "
                           "The output share is the mean over logged steps of output / (input + output).")
    grads.add_argument("--csv", required=True, help="the CSV file")
    grads.add_argument("--name", required=True, help="cache name")
    grads.add_argument("--run", help="run label (default: the file name)")
    grads.add_argument("--cache-dir", default=g["cache_dir"], help="folder of the caches (default: %(default)s)")
    grads.add_argument("--step-column", default=g["step_column"], help="column of the step (default: %(default)s)")
    grads.add_argument("--input-column", default=g["input_column"],
                       help="column of the input-side norm; its _effective twin is read when present "
                       "(default: %(default)s)")
    grads.add_argument("--output-column", default=g["output_column"],
                       help="column of the output-side norm; its _effective twin is read when present "
                       "(default: %(default)s)")
    grads.add_argument("--loss-column", help="optional column of the training loss")
    grads.add_argument("--early-steps", type=_positive_int, default=g["early_steps"],
                       help="the early output share is over logged steps <= this (default %(default)s, "
                       "the paper's window)")

    ej = sub.add_parser("evolution-json", help="import embedding-evolution files (JSON) of real models (Figure 3)",
                        description="Files with model_id, steps, input_vs_init, output_vs_init, input_consecutive and "
                        "output_consecutive (the paper's authors' format, e.g. published/evolution_pythia-1b.json) "
                        "into the evolution tables of one cache; one run per model.")
    ej.add_argument("--json", action="append", required=True, help="an evolution file; repeat for several models")
    ej.add_argument("--name", required=True, help="cache name")
    ej.add_argument("--cache-dir", default=_defaults(EvolutionJsonConfig)["cache_dir"],
                    help="folder of the caches (default: %(default)s)")

    pp = sub.add_parser("paper", help="build cache/paper.duckdb from the paper's published measurements",
                        description="The authors' published real-model measurements in published/ (gradient "
                        "provenance of an OLMo-1B tied run, embedding evolution of OLMo-1B-0724, OLMo-7B-0424 and "
                        "Pythia-1B; Apache-2.0) and the paper's tables, as one cache of kind 'published'.")
    pd_ = _defaults(PaperConfig)
    pp.add_argument("--data-dir", default=pd_["data_dir"],
                    help="folder of the published files (default: the project's published/)")
    pp.add_argument("--name", default=pd_["name"], help="cache name (default: %(default)s)")
    pp.add_argument("--cache-dir", default=pd_["cache_dir"], help="folder of the caches (default: %(default)s)")
    pp.add_argument("--early-steps", type=_positive_int, default=pd_["early_steps"],
                    help="the early output share is over logged steps <= this (default %(default)s)")

    tr = sub.add_parser("trajectory", help="top-k predictions of every hidden state of a cache's models on a text (JSON)",
                        description="Run the cache's tied and untied models (they must be on this machine, as the "
                        "toy lab's are) on a text and print, as JSON, the top-k next-token predictions of every "
                        "hidden state under the cache's tuned lens (when one fits) and the logit lens.")
    td = _defaults(TrajectoryConfig)
    tr.add_argument("cache", help="a cache file (cache/<name>.duckdb) or a pair name in --cache-dir")
    tr.add_argument("--cache-dir", default=td["cache_dir"], help="folder of the caches (default: %(default)s)")
    tr.add_argument("--text", required=True, help="the text to trace (at most 2,000 characters)")
    tr.add_argument("--top-k", type=_positive_int, default=td["top_k"], help="predictions per cell (default %(default)s)")
    tr.add_argument("--max-tokens", type=_positive_int, default=td["max_tokens"],
                    help="the text is cut to this many tokens (default %(default)s, at most 256)")
    tr.add_argument("--device", default=td["device"], help="cpu, cuda, cuda:1 (default: CUDA when present)")
    tr.add_argument("--trust-remote-code", action="store_true",
                    help="allow model code from the model's folder (off by default)")

    sw_d = _defaults(SweepConfig)
    sw = sub.add_parser("sweep", help="tied/untied twins over a grid of widths (and vocabularies) and seeds",
                        description="Train tied and untied twins (the toy lab's code path) in every cell of a grid of "
                        "widths, vocabulary sizes and seeds and write each cell's bias, loss gap, output share and "
                        "parameter shares to cache/<name>.duckdb (kind sweep) as soon as it is done; a killed sweep "
                        "resumes. --shard i/n trains every n-th cell (job arrays); sweep-merge joins the shards.")
    sw.add_argument("--name", default=sw_d["name"], help="cache name (default: %(default)s)")
    sw.add_argument("--cache-dir", default=sw_d["cache_dir"], help="folder of the caches (default: %(default)s)")
    sw.add_argument("--work-dir", help="where the tokenizers go (default: <cache-dir>/toylab/<name>)")
    sw.add_argument("--d-model", default=None,
                    help=f"widths, comma-separated (default {','.join(map(str, sw_d['widths']))}; "
                    f"--quick: {','.join(map(str, QUICK['widths']))})")
    sw.add_argument("--vocab-size", default=None,
                    help=f"BPE vocabulary sizes, comma-separated (default {','.join(map(str, sw_d['vocab_sizes']))})")
    sw.add_argument("--seeds", type=_positive_int, default=None,
                    help=f"seeds per cell (default {sw_d['seeds']}; --quick: {QUICK['seeds']})")
    _add_twin_options(sw, sw_d)
    sw.add_argument("--steps", type=_positive_int, default=None,
                    help=f"optimiser steps per twin (default {sw_d['steps']}; --quick: {QUICK['steps']})")
    sw.add_argument("--quick", action="store_true",
                    help="a small sweep for a first look (widths, seeds and steps as said above; within 5 minutes "
                    "on 2 cores)")
    sw.add_argument("--shard", default=None, help="i/n: train every n-th cell from the i-th (0 <= i < n), into "
                    "cache/<name>.shard<i>of<n>.duckdb")
    sm = sub.add_parser("sweep-merge", help="join the shard caches of a sweep into one cache",
                        description="Merge sweep caches (e.g. the --shard outputs of a job array) into "
                        "cache/<name>.duckdb: every cell once; caches trained with other settings are refused.")
    sm.add_argument("shards", nargs="+", help="the shard cache files")
    sm.add_argument("--name", default=sw_d["name"], help="the merged cache's name (default: %(default)s)")
    sm.add_argument("--cache-dir", default=sw_d["cache_dir"], help="folder of the caches (default: %(default)s)")
    sm.add_argument("--force", action="store_true", help="start the merged cache afresh")

    summ = sub.add_parser("summary", help="print a cache's headline numbers beside the paper's")
    summ.add_argument("cache", help="a cache file (cache/<name>.duckdb) or a pair name in --cache-dir")
    summ.add_argument("--cache-dir", default="cache", help="folder of the caches (default: %(default)s)")
    summ.add_argument("--json", action="store_true", help="print every number as JSON")
    return p


def _cmd_pair(args: argparse.Namespace, argv: list[str], *, lens_only: bool = False) -> int:
    from precompute.lens import LensOptions
    from precompute.pair import OPTIONAL_STAGES, PairConfig, PairRun, preset_config

    tied, untied = args.tied, args.untied
    if args.preset:
        ids = preset_config(args.preset)
        tied, untied = tied or ids["tied"], untied or ids["untied"]
    if not tied or not untied:
        raise UserError("give both --tied and --untied (or --preset)")
    cfg = PairConfig(
        tied=tied, untied=untied, name=args.name, tied_revision=args.tied_revision,
        untied_revision=args.untied_revision, preset=args.preset, cache_dir=args.cache_dir,
        match=args.match, neighbours_k=args.neighbours_k, held_out=args.held_out, spectral_k=args.spectral_k,
        spectral_components=args.spectral_components, spectral_tokens=args.spectral_tokens,
        umap_tokens=args.umap_tokens, umap_epochs=args.umap_epochs, seed=args.seed, text=args.text,
        skip=_skips(args), force=args.force, device=args.device, trust_remote_code=args.trust_remote_code,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv),
        lens=LensOptions(text=args.lens_text, steps=args.lens_steps, batch_size=args.lens_batch_size,
                         seq_len=args.lens_seq_len, tokens_per_step=args.lens_tokens_per_step,
                         train_tokens=args.lens_train_tokens,
                         eval_tokens=args.lens_eval_tokens),
    )
    if lens_only:
        cfg.skip = [s for s in OPTIONAL_STAGES if s != "lens"]
    path = PairRun(cfg).run()
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _skips(args: argparse.Namespace) -> list[str]:
    skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    if getattr(args, "skip_lens", False) and "lens" not in skip:
        skip.append("lens")
    return skip


def _factors(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--input-grad-scale takes numbers separated by commas, got '{text}'") from None
    if not values or any(not v > 0 for v in values):
        raise UserError(f"--input-grad-scale must be > 0, got '{text}'")
    return values


def _cmd_demo(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.toylab import DemoConfig, DemoRun

    cfg = DemoConfig(
        name=args.name, cache_dir=args.cache_dir, work_dir=args.work_dir, corpus=args.corpus,
        max_chars=args.max_chars, vocab_size=args.vocab_size, d_model=args.d_model, n_layers=args.n_layers,
        n_heads=args.n_heads, context=args.context, batch_size=args.batch_size, steps=args.steps, lr=args.lr,
        input_grad_scale=_factors(args.input_grad_scale), seeds=args.seeds, checkpoints=args.checkpoints,
        skip=_skips(args), force=args.force, device=args.device, lens_steps=args.lens_steps,
        lens_tokens_per_step=args.lens_tokens_per_step, early_steps=args.early_steps, command="python -m precompute " + " ".join(shlex.quote(a) for a in argv),
    )
    path = DemoRun(cfg).run()
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _cmd_evolution(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.dynamics import EvolutionConfig, run_evolution

    path = run_evolution(EvolutionConfig(
        model=args.model, revisions=args.revisions.split(","), name=args.name, cache_dir=args.cache_dir,
        trust_remote_code=args.trust_remote_code,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv)))
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _cmd_grads(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.dynamics import GradsConfig, run_grads

    path = run_grads(GradsConfig(
        csv=args.csv, name=args.name, run=args.run, cache_dir=args.cache_dir, step_column=args.step_column,
        input_column=args.input_column, output_column=args.output_column, loss_column=args.loss_column,
        early_steps=args.early_steps, command="python -m precompute " + " ".join(shlex.quote(a) for a in argv)))
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _cmd_evolution_json(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.published import EvolutionJsonConfig, import_evolution

    path = import_evolution(EvolutionJsonConfig(
        json=args.json, name=args.name, cache_dir=args.cache_dir,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv)))
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _cmd_paper(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.published import PaperConfig, build_paper

    path = build_paper(PaperConfig(
        data_dir=args.data_dir, name=args.name, cache_dir=args.cache_dir, early_steps=args.early_steps,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv)))
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def _cmd_sweep(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.sweep import QUICK, SweepConfig, SweepRun
    from tying.analysis.sweep import parse_ints

    d = SweepConfig()
    quick = args.quick
    cfg = SweepConfig(
        name=args.name, cache_dir=args.cache_dir, work_dir=args.work_dir, corpus=args.corpus, max_chars=args.max_chars,
        widths=parse_ints(args.d_model, "--d-model") if args.d_model is not None else
        list(QUICK["widths"] if quick else d.widths),
        vocab_sizes=parse_ints(args.vocab_size, "--vocab-size") if args.vocab_size is not None else d.vocab_sizes,
        seeds=args.seeds or (QUICK["seeds"] if quick else d.seeds), n_layers=args.n_layers, n_heads=args.n_heads,
        context=args.context, batch_size=args.batch_size, steps=args.steps or (QUICK["steps"] if quick else d.steps),
        lr=args.lr, shard=args.shard, force=args.force, device=args.device,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv))
    t0 = time.perf_counter()
    path = SweepRun(cfg).run()
    print(f"wrote {path} in {time.perf_counter() - t0:.0f} s")
    return _cmd_summary_path(path, as_json=False)


def _cmd_trajectory(args: argparse.Namespace) -> int:
    from precompute.trajectory import TrajectoryConfig, run_trajectory

    cfg = TrajectoryConfig(cache=args.cache, cache_dir=args.cache_dir, text=args.text, top_k=args.top_k,
                           max_tokens=args.max_tokens, device=args.device, trust_remote_code=args.trust_remote_code)
    out = run_trajectory(cfg, resolve_cache(args.cache, args.cache_dir))
    print(json.dumps(out, default=str, allow_nan=False))
    return 0


def resolve_cache(cache: str, cache_dir: str) -> Path:
    from tying.cache.store import CACHE_SUFFIX

    p = Path(cache)
    if p.is_file() or p.suffix == CACHE_SUFFIX:
        return p
    return Path(cache_dir) / f"{cache}{CACHE_SUFFIX}"


def _cmd_summary_path(path: Path, *, as_json: bool) -> int:
    from precompute.report import format_summary
    from tying.cache.store import CacheError, open_cache
    from tying.cache.summary import summarize

    try:
        con = open_cache(path)
    except CacheError as exc:
        hint = f"; rebuild with: {exc.rebuild}" if exc.rebuild else ""
        raise UserError(exc.message + hint) from None
    try:
        s = summarize(con)
    finally:
        con.close()
    print(json.dumps(s, indent=2, sort_keys=True, default=str, allow_nan=False) if as_json else format_summary(s))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "pair":
            return _cmd_pair(args, argv)
        if args.command == "lens":
            return _cmd_pair(args, argv, lens_only=True)
        if args.command == "evolution":
            return _cmd_evolution(args, argv)
        if args.command == "grads":
            return _cmd_grads(args, argv)
        if args.command == "demo":
            return _cmd_demo(args, argv)
        if args.command == "evolution-json":
            return _cmd_evolution_json(args, argv)
        if args.command == "paper":
            return _cmd_paper(args, argv)
        if args.command == "sweep":
            return _cmd_sweep(args, argv)
        if args.command == "sweep-merge":
            from precompute.sweep import merge

            path = merge(args.shards, args.name, args.cache_dir, force=args.force)
            print(f"wrote {path}")
            return _cmd_summary_path(path, as_json=False)
        if args.command == "trajectory":
            return _cmd_trajectory(args)
        if args.command == "summary":
            return _cmd_summary_path(resolve_cache(args.cache, args.cache_dir), as_json=args.json)
        raise UserError(f"unknown command {args.command}")
    except ValueError as exc:  # a UserError of a command, or a library function's bad argument
        if os.environ.get("PRECOMPUTE_DEBUG"):
            raise
        print(f"error: {' '.join(first_line(exc).split())}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted; the cache keeps every stage finished before", file=sys.stderr)
        return 130
    except MemoryError:
        print("error: out of memory; try a smaller --spectral-tokens/--umap-tokens or a GPU", file=sys.stderr)
        return 2
    except OSError as exc:
        if os.environ.get("PRECOMPUTE_DEBUG"):
            raise
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


def main_exit() -> None:
    """Console-script entry point (``precompute ...`` once the package is installed)."""
    sys.exit(main())
