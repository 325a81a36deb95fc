"""The cache writer and reader (tying.cache.writer, tying.cache.store): stage skipping, schema checks and atomic
replacement."""

import hashlib
import os
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tests.waiting import wait_until
from tying.cache import store, writer
from tying.cache.schema import SCHEMA_VERSION, TABLES
from tying.cache.store import CacheError, list_caches, open_cache, params_hash
from tying.cache.writer import CacheWriter


def _curve(value: float) -> dict[str, pd.DataFrame]:
    return {
        "neighbours": pd.DataFrame({"matrix": ["T"], "token": [0], "rank": [1], "neighbour": [1], "score": [0.5]}),
        "overlap_curve": pd.DataFrame({"pair": ["T~O"], "k": [1], "mean_overlap": [value]}),
    }


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_write_read_and_skip(tmp_path):
    path = tmp_path / "p.duckdb"
    w = CacheWriter(path, meta={"name": "p"})
    assert not w.is_done("neighbours", params_hash({"k": 1}))
    w.write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    con = open_cache(path)
    assert con.execute("SELECT mean_overlap FROM overlap_curve").fetchone()[0] == 0.25
    assert store.read_meta(con)["schema_version"] == str(SCHEMA_VERSION)
    con.close()
    # a new writer sees the finished stage with the same params, not with others
    w2 = CacheWriter(path)
    assert w2.is_done("neighbours", params_hash({"k": 1}))
    assert not w2.is_done("neighbours", params_hash({"k": 2}))
    assert not CacheWriter(path, force=True).is_done("neighbours", params_hash({"k": 1}))


def test_meta_is_set_per_key_with_none_as_no_row(tmp_path):
    path = tmp_path / "p.duckdb"
    CacheWriter(path, meta={"name": "p", "preset": "olmo", "vocabulary": {"n": 3, "a": [1, 2]}}).write_stage(
        "neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    CacheWriter(path, meta={"preset": None, "name": "q"}).write_stage("neighbours", {"k": 2}, _curve(0.5), seconds=0.1)
    con = open_cache(path)
    rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
    con.close()
    assert rows.pop("updated") and rows == {"name": "q", "vocabulary": '{"a": [1, 2], "n": 3}',
                                              "schema_version": str(SCHEMA_VERSION)}


def test_rewrite_replaces_rows_of_that_stage_only(tmp_path):
    path = tmp_path / "p.duckdb"
    w = CacheWriter(path)
    w.write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    w.write_stage("spectral", {}, {"spectral": pd.DataFrame(
        {"pair": ["T~O"], "graph_k": [2], "n_components": [2], "n_tokens": [3], "distance": [0.5]})}, seconds=0.1)
    w.write_stage("neighbours", {"k": 2}, _curve(0.75), seconds=0.1)
    con = open_cache(path)
    assert con.execute("SELECT count(*), max(mean_overlap) FROM overlap_curve").fetchone() == (1, 0.75)
    assert con.execute("SELECT count(*) FROM spectral").fetchone()[0] == 1
    con.close()


def test_invalidate_others_clears_other_stages(tmp_path):
    path = tmp_path / "p.duckdb"
    w = CacheWriter(path)
    w.write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    w.write_stage("spectral", {}, {"spectral": pd.DataFrame(
        {"pair": ["T~O"], "graph_k": [2], "n_components": [2], "n_tokens": [3], "distance": [0.5]})},
        seconds=0.1, invalidate_others=True)
    con = open_cache(path)
    assert con.execute("SELECT count(*) FROM overlap_curve").fetchone()[0] == 0
    assert [r[0] for r in con.execute("SELECT stage FROM stages").fetchall()] == ["spectral"]
    con.close()


@pytest.mark.parametrize("where", ["insert", "replace"])
def test_interrupted_write_leaves_previous_cache_intact(tmp_path, monkeypatch, where):
    path = tmp_path / "p.duckdb"
    CacheWriter(path).write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    before = _digest(path)

    class Boom(BaseException):
        pass

    def explode(*a, **k):
        raise Boom()

    w = CacheWriter(path)
    if where == "replace":
        monkeypatch.setattr(writer.os, "replace", explode)
        tables = _curve(0.9)
    else:
        bad = _curve(0.9)
        bad["overlap_curve"] = bad["overlap_curve"].assign(mean_overlap=[object()])  # duckdb cannot insert it
        tables = bad
    with pytest.raises(BaseException):
        w.write_stage("neighbours", {"k": 9}, tables, seconds=0.1)
    monkeypatch.undo()
    assert _digest(path) == before
    # no temporary left behind (the writers' lock file stays: removing it would race with a waiting writer)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".p.duckdb.lock") == ["p.duckdb"]
    con = open_cache(path)
    assert con.execute("SELECT mean_overlap FROM overlap_curve").fetchone()[0] == 0.25
    con.close()


def test_open_cache_errors(tmp_path):
    with pytest.raises(CacheError, match="no cache"):
        open_cache(tmp_path / "missing.duckdb")
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(CacheError, match="not a readable cache"):
        open_cache(junk)
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '0'), ('command', 'python -m precompute demo')")
    con.close()
    with pytest.raises(CacheError, match="schema version 0") as exc:
        open_cache(old)
    assert exc.value.rebuild == "python -m precompute demo"
    infos = {i.name: i for i in list_caches(tmp_path)}
    assert set(infos) == {"junk", "old"} and all(i.error for i in infos.values())


def test_old_schema_cache_is_rebuilt_not_copied(tmp_path):
    path = tmp_path / "p.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    con.execute("CREATE TABLE legacy (x INTEGER)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '0')")
    con.close()
    CacheWriter(path).write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    con = open_cache(path)
    tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    con.close()
    assert "legacy" not in tables


