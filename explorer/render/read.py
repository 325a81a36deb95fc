"""The only door to the caches: read-only connections and memoised queries, with no Streamlit.

The app (through :mod:`explorer.data`), the figure pack and the static site read here.
Every query is memoised per process in a bounded LRU (:func:`memo`). Large results (the
vocabulary, neighbour lists, per-token tables) are handed out without a copy: callers must
treat them as read-only. Small ones (``copy=True``: short tables) are copied on each call, so
a caller may change its own. The summary is a frozen :class:`~tying.cache.summary_types.Summary`,
shared by every caller (read-only, its sections included).

Pages never open connections or write SQL; they call the loaders here. A connection is
cached per (path, modification time), so a cache replaced by `precompute` (an atomic
rename) is picked up on the next run while sessions still reading the old file keep their
own connection. Each query uses its own cursor (one DuckDB connection is not
thread-safe).
"""

from __future__ import annotations

import copy as copying
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from explorer.render import convergence, identity
from explorer.render.shown import escape_markdown, visible_token  # noqa: F401  (readers' names for pages)
from tying.analysis.overlap import overlap_at_k
from tying.analysis.token_traits import MIN_COUNT
from tying.cache.schema import CACHE_DIR_ENV, MATRICES, pair_label, pairs_among
from tying.cache.store import (
    CacheError,
    has_column,
    list_caches,
    open_cache,
    query_df,
    stage_params,
    table_exists,
)
from tying.cache.summary import summarize_cache
from tying.cache.summary_types import Summary

ROOT = Path(__file__).resolve().parents[2]


def memo(max_entries: int | None, *, copy: bool = False):
    """Memoise a reader per process, at most ``max_entries`` results (least recently used go
    first); ``copy``: each call gets its own deep copy of the result."""

    def wrap(fn):
        cached = functools.lru_cache(maxsize=max_entries)(fn)
        if not copy:
            return cached

        @functools.wraps(fn)
        def copied(*args, **kwargs):
            return copying.deepcopy(cached(*args, **kwargs))

        copied.cache_clear = cached.cache_clear
        return copied

    return wrap


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or ROOT / "cache")


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


def caches(directory: str) -> list[CacheListing]:
    """Every cache in ``directory`` with its error, if it does not open or its summary cannot be
    read (:func:`open_error`): whoever keeps the caches without an error never meets a broken one."""
    out = []
    for c in list_caches(directory):
        try:
            err = None if c.error else open_error(CacheRef.of(Path(c.path)))
        except FileNotFoundError:
            err = CacheError("the cache file disappeared")
        out.append(CacheListing(c.name, str(c.path), err.message if err else c.error,
                                (err.rebuild if err else None) or c.rebuild))
    return out


@memo(32)
def _connection(path: str, mtime_ns: int) -> duckdb.DuckDBPyConnection:
    return open_cache(path)


def connect(ref: CacheRef) -> duckdb.DuckDBPyConnection:
    return _connection(ref.path, ref.mtime_ns)


def query(ref: CacheRef, sql: str, params: tuple = ()) -> pd.DataFrame:
    return query_df(connect(ref), sql, params)


@memo(256)
def has_rows(ref: CacheRef, table: str) -> bool:
    """Whether ``table`` exists in this cache and has at least one row."""
    cur = connect(ref).cursor()
    try:
        return table_exists(cur, table) and cur.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
    finally:
        cur.close()


@memo(64)
def summary(ref: CacheRef) -> Summary:
    """The cache's summary; CacheError (naming the file) for one that opens but cannot be read."""
    cur = connect(ref).cursor()
    try:
        return summarize_cache(cur, ref.path)
    finally:
        cur.close()


@memo(32)
def tokens(ref: CacheRef) -> pd.DataFrame:
    """The common vocabulary: token, raw, text, tied_id, untied_id, freq_tied, freq_untied, shown."""
    df = query(ref, "SELECT * FROM tokens ORDER BY token")
    df["shown"] = [visible_token(t, r) for t, r in zip(df["text"], df["raw"])]
    return df


def word_like(toks: pd.DataFrame) -> pd.Series:
    """Whether each token reads as an ordinary word: its text, less leading and trailing spaces,
    is letters only, three or more ('␣the', 'Returns'; not '↵', ',', '␣a' or '<|endoftext|>')."""
    text = toks["text"].fillna("").astype(str).str.strip()
    return text.str.len().ge(3) & text.str.isalpha()


