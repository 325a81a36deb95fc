"""The writer's registry: each analysis's stage (:data:`STAGES`, joined to :mod:`tying.registry`
by name), and the builders of ``precompute pair``'s stages.

A :class:`Stage` is the parameters the stage hashes (a function of the run) and its builder:
it takes the run (its matrices, models, config and device; a :class:`~precompute.pair.PairRun`)
and a ``progress`` callback and returns ``(tables, what ran)``: the tables the stage writes and
the parameters it actually used (None: nothing beyond the request).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from precompute import lens
from tying import layout, registry
from tying.analysis import token_traits as traits
from tying.analysis.cka import cka_tables
from tying.analysis.placement import PLACEMENT
from tying.analysis.twins import positions
from tying.cache.schema import CEILING, CEILING_PAIRS, MATRICES, MATRIX_PAIRS, pair_label, pairs_among
from tying.errors import UserError


def sample(n: int, limit: int, seed: int) -> np.ndarray:
    """Sorted row indices: all rows when n <= limit, else a seeded random sample of ``limit``."""
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=limit, replace=False))


def token_frequencies(tokenizer_dir: str, text_path: str, n_vocab: int) -> np.ndarray:
    """Counts of each token id of a tokenizer over a text file; array of shape (n_vocab,)."""
    with open(text_path, encoding="utf-8", errors="replace") as fh:
        return count_tokens(tokenizer_dir, fh.readlines(), n_vocab)


def count_tokens(tokenizer_dir: str, lines: list[str], n_vocab: int) -> np.ndarray:
    """Counts of each token id of a model's tokenizer over lines of text; shape (n_vocab,)."""
    from tying.loading.causal_lm import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    counts = np.zeros(n_vocab, dtype=np.int64)
    for start in range(0, len(lines), 2000):
        chunk = [ln for ln in lines[start:start + 2000] if ln.strip()]
        if not chunk:
            continue
        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in tok(chunk, add_special_tokens=False)["input_ids"]] or [np.zeros(0, np.int64)])
        ids = ids[ids < n_vocab]
        counts += np.bincount(ids, minlength=n_vocab)
    return counts


