"""Every read of a cache file goes through this module (every write, through
:mod:`tying.cache.writer`), and so does every cache's name and path.

Reading is read-only: :func:`open_cache` checks the schema version and gives a
:class:`CacheError` that names the command that rebuilds the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from tying.cache.schema import READABLE_VERSIONS, SCHEMA_VERSION
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
    """'allenai/OLMo-1B-hf' -> 'olmo-1b-hf': a model id, folder or GGUF file (its name without
    '.gguf') as part of a cache name."""
    name = Path(source.rstrip("/")).name
    name = name[:-5] if name.lower().endswith(".gguf") else name
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower()


def default_name(tied: str, untied: str) -> str:
    return f"{short_name(tied)}__{short_name(untied)}"


def cache_path(cache_dir: str | os.PathLike, name: str) -> Path:
    return Path(cache_dir) / f"{name}{CACHE_SUFFIX}"

NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
"""Every connection's settings: DuckDB never installs or loads an extension on its own (a file
posing as a cache, a SQLite database say, would otherwise make it download a scanner)."""

DUCKDB_MAGIC = b"DUCK"
"""A DuckDB database file holds these bytes at offset 8 (its header's magic)."""


def connect(path: str | os.PathLike, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to a cache file with :data:`NO_EXTENSIONS` set on it before any query
    (every open of a cache, to read or to write, goes through here). Set, not passed as the
    connection's configuration: DuckDB refuses a second connection to one file with another
    configuration, and a reader elsewhere in the process (a test, a notebook) may hold one."""
    con = duckdb.connect(str(path), read_only=read_only)
    try:
        for key, value in NO_EXTENSIONS.items():
            con.execute(f"SET {key} = {'true' if value else 'false'}")
    except BaseException:
        con.close()
        raise
    return con


def is_duckdb_file(path: str | os.PathLike) -> bool:
    """Whether the file's header is a DuckDB database's (checked before DuckDB opens it)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[8:12] == DUCKDB_MAGIC


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The cache's schema version (its meta table's), None when it has none or it is no number."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.Error:
        return None
    try:
        return int(row[0]) if row else None
    except (TypeError, ValueError):
        return None


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
    if not is_duckdb_file(path):
        raise CacheError(f"'{path}' is not a readable cache: not a DuckDB database (its header is another file's)",
                         rebuild_command(name))
    try:
        con = connect(path, read_only=True)
    except duckdb.Error as exc:
        raise CacheError(f"'{path}' is not a readable cache ({first_line(exc)})", rebuild_command(name)) from None
    version = schema_version(con)
    if version not in READABLE_VERSIONS:
        rebuild = read_meta(con).get("command") or rebuild_command(name)
        con.close()
        found = "no schema version" if version is None else f"schema version {version}"
        readable = (f"{READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}" if len(READABLE_VERSIONS) > 1
                    else str(SCHEMA_VERSION))
        raise CacheError(f"'{path}' has {found}; this version reads schema {readable}", rebuild)
    return con


def held_sources(path: str | os.PathLike) -> dict[str, str]:
    """``{role: model source}`` of the cache at ``path`` (its models table), empty when there is no
    readable cache there: what run a writer would replace."""
    try:
        con = open_cache(path)
    except CacheError:
        return {}
    try:
        return dict(con.execute("SELECT role, source FROM models").fetchall()) if table_exists(con, "models") else {}
    except duckdb.Error:
        return {}
    finally:
        con.close()


def same_source(a: str | None, b: str | None) -> bool:
    """Whether two model sources name one model: equal, or one local path."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


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
