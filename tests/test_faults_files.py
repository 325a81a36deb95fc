"""Fault cases (issue 50): one bad file never takes the explorer down.

Each case is a file or an input a careless or hostile user could hand the explorer; each test
checks the promise docs/commands.md lists for it ("What a bad file or a careless command gets"): one line and exit 2
for a command, a listed reason for the app, nothing written, nothing fetched.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from precompute.cli import main
from tests.stage_lists import MATRICES_ONLY
from tying.cache import store

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def _sql(path: Path, *statements: str) -> None:
    con = duckdb.connect(str(path))
    try:
        for sql in statements:
            con.execute(sql)
    finally:
        con.close()


BROKEN = {
    # a copy cut in half: DuckDB opens it or fails on a block it can no longer read
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    # a schema version that is no number
    "badversion": lambda p: _sql(p, "UPDATE meta SET value = 'abc' WHERE key = 'schema_version'"),
    # a table's value of the wrong type (the summary's int() of a step)
    "badstep": lambda p: _sql(p, "ALTER TABLE evolution ALTER step TYPE VARCHAR", "UPDATE evolution SET step = 'x'"),
    # random bytes
    "junk": lambda p: p.write_bytes(bytes(range(256)) * 64),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The shipped demo and paper caches beside a damaged copy of the demo for each case of BROKEN
    and a SQLite database named like a cache."""
    d = tmp_path_factory.mktemp("bad-caches")
    for name in ("demo", "paper"):
        shutil.copyfile(ROOT / "cache" / f"{name}.duckdb", d / f"{name}.duckdb")
    for name, damage in BROKEN.items():
        path = d / f"{name}.duckdb"
        shutil.copyfile(ROOT / "cache" / "demo.duckdb", path)
        damage(path)
    con = sqlite3.connect(d / "sqlite.duckdb")
    con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    con.commit()
    con.close()
    return d


BAD = (*BROKEN, "sqlite")


def test_every_bad_cache_is_listed_with_a_reason_naming_it_and_the_good_ones_open(folder):
    from explorer.render import read

    listing = {c.name: c for c in read.caches(str(folder))}
    assert set(listing) == {"demo", "paper", *BAD}
    assert listing["demo"].error is None and listing["paper"].error is None
    for name in BAD:
        error = listing[name].error
        assert error and f"{name}.duckdb" in error and "\n" not in error, (name, error)


def test_no_connection_installs_or_loads_an_extension_and_a_sqlite_file_is_refused_by_its_header(folder):
    con = store.connect(folder / "demo.duckdb", read_only=True)
    try:
        assert con.execute("SELECT current_setting('autoload_known_extensions'), "
                           "current_setting('autoinstall_known_extensions')").fetchone() == (False, False)
    finally:
        con.close()
    assert store.is_duckdb_file(folder / "demo.duckdb") and not store.is_duckdb_file(folder / "sqlite.duckdb")
    with pytest.raises(store.CacheError, match="not a DuckDB database"):
        store.open_cache(folder / "sqlite.duckdb")
    # the writer never opens it either: a stage written over it starts from an empty file
    from tying.cache.writer import CacheWriter

    assert CacheWriter(folder / "sqlite.duckdb")._finished_stages() == {}


