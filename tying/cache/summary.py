"""The headline numbers of a pair's cache (the paper's Table 1 and Table 5), read-only.

Used by the app's overview page and by ``python -m precompute summary`` (``--json`` prints
:func:`summarize`'s :class:`~tying.cache.summary_types.Summary` as JSON; its text tables are
written by the writer's report command).
"""

from __future__ import annotations

import json
import math
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from tying import registry
from tying.analysis.cka import cka_summary
from tying.analysis.share import DEFAULT_EARLY_STEPS, output_share
from tying.analysis.sweep import by_cell
from tying.cache import reference
from tying.cache.reference import OVERLAP_K
from tying.cache.store import (
    CacheError,
    finished_stages,
    has_column,
    query_df,
    read_meta,
    stage_params,
    table_exists,
)
from tying.cache.summary_types import EARLY_LAYERS, INDEPENDENT, SHARED_START, Summary, paper_reference
from tying.errors import first_line


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _clean(x: Any) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, recursively, so the JSON is strict."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def summarize(con: duckdb.DuckDBPyConnection) -> Summary:
    """Every headline number of the cache (strict JSON values: no NaN)."""
    return Summary.from_json(_clean(_summarize(con)))


def summarize_cache(con: duckdb.DuckDBPyConnection, path) -> Summary:
    """:func:`summarize`, a cache that opens but cannot be read (a damaged block, a value of the
    wrong type in a table) raised as a CacheError naming the file: one bad file is listed with its
    reason and skipped, never a traceback that takes the others down."""
    try:
        return summarize(con)
    except Exception as exc:  # whatever a damaged file raises: duckdb's IOException, ValueError, KeyError...
        raise CacheError(f"'{path}' cannot be read ({type(exc).__name__}: {first_line(exc)})",
                         read_meta(con).get("command")) from None


