"""The headline numbers of a pair's cache (the paper's Table 1 and Table 5), read-only.

Used by ``python -m precompute summary`` and by the app's overview page.
"""

from __future__ import annotations

import json
import math
from typing import Any

import duckdb

from tying import reference
from tying.schema import MATRIX_PAIRS, TABLE1_COMPARISONS, TABLE1_METHODS, pair_label
from tying.store import finished_stages, query_df, read_meta, table_exists


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


def summarize(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Every headline number of the cache as a JSON-able dict (strict JSON: no NaN)."""
    return _clean(_summarize(con))


def _summarize(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
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
        {k: int(sp.iloc[0][k]) for k in ("graph_k", "n_components", "n_tokens")} if len(sp) else {}
    )

    if table_exists(con, "lens_kl"):
        out["lens"] = lens_summary(con)
    if meta.get("kind") in ("toylab", "provenance", "evolution"):
        out.update(training_summary(con))

    preset = meta.get("preset") or reference.preset_for(
        out["models"].get("tied", {}).get("source"), out["models"].get("untied", {}).get("source")
    )
    if preset:
        out["paper"] = {
            "preset": preset,
            "table1": reference.TABLE1.get(preset),
            "table5": reference.TABLE5.get(preset),
            "tuned_lens_kl": reference.TUNED_LENS_KL.get(preset),
        }
    return out


def output_share(log, early_fraction: float = 0.1) -> dict[str, float | None]:
    """Output side's share of the gradient reaching the embedding matrix, early and overall.

    ``log`` has columns step, grad_input_norm, grad_output_norm; the share is
    sum(output norms) / (sum(input norms) + sum(output norms)) over the first
    ``early_fraction`` of the steps ("early") and over all steps ("overall").
    """
    log = log.sort_values("step")
    n_early = max(1, int(round(len(log) * early_fraction)))

    def share(part) -> float | None:
        o, i = float(part["grad_output_norm"].sum()), float(part["grad_input_norm"].sum())
        return o / (o + i) if o + i > 0 else None

    return {"early": share(log.iloc[:n_early]), "overall": share(log), "early_steps": int(n_early),
            "steps": int(len(log))}


EARLY_LAYERS = 2  # "early" hidden states for the KL gap: the input embedding and the first block


def lens_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
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
    for run in runs["run"]:
        log = query_df(con, "SELECT step, grad_input_norm, grad_output_norm FROM train_log WHERE run = ?", [run])
        if len(log):
            provenance[run] = output_share(log)
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
    return out


def _fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:6.3f}"


def format_summary(s: dict[str, Any]) -> str:
    """The summary as the plain-text tables the CLI prints."""
    lines = [f"{s.get('kind', 'pair')}: {s.get('name')}"]
    for role in ("tied", "untied"):
        m = s["models"].get(role)
        if m:
            rev = f"@{m['revision']}" if m.get("revision") else ""
            lines.append(
                f"  {role:<7} {m['source']}{rev}  d={m['d_model']}  vocab={m['n_vocab']}  "
                f"embedding share={m['embedding_share']:.1%}"
            )
    v = s.get("vocabulary") or {}
    if v:
        lines.append(
            f"  common tokens: {v.get('n_common')} (coverage tied {v.get('coverage_tied', 0):.1%}, "
            f"untied {v.get('coverage_untied', 0):.1%})"
        )
    paper = s.get("paper") or {}
    if s.get("alignment") or s.get("overlap"):
        _format_pair_tables(s, paper, lines)
    _format_lens(s, lines)
    _format_training(s, lines)
    return "\n".join(lines)


def _format_pair_tables(s: dict[str, Any], paper: dict[str, Any], lines: list[str]) -> None:
    lines.append("")
    lines.append("Table 1: mean per-token cosine after centring (in-sample / held-out)")
    lines.append(f"  {'':6}" + "".join(f"{m:>22}" for m in TABLE1_METHODS))
    for comp in TABLE1_COMPARISONS:
        row = f"  {comp:6}"
        for meth in TABLE1_METHODS:
            cell = s["alignment"].get(comp, {}).get(meth, {})
            row += f"{_fmt(cell.get('in_sample')):>13} /{_fmt(cell.get('held_out'))}"
        lines.append(row)
        if paper.get("table1") and comp in paper["table1"]:
            ref = paper["table1"][comp]
            lines.append(f"  {'paper':6}" + "".join(f"{_fmt(ref.get(m)):>22}" for m in TABLE1_METHODS))
    lines.append("")
    lines.append("Table 5: k-NN overlap@10")
    for a, b in MATRIX_PAIRS:
        p = pair_label(a, b)
        ref = (paper.get("table5") or {}).get(p)
        extra = f"   (paper {ref:.3f})" if ref is not None else ""
        lines.append(f"  {p}: {_fmt(s['overlap_at_10'].get(p))}{extra}")
    if s.get("spectral"):
        sp = s.get("spectral_params", {})
        lines.append("")
        lines.append(
            f"Spectral distance (k={sp.get('graph_k')}, {sp.get('n_components')} components, "
            f"{sp.get('n_tokens')} tokens; lower = more similar)"
        )
        for a, b in MATRIX_PAIRS:
            p = pair_label(a, b)
            lines.append(f"  {p}: {_fmt(s['spectral'].get(p))}")


def _format_lens(s: dict[str, Any], lines: list[str]) -> None:
    kl = (s.get("lens") or {}).get("kl") or {}
    if not kl:
        return
    lines.append("")
    lines.append("Layerwise KL (bits) to the final output, hidden states input, 1..L")
    for model in ("tied", "untied"):
        for lens in ("tuned", "logit"):
            series = kl.get(model, {}).get(lens)
            if series:
                lines.append(f"  {model:<7}{lens:<6} " + " ".join(_fmt(x).strip() for x in series))
    gap = s["lens"].get("gap")
    if gap:
        lines.append(f"  tuned-lens KL over the first {gap['layers']} hidden states: tied {gap['tied']:.2f}, "
                     f"untied {gap['untied']:.2f}")


def _format_training(s: dict[str, Any], lines: list[str]) -> None:
    if s.get("gradient_provenance"):
        lines.append("")
        lines.append("Gradient provenance: output side's share of the embedding gradient norm (early = first 10%)")
        for run, p in s["gradient_provenance"].items():
            if s["runs"][run]["variant"] == "untied":
                continue
            lines.append(f"  {run:<24} early {_fmt(p['early'])}   overall {_fmt(p['overall'])}")
    if s.get("table2"):
        lines.append("")
        lines.append("Table 2: tied matrix vs the untied twin's I / O (mean per-token cosine)")
        for method, cells in s["table2"].items():
            for run, c in cells.items():
                lines.append(f"  {method:<16} {run:<24} I {_fmt(c.get('I'))}   O {_fmt(c.get('O'))}")
    seeds = s.get("seeds") or {}
    if seeds and max(v["n"] for v in seeds.values()) > 1:
        lines.append("")
        lines.append("Across seeds (mean +- sample std)")
        for metric, v in seeds.items():
            lines.append(f"  {metric:<32} {_fmt(v['mean'])} +- {_fmt(v['std'])}  (n={v['n']})")
    if s.get("evolution"):
        lines.append("")
        lines.append("Embedding evolution: mean per-token cosine to the first checkpoint, at the last one")
        for run, mats in s["evolution"].items():
            cells = "   ".join(f"{m} {_fmt(v['cos_init'][-1])}" for m, v in mats.items())
            lines.append(f"  {run:<24} step {max(v['steps'][-1] for v in mats.values())}: {cells}")