def placement_record(quality: dict) -> dict:
    """:attr:`~tying.analysis.projection.Projection.quality` as the umap stage records it: the
    views "0", "1", "2" named T, I and O, numbers rounded to 4 decimals (JSON-able)."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return round(float(x), 4) if isinstance(x, float) else x

    names = {str(i): key for i, key in enumerate(MATRICES)}
    return clean({names.get(k, k): v for k, v in quality.items()})


def spectral_rows(run) -> np.ndarray | None:
    """Rows of the spectral distance: None for every common token, else a seeded sample."""
    limit = run.cfg.spectral_tokens
    return None if limit is None or run.n <= limit else sample(run.n, limit, run.cfg.seed)


def ceiling_pairs(run) -> tuple[tuple[str, str], ...]:
    """The ceiling's pairs (T~T') when the run has a second tied run, else none."""
    return CEILING_PAIRS if CEILING in run.matrices else ()


def load_tables(run, progress) -> tuple[dict[str, pd.DataFrame], None]:
    cfg, vocab = run.cfg, run.vocab
    freq = {"tied": None, "untied": None}
    if cfg.text:
        freq.update({role: run.text_counts(role) for role in freq if role in run.models})
    untied_ids = pd.array([None] * run.n, dtype="Int32") if "untied" not in run.models else \
        vocab.untied_ids.astype(np.int32)
    tokens = pd.DataFrame({
        "token": np.arange(run.n, dtype=np.int32),
        "raw": vocab.tokens,
        "text": vocab.texts,
        "tied_id": vocab.tied_ids.astype(np.int32),
        "untied_id": untied_ids,
        "freq_tied": freq["tied"] if freq["tied"] is not None else pd.array([None] * run.n, dtype="Int64"),
        "freq_untied": freq["untied"] if freq["untied"] is not None else pd.array([None] * run.n, dtype="Int64"),
    })
    norms = pd.concat([
        pd.DataFrame({"matrix": key, "token": np.arange(run.n, dtype=np.int32),
                      "norm": np.linalg.norm(mat, axis=1).astype(np.float32)})
        for key, mat in run.matrices.items() if key in MATRICES
    ])
    rows = []
    for role, m in run.models.items():
        rows.append({
            "role": role, "source": m.source, "revision": m.revision, "commit_sha": m.commit,
            "model_type": m.model_type, "tied_in_weights": bool(m.tied), "d_model": int(m.d_model),
            "n_vocab": int(m.n_vocab), "n_rows_stored": int(m.n_rows_stored), "n_params": int(m.n_params),
            "n_embedding_params": int(m.n_embedding_params), "embedding_share": float(m.embedding_share),
            "dtype": str(m.dtype), "input_key": m.input_key, "output_key": m.output_key,
            "fingerprint": json.dumps(m.fingerprint, sort_keys=True), "files": json.dumps(m.files, default=str),
            "load_seconds": float(m.seconds),
        })
    return {"models": pd.DataFrame(rows), "tokens": tokens, "norms": norms}, None


def alignment_tables(run, progress) -> tuple[dict[str, pd.DataFrame], None]:
    from tying.analysis.align_table import run_alignment

    results = run_alignment(run.matrices, held_out_fraction=run.cfg.held_out, seed=run.cfg.seed,
                            device=run.device, progress=progress)
    per_token, summary = [], []
    for r in results:
        summary.append({k: r[k] for k in ("comparison", "method", "split", "applicable", "note")}
                       | {"n_tokens": int(len(r["cosine"])), "mean": float(r["mean"]), "std": float(r["std"])})
        if r["applicable"]:
            per_token.append(pd.DataFrame({
                "comparison": r["comparison"], "method": r["method"], "split": r["split"],
                "token": np.asarray(r["token_idx"], dtype=np.int32), "cosine": np.asarray(r["cosine"], np.float32),
            }))
    frame = pd.concat(per_token) if per_token else pd.DataFrame(
        columns=["comparison", "method", "split", "token", "cosine"])
    return {"alignment": frame, "alignment_summary": pd.DataFrame(summary)}, None


def neighbours_tables(run, progress) -> tuple[dict[str, pd.DataFrame], dict]:
    from tying.analysis.neighbours import overlap_curve

    K = run.cfg.neighbours_k
    if run.n <= K:
        raise UserError(f"--neighbours-k {K} is not smaller than the {run.n} common tokens")
    # compute enough neighbours once for the spectral stage too, when it uses every token
    k_compute = max(K, min(run.cfg.spectral_k, run.n - 1)) if spectral_rows(run) is None else K
    ids, frames = {}, []
    for key in run.matrices:
        progress(f"k-NN {key}")
        i, s = run.knn(key, k_compute)
        ids[key] = i[:, :K]
        if key not in MATRICES:  # the ceiling: its overlap curve with T, not its neighbour lists
            continue
        frames.append(pd.DataFrame({
            "matrix": key,
            "token": np.repeat(np.arange(run.n, dtype=np.int32), K),
            "rank": np.tile(np.arange(1, K + 1, dtype=np.int16), run.n),
            "neighbour": i[:, :K].reshape(-1).astype(np.int32),
            "score": s[:, :K].reshape(-1).astype(np.float32),
        }))
    curves = [pd.DataFrame({"pair": pd.Series([], dtype=str), "k": pd.Series([], dtype=np.int32),
                            "mean_overlap": pd.Series([], dtype=np.float64)})]
    for a, b in pairs_among(run.matrices) + ceiling_pairs(run):
        c = overlap_curve(ids[a], ids[b], K)
        curves.append(pd.DataFrame({"pair": pair_label(a, b), "k": np.arange(1, K + 1, dtype=np.int32),
                                    "mean_overlap": np.asarray(c, dtype=np.float64)}))
    return {"neighbours": pd.concat(frames), "overlap_curve": pd.concat(curves)}, {"k": int(K)}


def spectral_tables(run, progress) -> tuple[dict[str, pd.DataFrame], dict]:
    """The spectral table, and what ran: the graphs' k, the embedding's components (as
    :func:`~tying.analysis.spectral.spectral_comparison` used them) and the tokens."""
    from tying.analysis.spectral import spectral_comparison

    cfg = run.cfg
    rows = spectral_rows(run)
    n_used = run.n if rows is None else len(rows)
    ids = {}
    for key in (*MATRICES, *([CEILING] if ceiling_pairs(run) else [])):
        progress(f"k-NN graph {key}")
        ids[key] = run.knn(key, min(cfg.spectral_k, n_used - 1), rows)[0]
    graph_k = int(ids[MATRICES[0]].shape[1])
    out = []
    for a, b in MATRIX_PAIRS + ceiling_pairs(run):
        progress(f"spectral {pair_label(a, b)}")
        d, components = spectral_comparison(ids[a], ids[b], n_components=cfg.spectral_components)
        out.append({"pair": pair_label(a, b), "graph_k": graph_k, "n_components": components,
                    "n_tokens": n_used, "n_common": run.n, "sampled": rows is not None,
                    "distance": float(d)})
    used = sorted({r["n_components"] for r in out})
    ran = {"k": graph_k, "components": used[0] if len(used) == 1 else used, "tokens": n_used,
           "sampled": rows is not None}
    return {"spectral": pd.DataFrame(out)}, ran


def traits_counts(run) -> tuple[np.ndarray | None, str | None, bool]:
    """(counts per common token, what they were counted on, whether the models were trained on that
    text) for the token_traits stage: the run's ``--text`` (the toy lab's training corpus), else
    the lens's text where the lens stage reads one offline (a real model: labelled so), else none."""
    if run.cfg is None:  # the synthetic fixture: its counts as given
        return run.counts, run.counts_source, True
    cfg, tied = run.cfg, run.models["tied"]
    if cfg.text:
        return run.text_counts("tied"), Path(cfg.text).name, bool(cfg.text_is_training)
    if "lens" in cfg.skip or cfg.lens.text.startswith("hf:") or not tied.runs:  # no lens text read (a GGUF of
        return None, None, False                                                    # matrices: no tokenizer either)
    from tying.loading.corpus import load_corpus

    lines = load_corpus(cfg.lens.text, cfg.lens.max_chars).splitlines(keepends=True)
    counts = count_tokens(tied.local_dir, lines, tied.n_vocab)[run.vocab.tied_ids]
    return counts, f"the lens text ({Path(cfg.lens.text).name}, {int(counts.sum()):,} tokens)", False


