"""`precompute summary`: a cache's headline numbers as the plain-text tables the CLI prints, or as JSON.

The numbers come from :func:`tying.cache.summary.summarize` (also what the app shows); this
module only lays them out as text, so the numerical library holds no CLI formatting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from precompute.options import cache_dir_option, option
from tying.cache import claims, reference
from tying.cache.schema import MATRIX_PAIRS, METHOD_LABELS, TABLE1_COMPARISONS, TABLE1_METHODS, pair_label
from tying.cache.sentences import coverage_text, match_text, paper_label, plus_minus, spectral_scope
from tying.cache.store import CACHE_SUFFIX, CacheError, open_cache
from tying.cache.summary import share_beside_paper, summarize_cache
from tying.cache.summary_types import (
    EARLY_LAYERS,
    PaperReference,
    Summary,
    model_source,
    stored_as,
    without_local_paths,
)
from tying.cache.verdicts import NO_DATA
from tying.errors import UserError


@dataclass
class SummaryConfig:
    """What `precompute summary` does."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    cache_dir: str = cache_dir_option()
    json: bool = option(False, help="print every number as JSON")


def resolve_cache(cache: str, cache_dir: str) -> Path:
    """A cache file as given, or the cache of that name in ``cache_dir``."""
    p = Path(cache)
    if p.is_file() or p.suffix == CACHE_SUFFIX:
        return p
    return Path(cache_dir) / f"{cache}{CACHE_SUFFIX}"


def print_summary(path: Path, *, as_json: bool) -> None:
    """Print a cache's summary (text tables, or every number as strict JSON)."""
    try:
        con = open_cache(path)
    except CacheError as exc:
        hint = f"; rebuild with: {exc.rebuild}" if exc.rebuild else ""
        raise UserError(exc.message + hint) from None
    try:
        s = summarize_cache(con, path)
    except CacheError as exc:
        raise UserError(exc.message) from None
    finally:
        con.close()
    if as_json:
        out = without_local_paths(s.to_json() | {"claims": claims.as_json(s)})  # no path of the builder's disk
        print(json.dumps(out, indent=2, sort_keys=True, default=str, allow_nan=False))
    else:
        print(format_summary(s))


def run_summary(cfg: SummaryConfig) -> None:
    print_summary(resolve_cache(cfg.cache, cfg.cache_dir), as_json=cfg.json)


def _fmt(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:6.3f}"


def format_summary(s: Summary) -> str:
    """The summary as the plain-text tables the CLI prints."""
    lines = [f"{s.kind or 'pair'}: {s.name}"]
    if s.scale:
        lines.append(f"  {s.scale['line']}")
    for role in ("tied", "untied"):
        m = s.models.get(role)
        if m:
            lines.append(
                f"  {role:<7} {model_source(m)}  d={m['d_model']}  vocab={m['n_vocab']}  "
                f"embedding share={m['embedding_share']:.1%}  stored as {stored_as(m.get('dtype'))}"
            )
    v = s.vocabulary or {}
    if v:
        lines.append(f"  {coverage_text(v)}")
    paper = s.paper or PaperReference()
    if s.alignment or s.overlap:
        _format_pair_tables(s, paper, lines)
    if s.kind == "published":
        _format_published(s, lines)
    _format_lens(s, lines)
    _format_training(s, lines)
    _format_sweep(s, lines)
    _format_claims(s, lines)
    return "\n".join(lines)


def _format_claims(s: Summary, lines: list[str]) -> None:
    """The paper's claims as a table: id, verdict, this cache's numbers (and the paper's), one row
    each; claims the cache holds no data for are listed on one line."""
    got = claims.claims(s)
    shown = {k: c for k, c in got.items() if c.verdict != NO_DATA}
    lines.append("")
    lines.append("Claims (verdicts computed from this cache; 'reported': the paper's printed value, not evidence)")
    for k, c in shown.items():
        lines.append(f"  {k:<11} {c.verdict:<14} {c.ours}")
        if c.paper:
            lines.append(f"  {'':<11} {'':<14} {c.paper}")
    missing = [k for k in got if k not in shown]
    if missing:
        lines.append(f"  no data: {', '.join(missing)}")



