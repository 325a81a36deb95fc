"""One owner per run parameter: each command's options come from its config dataclass, whose
construction is where they are checked; the CLI is a table of (config, runner)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from precompute import options
from precompute.cli import COMMANDS, build_parser, main
from tying.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def _declared(cls, prefix: str = "", only=None) -> set[str]:
    """The options a config dataclass declares (fields and InitVars; internal ones left out), read off its
    fields; a nested config's ``only`` those it exposes."""
    out = set()
    for f in cls.__dataclass_fields__.values():
        meta = f.metadata[options.METADATA_KEY]  # every field says whether it is an option
        if meta is None or (only is not None and f.name not in only):
            continue
        if "nested" in meta:
            out |= _declared(type(f.default_factory()), prefix + meta["nested"], meta.get("only"))
        elif meta["positional"]:
            out.add(f.name)
        else:
            out.add(meta["flag"] or f"--{prefix}{f.name.replace('_', '-')}")
    return out


def _subparsers():
    parser = build_parser()
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_lists_exactly_the_dataclass_options(name):
    text = _subparsers()[name].format_help()
    usage = text.split("\n\n")[0]
    listed = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", usage)) - {"--help"}
    listed |= set(re.findall(r"^  ([a-z_]+) ", text, flags=re.M))  # positional arguments
    assert listed == _declared(COMMANDS[name].config)
    assert "%" not in text.replace("10%", "")  # a '%' in a help text is printed, not formatted


def test_an_undeclared_field_is_refused():
    @dataclasses.dataclass
    class Bad:
        fine: int = options.option(1, help="declared")
        forgotten: int = 2

    with pytest.raises(TypeError, match="Bad.forgotten: declare it"):
        options.specs(Bad)