def default_token(toks: pd.DataFrame, among=None) -> int:
    """The token a page opens on when none is picked: a frequent ordinary word. Within ``among``
    (token ids) when given, among the words (:func:`word_like`) where there are any: the most
    frequent by the tied model's corpus counts; without counts the lowest id (a BPE vocabulary
    numbers its earliest, most frequent merges first). No word: the most frequent token, else the
    first. Every page agrees."""
    cand = toks if among is None else toks[toks["token"].isin(set(among))]
    if cand.empty:
        return int(toks["token"].iloc[0]) if len(toks) else 0
    words = cand[word_like(cand)]
    cand = words if len(words) else cand
    freq = cand["freq_tied"]
    if freq.notna().any():
        return int(cand.loc[freq.fillna(0).astype("int64").idxmax(), "token"])
    return int(cand["token"].min())


@memo(64)
def alignment(ref: CacheRef, method: str, split: str) -> pd.DataFrame:
    """Per-token cosine (columns comparison, token, cosine) for one method and split."""
    return query(ref, "SELECT comparison, token, cosine FROM alignment WHERE method = ? AND split = ? "
                      "ORDER BY comparison, token", (method, split))


@memo(64)
def alignment_means(ref: CacheRef, method: str, split: str) -> dict[str, float]:
    """Mean per-token cosine by comparison for one method and split."""
    return {str(c): float(v) for c, v in alignment(ref, method, split).groupby("comparison")["cosine"].mean().items()}