def _summarize(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The summary's JSON, built section by section (each analysis's hook sees the sections so far)."""
    meta = read_meta(con)
    models = query_df(con, "SELECT * FROM models ORDER BY role").to_dict("records")
    for m in models:
        m["files"] = json.loads(m["files"]) if m.get("files") else []
        m["fingerprint"] = json.loads(m["fingerprint"]) if m.get("fingerprint") else {}
    out: dict[str, Any] = {
        "name": meta.get("name"),
        "kind": meta.get("kind", "pair"),
        "schema_version": int(meta.get("schema_version", 0)),
        "models": {m["role"]: m for m in models},
        "stages": finished_stages(con),
    }
    voc = json.loads(meta.get("vocabulary", "{}"))
    out["vocabulary"] = voc

    al = query_df(con, "SELECT * FROM alignment_summary")
    alignment: dict[str, dict[str, dict[str, Any]]] = {}
    for r in al.to_dict("records"):
        cell = alignment.setdefault(r["comparison"], {}).setdefault(r["method"], {})
        cell[r["split"]] = _num(r["mean"]) if r["applicable"] else None
        if not r["applicable"]:
            cell["note"] = r["note"]
    out["alignment"] = alignment

    oc = query_df(con, "SELECT pair, k, mean_overlap FROM overlap_curve ORDER BY pair, k")
    overlap: dict[str, dict[str, float]] = {}
    for r in oc.to_dict("records"):
        overlap.setdefault(r["pair"], {})[str(int(r["k"]))] = float(r["mean_overlap"])
    out["overlap"] = overlap
    out["overlap_at_10"] = {p: v.get("10") for p, v in overlap.items()}

    sp = query_df(con, "SELECT * FROM spectral")
    out["spectral"] = {r["pair"]: _num(r["distance"]) for r in sp.to_dict("records")}
    out["spectral_params"] = (
        {k: int(sp.iloc[0][k]) for k in ("graph_k", "n_components", "n_tokens", "n_common")}
        | {"sampled": bool(sp.iloc[0]["sampled"])} if len(sp) else {}
    )

    for name, fields_of in SUMMARIES.items():  # the summary fields an analysis adds (under its name)
        if table_exists(con, next(iter(registry.BY_NAME[name].tables))):
            fields = fields_of(con, out)
            if fields:
                out[name] = fields
    if meta.get("kind") in ("toylab", "provenance", "evolution", "published"):
        out.update(training_summary(con))
    if meta.get("kind") == "sweep":
        out.update(sweep_summary(con))
        out["sweep_settings"] = json.loads(meta.get("sweep") or "{}")
    if meta.get("kind") == "mechanism":
        out.update(mechanism_summary(con))
        out["mechanism_settings"] = json.loads(meta.get("mechanism") or "{}")

    preset = meta.get("preset") or reference.preset_for(
        out["models"].get("tied", {}).get("source"), out["models"].get("untied", {}).get("source")
    )
    if preset:
        out["paper"] = paper_reference(preset)
    elif out["kind"] == "toylab":
        out["paper"] = paper_reference(reference.TOYLAB_REFERENCE) | {"beside_toylab": True}
    regime = twins_regime(meta)
    if regime:
        out["twins"] = regime
    if out["kind"] == "toylab":
        out["scale"] = toylab_scale(out, meta)
        out["overlap_context"] = overlap_context(con, out)
    if meta.get("sources"):
        out["sources"] = json.loads(meta["sources"])
    return out


TRAINED_KINDS = ("toylab", "sweep", "mechanism")
"""The kinds of cache whose twins were trained here; each keeps its settings under the meta key of
its kind."""


def twins_regime(meta: dict[str, str]) -> str | None:
    """SHARED_START or INDEPENDENT for a cache whose twins were trained here; None otherwise. A
    cache written before the twins had seeds of their own (no ``shared_start`` setting) shared
    the start."""
    kind = meta.get("kind")
    if kind not in TRAINED_KINDS or not meta.get(kind):
        return None
    return SHARED_START if json.loads(meta[kind]).get("shared_start", True) else INDEPENDENT


def toylab_scale(s: dict[str, Any], meta: dict[str, str]) -> dict[str, Any]:
    """What the toy models are, against the paper's: one line for wherever their numbers meet."""
    cfg = json.loads(meta.get("toylab") or "{}")
    tied = (s.get("models") or {}).get("tied") or {}
    untied = (s.get("models") or {}).get("untied") or {}
    steps, batch, context = cfg.get("steps"), cfg.get("batch_size"), cfg.get("context")
    seeds = cfg.get("seeds", 1)
    tokens = steps * batch * context if steps and batch and context else None
    sizes = f"{(tied.get('n_params') or 0) / 1e6:.2f}M"
    if untied.get("n_params"):
        sizes += f" (tied) and {untied['n_params'] / 1e6:.2f}M (untied)"
    parts = [f"toy lab: tied/untied twins of {sizes} parameters"]
    if cfg.get("n_layers"):
        parts[0] += f" ({cfg.get('n_layers')} layers, d={cfg.get('d_model')}, vocabulary {cfg.get('vocab_size')})"
    if tokens:
        parts.append(f"{steps:,} steps x {batch * context:,} tokens = {tokens / 1e6:.2f}M training tokens")
    parts.append(f"{seeds} seed{'s' if seeds != 1 else ''}")
    if twins_regime(meta) == SHARED_START:
        how = ("The twins start from one shared initialisation and read the same batches (the shared-start "
               "control), so their raw-row cosines sit far above the paper's near-zero ones")
    else:
        how = ("Each twin starts from an initial draw and reads a batch order of its own, as the paper's "
               "independently trained models do; a second tied run T' is the ceiling")
    line = ", ".join(parts) + f"; paper: {reference.SCALE[reference.TOYLAB_REFERENCE]}. " + how
    return {"line": line, "n_params": tied.get("n_params"), "n_params_untied": untied.get("n_params"), "steps": steps, "tokens": tokens, "seeds": seeds}


FREQUENT_MIN_COUNT = 100  # "frequent" tokens for the toy lab's second overlap figure: seen this often in the corpus