@pytest.mark.parametrize("argv, message", [
    (["pair", "--tied", "a", "--untied", "b", "--neighbours-k", "abc"], "argument --neighbours-k: expected a whole"),
    (["pair", "--tied", "a", "--untied", "b", "--neighbours-k", "0"], "--neighbours-k must be a positive integer"),
    (["pair", "--tied", "a", "--untied", "b", "--lens-steps", "0"], "--lens-steps must be a positive integer"),
    (["pair", "--tied", "a", "--untied", "b", "--held-out", "1.5"], "--held-out must be between 0 and 1"),
    (["pair", "--tied", "a", "--untied", "b", "--match", "tokens"], "invalid choice: 'tokens'"),
    (["pair", "--tied", "a", "--untied", "b", "--skip", "umap,nope"], "unknown stage(s) to skip: nope"),
    (["pair", "--untied", "b"], "give --tied (with --untied for a pair, or --preset)"),
    (["pair", "--tied", "a", "--match", "ids"], "--match pairs two vocabularies: give --untied too"),
    (["lens", "--tied", "a", "--untied", "b", "--lens-tokens-per-step", "-3"], "--lens-tokens-per-step must be"),
    (["demo", "--lr", "fast"], "argument --lr: expected a number, got 'fast'"),
    (["demo", "--input-grad-scale", "2,x"], "expected numbers separated by commas"),
    (["demo", "--input-grad-scale", "2,0"], "--input-grad-scale must be > 0, got 2,0"),
    (["demo", "--skip", "nope"], "unknown stage(s) to skip: nope"),
    (["demo", "--lens-steps", "0"], "--lens-steps must be a positive integer"),
    (["demo", "--early-steps", "0"], "--early-steps must be a positive step number"),
    (["sweep", "--d-model", "32,x"], "argument --d-model: expected whole numbers separated by commas"),
    (["sweep", "--vocab-size", "0"], "--vocab-size: every value must be positive"),
    (["sweep", "--steps", "1"], "--steps must be at least 2"),
    (["sweep-merge"], "the following arguments are required: shards"),
    (["evolution", "--model", "m", "--revisions", "step0"], "--revisions needs at least two"),
    (["grads", "--csv", "x.csv"], "the following arguments are required: --name"),
    (["grads", "--csv", "x.csv", "--name", "bad name"], "bad cache name 'bad name'"),
    (["paper", "--early-steps", "0"], "--early-steps must be a positive step number"),
    (["evolution-json", "--name", "e"], "the following arguments are required: --json"),
    (["trajectory", "demo", "--text", "hi", "--top-k", "0"], "--top-k must be a positive integer"),
    (["summary"], "the following arguments are required: cache"),
    (["summary", "demo", "--json=yes"], "ignored explicit argument"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_a_bad_value_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # a default --cache-dir 'cache' would land here
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_configs_built_in_code_are_checked_too():
    from precompute.pair import PairConfig
    from precompute.sweep_config import SweepConfig
    from precompute.toylab import DemoConfig

    with pytest.raises(UserError, match="--neighbours-k must be a positive integer, got 0"):
        PairConfig(tied="a", untied="b", neighbours_k=0)
    with pytest.raises(UserError, match="--d-model: 32 given more than once"):
        SweepConfig(widths=[32, 64, 32])
    with pytest.raises(UserError, match="--steps 5 is too few for 12"):
        DemoConfig(steps=5)
    cfg = PairConfig(tied="a", untied="b")
    cfg.neighbours_k = 0  # changed after it was built: the runs check again
    with pytest.raises(UserError, match="--neighbours-k"):
        cfg.check()


def test_folded_options_and_dependent_defaults():
    from precompute.pair import PairConfig
    from precompute.sweep_config import FULL, QUICK, SweepConfig
    from precompute.toylab import DemoConfig
    from tying.cache import reference

    assert PairConfig(tied="a", untied="b", skip=["umap"], skip_lens=True).skip == ["umap", "lens"]
    assert DemoConfig(skip_lens=True).skip == ["lens"] and "skip_lens" not in dataclasses.asdict(DemoConfig())
    olmo = PairConfig(preset="olmo")
    assert (olmo.tied, olmo.untied) == (reference.PRESETS["olmo"]["tied"], reference.PRESETS["olmo"]["untied"])
    quick, full = SweepConfig(quick=True), SweepConfig()
    assert (quick.widths, quick.seeds, quick.steps) == (QUICK["widths"], QUICK["seeds"], QUICK["steps"])
    assert (full.widths, full.seeds, full.steps) == (FULL["widths"], FULL["seeds"], FULL["steps"]) == \
           ([32, 64, 128, 256], 3, 250)
    assert SweepConfig(quick=True, widths=[16], seeds=1).widths == [16]  # given values win over --quick's
    parser = build_parser()
    args = vars(parser.parse_args(["pair", "--tied", "a", "--untied", "b", "--lens-steps", "7", "--skip-lens"]))
    args.pop("command")
    cfg = options.build(PairConfig, args)
    assert cfg.lens.steps == 7 and cfg.lens.batch_size == 8 and cfg.skip == ["lens"]
    for argv, key, value in [(["sweep-merge", "a.duckdb", "b,c.duckdb"], "shards", ["a.duckdb", "b,c.duckdb"]),
                             (["evolution-json", "--json", "a,b", "--json", "c", "--name", "e"], "json", ["a,b", "c"]),
                             (["sweep", "--d-model", "16, 32"], "widths", [16, 32]),
                             (["evolution", "--model", "m", "--revisions", "a,,b"], "revisions", ["a", "b"]),
                             (["summary", "x", "--json"], "json", True)]:
        args = vars(parser.parse_args(argv))
        assert getattr(options.build(COMMANDS[args.pop("command")].config, args), key) == value, argv


def test_the_shipped_caches_stay_valid_for_the_default_commands():
    """`demo --seeds 3 --control` gives the parameters the shipped demo's stages were recorded with,
    so a rerun reuses them (nothing about the options changed a hash); the README's sweep and
    mechanism commands give the shipped caches' recorded values, and `--shared-start` others."""
    import duckdb

    from precompute.sweep import cell_params
    from precompute.sweep_config import SweepConfig
    from precompute.toylab import DemoConfig, DemoRun
    from tying.analysis.sweep import Cell

    def recorded(cache, stage):
        con = duckdb.connect(str(ROOT / "cache" / cache), read_only=True)
        try:
            return json.loads(con.execute("SELECT params FROM stages WHERE stage = ?", [stage]).fetchone()[0])
        finally:
            con.close()

    def parsed(argv):
        args = vars(build_parser().parse_args(argv))
        return options.build(COMMANDS[args.pop("command")].config, args)

    training = recorded("demo.duckdb", "training")
    demo = parsed(["demo", "--seeds", "3", "--control"])
    assert isinstance(demo, DemoConfig)
    assert DemoRun(demo).training_params(training["corpus_sha256"]) == training
    cell = recorded("sweep.duckdb", "sweep:d32:v4096:s0")
    # the shipped sweep is the README's rebuild command (issue 48, protocol 4, independent twins): that
    # command gives exactly the parameters its cells were recorded with, so a rerun of it trains nothing
    # again; with --shared-start (the control) the hash changes
    rebuild = ["sweep", "--force", "--max-chars", "2100000", "--tokens", "330000", "--lr-grid", "1e-3,3e-3,1e-2,3e-2,1e-1"]
    sweep = parsed(rebuild)
    assert isinstance(sweep, SweepConfig)
    now = cell_params(sweep, Cell(32, 4096, 0), cell["corpus_sha256"])
    assert now == cell and now["protocol"] == 4 and now["shared_start"] is False
    shared = cell_params(parsed([*rebuild, "--shared-start"]), Cell(32, 4096, 0), cell["corpus_sha256"])
    assert shared != cell and "shared_start" not in shared
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "--lr-grid 1e-3,3e-3,1e-2,3e-2,1e-1   # cache/sweep.duckdb" in readme
    # the mechanism lab: the README's command gives its runs' recorded parameters
    from precompute.mechanism import MechanismConfig, MechanismRun

    base = recorded("mechanism.duckdb", "mechanism:baseline:s0")
    lab = parsed(["mechanism", "--seeds", "5"])
    assert isinstance(lab, MechanismConfig) and "python -m precompute mechanism --seeds 5   #" in readme
    assert MechanismRun(lab).params("baseline", 0, base["corpus_sha256"], lab.lr) == base


def test_markdown_tables_mark_required_options():
    from precompute.readme import markdown
    from precompute.trajectory import TrajectoryConfig

    table = markdown(TrajectoryConfig)
    assert "| `<cache>` | required |" in table and "| `--text` | required |" in table
    assert "| `--top-k` | 10 | predictions per cell |" in table


def test_an_abbreviated_option_is_refused(capsys):
    """An option has one spelling: '--forc' is not taken for '--force'."""
    from precompute.cli import main

    code = main(["summary", "cache/demo.duckdb", "--jso"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--jso" in err


def test_every_command_takes_its_cache_dir_from_the_environment(monkeypatch, tmp_path):
    """One owner for --cache-dir and --device: every command's comes from options.cache_dir_option /
    device_option, and the cache folder defaults to $TYING_CACHE_DIR (as the app's) when set."""
    from precompute.cli import COMMANDS

    shared_dir = options.specs(COMMANDS["summary"].config)
    shown_dir = next(s.shown for s in shared_dir if s.flag == "--cache-dir")
    seen = 0
    for name, command in COMMANDS.items():
        for s in options.specs(command.config):
            if s.flag == "--cache-dir":
                seen += 1
                assert s.shown == shown_dir and s.help == "folder of the caches", name
            if s.flag == "--device":
                assert s.shown == "`cuda` when present, else `cpu`" and s.help.startswith("torch device"), name
    assert seen >= 12
    monkeypatch.setenv("TYING_CACHE_DIR", str(tmp_path))
    assert options.build(COMMANDS["summary"].config, {"cache": "demo"}).cache_dir == str(tmp_path)
    monkeypatch.delenv("TYING_CACHE_DIR")
    assert options.build(COMMANDS["summary"].config, {"cache": "demo"}).cache_dir == "cache"