@memo(256)
def extremes(ref: CacheRef, method: str, split: str, comparison: str, n: int,
             min_freq: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``n`` best- and worst-aligned tokens of one comparison: token, token text, cosine,
    frequency; with ``min_freq``, only the tokens seen at least that often. Read-only."""
    per_token = alignment(ref, method, split)
    sub = per_token[per_token["comparison"] == comparison].merge(tokens(ref)[["token", "shown", "freq_tied"]],
                                                                  on="token")
    if min_freq is not None:
        sub = sub[sub["freq_tied"].fillna(0) >= min_freq]
    cols = {"shown": "token text", "freq_tied": "frequency"}
    keep = ["token", "shown", "cosine", "freq_tied"]
    return (sub.nlargest(n, "cosine")[keep].rename(columns=cols), sub.nsmallest(n, "cosine")[keep].rename(columns=cols))


UNTRAINED_MAX_FREQ = MIN_COUNT - 1
"""Toy lab: tokens seen at most this often in the corpus keep rows near the initialisation the twins
share, so they align almost perfectly; the best/worst lists leave them out unless asked."""


@memo(64)
def untrained_tokens(ref: CacheRef, method: str, split: str, comparison: str) -> pd.DataFrame:
    """The rarely seen tokens (frequency 0..UNTRAINED_MAX_FREQ) of one comparison, with their cosine."""
    per_token = alignment(ref, method, split)
    sub = per_token[per_token["comparison"] == comparison].merge(tokens(ref)[["token", "freq_tied"]], on="token")
    return sub[sub["freq_tied"].fillna(0) <= UNTRAINED_MAX_FREQ]


@memo(16, copy=True)
def alignment_summary(ref: CacheRef) -> pd.DataFrame:
    return query(ref, "SELECT * FROM alignment_summary ORDER BY comparison, method, split")


@memo(32)
def neighbour_ids(ref: CacheRef, matrix: str) -> np.ndarray:
    """Neighbour ids of every token in one matrix; array of shape (n_tokens, K)."""
    df = query(ref, "SELECT token, neighbour FROM neighbours WHERE matrix = ? ORDER BY token, rank", (matrix,))
    n = int(df["token"].max()) + 1 if len(df) else 0
    return df["neighbour"].to_numpy(np.int64).reshape(n, -1) if n else np.zeros((0, 0), np.int64)


@memo(64)
def build_command(ref: CacheRef) -> str | None:
    """The command that built the cache (its meta table's), None when it records none."""
    df = query(ref, "SELECT value FROM meta WHERE key = 'command'")
    return str(df["value"].iloc[0]) if len(df) else None


@memo(64)
def matrices(ref: CacheRef, table: str = "neighbours") -> tuple[str, ...]:
    """The matrices of T, I and O ``table`` (neighbours, umap) holds rows of: all three for a pair,
    T alone for one tied model (a cache of kind ``model``), none without rows."""
    have = set(query(ref, f"SELECT DISTINCT matrix FROM {table}")["matrix"]) if has_rows(ref, table) else set()
    return tuple(m for m in MATRICES if m in have)


def matrix_pairs(ref: CacheRef) -> tuple[tuple[str, str], ...]:
    """The pairs of T, I and O whose overlap the cache can give (none on one tied model)."""
    return pairs_among(matrices(ref))


def max_k(ref: CacheRef) -> int:
    ids = neighbour_ids(ref, "T")
    return int(ids.shape[1]) if ids.ndim == 2 else 0


@memo(4096)
def neighbours_of(ref: CacheRef, token: int, k: int) -> pd.DataFrame:
    """Top-k neighbours of ``token`` in T, I and O: matrix, rank, neighbour, score, shown, in
    (the other matrices that list the same neighbour). Shared: read-only."""
    df = query(ref, "SELECT matrix, rank, neighbour, score FROM neighbours WHERE token = ? AND rank <= ? "
                    "ORDER BY matrix, rank", (int(token), int(k)))
    shown = tokens(ref)["shown"].to_numpy()
    df["shown"] = shown[df["neighbour"].to_numpy()] if len(df) else []
    sets = {m: set(g["neighbour"]) for m, g in df.groupby("matrix")}
    df["in"] = [
        "".join(o for o in MATRICES if o != m and n in sets.get(o, ())) for m, n in zip(df["matrix"], df["neighbour"])
    ]
    return df


@memo(1024)
def find_tokens(ref: CacheRef, query: str, limit: int = 200) -> tuple[int, ...]:
    """Tokens whose text or raw form contains ``query`` ('␣' stands for a space), exact matches
    (ignoring surrounding spaces) first; at most ``limit``."""
    q = query.replace("␣", " ")
    if not q:
        return ()
    toks = tokens(ref)
    hits = toks[toks["text"].fillna("").str.contains(q, regex=False) | toks["raw"].fillna("").str.contains(q, regex=False)]
    exact = hits[hits["text"].fillna("").str.strip() == q.strip()]
    return tuple(int(t) for t in pd.concat([exact, hits.drop(exact.index)])["token"].head(limit))


@memo(64)
def most_changed(ref: CacheRef, k: int, n: int = 10) -> dict[int, float]:
    """The ``n`` tokens at each extreme of overlap@k T~O minus T~I: token -> difference."""
    table = overlap_table(ref, k)
    changed = (table["T~O"] - table["T~I"]).to_numpy()
    order = np.argsort(changed, kind="stable")
    extremes = np.concatenate([order[:n], order[-n:][::-1]])
    return {int(t): float(changed[t]) for t in extremes}


@memo(64)
def overlap_per_token(ref: CacheRef, a: str, b: str, k: int) -> np.ndarray:
    """overlap@k of every token between matrices ``a`` and ``b``; array of shape (n_tokens,)."""
    return overlap_at_k(neighbour_ids(ref, a), neighbour_ids(ref, b), k)


@memo(32)
def overlap_table(ref: CacheRef, k: int) -> pd.DataFrame:
    """overlap@k of every token for each matrix pair: columns token, T~I, T~O, I~O."""
    out = {"token": np.arange(len(neighbour_ids(ref, "T")))}
    for a, b in matrix_pairs(ref):
        out[pair_label(a, b)] = overlap_per_token(ref, a, b, k)
    return pd.DataFrame(out)


@memo(32, copy=True)
def overlap_counts(ref: CacheRef, k: int) -> pd.DataFrame:
    """Distribution of overlap@k over the vocabulary: columns pair, overlap, count."""
    wide = overlap_table(ref, k)
    long = wide.drop(columns="token").melt(var_name="pair", value_name="overlap")
    long["overlap"] = long["overlap"].round(4)
    return long.groupby(["pair", "overlap"], sort=True).size().rename("count").reset_index()


@memo(16, copy=True)
def overlap_curve(ref: CacheRef) -> pd.DataFrame:
    return query(ref, "SELECT pair, k, mean_overlap FROM overlap_curve ORDER BY pair, k")


@memo(16)
def norms(ref: CacheRef) -> pd.DataFrame:
    """matrix, token, norm, freq (tied-side corpus count, may be null)."""
    return query(ref, "SELECT n.matrix, n.token, n.norm, t.freq_tied AS freq FROM norms n "
                      "JOIN tokens t USING (token) ORDER BY n.matrix, n.token")


@memo(16)
def umap(ref: CacheRef) -> pd.DataFrame:
    """matrix, token, x, y, placed (True: placed from its nearest fitted tokens, False: fitted by
    AlignedUMAP; a cache written before placement has no such column, and all its rows were fitted)."""
    placed = "coalesce(placed, false)" if _has_placed(ref) else "false"
    return query(ref, f"SELECT matrix, token, x, y, {placed} AS placed FROM umap ORDER BY matrix, token")


def _has_placed(ref: CacheRef) -> bool:
    cur = connect(ref).cursor()
    try:
        return has_column(cur, "umap", "placed")
    finally:
        cur.close()


@memo(16)
def norm_frequency_correlation(ref: CacheRef) -> dict[str, float]:
    """Pearson correlation of each matrix's row norms with log corpus frequency (tokens seen
    at least once; matrices with fewer than 3 such tokens left out). Empty without frequencies."""
    nf = norms(ref)
    out = {}
    for m, g in nf.groupby("matrix"):
        seen = g["freq"].fillna(0) > 0
        if seen.sum() > 2:
            out[str(m)] = float(np.corrcoef(np.log(g["freq"][seen].astype(float)), g["norm"][seen])[0, 1])
    return out


@memo(16)
def umap_shown(ref: CacheRef) -> pd.DataFrame:
    """UMAP coordinates with each token's visible text: matrix, token, x, y, shown. Read-only."""
    return umap(ref).merge(tokens(ref)[["token", "shown"]], on="token", how="left")


@memo(64)
def umap_sample(ref: CacheRef, limit: int) -> pd.DataFrame:
    """At most ``limit`` projected tokens per view, a seeded sample of the same tokens in every
    view (all of them when there are fewer). Read-only."""
    coords = umap_shown(ref)
    ids = coords["token"].drop_duplicates()
    if len(ids) <= limit:
        return coords
    return coords[coords["token"].isin(ids.sample(limit, random_state=0))]


@memo(16)
def projected_tokens(ref: CacheRef) -> frozenset[int]:
    """The tokens UMAP was computed on."""
    return frozenset(int(t) for t in umap(ref)["token"].unique())


@memo(64)
def table(ref: CacheRef, name: str) -> pd.DataFrame:
    """A whole small table (runs, train_log, evolution, scaling, seed_metrics, lens tables).
    Shared: read-only."""
    return query(ref, f"SELECT * FROM {name}")


@memo(16)
def lens_layers(ref: CacheRef) -> int:
    """The index of the last hidden state in the lens tables (the number of blocks)."""
    return int(table(ref, "lens_kl")["layer"].max())


@memo(16)
def lens_convergence(ref: CacheRef) -> tuple[str, ...]:
    """One line per model on whether its tuned lens converged, with the recorded budget."""
    budget = stage_params(summary(ref).stages, "lens").get("budget")
    return tuple(convergence.lens_convergence(table(ref, "lens_curve"), budget))


@memo(16)
def trajectory_choices(ref: CacheRef) -> dict[str, list]:
    traj = table(ref, "lens_trajectory")
    return {"models": sorted(traj["model"].unique()), "samples": sorted(int(i) for i in traj["sample"].unique())}


@memo(256)
def trajectory(ref: CacheRef, model: str, lens: str, sample: int) -> pd.DataFrame:
    """One sample text's prediction trajectory, tokens and predictions made visible. Read-only."""
    traj = table(ref, "lens_trajectory")
    return visible_trajectory(traj[(traj["model"] == model) & (traj["lens"] == lens) & (traj["sample"] == sample)])


def visible_trajectory(t: pd.DataFrame) -> pd.DataFrame:
    t = t.copy()
    t["token"] = t["token"].map(visible_token)
    t["prediction"] = t["prediction"].map(visible_token)
    return t


@identity.per_object  # once per stored trajectory (its frame comes from the memo above)
def trajectory_text(t: pd.DataFrame) -> str:
    """The input text of a trajectory, its tokens joined (as shown)."""
    first = t[(t["layer"] == t["layer"].min()) & (t["rank"] == 1)].sort_values("position")
    return "".join(first["token"])


@memo(32)
def per_run(ref: CacheRef, name: str) -> dict[str, pd.DataFrame]:
    """The rows of table ``name`` (evolution or train_log) split by run. Read-only."""
    return {str(run): g for run, g in table(ref, name).groupby("run")}


def open_error(ref: CacheRef) -> CacheError | None:
    """Why the cache cannot be used (it does not open, or its summary cannot be read), or None."""
    try:
        connect(ref)
        summary(ref)
    except CacheError as exc:
        return exc
    return None
