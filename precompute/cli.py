"""Command line: ``python -m precompute {pair,summary} ...``.

Every user mistake ends as one line on stderr (``error: ...``) and exit code 2, with no
cache file touched. ``main(argv)`` returns the exit code so tests run commands in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from tying.errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse that raises UserError (one line, exit 2) instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UserError(f"{message} (see 'python -m {self.prog} --help')")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _add_pair_options(pair: argparse.ArgumentParser) -> None:
    pair.add_argument("--tied", help="tied model: Hugging Face id or local directory")
    pair.add_argument("--untied", help="untied model: Hugging Face id or local directory")
    pair.add_argument("--preset", help="one of the paper's pairs: olmo, gptneo-pythia, qwen3")
    pair.add_argument("--name", help="cache name (default: derived from the two models)")
    pair.add_argument("--tied-revision", help="hub revision (branch, tag or commit) of the tied model")
    pair.add_argument("--untied-revision", help="hub revision of the untied model")
    pair.add_argument("--cache-dir", default="cache", help="folder of the caches (default: cache)")
    pair.add_argument("--neighbours-k", type=_positive_int, default=50,
                      help="neighbours stored per token; overlap@k is available for every k up to it (default 50)")
    pair.add_argument("--held-out", type=float, default=0.2,
                      help="fraction of tokens held out to score fitted maps (default 0.2)")
    pair.add_argument("--spectral-k", type=_positive_int, default=64, help="k of the k-NN graphs (default 64)")
    pair.add_argument("--spectral-components", type=_positive_int, default=128,
                      help="dimensions of the adjacency spectral embedding (default 128)")
    pair.add_argument("--spectral-tokens", type=_positive_int, default=10000,
                      help="tokens used for the spectral distance; a seeded random sample above (default 10000)")
    pair.add_argument("--umap-tokens", type=_positive_int, default=20000,
                      help="tokens projected by UMAP; a seeded random sample above (default 10000)")
    pair.add_argument("--umap-epochs", type=_positive_int, default=200, help="UMAP optimisation epochs (default 200)")
    pair.add_argument("--seed", type=int, default=0, help="seed for splits and samples (default 0)")
    pair.add_argument("--text", help="a text file: token frequencies for the norm-vs-frequency view")
    pair.add_argument("--skip", default="",
                      help="comma-separated stages to skip: alignment,neighbours,spectral,umap,lens")
    pair.add_argument("--force", action="store_true", help="recompute every stage even if cached")
    pair.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    pair.add_argument("--trust-remote-code", action="store_true",
                      help="allow model code from the hub to run (off by default)")

    pair.add_argument("--skip-lens", action="store_true", help="skip the lens stage (same as --skip lens)")
    pair.add_argument("--lens-text", default="python-docs",
                      help="lens text: 'python-docs' (offline), a text file, or hf:<dataset> such as hf:wikitext")
    pair.add_argument("--lens-steps", type=_positive_int, default=250, help="tuned-lens training steps (default 250)")
    pair.add_argument("--lens-batch-size", type=_positive_int, default=8,
                      help="sequences per lens batch; bounds memory (default 8)")
    pair.add_argument("--lens-seq-len", type=_positive_int, default=128,
                      help="tokens per lens sequence, capped at the model's context (default 128)")
    pair.add_argument("--lens-train-tokens", type=_positive_int, default=262_144,
                      help="tokens of lens training text (default 262144)")
    pair.add_argument("--lens-eval-tokens", type=_positive_int, default=65_536,
                      help="tokens of lens evaluation text, disjoint from training (default 65536)")


def build_parser() -> argparse.ArgumentParser:
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

    demo = sub.add_parser("demo", help="the toy lab: train tied and untied twins here and analyse them",
                          description="Train small tied, untied and input-gradient-scaled twins on an offline "
                          "corpus (CPU is enough), run every analysis on (tied, untied) and write cache/<name>.duckdb.")
    demo.add_argument("--name", default="demo", help="cache name (default: demo)")
    demo.add_argument("--cache-dir", default="cache", help="folder of the caches (default: cache)")
    demo.add_argument("--work-dir", help="where models and tokenizer go (default: <cache-dir>/toylab/<name>)")
    demo.add_argument("--corpus", default="python-docs",
                      help="'python-docs' (offline: Python's own documentation), a text file, or hf:<dataset>")
    demo.add_argument("--max-chars", type=_positive_int, default=1_200_000, help="corpus size cap (characters)")
    demo.add_argument("--vocab-size", type=_positive_int, default=4096, help="BPE vocabulary (default 4096)")
    demo.add_argument("--d-model", type=_positive_int, default=128, help="model width (default 128)")
    demo.add_argument("--n-layers", type=_positive_int, default=4, help="transformer blocks (default 4)")
    demo.add_argument("--n-heads", type=_positive_int, default=4, help="attention heads (default 4)")
    demo.add_argument("--context", type=_positive_int, default=64, help="tokens per training sequence (default 64)")
    demo.add_argument("--batch-size", type=_positive_int, default=16, help="sequences per step (default 16)")
    demo.add_argument("--steps", type=_positive_int, default=250, help="optimiser steps per twin (default 250)")
    demo.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (default 3e-3)")
    demo.add_argument("--input-grad-scale", default="5",
                      help="factor(s) on the input-side gradient of the scaled tied twin, e.g. 5 or 2,5,10 (default 5)")
    demo.add_argument("--seeds", type=_positive_int, default=1, help="independent runs; the summary gives mean and spread")
    demo.add_argument("--checkpoints", type=_positive_int, default=12, help="log-spaced snapshots per run (default 12)")
    demo.add_argument("--skip", default="", help="pair stages to skip: alignment,neighbours,spectral,umap,lens")
    demo.add_argument("--skip-lens", action="store_true", help="skip the lens stage (same as --skip lens)")
    demo.add_argument("--lens-steps", type=_positive_int, default=100, help="tuned-lens training steps (default 100)")
    demo.add_argument("--force", action="store_true", help="retrain and recompute everything")
    demo.add_argument("--device", help="torch device (default: cuda when present, else cpu)")

    evo = sub.add_parser("evolution", help="embedding evolution over a model's checkpoints (Figure 3)",
                         description="Mean per-token cosine of the input and output matrices to the first "
                         "checkpoint and to the previous one, over a model's revisions.")
    evo.add_argument("--model", required=True,
                     help="a Hugging Face id, or a local folder with one subfolder per revision")
    evo.add_argument("--revisions", required=True, help="comma-separated revisions, first = reference")
    evo.add_argument("--name", help="cache name (default: <model>-evolution)")
    evo.add_argument("--cache-dir", default="cache", help="folder of the caches (default: cache)")
    evo.add_argument("--trust-remote-code", action="store_true", help="allow a hub model's own code to run")

    grads = sub.add_parser("grads", help="import a gradient-provenance log (CSV) from a real training run",
                           description="One row per step with the L2 norms of the gradient reaching the embedding "
                           "matrix through the input lookup and through the output projection.")
    grads.add_argument("--csv", required=True, help="the CSV file")
    grads.add_argument("--name", required=True, help="cache name")
    grads.add_argument("--run", help="run label (default: the file name)")
    grads.add_argument("--cache-dir", default="cache", help="folder of the caches (default: cache)")
    grads.add_argument("--step-column", default="step", help="column of the step (default: step)")
    grads.add_argument("--input-column", default="embedding_grad_l2_norm",
                       help="column of the input-side norm (default: embedding_grad_l2_norm)")
    grads.add_argument("--output-column", default="output_proj_grad_l2_norm",
                       help="column of the output-side norm (default: output_proj_grad_l2_norm)")
    grads.add_argument("--loss-column", help="optional column of the training loss")

    summ = sub.add_parser("summary", help="print a cache's Table 1 and Table 5 numbers")
    summ.add_argument("cache", help="a cache file (cache/<name>.duckdb) or a pair name in --cache-dir")
    summ.add_argument("--cache-dir", default="cache")
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
        neighbours_k=args.neighbours_k, held_out=args.held_out, spectral_k=args.spectral_k,
        spectral_components=args.spectral_components, spectral_tokens=args.spectral_tokens,
        umap_tokens=args.umap_tokens, umap_epochs=args.umap_epochs, seed=args.seed, text=args.text,
        skip=_skips(args), force=args.force, device=args.device, trust_remote_code=args.trust_remote_code,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv),
        lens=LensOptions(text=args.lens_text, steps=args.lens_steps, batch_size=args.lens_batch_size,
                         seq_len=args.lens_seq_len, train_tokens=args.lens_train_tokens,
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
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv),
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
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv)))
    print(f"wrote {path}")
    return _cmd_summary_path(path, as_json=False)


def resolve_cache(cache: str, cache_dir: str) -> Path:
    from tying.store import CACHE_SUFFIX

    p = Path(cache)
    if p.is_file() or p.suffix == CACHE_SUFFIX:
        return p
    return Path(cache_dir) / f"{cache}{CACHE_SUFFIX}"


def _cmd_summary_path(path: Path, *, as_json: bool) -> int:
    from tying.store import CacheError, open_cache
    from tying.summary import format_summary, summarize

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
        if args.command == "summary":
            return _cmd_summary_path(resolve_cache(args.cache, args.cache_dir), as_json=args.json)
        raise UserError(f"unknown command {args.command}")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
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
