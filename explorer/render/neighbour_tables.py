"""The Neighbours page's tables for one token (once per cache, token and k): each matrix's
top-k list and the token's overlap@k between the matrices the cache has."""

from __future__ import annotations

import pandas as pd

from explorer.render import read
from tying.cache.schema import pair_label


@read.memo(4096)
def token_lists(ref: read.CacheRef, token: int, k: int) -> tuple[dict[str, pd.DataFrame], dict[str, float]]:
    """``({matrix: its top-k table}, {pair: overlap@k})`` of ``token``: the tables' columns rank,
    neighbour, cosine and, where the cache has more than one matrix, "also in" (the other
    matrices listing the same neighbour). Read-only: shared by every session."""
    nb = read.neighbours_of(ref, token, k)
    pairs = read.matrix_pairs(ref)
    columns = ["rank", "shown", "score", *(["in"] if pairs else [])]
    by_matrix = {m: nb[nb["matrix"] == m] for m in read.matrices(ref)}
    tables = {m: g[columns].rename(columns={"shown": "neighbour", "score": "cosine", "in": "also in"})
              for m, g in by_matrix.items()}
    sets = {m: set(g["neighbour"]) for m, g in by_matrix.items()}
    return tables, {pair_label(a, b): len(sets[a] & sets[b]) / k for a, b in pairs}


@read.memo(64)
def overlap_means(ref: read.CacheRef, k: int, min_count: int | None = None) -> tuple[int, dict[str, float]]:
    """``(tokens, {pair: mean overlap@k})`` over the vocabulary, or over the tokens seen at least
    ``min_count`` times in the corpus (the toy lab's second figure); once per cache."""
    table = read.overlap_table(ref, k)
    if min_count is not None:
        seen = read.query(ref, "SELECT token FROM tokens WHERE freq_tied >= ?", (min_count,))["token"]
        table = table[table["token"].isin(set(seen))]
    return len(table), {pair_label(a, b): float(table[pair_label(a, b)].mean()) if len(table) else float("nan")
                        for a, b in read.matrix_pairs(ref)}
