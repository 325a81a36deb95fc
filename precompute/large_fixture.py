"""A synthetic cache of a large vocabulary's map, fast to write: for the Projection page's WebGL
views, their test and their benchmark.

``build_synthetic_cache`` computes alignment and exact neighbours from random matrices, which
takes minutes at 152,000 tokens on 2 cores. This one writes only what the Projection page (and
the Neighbours page it links to) reads: the tokens, the models, the row norms, the 2-D
coordinates of T, I and O and each token's nearest neighbours on its own map (a k-d tree on the
2-D coordinates, not the matrices: there are none). The map is a few hundred clusters of
different sizes and spreads; O is T moved a little, I a shuffle of T's clusters (the paper's
pattern: T's neighbourhoods echo O's). Every value is reproducible from the seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from precompute.fixtures import byte_token
from tying.cache.schema import MATRIX_PAIRS, pair_label
from tying.cache.store import cache_path
from tying.cache.writer import CacheWriter

WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "import", "def", "return", "class")


def _token_strings(n: int) -> tuple[list[str], list[str]]:
    """Raw (byte-level BPE spelling) and text of every token: 256 bytes, then numbered words."""
    raws, texts = [], []
    for i in range(n):
        if i < 256:
            raw, text = byte_token(i)
        else:
            word = f"{WORDS[i % len(WORDS)]}{i}"
            text, raw = (" " + word, "Ġ" + word) if i % 2 else (word, word)
        raws.append(raw)
        texts.append(text)
    return raws, texts


def _overlap_curve(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """Mean overlap@j of two neighbour lists (tokens x k), j = 1..k."""
    same = (a[:, :k, None] == b[:, None, :k]).cumsum(axis=1, dtype=np.int32).cumsum(axis=2)  # rows hold no repeats
    j = np.arange(1, k + 1)
    return same[:, j - 1, j - 1].mean(axis=0) / j


def _clusters(rng: np.random.Generator, n: int, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Each token's cluster and its offset from the cluster's centre (sizes and spreads vary)."""
    weights = rng.pareto(1.5, n_clusters) + 0.2
    label = rng.choice(n_clusters, size=n, p=weights / weights.sum())
    spread = rng.uniform(0.15, 0.8, n_clusters)[label]
    offset = rng.standard_normal((n, 2)) * spread[:, None]
    return label, offset


def _neighbours(xy: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest other tokens on the 2-D map (ids, a cosine-like score falling with distance)."""
    from scipy.spatial import cKDTree

    dist, ids = cKDTree(xy).query(xy, k=k + 1)
    own = ids == np.arange(len(xy))[:, None]
    # drop each token itself (normally the first column; on exact duplicates wherever it fell)
    keep = np.where(own.any(axis=1)[:, None], ~own, np.arange(k + 1)[None, :] < k)
    ids = ids[keep].reshape(len(xy), k).astype(np.int32)
    dist = dist[keep].reshape(len(xy), k)
    return ids, (1.0 / (1.0 + dist)).astype(np.float32)


def build_large_projection_cache(cache_dir, name: str = "large", *, n_tokens: int = 152_000, k: int = 10,
                                 n_clusters: int = 400, seed: int = 0) -> Path:
    """Write ``cache_dir/<name>.duckdb`` with the load, neighbours and umap stages; return its path."""
    rng = np.random.default_rng(seed)
    label, offset = _clusters(rng, n_tokens, n_clusters)
    centres = rng.uniform(-12, 12, (n_clusters, 2))
    coords = {"T": centres[label] + offset}
    coords["O"] = coords["T"] + 0.25 * rng.standard_normal((n_tokens, 2))
    shuffled = rng.permutation(n_clusters)  # I: T's clusters in other places, their members kept together
    coords["I"] = centres[shuffled][label] + 1.3 * offset + 0.4 * rng.standard_normal((n_tokens, 2))
    raws, texts = _token_strings(n_tokens)
    freq = np.maximum(0, (1e5 / (np.arange(n_tokens) + 10) * rng.uniform(0.5, 1.5, n_tokens))).astype(np.int64)
    token = np.arange(n_tokens, dtype=np.int32)

    meta = {"name": name, "kind": "pair", "command": "precompute.large_fixture.build_large_projection_cache",
            "vocabulary": {"n_common": n_tokens, "n_tied": n_tokens, "n_untied": n_tokens, "coverage_tied": 1.0,
                           "coverage_untied": 1.0, "identical": True, "match": "strings", "same_string": 1.0},
            "synthetic": True}
    w = CacheWriter(cache_path(cache_dir, name), force=True, meta=meta)
    d = 64
    models = pd.DataFrame([
        {"role": role, "source": f"synthetic/{role}-large", "revision": None, "commit_sha": None,
         "model_type": "llama", "tied_in_weights": role == "tied", "d_model": d, "n_vocab": n_tokens,
         "n_rows_stored": n_tokens, "n_params": 10 * n_tokens * d,
         "n_embedding_params": (1 if role == "tied" else 2) * n_tokens * d,
         "embedding_share": (1 if role == "tied" else 2) / 10, "dtype": "F32", "input_key": "model.embed_tokens.weight",
         "output_key": None if role == "tied" else "lm_head.weight", "fingerprint": json.dumps({"seed": seed}),
         "files": "[]", "load_seconds": 0.0} for role in ("tied", "untied")])
    toks = pd.DataFrame({"token": token, "raw": raws, "text": texts, "tied_id": token, "untied_id": token,
                         "freq_tied": freq, "freq_untied": freq})
    norms = pd.concat([pd.DataFrame({"matrix": m, "token": token, "norm": np.hypot(*xy.T).astype(np.float32) + 1}) for
                       m, xy in coords.items()])
    w.write_stage("load", {"seed": seed}, {"models": models, "tokens": toks, "norms": norms}, seconds=0.0)

    ids, frames = {}, []
    for m, xy in coords.items():
        nb, score = _neighbours(xy, k)
        ids[m] = nb
        frames.append(pd.DataFrame({"matrix": m, "token": np.repeat(token, k),
                                    "rank": np.tile(np.arange(1, k + 1, dtype=np.int16), n_tokens),
                                    "neighbour": nb.reshape(-1), "score": score.reshape(-1)}))
    curves = pd.concat([pd.DataFrame({"pair": pair_label(a, b), "k": np.arange(1, k + 1),
                                      "mean_overlap": _overlap_curve(ids[a], ids[b], k)}) for a, b in MATRIX_PAIRS])
    w.write_stage("neighbours", {"k": k}, {"neighbours": pd.concat(frames), "overlap_curve": curves}, seconds=0.0)
    umap = pd.concat([pd.DataFrame({"matrix": m, "token": token, "x": xy[:, 0].astype(np.float32),
                                    "y": xy[:, 1].astype(np.float32)}) for m, xy in coords.items()])
    w.write_stage("umap", {"n_tokens": n_tokens}, {"umap": umap}, seconds=0.0)
    return cache_path(cache_dir, name)