def token_traits_params(run) -> dict:
    cfg = run.cfg
    return {"min_count": traits.MIN_COUNT, "z": traits.ROBUST_Z, "trained": bool(cfg.text_is_training),
            "lens_text": None if cfg.text or "lens" in cfg.skip else [cfg.lens.text, cfg.lens.max_chars]}


def token_traits_tables(run, progress) -> tuple[dict[str, pd.DataFrame], dict]:
    """Each common token's count, log10 count, T's position between I and O and the under-trained
    flag; what ran: the text counted, the rule of the flag, how many it flags, Spearman's rho of
    log count against position."""
    progress("counting tokens")
    counts, source, trained = traits_counts(run)
    T = run.matrices["T"]
    pos = np.full(run.n, np.nan)
    if "I" in run.matrices and "O" in run.matrices:
        progress("T's position between I and O")
        pos = positions(T, run.matrices["I"], run.matrices["O"], device=run.device)
    if counts is not None and trained:
        flag, rule = traits.under_trained_by_count(counts), traits.COUNT_RULE
    else:
        flag, rule = traits.under_trained_by_geometry(T), traits.GEOMETRY_RULE
    logc = traits.log_count(counts) if counts is not None else np.full(run.n, np.nan)
    rho, n_rho = traits.spearman(logc, pos)
    table = pd.DataFrame({"token": np.arange(run.n, dtype=np.int32),
                          "count": pd.array(counts if counts is not None else [None] * run.n, dtype="Int64"),
                          "log_count": logc, "position": pos, "under_trained": flag})
    ran = {"counts": source, "under_trained": rule, "n_under_trained": int(flag.sum()),
           "rho": None if np.isnan(rho) else round(rho, 4), "rho_tokens": n_rho}
    return {"token_traits": table}, ran


def umap_params(run) -> dict:
    """The umap stage's hashed parameters: the sample, the epochs and how the rest are placed."""
    return {"tokens": run.cfg.umap_tokens, "seed": run.cfg.seed, "epochs": run.cfg.umap_epochs,
            "placement": PLACEMENT}


def umap_tables(run, progress) -> tuple[dict[str, pd.DataFrame], dict]:
    """The umap table: AlignedUMAP fitted on a seeded sample of ``--umap-tokens`` common tokens,
    every other common token placed into the same coordinates from its 10 nearest fitted
    tokens (:func:`~tying.analysis.projection.project`), per matrix. What ran: the fitted
    and placed counts, the epochs and the placement's settings and quality
    (``placement``: per matrix T, I, O trustworthiness@10 and nearest-drawn-neighbour share
    of placed and of fitted tokens, the hold-out check; see :func:`placement_record`)."""
    from tying.analysis.projection import project

    rows = sample(run.n, run.cfg.umap_tokens, run.cfg.seed)
    progress(f"UMAP of {len(rows):,} tokens x {len(run.matrices)} matrices" + (f", then {run.n - len(rows):,} placed"
                                                              if len(rows) < run.n else ""))
    keys = [k for k in MATRICES if k in run.matrices]
    proj = project([run.matrices[k] for k in keys], rows, seed=run.cfg.seed, n_epochs=run.cfg.umap_epochs,
                   progress=progress)
    frames = [pd.DataFrame({"matrix": key, "token": np.arange(run.n, dtype=np.int32),
                            "x": c[:, 0].astype(np.float32), "y": c[:, 1].astype(np.float32),
                            "placed": proj.placed})
              for key, c in zip(keys, proj.coords)]
    ran = {"tokens": int(len(rows)), "placed": int(proj.placed.sum()), "epochs": int(run.cfg.umap_epochs),
           "placement": placement_record(proj.quality)}
    return {"umap": pd.concat(frames)}, ran