def test_a_stage_written_into_a_cache_that_lacks_tables_creates_them_and_keeps_the_rest(tmp_path):
    """A cache of the current schema without some tables (written before they existed, say): the next
    stage write creates every missing table and keeps the rows it has; a file that is no DuckDB
    database, or a DuckDB file of no readable schema, is started anew."""
    path = tmp_path / "p.duckdb"
    w = CacheWriter(path)
    w.write_stage("neighbours", {"k": 1}, _curve(0.25), seconds=0.1)
    w.write_stage("spectral", {}, {"spectral": pd.DataFrame(
        {"pair": ["T~O"], "graph_k": [2], "n_components": [2], "n_tokens": [3], "distance": [0.5]})}, seconds=0.1)
    with duckdb.connect(str(path)) as con:
        con.execute("DROP TABLE umap")
        con.execute("DROP TABLE cka")
    w.write_stage("neighbours", {"k": 2}, _curve(0.5), seconds=0.1)
    con = open_cache(path)
    tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    assert set(TABLES) <= tables and con.execute("SELECT max(mean_overlap) FROM overlap_curve").fetchone()[0] == 0.5
    assert con.execute("SELECT distance FROM spectral").fetchall() == [(0.5,)]  # the other stage's rows kept
    con.close()
    for junk in (b"DUCK" * 1024, b"\0" * 8 + b"DUCK" + b"\0" * 4096):  # no DuckDB file; a header posing as one
        path.write_bytes(junk)
        CacheWriter(path).write_stage("neighbours", {"k": 3}, _curve(0.75), seconds=0.1)
        con = open_cache(path)
        assert con.execute("SELECT count(*), max(mean_overlap) FROM overlap_curve").fetchone() == (1, 0.75)
        con.close()
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name or p.name.endswith(".wal")]  # none left


def test_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot write the cache"):
        CacheWriter(blocker / "sub" / "p.duckdb")
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(ValueError, match="cannot write the cache"):
            CacheWriter(ro / "p.duckdb")


def test_stale_temporary_of_a_dead_writer_is_removed(tmp_path):
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".p.duckdb.tmp-{dead.pid}"
    stale.write_bytes(b"half written")
    live = tmp_path / f".p.duckdb.tmp-{os.getppid()}"
    live.write_bytes(b"someone else's")
    CacheWriter(tmp_path / "p.duckdb")
    assert not stale.exists() and live.exists()


_WRITER = r"""
import sys
from pathlib import Path
import numpy as np, pandas as pd
from tests.waiting import wait_until
from tying.cache.writer import CacheWriter
path, stage, barrier, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
n = np.arange(rows, dtype=np.int32)
tables = {"umap": {"umap": pd.DataFrame({"matrix": "T", "token": n, "x": np.float32(1), "y": np.float32(2)})},
          "load": {"norms": pd.DataFrame({"matrix": "I", "token": n, "norm": np.float32(3)})}}[stage]
w = CacheWriter(path)
if barrier != "-":  # both writers begin together: say ready, then wait for the go
    (Path(barrier) / f"ready-{stage}").touch()
    wait_until(lambda: (Path(barrier) / "go").exists(), timeout=120, interval=0.005, what="the go")
w.write_stage(stage, {"rows": rows}, tables, seconds=0.0)
print("done", stage)
"""


@pytest.mark.slow
def test_two_writers_at_once_keep_every_stage(tmp_path):
    """Two processes write two stages of one cache at the same moment: both stages survive.

    Without the writer lock each writer copies the (empty) cache, inserts its rows and
    renames over the file, and the later rename drops the other writer's stage.
    """
    import subprocess
    import sys

    path = tmp_path / "both.duckdb"
    root = Path(__file__).resolve().parent.parent
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    stages = ("umap", "load")
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), stage, str(barrier), "400000"], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for stage in stages]
    # both interpreters have imported duckdb and pandas and hold a writer (or one failed): go
    wait_until(lambda: all((barrier / f"ready-{s}").exists() for s in stages)
               or any(p.poll() is not None for p in procs), timeout=120, what="both writers ready")
    (barrier / "go").touch()
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    con = open_cache(path)
    try:
        assert sorted(r[0] for r in con.execute("SELECT stage FROM stages").fetchall()) == ["load", "umap"]
        assert con.execute("SELECT count(*) FROM umap").fetchone() == (400000,)
        assert con.execute("SELECT count(*) FROM norms").fetchone() == (400000,)
    finally:
        con.close()


def test_a_second_writer_waits_with_a_message(tmp_path):
    import subprocess
    import sys

    from tying.cache.writer import writer_lock

    path = tmp_path / "wait.duckdb"
    root = Path(__file__).resolve().parent.parent
    err_file = tmp_path / "writer.err"
    with writer_lock(path):
        with open(err_file, "w") as err_out:
            proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "umap", "-", "50"], cwd=root,
                                    stdout=subprocess.PIPE, stderr=err_out, text=True)
        wait_until(lambda: "waiting for the other writer" in err_file.read_text() or proc.poll() is not None,
                   timeout=120, what="the second writer's message")
        assert proc.poll() is None  # still waiting for the lock
        assert not path.exists()
    out, _ = proc.communicate(timeout=120)
    err = err_file.read_text()
    assert proc.returncode == 0 and "done umap" in out
    assert "waiting for the other writer of wait.duckdb" in err and f"pid {os.getpid()}" in err
    con = open_cache(path)
    try:
        assert con.execute("SELECT count(*) FROM umap").fetchone() == (50,)
    finally:
        con.close()
