"""Every write to a cache file goes through this module (every read, through :mod:`tying.cache.store`).

Writing is atomic: each finished stage is written into a temporary copy of the cache,
which then replaces the cache with one ``os.replace`` (:func:`atomic_write`). A run killed at
any moment leaves the previous cache (with every stage finished before it) intact, and a reader
that has the old file open keeps reading the old file. Writers of one cache take turns under its
lock (:func:`writer_lock`); :class:`CacheWriter` writes a cache stage by stage.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import glob
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from tying.cache.schema import MIGRATIONS, READABLE_VERSIONS, SCHEMA_VERSION, STAGE_TABLES, TABLES
from tying.cache.store import connect, is_duckdb_file, params_hash, schema_version
from tying.errors import UserError


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Every table of :data:`TABLES` the file lacks (the names read once: a statement per table
    that exists cost a stage write about 10 ms)."""
    have = {row[0] for row in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main'").fetchall()}
    for table, body in TABLES.items():
        if table not in have:
            con.execute(f"CREATE TABLE {table} ({body})")


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring a cache of a readable older version to this one (:data:`~tying.cache.schema.MIGRATIONS`);
    a new or current file is left as it is. The caller then records the current version."""
    version = schema_version(con)
    if version is None:
        return
    for target in range(version + 1, SCHEMA_VERSION + 1):
        for sql in MIGRATIONS.get(target, ()):
            con.execute(sql)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None], *, tmp: Path | None = None) -> Path:
    """Write ``path`` atomically: ``write(tmp)`` fills a temporary file beside it, which is
    synced and renamed over ``path`` (then the folder is synced). On any failure, also an
    interrupt, the temporary is removed and ``path`` is left as it was.

    ``tmp``: the temporary's path (default: a fresh ``.<name>.<random>.tmp`` beside ``path``).
    """
    path = Path(path)
    if tmp is None:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        tmp = Path(name)
    _remove_with_wal(tmp)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        try:
            fd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return path
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _remove_with_wal(tmp)
        raise
    return path


def remove_dead_leftovers(folder: str | os.PathLike, name: str) -> None:
    """Delete what killed writers of ``name`` left in ``folder``: ``.<name>.<what>-<pid>`` files and
    folders (a site's ``.partial-<pid>``, a folder's ``.tmp-<pid>`` and ``.old-<pid>``) whose process
    is gone, and their ``.wal`` or ``.lock`` beside them. A live writer's are left alone."""
    for p in Path(folder).glob(f".{glob.escape(name)}.*-*"):
        pid = p.name.rsplit("-", 1)[-1].split(".")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


@contextlib.contextmanager
def folder_written(path: str | os.PathLike):
    """Write the folder ``path`` whole or not at all: the ``with`` body fills the temporary
    folder it is given, beside ``path`` (``.<name>.tmp-<pid>``, made with the permissions of any
    new folder: 0755 under the usual umask), which then takes ``path``'s place (an earlier folder
    there is moved aside, then removed). On any failure, also an interrupt, the temporary is
    removed and ``path`` is left as it was; leftovers of killed writers are removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_leftovers(path.parent, path.name)
    tmp, old = path.parent / f".{path.name}.tmp-{os.getpid()}", None
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            old = path.parent / f".{path.name}.old-{os.getpid()}"
            os.replace(path, old)  # a mount point cannot move: refused here, nothing left behind
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not path.exists():
            os.replace(old, path)  # the earlier folder back in its place
        raise


def _remove_with_wal(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def forced_path(path: str | os.PathLike) -> Path:
    """Where a ``--force`` rebuild writes its stages: a hidden file beside the cache
    (``.<name>.duckdb.tmp-forced-<pid>``), renamed over it by :func:`publish` once the rebuild is
    complete. A rebuild killed on the way leaves the previous cache whole; the next writer of the
    cache removes the dead one's file (:func:`remove_stale_temporaries`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-forced-{os.getpid()}")


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Delete what writers of the cache at ``path`` left when they were killed (their process is
    gone): stage temporaries (``.<name>.duckdb.tmp-<pid>`` and their ``.wal``), a stopped forced
    rebuild (``.<name>.duckdb.tmp-forced-<pid>``) and that rebuild's own lock file."""
    path = Path(path)
    remove_dead_leftovers(path.parent, path.name)
    remove_dead_leftovers(path.parent, "." + path.name)  # ``..<name>.duckdb.tmp-forced-<pid>.lock``


def publish(staged: str | os.PathLike, path: str | os.PathLike) -> None:
    """Rename a complete forced rebuild (:func:`forced_path`) over the cache at ``path``, under the
    cache's writer lock, then sync the folder."""
    staged, path = Path(staged), Path(path)
    with writer_lock(path):
        atomic_write(path, lambda tmp: os.replace(staged, tmp), tmp=path.with_name(f".{path.name}.tmp-{os.getpid()}"))
    lock_path(staged).unlink(missing_ok=True)


def lock_path(path: str | os.PathLike) -> Path:
    """The lock file of a cache: ``.<name>.duckdb.lock`` beside it (writers only; readers never touch it)."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def writer_lock(path: str | os.PathLike, *, say=None):
    """Hold the exclusive writer lock of the cache at ``path`` (an advisory ``flock``).

    A second writer of the same cache waits here until the first has renamed its stage
    into place; ``say`` (default: a line on stderr) is told once that it waits. Readers
    open the cache file itself and never wait. Where ``fcntl`` is missing (Windows) there
    is no lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield
        return
    lock = lock_path(path)
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            (say or (lambda m: print(m, file=sys.stderr, flush=True)))(
                f"waiting for the other writer of {Path(path).name} ({holder}) to finish its stage")
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class CacheWriter:
    """Writes one pair's cache stage by stage, each stage an atomic replace of the file.

    ``CacheWriter(path).write_stage("alignment", params, {"alignment": df, ...})``

    Writers of one cache take turns: each stage is written under the cache's exclusive
    writer lock (:func:`writer_lock`), starting from the file as it is at that moment, so
    two commands writing one cache at once (``precompute lens`` while ``precompute pair``
    runs UMAP) both keep their stages. A second writer waits, with a message.
    """

    def __init__(self, path: str | os.PathLike, *, force: bool = False, meta: dict[str, Any] | None = None,
                 replace: bool | None = None):
        """``force``: start the stages anew; ``replace``: the user's ``--force``, which alone lets a
        cache of another kind (``meta["kind"]``) be replaced (default: ``force``)."""
        self.path = Path(path)
        self.force = force
        self.meta = dict(meta or {})
        self._check_writable()
        self._check_kind(force if replace is None else replace)
        remove_stale_temporaries(self.path)
        self._done = {} if force else self._finished_stages()
        self._start_empty = force  # a forced rebuild's first stage starts from an empty file

    # -- inspection -------------------------------------------------------------
    def _check_writable(self) -> None:
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            probe = parent / f".{self.path.name}.probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UserError(f"cannot write the cache at '{self.path}': {exc.strerror or exc}") from None
        if self.path.exists() and not self.path.is_file():
            raise UserError(f"cannot write the cache at '{self.path}': it is not a file")

    def _check_kind(self, replace: bool) -> None:
        """UserError (nothing touched) when the file holds a cache of another kind than the one this
        writer writes, unless the user asked to replace it: ``grads --name sweep`` must not turn an
        85-minute sweep into an empty log."""
        kind = self.meta.get("kind")
        if replace or not kind or not self.path.is_file() or not is_duckdb_file(self.path):
            return
        try:
            con = connect(self.path, read_only=True)
        except duckdb.Error:
            return
        try:
            held = dict(con.execute("SELECT key, value FROM meta WHERE key IN ('kind', 'name')").fetchall())
        except duckdb.Error:
            return
        finally:
            con.close()
        if held.get("kind") and held["kind"] != kind:
            raise UserError(f"'{self.path}' holds a cache of another kind ({held['kind']}, not {kind}): choose another "
                            "--name, or pass --force to replace it")

    def _finished_stages(self) -> dict[str, str]:
        """stage -> params_hash of the existing cache; empty if none or unusable."""
        if not self.path.exists() or not is_duckdb_file(self.path):
            return {}
        try:
            con = connect(self.path, read_only=True)
        except duckdb.Error:
            return {}
        try:
            if schema_version(con) not in READABLE_VERSIONS:
                return {}
            return dict(con.execute("SELECT stage, params_hash FROM stages").fetchall())
        except duckdb.Error:
            return {}
        finally:
            con.close()

    def is_done(self, stage: str, phash: str) -> bool:
        return self._done.get(stage) == phash

    # -- writing ----------------------------------------------------------------
    def write_stage(
        self,
        stage: str,
        params: dict[str, Any],
        tables: dict[str, pd.DataFrame],
        *,
        seconds: float,
        invalidate_others: bool = False,
        record: dict[str, Any] | None = None,
    ) -> None:
        """Replace the rows of ``stage``'s tables and mark the stage finished, atomically.

        A table of the stage missing from ``tables`` is emptied. ``invalidate_others``
        clears every other stage (used when the models changed). ``params`` are the
        requested parameters: their hash marks the stage done, so a rerun with the same
        request skips it. ``record`` is what the stages table keeps as the stage's
        parameters (default ``params``): the parameters as the stage ran them.
        """
        expected = set(STAGE_TABLES[stage])
        if not set(tables) <= expected:
            raise ValueError(f"stage {stage} writes {sorted(expected)}, got {sorted(tables)}")
        tables = {t: tables.get(t, pd.DataFrame()) for t in STAGE_TABLES[stage]}
        with writer_lock(self.path):
            self._write_stage_locked(stage, params, tables, seconds, invalidate_others, record)

    def _write_stage_locked(self, stage, params, tables, seconds, invalidate_others, record=None) -> None:
        def apply(con) -> None:
            if invalidate_others:
                for other, other_tables in STAGE_TABLES.items():
                    if other != stage:
                        for t in other_tables:
                            con.execute(f"DELETE FROM {t}")
                con.execute("DELETE FROM stages")
                self._done = {}
            for table, frame in tables.items():
                con.execute(f"DELETE FROM {table}")
                _insert(con, table, frame)

        self._write_locked(stage, params, seconds, apply, record)

    def write_cell(self, stage: str, params: dict[str, Any], table: str, frame: pd.DataFrame,
                   key: dict[str, Any], *, seconds: float) -> None:
        """Replace the rows of ``table`` matching ``key`` (column -> value) with ``frame`` and
        mark ``stage`` finished, atomically: one cell of a grid whose other rows stay."""
        self.write_cells(stage, params, {table: frame}, key, seconds=seconds)

    def write_cells(self, stage: str, params: dict[str, Any], frames: dict[str, pd.DataFrame],
                    key: dict[str, Any], *, seconds: float) -> None:
        """:meth:`write_cell` for several tables at once (table -> frame), one key for all: a run
        whose row and curve land together or not at all."""
        if not frames or any(t not in TABLES for t in frames) or not key:
            raise ValueError(f"write_cell needs cache tables and a key, got {list(frames)!r}, {key!r}")
        where = " AND ".join(f"{col} = ?" for col in key)

        def apply(con) -> None:
            for table, frame in frames.items():
                con.execute(f"DELETE FROM {table} WHERE {where}", list(key.values()))
                _insert(con, table, frame)

        with writer_lock(self.path):
            self._write_locked(stage, params, seconds, apply)

    def _write_locked(self, stage, params, seconds, apply, record=None) -> None:
        phash = params_hash(params)
        recorded = json.dumps(params if record is None else record, sort_keys=True, default=str)

        def fill(tmp: Path) -> None:
            # Start from an empty file when nothing usable is there (new cache, the first
            # stage of --force, an unreadable schema); otherwise from a copy of the cache as it
            # is now, under the lock: stages other writers finished meanwhile are kept, and an
            # older readable schema is migrated.
            con = self._open_copy(tmp)
            try:
                _create_tables(con)
                _migrate(con)
                con.execute("BEGIN TRANSACTION")
                apply(con)
                con.execute("DELETE FROM stages WHERE stage = ?", [stage])
                con.execute(
                    "INSERT INTO stages VALUES (?, ?, ?, ?, ?)",
                    [stage, phash, recorded, float(seconds),
                     _dt.datetime.now(_dt.UTC).replace(tzinfo=None)],
                )
                meta = {**self.meta, "schema_version": str(SCHEMA_VERSION),
                        "updated": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
                _write_meta(con, meta)
                con.execute("COMMIT")
                con.execute("CHECKPOINT")
            finally:
                con.close()

        atomic_write(self.path, fill, tmp=self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}"))
        self._start_empty = False
        self._done[stage] = phash

    def _open_copy(self, tmp: Path) -> duckdb.DuckDBPyConnection:
        """A connection to ``tmp``: a copy of the cache where it is one of a readable schema, else a
        new empty file. The copy itself is opened and checked (one DuckDB instance a stage write,
        not one to check the cache and another to fill the copy: each costs about 17 ms)."""
        if not self._start_empty and is_duckdb_file(self.path):
            shutil.copyfile(self.path, tmp)
            with contextlib.suppress(duckdb.Error):  # a file that is no readable DuckDB database
                con = connect(tmp, read_only=False)
                if schema_version(con) in READABLE_VERSIONS:
                    return con
                con.close()
            _remove_with_wal(tmp)  # start anew
        return connect(tmp, read_only=False)


def _write_meta(con: duckdb.DuckDBPyConnection, meta: dict[str, Any]) -> None:
    """Set the meta table's rows for ``meta``'s keys in two statements (one a key cost a stage write
    about 12 ms): a value of None is no row, never the string "null" (an absent fact: no preset, say);
    anything not a string is stored as its JSON."""
    con.execute("DELETE FROM meta WHERE list_contains(?, key)", [list(meta)])
    _insert(con, "meta", pd.DataFrame(
        [(k, v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str))
         for k, v in meta.items() if v is not None], columns=["key", "value"]))


def _insert(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    if len(frame):
        con.register("_frame", frame)
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _frame")
        con.unregister("_frame")



def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
