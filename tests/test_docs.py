"""The README documents every cache table and column, every CLI option, and CI runs its test command."""

import dataclasses
import re
from pathlib import Path

from precompute import options, readme
from precompute.cli import COMMANDS, build_parser
from tying.cache.schema import TABLES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_every_table_and_column_is_documented():
    for table, body in TABLES.items():
        row = next((ln for ln in README.splitlines() if ln.startswith(f"| `{table}` |")), None)
        assert row is not None, f"table {table} missing from README"
        for col in re.findall(r"^\s*(\w+)\s+[A-Z]", body, flags=re.M):
            assert re.search(rf"\b{col}\b", row), f"column {table}.{col} missing from README"


def _documented(opt: str, text: str) -> bool:
    """`--opt` appears as a whole option, not as the start of a longer one (`--lens` is not `--lens-steps`)."""
    return re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text) is not None


def test_documented_matches_whole_options_only():
    assert _documented("--lens-steps", "| `--lens-steps` | 250 |") and _documented("--json", "summary --json.")
    assert not _documented("--lens", "| `--lens-steps` | 250 |")  # a prefix of a documented option
    assert not _documented("--steps", "`--lens-steps`") and not _documented("--d", "--d-model 32")
    # the old check (f" {opt}" in README) took an undocumented `--n-head` for the documented `--n-heads`
    assert " --n-head" in README and not _documented("--n-head", README) and _documented("--n-heads", README)


def test_every_cli_command_and_option_is_documented():
    for name, sub in _subparsers().items():
        assert f"python -m precompute {name}" in README, name
        for action in sub._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help":
                    assert _documented(opt, README), f"{name} {opt} missing from README"


def _parser_options(sub) -> set[str]:
    """A subcommand's options (`--x`) and positionals (`<x>`), as its parser has them."""
    out = set()
    for action in sub._actions:
        if action.option_strings:
            out |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
        else:
            out.add(f"<{action.dest}>")
    return out


def _readme_tables() -> dict[str, set[str]]:
    """{command: the options of its generated README table}."""
    return {name: set(re.findall(r"^\| `(--[\w-]+|<[\w-]+>)` \|", table, flags=re.M))
            for name, table in readme.readme_blocks(README).items()}


def test_readme_tables_list_every_commands_options_both_ways():
    """Per command, the README's table and the parser hold the same options: none missing, none extra."""
    tables, subs = _readme_tables(), _subparsers()
    assert "`python -m precompute lens` takes the same options" in README
    assert COMMANDS["lens"].config is COMMANDS["pair"].config
    for name, sub in subs.items():
        documented = tables["pair" if name == "lens" else name]
        parsed = _parser_options(sub)
        assert parsed - documented == set(), f"{name}: undocumented in the README table: {parsed - documented}"
        assert documented - parsed == set(), f"{name}: in the README table, not an option: {documented - parsed}"
    assert set(tables) == set(subs) - {"lens"}


def test_readme_tables_are_the_generated_ones():
    """The README's tables are what `python -m precompute.readme --write README.md` makes from the dataclasses."""
    tables = readme.readme_blocks(README)
    for name, table in tables.items():
        assert table == readme.markdown(COMMANDS[name].config), \
            f"README table of {name} is stale: run python -m precompute.readme --write README.md"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd.strip() in ci


def _readme_option_table() -> dict[str, dict[str, str]]:
    """{command: {option: default cell}} of the README's generated tables."""
    out = {}
    for name, table in readme.readme_blocks(README).items():
        out[name] = {}
        for line in table.splitlines():
            m = re.match(r"^\| `(--[\w-]+)` \| ([^|]*) \|", line)
            if m:
                out[name][m.group(1)] = m.group(2).strip().strip("`")
    return out


def _field_defaults(cls, prefix: str = "") -> dict[str, object]:
    """{option: default} of a config's option fields with a plain default, read off the dataclass itself."""
    out = {}
    for f in cls.__dataclass_fields__.values():
        meta = f.metadata.get(options.METADATA_KEY)
        if meta is None:
            continue
        if "nested" in meta:
            out |= _field_defaults(f.default_factory, prefix + meta["nested"])
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if meta["shown"] is None and default not in (None, False, "", [], dataclasses.MISSING):
            out[meta["flag"] or f"--{prefix}{f.name.replace('_', '-')}"] = default
    return out


def _as_text(value) -> str:
    if isinstance(value, list):
        return ",".join(_as_text(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_readme_defaults_equal_the_configs():
    """Every default the README's tables state is the config dataclass's own."""
    tables = _readme_option_table()
    checked = 0
    for name, table in tables.items():
        for opt, default in _field_defaults(COMMANDS[name].config).items():
            assert table[opt] == _as_text(default), f"README says {name} {opt} defaults to {table[opt]!r}, " \
                                                    f"the config {default!r}"
            checked += 1
    assert checked >= 40
    assert tables["pair"]["--neighbours-k"] == "50" and tables["sweep"]["--vocab-size"] == "4096"


def test_help_states_the_configs_defaults():
    """`--help` text never contradicts the default in force (it is built from it)."""
    checked = 0
    for name, sub in _subparsers().items():
        defaults = _field_defaults(COMMANDS[name].config)
        for action in sub._actions:
            opt = next((o for o in action.option_strings if o.startswith("--")), None)
            if opt in defaults:
                assert f"(default: {_as_text(defaults[opt])})" in action.help, f"{name} {opt}: {action.help!r}"
                checked += 1
    assert checked >= 60


def test_every_command_prints_its_help():
    """--help formats every option's text (a bare '%' in a help text made `demo --help` crash)."""
    for name, sub in _subparsers().items():
        text = sub.format_help()
        assert "usage:" in text and "--help" in text, name