def lens_setup(run) -> lens.LensSetup:
    """The run's lens options, its cache's translator folder (made), device and log."""
    folder = layout.lens_dir(run.cfg.cache_dir, run.name)
    folder.mkdir(parents=True, exist_ok=True)
    return lens.LensSetup(run.cfg.lens, folder, run.device, say=run.log,
                          gpu_command=lens.lens_gpu_command(run.cfg, run.name), cache=str(run.path))


def lens_tables(run, progress) -> tuple[dict[str, pd.DataFrame], dict]:
    """The lens tables, and the budget each model's tuned lens trained with (``{role: budget}``)."""
    return lens.read_models(lens_setup(run), {role: m.local_dir for role, m in run.models.items()}, progress,
                            trust_remote_code=run.cfg.trust_remote_code)


SELF_PREDICTION_TOKENS = 8_192
"""Positions of the lens's evaluation text read by the self_prediction stage, per model."""


def self_prediction_tables(run, progress) -> tuple[dict[str, pd.DataFrame], None]:
    """Each model read through the logit lens (an untied one through O and I) and through its tuned
    lens where the lens stage saved one that fits it: the share of positions whose top-1 is the
    input token itself, per hidden state."""
    from tying.lens.files import load_lens
    from tying.lens.self_prediction import self_prediction

    opts, text, frames = run.cfg.lens, lens.LensText.load(run.cfg.lens), []
    for role, m in run.models.items():
        progress(f"{role}: loading the model")
        lm = lens.LensModel.load(role, m.local_dir, run.device, run.cfg.trust_remote_code)
        budget = lens.model_budget(opts, run.device, lm.context)
        tuned = next((t for f in layout.lens_files(run.path, role, budget)  # this run's lens first
                      if (t := load_lens(f, lm.fingerprint, device=run.device)) is not None), None)
        seq = budget.seq_len
        progress(f"{role}: reading {SELF_PREDICTION_TOKENS:,} positions through each lens")
        frames.append(self_prediction(lm.model, lm.batches(text.evaluate, seq, opts.batch_size, SELF_PREDICTION_TOKENS),
                                      tied=role == "tied", tuned=tuned, device=run.device,
                                      parts=lm.parts).assign(model=role))
    return {"self_prediction": pd.concat(frames, ignore_index=True)}, None


@dataclass(frozen=True)
class Stage:
    """How the writer computes one analysis: the parameters its stage hashes and its builder
    (None: written by another command, the toy lab's training by ``precompute demo``)."""

    params: Callable[[Any], dict]
    build: Callable[[Any, Callable[[str], None]], tuple[dict, Any]] | None


STAGES: dict[str, Stage] = {
    "load": Stage(lambda run: {"tied": run.cfg.tied, "untied": run.cfg.untied, "tied_revision": run.cfg.tied_revision,
                               "untied_revision": run.cfg.untied_revision, "text": run.cfg.text,
                               "match": run.cfg.match}, load_tables),
    "alignment": Stage(lambda run: {"held_out": run.cfg.held_out, "seed": run.cfg.seed}, alignment_tables),
    "neighbours": Stage(lambda run: {"k": run.cfg.neighbours_k}, neighbours_tables),
    "spectral": Stage(lambda run: {"k": run.cfg.spectral_k, "components": run.cfg.spectral_components,
                                   "tokens": run.cfg.spectral_tokens, "seed": run.cfg.seed}, spectral_tables),
    "cka": Stage(lambda run: {}, cka_tables),
    "token_traits": Stage(token_traits_params, token_traits_tables),
    "umap": Stage(umap_params, umap_tables),
    "lens": Stage(lambda run: run.cfg.lens.params() | {"budget": run.requested_lens_budget()}, lens_tables),
    "self_prediction": Stage(lambda run: {"tokens": SELF_PREDICTION_TOKENS, "lens": STAGES["lens"].params(run)},
                             self_prediction_tables),
    "training": Stage(lambda run: {}, None),
}
"""Every analysis's stage, by the registry's name, in its order."""

assert tuple(STAGES) == tuple(a.name for a in registry.ANALYSES), "one stage per analysis, in the registry's order"
