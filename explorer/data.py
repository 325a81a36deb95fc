"""The app's only door to the caches: read-only connections and cached queries.

Large results (the vocabulary, neighbour lists, per-token tables) are cached with
``st.cache_resource``, which hands out the same object without a copy: callers must treat
them as read-only. Small ones use ``st.cache_data``.

Pages never open connections or write SQL; they call the loaders here. A connection is
cached per (path, modification time), so a cache replaced by `precompute` (an atomic
rename) is picked up on the next run while sessions still reading the old file keep their
own connection. Each query uses its own cursor (one DuckDB connection is not
thread-safe).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import streamlit as st

from tying.overlap import overlap_at_k
from tying.schema import MATRICES
from tying.store import CacheError, list_caches, open_cache, query_df, table_exists
from tying.summary import summarize

ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    return Path(os.environ.get("TYING_CACHE_DIR", ROOT / "cache"))


@dataclass(frozen=True)
class CacheRef:
    """A cache file as of one modification time (hashable: the key of every cached query)."""

    name: str
    path: str
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> CacheRef:
        return cls(path.name.removesuffix(".duckdb"), str(path), path.stat().st_mtime_ns)


@dataclass(frozen=True)
class CacheListing:
    name: str
    path: str
    error: str | None
    rebuild: str | None


@st.cache_data(ttl=5, show_spinner=False)
def caches(directory: str) -> list[CacheListing]:
    """Every cache in ``directory`` with its error, if it cannot be opened."""
    return [CacheListing(c.name, str(c.path), c.error, c.rebuild) for c in list_caches(directory)]


@st.cache_resource(max_entries=32, show_spinner=False)
def _connection(path: str, mtime_ns: int) -> duckdb.DuckDBPyConnection:
    return open_cache(path)


def connect(ref: CacheRef) -> duckdb.DuckDBPyConnection:
    return _connection(ref.path, ref.mtime_ns)


def query(ref: CacheRef, sql: str, params: tuple = ()) -> pd.DataFrame:
    return query_df(connect(ref), sql, params)


@st.cache_data(max_entries=256, show_spinner=False)
def has_rows(ref: CacheRef, table: str) -> bool:
    """Whether ``table`` exists in this cache and has at least one row."""
    cur = connect(ref).cursor()
    try:
        return table_exists(cur, table) and cur.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
    finally:
        cur.close()


@st.cache_data(max_entries=64, show_spinner=False)
def summary(ref: CacheRef) -> dict:
    cur = connect(ref).cursor()
    try:
        return summarize(cur)
    finally:
        cur.close()


@st.cache_resource(max_entries=32, show_spinner=False)
def tokens(ref: CacheRef) -> pd.DataFrame:
    """The common vocabulary: token, raw, text, tied_id, untied_id, freq_tied, freq_untied, shown."""
    df = query(ref, "SELECT * FROM tokens ORDER BY token")
    df["shown"] = [visible_token(t, r) for t, r in zip(df["text"], df["raw"])]
    return df


def default_token(toks: pd.DataFrame, among=None) -> int:
    """The token a page opens on when none is picked: the most frequent (by the tied model's
    corpus counts), within ``among`` (token ids) when given; else the first. Every page agrees."""
    cand = toks if among is None else toks[toks["token"].isin(set(among))]
    if cand.empty:
        return int(toks["token"].iloc[0]) if len(toks) else 0
    freq = cand["freq_tied"]
    if freq.notna().any():
        return int(cand.loc[freq.fillna(0).astype("int64").idxmax(), "token"])
    return int(cand["token"].iloc[0])


@st.cache_resource(max_entries=64, show_spinner=False)
def alignment(ref: CacheRef, method: str, split: str) -> pd.DataFrame:
    """Per-token cosine (columns comparison, token, cosine) for one method and split."""
    return query(ref, "SELECT comparison, token, cosine FROM alignment WHERE method = ? AND split = ? "
                      "ORDER BY comparison, token", (method, split))


@st.cache_data(max_entries=16, show_spinner=False)
def alignment_summary(ref: CacheRef) -> pd.DataFrame:
    return query(ref, "SELECT * FROM alignment_summary ORDER BY comparison, method, split")


@st.cache_resource(max_entries=32, show_spinner=False)
def neighbour_ids(ref: CacheRef, matrix: str) -> np.ndarray:
    """Neighbour ids of every token in one matrix; array of shape (n_tokens, K)."""
    df = query(ref, "SELECT token, neighbour FROM neighbours WHERE matrix = ? ORDER BY token, rank", (matrix,))
    n = int(df["token"].max()) + 1 if len(df) else 0
    return df["neighbour"].to_numpy(np.int64).reshape(n, -1) if n else np.zeros((0, 0), np.int64)


def max_k(ref: CacheRef) -> int:
    ids = neighbour_ids(ref, "T")
    return int(ids.shape[1]) if ids.ndim == 2 else 0


def neighbours_of(ref: CacheRef, token: int, k: int) -> pd.DataFrame:
    """Top-k neighbours of ``token`` in T, I and O: matrix, rank, neighbour, score, shown, shared."""
    df = query(ref, "SELECT matrix, rank, neighbour, score FROM neighbours WHERE token = ? AND rank <= ? "
                    "ORDER BY matrix, rank", (int(token), int(k)))
    shown = tokens(ref)["shown"].to_numpy()
    df["shown"] = shown[df["neighbour"].to_numpy()] if len(df) else []
    sets = {m: set(g["neighbour"]) for m, g in df.groupby("matrix")}
    df["in"] = [
        "".join(o for o in MATRICES if o != m and n in sets.get(o, ())) for m, n in zip(df["matrix"], df["neighbour"])
    ]
    return df


@st.cache_resource(max_entries=64, show_spinner=False)
def overlap_per_token(ref: CacheRef, a: str, b: str, k: int) -> np.ndarray:
    """overlap@k of every token between matrices ``a`` and ``b``; array of shape (n_tokens,)."""
    return overlap_at_k(neighbour_ids(ref, a), neighbour_ids(ref, b), k)


@st.cache_resource(max_entries=32, show_spinner=False)
def overlap_table(ref: CacheRef, k: int) -> pd.DataFrame:
    """overlap@k of every token for each matrix pair: columns token, T~I, T~O, I~O."""
    from tying.schema import MATRIX_PAIRS, pair_label

    out = {"token": np.arange(len(neighbour_ids(ref, "T")))}
    for a, b in MATRIX_PAIRS:
        out[pair_label(a, b)] = overlap_per_token(ref, a, b, k)
    return pd.DataFrame(out)


@st.cache_data(max_entries=32, show_spinner=False)
def overlap_counts(ref: CacheRef, k: int) -> pd.DataFrame:
    """Distribution of overlap@k over the vocabulary: columns pair, overlap, count."""
    wide = overlap_table(ref, k)
    long = wide.drop(columns="token").melt(var_name="pair", value_name="overlap")
    long["overlap"] = long["overlap"].round(4)
    return long.groupby(["pair", "overlap"], sort=True).size().rename("count").reset_index()


@st.cache_data(max_entries=16, show_spinner=False)
def overlap_curve(ref: CacheRef) -> pd.DataFrame:
    return query(ref, "SELECT pair, k, mean_overlap FROM overlap_curve ORDER BY pair, k")


@st.cache_resource(max_entries=16, show_spinner=False)
def norms(ref: CacheRef) -> pd.DataFrame:
    """matrix, token, norm, freq (tied-side corpus count, may be null)."""
    return query(ref, "SELECT n.matrix, n.token, n.norm, t.freq_tied AS freq FROM norms n "
                      "JOIN tokens t USING (token) ORDER BY n.matrix, n.token")


@st.cache_resource(max_entries=16, show_spinner=False)
def umap(ref: CacheRef) -> pd.DataFrame:
    return query(ref, "SELECT matrix, token, x, y FROM umap ORDER BY matrix, token")


@st.cache_data(max_entries=16, show_spinner=False)
def table(ref: CacheRef, name: str) -> pd.DataFrame:
    """A whole small table (runs, train_log, evolution, scaling, seed_metrics, lens tables)."""
    return query(ref, f"SELECT * FROM {name}")


def open_error(ref: CacheRef) -> CacheError | None:
    try:
        connect(ref)
    except CacheError as exc:
        return exc
    return None


# -- showing tokens ---------------------------------------------------------------------

_CONTROL = {"\n": "↵", "\t": "⇥", "\r": "␍"}


def visible_token(text: str | None, raw: str | None = None) -> str:
    """A token as a person can read it: leading/trailing spaces as '␣', controls as symbols,
    undecodable bytes as their raw token (e.g. 'Ã¢' or '<0xE2>'). Plain text, not markup."""
    if text is None:
        text = raw or ""
    if "\ufffd" in text and raw:
        return f"⟨{raw}⟩"
    out = "".join(_CONTROL.get(c, c if c.isprintable() or c == " " else f"\\x{ord(c):02x}") for c in text)
    stripped = out.strip(" ")
    lead = len(out) - len(out.lstrip(" "))
    trail = len(out) - len(out.rstrip(" "))
    if not stripped:
        return "␣" * len(out) if out else "∅"
    return "␣" * lead + stripped + "␣" * trail


def escape_markdown(text: str) -> str:
    """Escape a string for st.markdown: HTML entities and every markdown control character."""
    import html

    text = html.escape(text, quote=True)
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|~>$" else c for c in text)
