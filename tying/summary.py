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
from tying.store import finished_stages, query_df, read_meta


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def summarize(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Every headline number of the cache as a JSON-able dict."""
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


def _fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:6.3f}"


def format_summary(s: dict[str, Any]) -> str:
    """The summary as the plain-text tables the CLI prints."""
    lines = [f"pair: {s.get('name')}"]
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
    return "\n".join(lines)
