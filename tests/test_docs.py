"""The README documents every cache table and column, every CLI option, and CI runs its test command."""

import re
from pathlib import Path

from precompute.cli import build_parser
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


def test_every_cli_command_and_option_is_documented():
    for name, sub in _subparsers().items():
        assert f"python -m precompute {name}" in README, name
        for action in sub._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help":
                    assert f"`{opt}`" in README or f" {opt}" in README, f"{name} {opt} missing from README"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    test_cmd = next(c for c in commands if "pytest" in c)
    assert test_cmd.strip() in ci


def _readme_option_table() -> dict[str, str]:
    """`| `--option`[, `--other`] | default | meaning |` rows of the README: option -> default cell."""
    rows = {}
    for line in README.splitlines():
        m = re.match(r"^\| (`--[^|]+) \| ([^|]*) \|", line)
        if m:
            for opt in re.findall(r"`(--[\w-]+)`", m.group(1)):
                rows[opt] = m.group(2).strip().strip("`")
    return rows


def test_readme_defaults_equal_the_parsers():
    """Every default the README's option table states is the parser's own (which comes from the config)."""
    table = _readme_option_table()
    pair = _subparsers()["pair"]
    checked = 0
    for action in pair._actions:
        for opt in action.option_strings:
            if opt not in table or action.default in (None, False, "", "==SUPPRESS=="):
                continue
            assert table[opt] == str(action.default), f"README says {opt} defaults to {table[opt]!r}, " \
                                                      f"the parser {action.default!r}"
            checked += 1
    assert checked >= 10


def test_help_states_the_parsers_defaults():
    """`--help` text never contradicts the default in force (it is built from it)."""
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if action.default in (None, False, "==SUPPRESS==") or not action.help:
                continue
            for stated in re.findall(r"\(default:? ([^)]+)\)", action.help):
                stated = stated.split(",")[0].strip()
                if stated.startswith("%(default") or " " in stated:  # built from the default, or words
                    continue
                assert stated == str(action.default), f"{name} {action.option_strings}: help says {stated!r}"


def test_every_command_prints_its_help():
    """--help formats every option's text (a bare '%' in a help text made `demo --help` crash)."""
    for name, sub in _subparsers().items():
        text = sub.format_help()
        assert "usage:" in text and "--help" in text, name