def _format_sweep(s: Summary, lines: list[str]) -> None:
    """One line per cell of a width sweep: mean ± sample std over seeds."""
    cells = s.sweep_cells
    if not cells:
        return
    lines.append("")
    lines.append("Width sweep: mean ± sample std over seeds per cell; bias = O->T minus I->T (linear, held-out) and "
                 "T~O minus T~I (overlap@10); loss gap = untied minus tied eval loss (negative: untying pays off)")
    lines.append(f"  {'vocab':>6} {'d':>5} {'seeds':>5} {'emb. share T':>12} {'bias linear':>16} {'bias overlap':>16} "
                 f"{'loss gap':>16} {'output share':>16}")
    for c in cells:
        n = c["n"]
        lines.append(f"  {c['vocab_size']:>6} {c['d_model']:>5} {n:>5} {c['embedding_share_tied']:>12.1%} "
                     f"{plus_minus(c['bias_linear'], c['bias_linear_std'], n):>16} "
                     f"{plus_minus(c['bias_overlap'], c['bias_overlap_std'], n):>16} "
                     f"{plus_minus(c['loss_gap'], c['loss_gap_std'], n):>16} "
                     f"{plus_minus(c['output_share_early'], c['output_share_early_std'], n):>16}")


def _format_published(s: Summary, lines: list[str]) -> None:
    """The paper's own tables (quoted) and where each published file comes from."""
    lines.append("")
    lines.append(f"Published measurements: {reference.PAPER}")
    for src in s.sources or []:
        if src.get("file"):
            lines.append(f"  {src.get('figure') or '':<9} {Path(src['file']).name}  <- {src['repository']}@"
                         f"{src['commit'][:12]}:{src.get('path') or ''}  ({src.get('license')})")
    lines.append("")
    lines.append("Table 1 (paper): mean per-token cosine, identity (raw rows) / orthogonal / linear (in-sample)")
    for preset, table in reference.TABLE1.items():
        for comp, cells in table.items():
            lines.append(f"  {preset:<14} {comp:5} " + " / ".join(
                _fmt(cells.get(m)).strip() for m in ("identity_raw", "orthogonal", "linear")))
    lines.append("")
    lines.append("Table 5 (paper): k-NN overlap@10")
    for preset, cells in reference.TABLE5.items():
        lines.append(f"  {preset:<14} " + "   ".join(f"{p} {v:.3f}" for p, v in cells.items()))



def _format_pair_tables(s: Summary, paper: PaperReference, lines: list[str]) -> None:
    lines.append("")
    lines.append("Table 1: mean per-token cosine (in-sample / held-out); identity (raw rows) is the paper's "
                 "identity column, the other maps are on centred rows")
    width = 22
    lines.append(f"  {'':14}" + "".join(f"{METHOD_LABELS[m]:>{width}}" for m in TABLE1_METHODS))
    label = paper_label(paper)
    for comp in TABLE1_COMPARISONS:
        row = f"  {comp:14}"
        for meth in TABLE1_METHODS:
            cell = s.alignment.get(comp, {}).get(meth, {})
            row += f"{_fmt(cell.get('in_sample')):>{width - 9}} /{_fmt(cell.get('held_out'))}"
        lines.append(row)
        if paper.table1 and comp in paper.table1:
            ref = paper.table1[comp]
            lines.append(f"  {label:14}" + "".join(f"{_fmt(ref.get(m)) if m in ref else '-':>{width}}"
                                                    for m in TABLE1_METHODS))
    vocab = s.vocabulary or {}
    if paper.table1 or not vocab.get("identical", True):
        lines.append(f"  {match_text(s)}")
    lines.append("")
    lines.append("Table 5: k-NN overlap@10")
    for a, b in MATRIX_PAIRS:
        p = pair_label(a, b)
        ref = (paper.table5 or {}).get(p)
        extra = f"   ({label} {ref:.3f})" if ref is not None else ""
        lines.append(f"  {p}: {_fmt(s.overlap_at_10.get(p))}{extra}")
    if s.spectral:
        sp = s.spectral_params
        lines.append("")
        sampled = spectral_scope(sp)
        lines.append(
            f"Spectral distance (weighted k-NN graphs, k={sp.get('graph_k')}, {sp.get('n_components')} components, "
            f"{sampled}; lower = more similar)"
        )
        for a, b in MATRIX_PAIRS:
            p = pair_label(a, b)
            lines.append(f"  {p}: {_fmt(s.spectral.get(p))}")