def overlap_context(con: duckdb.DuckDBPyConnection, s: dict[str, Any], k: int = OVERLAP_K,
                    min_count: int = FREQUENT_MIN_COUNT) -> dict[str, Any]:
    """Why a toy lab's overlap@k sits far below the paper's, from the cache itself.

    ``chance``: k / (V - 1), the overlap of two random neighbour lists over V tokens; ``unseen``:
    tokens that never occur in the corpus (their input rows never get a gradient and stay at the
    initialisation); ``input_cos_init``: the untied twin's input matrix against its start at the
    last checkpoint (seed 0, the pair's twins); ``frequent``: overlap@k averaged over the tokens
    seen at least ``min_count`` times (their stored top-k neighbours among all tokens), a labelled
    second figure. Numpy only, on the stored neighbour lists.
    """
    from tying.analysis.overlap import overlap_at_k

    out: dict[str, Any] = {"k": k, "min_count": min_count}
    tok = query_df(con, "SELECT token, freq_tied FROM tokens ORDER BY token") if table_exists(con, "tokens") else None
    nb = query_df(con, "SELECT matrix, token, neighbour FROM neighbours WHERE rank <= ? ORDER BY matrix, token, rank",
                  [k]) if table_exists(con, "neighbours") else None
    n = int(nb["token"].nunique()) if nb is not None and len(nb) else (len(tok) if tok is not None else 0)
    out["n_tokens"] = n
    out["chance"] = k / (n - 1) if n > 1 else None
    if tok is not None and tok["freq_tied"].notna().any():
        freq = tok["freq_tied"].fillna(0).to_numpy()
        out["unseen"] = int((freq == 0).sum())
        frequent = tok["token"].to_numpy()[freq >= min_count]
        out["frequent"] = {"n_tokens": int(len(frequent))}
        if nb is not None and len(nb) and len(frequent):
            ids = {}
            for m, g in nb.groupby("matrix"):
                tokens = g["token"].to_numpy()
                arr = g["neighbour"].to_numpy().reshape(-1, k)
                ids[m] = arr[np.isin(tokens[::k], frequent)]
            for a, b in (("T", "I"), ("T", "O"), ("I", "O")):
                if a in ids and b in ids and ids[a].shape[0]:
                    out["frequent"][f"{a}~{b}"] = float(overlap_at_k(ids[a], ids[b], k).mean())
    evo = (s.get("evolution") or {}).get("untied/seed0", {}).get("I")
    if evo and evo.get("steps"):
        out["input_cos_init"] = {"run": "untied/seed0", "step": evo["steps"][-1], "I": evo["cos_init"][-1]}
    return out


