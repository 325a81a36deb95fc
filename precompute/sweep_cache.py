"""The sweep's caches read back and joined: whether a cache is of the current protocol
(:func:`has_columns`), its stored learning-rate probes (:func:`read_probes`), and one sweep cache
from the shard caches of a job array (:func:`merge`, `precompute sweep-merge`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tying.analysis import sweep as S
from tying.cache.store import cache_path, check_name, open_cache, query_df, read_meta, table_exists
from tying.cache.writer import CacheWriter
from tying.errors import UserError


def has_columns(path: Path, columns) -> bool:
    """Whether the cache at ``path`` has a sweep table with all of ``columns`` (True without one)."""
    con = open_cache(path)
    try:
        if not table_exists(con, "sweep"):
            return True
        have = set(query_df(con, "SELECT * FROM sweep LIMIT 0").columns)
    finally:
        con.close()
    return set(columns) <= have


def read_probes(path: Path, d_model: int, vocab_size: int) -> pd.DataFrame:
    """The stored learning-rate probes of one width and vocabulary."""
    con = open_cache(path)
    try:
        return query_df(con, "SELECT * FROM lr_probe WHERE d_model = ? AND vocab_size = ? ORDER BY arm, lr",
                        [d_model, vocab_size])
    finally:
        con.close()


def merge(paths: list[str], name: str, cache_dir: str, *, force: bool = False) -> Path:
    """One sweep cache from shard caches: every cell once; cells of different settings refused."""
    check_name(name)
    if not paths:
        raise UserError("give the shard caches to merge")
    cells: dict[tuple, tuple[dict, pd.Series, float]] = {}
    settings, sweep_meta = None, None
    for p in paths:
        if not Path(p).is_file():
            raise UserError(f"no cache at {p}")
        con = open_cache(p)
        try:
            if not table_exists(con, "sweep"):
                raise UserError(f"{p} is not a sweep cache (no sweep table)")
            rows = query_df(con, "SELECT * FROM sweep")
            sweep_meta = sweep_meta or json.loads(read_meta(con).get("sweep") or "null")
            stages = {r["stage"]: r for r in query_df(con, "SELECT stage, params, seconds FROM stages")
                      .to_dict("records")}
        finally:
            con.close()
        for _, row in rows.iterrows():
            cell = S.Cell(int(row["d_model"]), int(row["vocab_size"]), int(row["seed"]))
            st = stages.get(cell.stage)
            if st is None:
                raise UserError(f"{p}: cell {cell.stage} has rows but no finished stage")
            params = json.loads(st["params"])
            shared = {k: v for k, v in params.items() if k not in ("stage", "d_model", "vocab_size", "seed")}
            if settings is None:
                settings = shared
            elif shared != settings:
                differ = sorted(k for k in set(shared) | set(settings) if shared.get(k) != settings.get(k))
                raise UserError(f"{p} was trained with other settings ({', '.join(differ)}): not one sweep")
            key = (cell.d_model, cell.vocab_size, cell.seed)
            if key in cells and not np.allclose(cells[key][1][list(S.METRICS)].astype(float),
                                                row[list(S.METRICS)].astype(float), equal_nan=True):
                raise UserError(f"cell {cell.stage} is in two shards with different numbers")
            cells[key] = (params, row, float(st["seconds"]))
    if not cells:
        raise UserError("the shard caches hold no cells")
    writer = CacheWriter(cache_path(cache_dir, name), force=force,
                         meta={"kind": "sweep", "name": name, "command": f"merged from {len(paths)} shard caches",
                               "sweep": dict(sweep_meta or {}, shard=None, name=name)})
    for (d, v, s), (params, row, seconds) in sorted(cells.items()):
        writer.write_cell(S.Cell(d, v, s).stage, params, "sweep", pd.DataFrame([row.to_dict()]),
                          {"d_model": d, "vocab_size": v, "seed": s}, seconds=seconds)
    return writer.path