def _format_lens(s: Summary, lines: list[str]) -> None:
    kl = (s.analysis("lens") or {}).get("kl") or {}
    if not kl:
        return
    lines.append("")
    lines.append("Layerwise KL (bits) to the final output, hidden states input, 1..L")
    for model in ("tied", "untied"):
        for lens in ("tuned", "logit"):
            series = kl.get(model, {}).get(lens)
            if series:
                lines.append(f"  {model:<7}{lens:<6} " + " ".join(_fmt(x).strip() for x in series))
    gap = s.analysis("lens").get("gap")
    if gap:
        lines.append(f"  tuned-lens KL over the first {gap['layers']} hidden states: tied {gap['tied']:.2f}, "
                     f"untied {gap['untied']:.2f}")
    ref = s.paper.tuned_lens_kl if s.paper else None
    if ref:
        n = EARLY_LAYERS
        lines.append(f"  paper ({s.paper.preset}, authors' indexing): tied "
                     f"{sum(ref['tied'][:n]) / n:.2f}, untied {sum(ref['untied'][:n]) / n:.2f} over the first {n}; "
                     f"note: {s.paper.tuned_lens_note}")


def _format_training(s: Summary, lines: list[str]) -> None:
    paper = s.paper or PaperReference()
    if s.gradient_provenance:
        lines.append("")
        lines.append("Gradient provenance: output share = mean over logged steps of output / (input + output) with "
                     "the authors' input proxy when logged (the paper's quantity); early = logged steps <= N")
        for run, p in s.gradient_provenance.items():
            if s.runs[run]["variant"] == "untied":
                continue
            b = p.get("beside_paper") or share_beside_paper(p)
            ros = b.get("ratio_of_sums") or {}
            lines.append(f"  {run:<24} early {_fmt(b['early'])} (steps <= {p['early_steps']:,}, "
                         f"{p['early_logged_steps']:,} logged)   overall {_fmt(b['overall'])} "
                         f"({p['logged_steps']:,} logged)   input norm: {b['input']}")
            extra = f"  {'':<24} ratio of summed norms (not the paper's quantity): early {_fmt(ros.get('early'))}  " \
                    f"overall {_fmt(ros.get('overall'))}"
            if b["input"] != "exact" and (p.get("input_norm") or "exact") == "exact":
                extra += f";  exact input norm (a second figure, not the paper's): early {_fmt(p['early'])}  " \
                         f"overall {_fmt(p['overall'])}"
            lines.append(extra)
        ref = paper.output_share
        if ref:
            lines.append(f"  paper ({reference.SCALE['gradient_run']}): early {ref['early']:.4f} "
                         f"(steps <= {ref['early_steps']:,})   overall {ref['overall']:.4f}")
    if s.table2:
        lines.append("")
        lines.append("Table 2: tied matrix vs the untied twin's I / O (mean per-token cosine); the paper's map is "
                     f"'{reference.TABLE2_METHOD}' ({reference.TABLE2_METHOD_LABEL}), the others are extras")
        methods = sorted(s.table2, key=lambda m: (m != reference.TABLE2_METHOD, m))
        for method in methods:
            for run, c in s.table2[method].items():
                lines.append(f"  {method:<20} {run:<24} I {_fmt(c.get('I'))}   O {_fmt(c.get('O'))}")
        for scale, ref in (paper.table2 or {}).items():
            lines.append(f"  {'paper (OLMo-1B)':<20} {'input x' + scale:<24} I {_fmt(ref['I'])}   O {_fmt(ref['O'])}"
                         f"   ({reference.TABLE2_METHOD})")
    seeds = s.seeds or {}
    if seeds:
        n = max(v["n"] for v in seeds.values())
        lines.append("")
        lines.append(f"Across seeds (mean +- sample std, n={n})")
        for metric, v in seeds.items():
            lines.append(f"  {metric:<36} {_fmt(v['mean'])} +- {_fmt(v['std'])}  (n={v['n']})")
    for claim, d in (s.directions or {}).items():
        lines.append(f"  {claim}: holds in {sum(d['holds'])} of {len(d['holds'])} seeds")
    if s.evolution:
        lines.append("")
        lines.append("Embedding evolution: mean per-token cosine to the first checkpoint, at the last one")
        for run, mats in s.evolution.items():
            cells = "   ".join(f"{m} {_fmt(v['cos_init'][-1])}" for m, v in mats.items())
            lines.append(f"  {run:<24} step {max(v['steps'][-1] for v in mats.values())}: {cells}")
        ev = paper.evolution
        if ev:
            lines.append(f"  paper ({ev['model']})         step {ev['step']:,}: I {ev['I']:.3f}   O {ev['O']:.3f}")