def umap_summary(con: duckdb.DuckDBPyConnection, summary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The umap table's tokens and the placement's quality (None when the table is empty);
    ``summary``: the cache's summary so far (its finished stages are read from there).

    {"n_tokens": tokens on the map, "n_fitted": fitted by AlignedUMAP, "n_placed": placed from
    their nearest fitted tokens, "n_common": common tokens of the cache, "placement": what the
    umap stage recorded (``ran.placement``: per matrix T, I, O the trustworthiness@10 and
    nearest-drawn-neighbour share of placed and fitted samples and the hold-out check, and the
    settings), or None for a cache written before placement}. A cache of schema 2 has no
    ``placed`` column: every row there was fitted.
    """
    placed = "coalesce(placed, false)" if has_column(con, "umap", "placed") else "false"
    row = query_df(con, f"SELECT count(DISTINCT token) AS n, count(DISTINCT token) FILTER (WHERE {placed}) AS placed "
                        "FROM umap").iloc[0]
    n_common = int(con.execute("SELECT count(*) FROM tokens").fetchone()[0]) if table_exists(con, "tokens") else None
    stages = (summary or {}).get("stages")
    ran = stage_params(stages if stages is not None else finished_stages(con), "umap").get("ran") or {}
    n, n_placed = int(row["n"]), int(row["placed"])
    if not n:
        return None
    out = {"n_tokens": n, "n_fitted": n - n_placed, "n_placed": n_placed, "n_common": n_common,
           "placement": ran.get("placement")}
    if (summary or {}).get("kind") == "model":  # one tied model: one map, fitted by plain UMAP
        out["views"] = 1
    return out


def lens_summary(con: duckdb.DuckDBPyConnection, summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per-layer KL series (bits) by model and lens, and the early-layer tuned-lens gap."""
    df = query_df(con, "SELECT model, lens, layer, kl_mean FROM lens_kl ORDER BY model, lens, layer")
    out: dict[str, Any] = {"kl": {}}
    for (model, lens), g in df.groupby(["model", "lens"]):
        out["kl"].setdefault(model, {})[lens] = [_num(x) for x in g["kl_mean"]]
    tuned = {m: v.get("tuned") for m, v in out["kl"].items()}
    if tuned.get("tied") and tuned.get("untied"):
        out["gap"] = {m: sum(x or 0 for x in tuned[m][:EARLY_LAYERS]) / EARLY_LAYERS for m in ("tied", "untied")}
        out["gap"]["layers"] = EARLY_LAYERS
    return out


PAPER_INPUT_SIDES = ("proxy", "effective", "plain")
"""Input-side figures that are the authors' proxy (runs.input_norm of an imported log of theirs)."""


def share_beside_paper(p: dict[str, Any]) -> dict[str, Any]:
    """The output share set beside the paper's 0.7033 / 0.6357: the mean of per-step ratios with the
    authors' input-side proxy (the gradient w.r.t. the embedding output over all positions), as their
    log has it. A run that logged the proxy beside the exact norm uses the proxy; any other run its
    own figure, named in ``input`` ('exact' is then not the paper's quantity and ``like_paper`` is
    False).

    ``p``: one run's ``gradient_provenance`` entry (``early``, ``overall``, ``input_norm``,
    ``ratio_of_sums`` and, when logged, ``proxy``).
    """
    if p.get("proxy"):
        px = p["proxy"]
        return {"early": px["early"], "overall": px["overall"], "ratio_of_sums": px.get("ratio_of_sums"),
                "input": "proxy", "like_paper": True}
    side = p.get("input_norm") or "exact"
    return {"early": p["early"], "overall": p["overall"], "ratio_of_sums": p.get("ratio_of_sums"),
            "input": side, "like_paper": side in PAPER_INPUT_SIDES}


def training_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Gradient provenance, input-gradient scaling (Table 2) and spread across seeds."""
    out: dict[str, Any] = {}
    if not table_exists(con, "runs"):
        return out
    runs = query_df(con, "SELECT * FROM runs ORDER BY run")
    out["runs"] = {r["run"]: {k: (_num(r[k]) if isinstance(r[k], float) else r[k])
                              for k in ("variant", "seed", "input_grad_scale", "steps", "final_loss", "eval_loss",
                                        "seconds")} for r in runs.to_dict("records")}
    provenance = {}
    for r in runs.to_dict("records"):
        run = r["run"]
        log = query_df(con, "SELECT step, grad_input_norm, grad_output_norm, grad_input_proxy_norm FROM train_log "
                            "WHERE run = ?", [run])
        if not len(log):
            continue
        n_early = r.get("early_steps")
        n_early = int(n_early) if n_early is not None and not pd.isna(n_early) else DEFAULT_EARLY_STEPS
        share = output_share(log["step"], log["grad_input_norm"], log["grad_output_norm"], early_steps=n_early)
        share["input_norm"] = r.get("input_norm")
        if log["grad_input_proxy_norm"].notna().any():
            proxy = output_share(log["step"], log["grad_input_proxy_norm"], log["grad_output_norm"],
                                 early_steps=n_early)
            share["proxy"] = {"early": proxy["early"], "overall": proxy["overall"],
                              "ratio_of_sums": proxy["ratio_of_sums"]}
        share["beside_paper"] = share_beside_paper(share)
        provenance[run] = share
    out["gradient_provenance"] = provenance
    ev = query_df(con, "SELECT run, matrix, step, label, cos_init FROM evolution ORDER BY run, matrix, step")
    evolution: dict[str, dict[str, Any]] = {}
    for (run, matrix), g in ev.groupby(["run", "matrix"], sort=True):
        evolution.setdefault(run, {})[matrix] = {"steps": [int(x) for x in g["step"]],
                                                 "cos_init": [_num(x) for x in g["cos_init"]]}
    out["evolution"] = evolution
    sc = query_df(con, "SELECT * FROM scaling ORDER BY input_grad_scale, run")
    table2: dict[str, dict[str, Any]] = {}
    for r in sc.to_dict("records"):
        cell = table2.setdefault(r["method"], {}).setdefault(r["run"], {"input_grad_scale": r["input_grad_scale"]})
        cell[r["target"]] = float(r["mean_cosine"])
    out["table2"] = table2
    sm = query_df(con, "SELECT metric, count(*) AS n, avg(value) AS mean, stddev_samp(value) AS std "
                       "FROM seed_metrics GROUP BY metric ORDER BY metric")
    out["seeds"] = {r["metric"]: {"n": int(r["n"]), "mean": _num(r["mean"]), "std": _num(r["std"])}
                    for r in sm.to_dict("records")}
    per_seed = query_df(con, "SELECT seed, metric, value FROM seed_metrics ORDER BY metric, seed")
    out["seed_values"] = {m: {str(int(r.seed)): _num(r.value) for r in g.itertuples()}
                          for m, g in per_seed.groupby("metric", sort=True)}
    out["directions"] = seed_directions(per_seed)
    return out


def sweep_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """A width sweep: one row per cell ("sweep") and mean and spread per grid point ("sweep_cells")."""
    if not table_exists(con, "sweep"):
        return {}
    rows = query_df(con, "SELECT * FROM sweep ORDER BY vocab_size, d_model, seed")
    if not len(rows):
        return {}
    ints = ("d_model", "vocab_size", "seed", "n_layers", "steps", "params_tied", "params_untied",
            "params_tied_matched", "n_layers_matched", "tokens_seen", "d_ff", "d_ff_matched", "bigram_train_tokens")
    out = {"sweep": [{k: int(v) if k in ints and v is not None and not pd.isna(v) else _num(v)
                      for k, v in r.items()} for r in rows.to_dict("records")],
           "sweep_cells": sweep_cells(rows)}
    if table_exists(con, "lr_probe"):
        probes = query_df(con, "SELECT * FROM lr_probe ORDER BY vocab_size, d_model, arm, lr, seed")
        if len(probes):
            out["sweep_probes"] = [{k: v if isinstance(v, str) else int(v) if k in ints + ("steps",) else _num(v)
                                    for k, v in r.items()} for r in probes.to_dict("records")]
    return out


def mechanism_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The mechanism lab: one row per run ("mechanism"), the bias at every snapshot of every run
    ("mechanism_curves") and the SGD arm's learning-rate probes ("mechanism_probes")."""
    out: dict[str, Any] = {}
    ints = ("seed", "steps", "step")
    for key, table, order in (("mechanism", "mechanism", "arm, seed"), ("mechanism_curves", "mechanism_curve",
                                                                        "arm, seed, step"),
                              ("mechanism_probes", "mechanism_probe", "lr")):
        if table_exists(con, table):
            rows = query_df(con, f"SELECT * FROM {table} ORDER BY {order}")
            if len(rows):
                out[key] = [{k: v if isinstance(v, str) else int(v) if k in ints and v is not None and not
                             pd.isna(v) else _num(v) for k, v in r.items()} for r in rows.to_dict("records")]
    return out


def sweep_cells(rows) -> list[dict[str, Any]]:
    """Per (vocab_size, d_model): mean, sample std and seed count of the biases, the loss gap
    (untied minus tied) and the rest, and the 95% half-widths of the biases and the loss gap
    (``<col>_half``; null with one seed)."""

    return [{k: (_num(v) if isinstance(v, float) else int(v)) for k, v in r.items()}
            for r in by_cell(rows).to_dict("records")]


# The paper's directions, each as (claim, larger metric, smaller metric or a constant).
DIRECTIONS = (
    ("O->T above I->T (linear, held-out)", "O->T linear held-out", "I->T linear held-out"),
    ("T~O above T~I (overlap@10)", "overlap@10 T~O", "overlap@10 T~I"),
    ("output share early above 1/2", "output share early", 0.5),
)


def seed_directions(sm) -> dict[str, dict[str, Any]]:
    """Whether each of the paper's directions holds in each seed: {claim: {"seeds", "holds", "all"}}."""
    out: dict[str, dict[str, Any]] = {}
    if not len(sm):
        return out
    wide = sm.pivot_table(index="seed", columns="metric", values="value", aggfunc="first")
    for claim, big, small in DIRECTIONS:
        if big not in wide or (isinstance(small, str) and small not in wide):
            continue
        lo = wide[small] if isinstance(small, str) else small
        holds = [bool(x) for x in (wide[big] > lo)]
        out[claim] = {"seeds": [int(x) for x in wide.index], "holds": holds, "all": all(holds)}
    return out


SUMMARIES = {"umap": umap_summary, "lens": lens_summary, "cka": cka_summary}
"""The summary fields an analysis adds, by the registry's name: (connection, summary so far) ->
its fields (under its name in the JSON), or None. Read when its first table exists."""
