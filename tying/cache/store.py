"""Every access to a cache file goes through this module.

Writing is atomic: each finished stage is written into a temporary copy of the cache,
which then replaces the cache with one ``os.replace``. A run killed at any moment leaves
the previous cache (with every stage finished before it) intact, and a reader that has
the old file open keeps reading the old file.

Reading is read-only: :func:`open_cache` checks the schema version and gives a
:class:`CacheError` that names the command that rebuilds the cache.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from tying.cache.schema import MIGRATIONS, READABLE_VERSIONS, SCHEMA_VERSION, STAGE_TABLES, TABLES
from tying.errors import UserError, first_line

CACHE_SUFFIX = ".duckdb"


class CacheError(Exception):
    """A cache that cannot be read: missing, corrupt, or of another schema version."""

    def __init__(self, message: str, rebuild: str | None = None):
        super().__init__(message)
        self.message = message
        self.rebuild = rebuild


def params_hash(params: dict[str, Any]) -> str:
    """A short stable hash of a JSON-able parameter dict."""
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def check_name(name: str) -> str:
    """A cache name: letters, digits, '.', '_' and '-' (it becomes a file name)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name or ""):
        raise UserError(f"bad cache name '{name}': use letters, digits, '.', '_' and '-'")
    return name


def short_name(source: str) -> str:
    """'allenai/OLMo-1B-hf' -> 'olmo-1b-hf': a model id or folder as part of a cache name."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", Path(source.rstrip("/")).name).strip("-").lower()


def default_name(tied: str, untied: str) -> str:
    return f"{short_name(tied)}__{short_name(untied)}"


def cache_path(cache_dir: str | os.PathLike, name: str) -> Path:
    return Path(cache_dir) / f"{name}{CACHE_SUFFIX}"


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table, body in TABLES.items():
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")


def _schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row else None


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring a cache of a readable older version to this one (:data:`~tying.cache.schema.MIGRATIONS`);
    a new or current file is left as it is. The caller then records the current version."""
    version = _schema_version(con)
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


def _remove_with_wal(path: Path) -> None:
    for p in (path, path.with_name(path.name + ".wal")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


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

    def __init__(self, path: str | os.PathLike, *, force: bool = False, meta: dict[str, Any] | None = None):
        self.path = Path(path)
        self.force = force
        self.meta = dict(meta or {})
        self._check_writable()
        self._remove_stale_temporaries()
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

    def _remove_stale_temporaries(self) -> None:
        """Delete temporaries left by writers that were killed (their process is gone)."""
        for tmp in self.path.parent.glob(f".{self.path.name}.tmp-*"):
            pid = tmp.name.rsplit("-", 1)[-1].split(".")[0]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                self._remove(tmp)

    def _finished_stages(self) -> dict[str, str]:
        """stage -> params_hash of the existing cache; empty if none or unusable."""
        if not self.path.exists():
            return {}
        try:
            con = duckdb.connect(str(self.path), read_only=True)
        except duckdb.Error:
            return {}
        try:
            if _schema_version(con) not in READABLE_VERSIONS:
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
        if table not in TABLES or not key:
            raise ValueError(f"write_cell needs a cache table and a key, got {table!r}, {key!r}")
        where = " AND ".join(f"{col} = ?" for col in key)

        def apply(con) -> None:
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
            if not self._start_empty and self.path.exists() and self._usable():
                shutil.copyfile(self.path, tmp)
            con = duckdb.connect(str(tmp))
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
                for key, value in meta.items():
                    if value is None:  # an absent fact (no preset, say) is no row, never the string "null"
                        con.execute("DELETE FROM meta WHERE key = ?", [key])
                        continue
                    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
                    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, text])
                con.execute("COMMIT")
                con.execute("CHECKPOINT")
            finally:
                con.close()

        atomic_write(self.path, fill, tmp=self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}"))
        self._start_empty = False
        self._done[stage] = phash

    def _usable(self) -> bool:
        """Whether the current file is a cache of a readable schema (else a stage starts from empty)."""
        try:
            con = duckdb.connect(str(self.path), read_only=True)
        except duckdb.Error:
            return False
        try:
            return _schema_version(con) in READABLE_VERSIONS
        finally:
            con.close()

    @staticmethod
    def _remove(path: Path) -> None:
        _remove_with_wal(path)


def _insert(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    if len(frame):
        con.register("_frame", frame)
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _frame")
        con.unregister("_frame")


# -- reading ---------------------------------------------------------------------


def rebuild_command(name: str) -> str:
    return f"python -m precompute pair --name {name} --tied <tied model> --untied <untied model> --force"


def open_cache(path: str | os.PathLike) -> duckdb.DuckDBPyConnection:
    """Open a cache read-only after checking it exists and has a schema version this code reads
    (:data:`~tying.cache.schema.READABLE_VERSIONS`: an older one lacks columns added since, which
    readers treat as their documented defaults; see :func:`has_column`)."""
    path = Path(path)
    name = path.name.removesuffix(CACHE_SUFFIX)
    if not path.is_file():
        raise CacheError(f"no cache at '{path}'", rebuild_command(name))
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise CacheError(f"'{path}' is not a readable cache ({first_line(exc)})", rebuild_command(name)) from None
    version = _schema_version(con)
    if version not in READABLE_VERSIONS:
        rebuild = read_meta(con).get("command") or rebuild_command(name)
        con.close()
        found = "no schema version" if version is None else f"schema version {version}"
        readable = (f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}" if len(READABLE_VERSIONS) > 1
                    else str(SCHEMA_VERSION))
        raise CacheError(f"'{path}' has {found}; this version reads schema {readable}", rebuild)
    return con


def read_meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    except duckdb.Error:
        return {}


def table_exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the cache has ``table`` (caches written before a table was added lack it)."""
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [table]).fetchone()[0])


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether the cache's ``table`` has ``column`` (a cache of an older readable schema may lack it)."""
    return bool(con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = ? "
                            "AND column_name = ?", [table, column]).fetchone()[0])


def finished_stages(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    rows = con.execute("SELECT stage, params, seconds, finished_at FROM stages").fetchall()
    return {s: {"params": json.loads(p), "seconds": sec, "finished_at": str(at)} for s, p, sec, at in rows}


def stage_params(stages: dict[str, dict[str, Any]] | None, stage: str) -> dict[str, Any]:
    """The recorded parameters of ``stage`` in a :func:`finished_stages` dict (a summary's
    "stages"); empty when the stage has not run."""
    return ((stages or {}).get(stage) or {}).get("params") or {}


def query_df(con: duckdb.DuckDBPyConnection, sql: str, params: Iterable[Any] | None = None) -> pd.DataFrame:
    """Run one query on its own cursor (a DuckDB connection is not thread-safe)."""
    cur = con.cursor()
    try:
        return cur.execute(sql, list(params or [])).df()
    finally:
        cur.close()


@dataclass
class CacheInfo:
    name: str
    path: Path
    error: str | None = None
    rebuild: str | None = None


def list_caches(cache_dir: str | os.PathLike) -> list[CacheInfo]:
    """Every ``*.duckdb`` in ``cache_dir`` (temporary files skipped), with its open error if any."""
    out = []
    d = Path(cache_dir)
    if not d.is_dir():
        return out
    for path in sorted(d.glob(f"*{CACHE_SUFFIX}")):
        if path.name.startswith("."):
            continue
        info = CacheInfo(path.name.removesuffix(CACHE_SUFFIX), path)
        try:
            open_cache(path).close()
        except CacheError as exc:
            info.error, info.rebuild = exc.message, exc.rebuild
        out.append(info)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


