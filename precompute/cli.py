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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="precompute", description="Precompute weight-tying analyses into DuckDB caches.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    pair = sub.add_parser("pair", help="analyse a tied/untied model pair and write cache/<name>.duckdb",
                          description="Load a tied and an untied model (Hugging Face ids or local directories), "
                          "run alignment, k-NN overlap, spectral distance and UMAP, and write the pair's cache.")
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
    pair.add_argument("--spectral-tokens", type=_positive_int, default=20000,
                      help="tokens used for the spectral distance; a seeded random sample above (default 20000)")
    pair.add_argument("--umap-tokens", type=_positive_int, default=20000,
                      help="tokens projected by UMAP; a seeded random sample above (default 20000)")
    pair.add_argument("--seed", type=int, default=0, help="seed for splits and samples (default 0)")
    pair.add_argument("--text", help="a text file: token frequencies for the norm-vs-frequency view")
    pair.add_argument("--skip", default="", help="comma-separated stages to skip: alignment,neighbours,spectral,umap")
    pair.add_argument("--force", action="store_true", help="recompute every stage even if cached")
    pair.add_argument("--device", help="torch device (default: cuda when present, else cpu)")
    pair.add_argument("--trust-remote-code", action="store_true",
                      help="allow model code from the hub to run (off by default)")

    summ = sub.add_parser("summary", help="print a cache's Table 1 and Table 5 numbers")
    summ.add_argument("cache", help="a cache file (cache/<name>.duckdb) or a pair name in --cache-dir")
    summ.add_argument("--cache-dir", default="cache")
    summ.add_argument("--json", action="store_true", help="print every number as JSON")
    return p


def _cmd_pair(args: argparse.Namespace, argv: list[str]) -> int:
    from precompute.pair import PairConfig, PairRun, preset_config

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
        umap_tokens=args.umap_tokens, seed=args.seed, text=args.text,
        skip=[s.strip() for s in args.skip.split(",") if s.strip()], force=args.force, device=args.device,
        trust_remote_code=args.trust_remote_code,
        command="python -m precompute " + " ".join(shlex.quote(a) for a in argv),
    )
    path = PairRun(cfg).run()
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
    print(json.dumps(s, indent=2, sort_keys=True, default=str) if as_json else format_summary(s))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "pair":
            return _cmd_pair(args, argv)
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