@pytest.mark.parametrize("name", BAD)
def test_summary_of_a_bad_cache_is_one_line_and_exit_2(folder, capsys, name):
    assert main(["summary", str(folder / f"{name}.duckdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{name}.duckdb" in err and "\n" not in err and "Traceback" not in err


@pytest.mark.slow
def test_figures_site_and_export_lens_skip_or_refuse_a_bad_cache_in_one_line(folder, tmp_path, capsys):
    assert main(["figures", str(folder / "badstep.duckdb"), "--out", str(tmp_path / "fig"), "--format", "svg"]) == 2
    err = capsys.readouterr().err.strip()
    assert "badstep.duckdb" in err and "\n" not in err and not (tmp_path / "fig").exists()
    assert main(["export-lens", str(folder / "truncated.duckdb"), "--out", str(tmp_path / "lens")]) == 2
    err = capsys.readouterr().err.strip()
    assert "truncated.duckdb" in err and "\n" not in err and "holds no trained tuned lens" not in err
    # the site: the bad caches skipped with their reasons, the good one built
    code = main(["site", "paper", "junk", "badversion", "--cache-dir", str(folder), "--out", str(tmp_path / "site"),
                 "--formats", "svg"])
    out = capsys.readouterr()
    assert code == 0, out.err
    skipped = [line for line in out.err.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 2 and any("junk.duckdb" in s for s in skipped) and any("badversion" in s for s in skipped)
    assert (tmp_path / "site" / "paper").is_dir() and not (tmp_path / "site" / "junk").exists()


def _app(folder: Path, monkeypatch, pair: str, page: str = "overview") -> AppTest:
    monkeypatch.setenv("TYING_CACHE_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["pair"] = pair
    at.switch_page(f"views/{page}.py").run()
    return at


@pytest.mark.parametrize("page", ["overview", "tour", "dynamics", "sweep"])
def test_the_app_draws_a_good_cache_beside_bad_ones(folder, monkeypatch, page):
    at = _app(folder, monkeypatch, "demo", page)
    assert not at.exception, (page, at.exception)
    assert not [e.value for e in at.error if "Cannot open" in e.value]


@pytest.mark.parametrize("name", BAD)
def test_the_app_picking_a_bad_cache_says_why_in_one_line(folder, monkeypatch, name):
    at = _app(folder, monkeypatch, name)
    assert not at.exception, (name, at.exception)
    errors = [e.value for e in at.error]
    assert any(e.startswith(f"Cannot open the cache '{name}'") and f"{name}.duckdb" in e for e in errors), errors


# -- a cache of another kind is never replaced without --force --------------------------------------

def _fingerprint(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


@pytest.mark.parametrize("argv", [
    ["grads", "--csv", str(ROOT / "published" / "olmo-1b-tied-gradient-provenance.csv"), "--name", "demo"],
    ["evolution-json", "--json", str(ROOT / "published" / "evolution_pythia-1b.json"), "--name", "demo"],
    ["paper", "--name", "demo"],
])
def test_a_writer_refuses_a_cache_of_another_kind_without_force(tmp_path, capsys, argv):
    """`grads --name sweep` once emptied the sweep (exit 0); now: one line, exit 2, the cache
    untouched; with --force the user asks for the replacement and gets it."""
    shutil.copyfile(ROOT / "cache" / "demo.duckdb", tmp_path / "demo.duckdb")
    before = _fingerprint(tmp_path / "demo.duckdb")
    assert main([*argv, "--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "another kind (toylab" in err and "--force" in err and "\n" not in err
    assert _fingerprint(tmp_path / "demo.duckdb") == before
    assert main([*argv, "--cache-dir", str(tmp_path), "--force"]) == 0
    capsys.readouterr()
    con = store.open_cache(tmp_path / "demo.duckdb")
    try:
        assert store.read_meta(con)["kind"] != "toylab"
    finally:
        con.close()


@pytest.mark.slow
def test_pair_and_demo_refuse_a_cache_of_another_kind(tmp_path, capsys, tiny_model):
    from precompute.fixtures import build_sweep_cache

    build_sweep_cache(tmp_path, {32: [0.3, 0.31, 0.29]})
    sweep = tmp_path / "sweep.duckdb"
    before = _fingerprint(sweep)
    tied = tiny_model("llama", True, seed=1)
    assert main(["pair", "--tied", str(tied), "--name", "sweep", "--cache-dir", str(tmp_path), "--skip", MATRICES_ONLY]) == 2
    assert "another kind (sweep, not model)" in capsys.readouterr().err
    assert main(["demo", "--name", "sweep", "--cache-dir", str(tmp_path), "--steps", "13", "--seeds", "1"]) == 2
    assert "another kind (sweep, not toylab)" in capsys.readouterr().err
    assert _fingerprint(sweep) == before


# -- bad inputs: one line, exit 2, checked before anything is written --------------------------------

def _one_line(capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2, argv
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("text", ["caf\udce9", "lone \ud800 surrogate"])
def test_a_text_that_is_not_utf8_is_one_line(capsys, text):
    """Bytes that are not UTF-8 reach argv as lone surrogates (Python's surrogateescape)."""
    err = _one_line(capsys, ["trajectory", str(ROOT / "cache" / "demo.duckdb"), "--text", text])
    assert "not valid UTF-8" in err
    from precompute.serve import check_request
    from tying.errors import UserError

    with pytest.raises(UserError, match="not valid UTF-8"):
        check_request({"text": text})


@pytest.fixture(scope="module")
def lens_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lens") / "demo-lens"
    assert main(["export-lens", str(ROOT / "cache" / "demo.duckdb"), "--out", str(out)]) == 0
    return out


def _bad_lens(src: Path, dst: Path, params=None, config=None) -> Path:
    import json

    import torch

    shutil.copytree(src, dst)
    for role in ("tied", "untied"):
        if config is not None:
            c = json.loads((dst / role / "config.json").read_text()) | config
            (dst / role / "config.json").write_text(json.dumps(c))
        if params is not None:
            state = torch.load(dst / role / "params.pt", weights_only=True)
            torch.save(params(state), dst / role / "params.pt")
    return dst


def _nan(state):
    state["0.weight"][0, 0] = float("nan")
    return state


def _complex(state):
    return {k: v.to(__import__("torch").complex64) for k, v in state.items()}


def _lists(state):
    return {k: v.tolist() for k, v in state.items()}


@pytest.mark.slow
@pytest.mark.parametrize("case, params, config, says", [
    ("nan", _nan, None, "NaN or infinite"),
    ("complex", _complex, None, "real floating point"),
    ("lists", _lists, None, "not tensors"),
    ("hash", None, {"unembed_hash": 12345}, "unembed_hash is a int"),
])
def test_lens_from_a_bad_folder_is_one_line_and_writes_nothing(lens_folder, tmp_path, capsys, case, params, config,
                                                               says):
    folder = _bad_lens(lens_folder, tmp_path / case, params, config)
    err = _one_line(capsys, ["pair", "--tied", ROOT / "cache" / "toylab" / "demo" / "tied-seed0", "--untied",
                             ROOT / "cache" / "toylab" / "demo" / "untied-seed0", "--name", "x",
                             "--cache-dir", tmp_path / "out", "--lens-from", folder])
    assert says in err and "--lens-from" in err
    assert not (tmp_path / "out" / "x.duckdb").exists()


@pytest.mark.parametrize("url, says", [
    ("https://exa mple.org/tour", "plain host"),
    ("https://example.org\x07/tour", "plain host"),
    ("https://example.org/my tour", "plain host"),
    ("http://user:secret@example.org/tour", "plain host"),
    ("ftp://example.org/tour", "plain host"),
    ("https://example.org/" + "p" * 5000, "too long for a QR code"),
])
def test_a_bad_base_url_is_one_line_before_the_build(tmp_path, capsys, url, says):
    err = _one_line(capsys, ["site", "paper", "--cache-dir", ROOT / "cache", "--out", tmp_path / "site",
                             "--formats", "svg", "--base-url", url])
    assert says in err and "--base-url" in err
    assert not (tmp_path / "site").exists()


# -- leftovers ----------------------------------------------------------------------------------------

def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_folder_is_written_0755_and_a_killed_writers_leftovers_are_removed(tmp_path, monkeypatch):
    import errno
    import os

    from tying.cache.writer import folder_written

    dead, alive = _dead_pid(), os.getppid()
    for what in ("tmp", "old", "partial"):
        (tmp_path / f".lens.{what}-{dead}").mkdir()
    (tmp_path / f".lens.tmp-{alive}").mkdir()  # a live writer's: left alone
    with folder_written(tmp_path / "lens") as tmp:
        (tmp / "tied").mkdir()
        (tmp / "tied" / "params.pt").write_bytes(b"x")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".lens.tmp-{alive}", "lens"], left
    want = 0o777 & ~_umask()
    assert (tmp_path / "lens").stat().st_mode & 0o777 == want and (tmp_path / "lens" / "tied").stat().st_mode & 0o777 == want
    # a folder that cannot be moved (a mount point): refused, the folder as it was, nothing left beside it
    real = os.replace

    def busy(src, dst):
        if Path(src) == tmp_path / "lens":
            raise OSError(errno.EBUSY, "Device or resource busy", str(src))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", busy)
    with pytest.raises(OSError), folder_written(tmp_path / "lens") as tmp:
        (tmp / "new").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".lens.tmp-{alive}", "lens"]
    assert (tmp_path / "lens" / "tied" / "params.pt").read_bytes() == b"x"


@pytest.mark.slow
def test_a_killed_site_builds_partial_folder_is_removed_by_the_next_build(tmp_path, capsys):
    dead = _dead_pid()
    stale = tmp_path / f".site.partial-{dead}"
    stale.mkdir()
    (stale / "index.html").write_text("half")
    assert main(["site", "paper", "--cache-dir", str(ROOT / "cache"), "--out", str(tmp_path / "site"),
                 "--formats", "svg"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    assert (tmp_path / "site").stat().st_mode & 0o777 == 0o777 & ~_umask()


# -- a --force rebuild stopped on the way leaves the previous cache whole --------------------------------

@pytest.mark.slow
def test_a_stopped_force_rebuild_leaves_the_previous_cache_whole(tiny_model, tmp_path, capsys, monkeypatch):
    """`pair --force` once started from an empty file at its first stage: stopped after it, the cache
    had lost every other stage. Now the rebuild is written beside the cache and renamed over it
    when complete; a stopped one leaves the cache as it was, and its file is removed by the next
    writer once its process is gone."""
    import os

    import precompute.stages
    from tying.cache.writer import CacheWriter

    tied, untied = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)
    argv = ["pair", "--tied", tied, "--untied", untied, "--cache-dir", tmp_path, "--name", "p", "--skip", MATRICES_ONLY,
            "--spectral-components", "8", "--neighbours-k", "10"]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    path = tmp_path / "p.duckdb"
    before = path.read_bytes()

    def stopped(run, progress):
        raise KeyboardInterrupt

    stage = precompute.stages.STAGES["neighbours"]  # after load and alignment
    monkeypatch.setitem(precompute.stages.STAGES, "neighbours", precompute.stages.Stage(stage.params, stopped))
    assert main([str(a) for a in [*argv, "--force"]]) == 130
    capsys.readouterr()
    assert path.read_bytes() == before  # every stage of the previous cache, untouched
    staged = sorted(p for p in tmp_path.iterdir() if ".tmp-forced-" in p.name)
    assert [p.name.endswith(".lock") for p in staged] == [True, False]  # the stopped rebuild's file and lock
    pid = _dead_pid()  # as if its process were gone
    dead = [p.rename(p.with_name(p.name.replace(f"forced-{os.getpid()}", f"forced-{pid}"))) for p in staged]
    CacheWriter(path)
    assert not any(p.exists() for p in dead)
    # a rebuild that completes replaces the cache
    monkeypatch.undo()
    assert main([str(a) for a in [*argv, "--force", "--neighbours-k", "12"]]) == 0
    capsys.readouterr()
    assert path.read_bytes() != before and not [p for p in tmp_path.iterdir() if ".tmp-forced-" in p.name]
    assert store.read_meta(store.open_cache(path))["kind"] == "pair"


@pytest.mark.slow
def test_pair_refuses_to_replace_another_run_of_its_name_without_force(tiny_model, tmp_path, capsys):
    a, b = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)
    other = tiny_model("llama", False, seed=5)
    argv = ["pair", "--tied", a, "--untied", b, "--cache-dir", tmp_path, "--name", "p", "--skip", f"{MATRICES_ONLY},spectral"]
    assert main([str(x) for x in argv]) == 0
    assert main([str(x) for x in argv]) == 0  # the same run again: its stages are reused
    capsys.readouterr()
    path = tmp_path / "p.duckdb"
    before = _fingerprint(path)
    again = [str(x) for x in argv]
    again[again.index(str(b))] = str(other)
    assert main(again) == 2
    err = capsys.readouterr().err.strip()
    assert "holds another run" in err and str(b) in err and "--force" in err and "\n" not in err
    assert _fingerprint(path) == before
    assert main([*again, "--force"]) == 0


@pytest.mark.slow
def test_lens_from_a_lens_of_another_model_is_refused_before_any_stage_is_written(lens_folder, tiny_model, tmp_path,
                                                                                  capsys):
    tied, untied = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)
    err = _one_line(capsys, ["pair", "--tied", tied, "--untied", untied, "--name", "x", "--cache-dir", tmp_path,
                             "--lens-from", lens_folder])
    assert "--lens-from: the lens in" in err and "the tied model needs" in err
    assert not (tmp_path / "x.duckdb").exists()
