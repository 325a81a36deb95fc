"""The paper's claims, each with this cache's numbers and a verdict computed from them.

One function per claim reads :func:`tying.cache.summary.summarize`'s Summary and returns a
:class:`Claim`; the tour, the Overview's first screen, the figure pack's captions, the static
site and ``summary --json`` (under ``claims``) all say the same sentences. Nothing here is
hard-coded: a cache whose numbers go the other way gets "does not hold", a cache without the
data gets "no data" and names the kind of cache that has it.

The verdicts and the rules that decide them (one verdict from per-run differences, one from a
claim's parts) are :mod:`tying.cache.verdicts`'s; this module computes each claim's numbers,
its lines and the quantity its verdict is decided on.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tying.cache import mechanism_claims, reference, sweep_claims
from tying.cache.claim_types import Claim
from tying.cache.regime import CEILING_NOTE, against, ceiling_mean
from tying.cache.summary_types import EARLY_LAYERS, SHARED_START, Summary
from tying.cache.verdicts import FAILS, HOLDS, MIXED, NO_DATA, REPORTED, combine, decide

IDS = ("alignment", "overlap", "map", "gradient", *mechanism_claims.IDS, "scaling", "lens", "published",
       *sweep_claims.IDS)
"""Every claim id, in the tour's order (the keys of ``summary --json``'s ``claims``)."""


# -- what the numbers are ---------------------------------------------------------------------------

def _paper_label(s: Summary) -> str:
    preset = s.paper.preset if s.paper else None
    return "paper (OLMo-1B)" if preset in (None, "olmo") else f"paper ({preset})"


def toy_scale(s: Summary) -> str:
    """'toy (1.57M/2.10M parameters, 0.26M training tokens)' for a toy cache, '' otherwise: every
    line set beside the paper's from a toy says so (and ', shared start' where the twins shared
    their start and batches: the control, not the paper's regime)."""
    text = _toy_size(s)
    return f"{text[:-1]}, shared start)" if text.endswith(")") and s.twins == SHARED_START else text


def _toy_size(s: Summary) -> str:
    if s.kind == "toylab":
        sc = s.scale or {}
        sizes = "/".join(f"{n / 1e6:.2f}M" for n in (sc.get("n_params"), sc.get("n_params_untied")) if n)
        parts = [f"{sizes} parameters" if sizes else "", f"{sc['tokens'] / 1e6:.2f}M training tokens"
                 if sc.get("tokens") else ""]
        return "toy (" + ", ".join(p for p in parts if p) + ")" if any(parts) else "toy"
    if s.kind == "sweep":
        return sweep_claims.sweep_size(s)
    return ""


def _toy(s: Summary, text: str) -> str:
    scale = toy_scale(s)
    return f"{scale}: {text}" if scale else text


def _runs(n: int, unit: str = "seeds") -> str:
    return f"mean of {n} {unit}" if n > 1 else "one run"


def _per_seed(s: Summary, metric: str) -> dict[int, float]:
    """{seed: value} of one per-seed metric of a toy lab (``seed_values``)."""
    return {int(k): v for k, v in ((s.seed_values or {}).get(metric) or {}).items() if v is not None}


def _paired(s: Summary, big: str, small: str) -> tuple[list[float], dict[int, float], dict[int, float]]:
    """Per-seed differences big - small over the seeds that have both, and the two series."""
    a, b = _per_seed(s, big), _per_seed(s, small)
    seeds = sorted(set(a) & set(b))
    return [a[k] - b[k] for k in seeds], {k: a[k] for k in seeds}, {k: b[k] for k in seeds}


def _mean(values: dict[int, float]) -> float:
    return float(np.mean(list(values.values())))


STATEMENTS = {
    "alignment": "The tied matrix T resembles the untied output matrix O, not the input matrix I.",
    "overlap": "T's nearest neighbours agree with O's more than with I's.",
    "map": "On the aligned map, T's neighbourhood graph lies closer to O's than to I's.",
    "gradient": "Output-side gradients dominate what reaches the tied matrix early in training.",
    "scaling": "Scaling up the input-side gradient moves T towards I and away from O.",
    "lens": "Early layers of tied models are harder to read: higher tuned-lens KL.",
    "published": "In real models the output matrix moves away from its start faster and further than the input matrix.",
    **sweep_claims.STATEMENTS,
    **mechanism_claims.STATEMENTS,
}

REPORTED_NOTE = "the paper's printed value, shown for reference: not evidence, so no verdict is computed"


# -- the claims -------------------------------------------------------------------------------------

def alignment(s: Summary) -> Claim:
    st = STATEMENTS["alignment"]
    t1 = s.paper.table1 if s.paper else None
    if s.kind == "published":
        t1 = t1 or reference.TABLE1["olmo"]
        return Claim("alignment", st, REPORTED, f"O→T {t1['O->T']['linear']:.3f} vs I→T {t1['I->T']['linear']:.3f}",
                     note=f"The paper's Table 1 (OLMo-1B, linear map, in-sample): {REPORTED_NOTE}.")
    paper = (f"{_paper_label(s)}: O→T {t1['O->T']['linear']:.3f} vs I→T {t1['I->T']['linear']:.3f} (linear, "
             "in-sample)" if t1 else "")
    diffs, o, i = _paired(s, "O->T linear in-sample", "I->T linear in-sample")
    held, ho, hi_ = _paired(s, "O->T linear held-out", "I->T linear held-out")
    al = s.alignment
    lin = {c: (al.get(c) or {}).get("linear") or {} for c in ("O->T", "I->T")}
    ceiling = None
    if diffs:
        d, ov, iv, n = decide(diffs), _mean(o), _mean(i), len(diffs)
        ceiling = ceiling_mean(s, "T'->T linear in-sample", list(o))
    elif lin["O->T"].get("in_sample") is not None and lin["I->T"].get("in_sample") is not None:
        ov, iv, n = lin["O->T"]["in_sample"], lin["I->T"]["in_sample"], 1
        d = decide([ov - iv])
    else:
        return Claim("alignment", st, NO_DATA, note="This cache holds no in-sample linear alignment.", needs="toylab")
    second = ""
    if held:
        second = f"; held-out: O→T {_mean(ho):.3f} vs I→T {_mean(hi_):.3f}"
    elif lin["O->T"].get("held_out") is not None and lin["I->T"].get("held_out") is not None:
        second = f"; held-out: O→T {lin['O->T']['held_out']:.3f} vs I→T {lin['I->T']['held_out']:.3f}"
    ours = _toy(s, against(("O→T", "I→T"), (ov, iv), ceiling, "T'→T") + f" (linear, in-sample, {_runs(n)}){second}")
    return Claim("alignment", st, d.verdict, ours, paper,
                 "Mean per-token cosine after a linear map fitted and scored on every token (the paper's "
                 f"protocol); held-out: fitted on 80% of the tokens, scored on the rest (a second figure). Decided "
                 f"on O→T minus I→T in-sample: {d.text}." + (" " + CEILING_NOTE if ceiling else ""), n_runs=d.n)


def overlap(s: Summary) -> Claim:
    st = STATEMENTS["overlap"]
    t5 = s.paper.table5 if s.paper else None
    if s.kind == "published":
        t5 = t5 or reference.TABLE5["olmo"]
        return Claim("overlap", st, REPORTED, f"T~O {t5['T~O']:.3f} vs T~I {t5['T~I']:.3f}",
                     note=f"The paper's Table 5 (OLMo-1B, overlap@10): {REPORTED_NOTE}.")
    diffs, to, ti = _paired(s, "overlap@10 T~O", "overlap@10 T~I")
    ov = s.overlap_at_10
    ceiling = None
    if diffs:
        d, a, b, n = decide(diffs), _mean(to), _mean(ti), len(diffs)
        ceiling = ceiling_mean(s, "overlap@10 T~T'", list(to))
    elif ov.get("T~O") is not None and ov.get("T~I") is not None:
        a, b, n = ov["T~O"], ov["T~I"], 1
        d = decide([a - b])
    else:
        return Claim("overlap", st, NO_DATA, note="This cache holds no neighbour lists.", needs="toylab")
    paper = f"{_paper_label(s)}: T~O {t5['T~O']:.3f} vs T~I {t5['T~I']:.3f}" if t5 else ""
    return Claim("overlap", st, d.verdict,
                 _toy(s, "overlap@10 " + against(("T~O", "T~I"), (a, b), ceiling, "T~T'") + f" ({_runs(n)})"), paper,
                 f"Share of each token's 10 nearest neighbours two matrices have in common. Decided on T~O minus "
                 f"T~I: {d.text}." + (" " + CEILING_NOTE if ceiling else ""), n_runs=d.n)


def spectral_map(s: Summary) -> Claim:
    st = STATEMENTS["map"]
    diffs, o, i = _paired(s, "spectral T~I", "spectral T~O")
    sp = s.spectral
    ceiling = ""
    if diffs:
        d, to, ti, n = decide(diffs), _mean(i), _mean(o), len(diffs)
        c = ceiling_mean(s, "spectral T~T'", list(o))
        ceiling = f"; two runs of T, T~T' {c:.3f}" if c is not None else ""
    elif sp.get("T~O") is not None and sp.get("T~I") is not None:
        to, ti, n = sp["T~O"], sp["T~I"], 1
        d = decide([ti - to])
    else:
        return Claim("map", st, NO_DATA, note="This cache holds no spectral distance.", needs="toylab")
    which = ", seed 0's twins" if s.kind == "toylab" and n == 1 else ""
    return Claim("map", st, d.verdict,
                 _toy(s, f"spectral distance T~O {to:.3f} vs T~I {ti:.3f}{ceiling} ({_runs(n)}{which})"),
                 note="Distance between the k-NN graphs of two matrices; lower is more alike (two runs of T set the "
                      f"floor). Decided on T~I minus T~O: {d.text}.", n_runs=d.n)


def _first_tied_run(prov: dict) -> str | None:
    plain = [r for r in prov if not r.startswith("untied") and "scaled" not in r]
    return plain[0] if plain else None


def gradient(s: Summary) -> Claim:
    st = STATEMENTS["gradient"]
    ps = s.paper.output_share if s.paper else None
    paper = f"{_paper_label(s)}: {ps['early']:.1%} over steps 1-{ps['early_steps']:,} (the authors' input proxy)" \
        if ps else ""
    proxy = list(_per_seed(s, "output share early (proxy input)").values())
    exact = list(_per_seed(s, "output share early").values())
    prov = s.gradient_provenance or {}
    run = _first_tied_run(prov)
    early_steps = (prov.get(run) or {}).get("early_steps", 0) if run else 0
    if proxy:  # the per-seed shares with the authors' proxy: the quantity beside the paper's
        values, side = proxy, "proxy"
        second = f"; with the exact input norm {np.mean(exact):.1%}" if exact else ""
    elif exact:
        values, side, second = exact, "exact", ""
    elif run is not None and ((prov[run].get("beside_paper") or {}).get("early", prov[run].get("early"))) is not None:
        b = prov[run].get("beside_paper") or {}
        values = [b.get("early", prov[run].get("early"))]
        side, second = b.get("input", "exact"), ""
    else:
        return Claim("gradient", st, NO_DATA, note="This cache holds no gradient log of a tied run.", needs="toylab")
    d = decide([v - 0.5 for v in values])
    label = ("the authors' input proxy" if side in ("proxy", "effective", "plain") else
             "the exact input norm" if side == "exact" else f"input: {side}")
    ours = _toy(s, f"output share {np.mean(values):.1%} over steps ≤ {early_steps:,} ({label}, "
                   f"{_runs(len(values))}){second}")
    paper_note = "" if side in ("proxy", "effective", "plain") else " Not the paper's quantity: its input side is the authors' proxy."
    return Claim("gradient", st, d.verdict, ours, paper,
                 "Mean over early steps of output / (input + output) gradient norm; above 50%: the output side "
                 f"dominates. Decided on the share minus one half, as shown: {d.text}.{paper_note}", n_runs=d.n)


def scaling(s: Summary) -> Claim:
    st = STATEMENTS["scaling"]
    t2 = s.table2 or {}
    if s.kind == "published":
        rows = t2.get("paper") or {}
        base = [r for k, r in rows.items() if r["input_grad_scale"] == 1 and "Table 2" in k]
        up = [r for k, r in rows.items() if r["input_grad_scale"] > 1 and "Table 2" in k]
        if not base or not up:
            return Claim("scaling", st, NO_DATA, needs="toylab")
        b, u = base[0], up[0]
        return Claim("scaling", st, REPORTED,
                     f"to I {b['I']:.3f} → {u['I']:.3f}, to O {b['O']:.3f} → {u['O']:.3f} (x{u['input_grad_scale']:g})",
                     note="The paper's Table 2 (OLMo-1B, 10k steps, " + reference.TABLE2_METHOD_LABEL
                          + f"): {REPORTED_NOTE}.")
    method = reference.TABLE2_METHOD if reference.TABLE2_METHOD in t2 else next(iter(t2), None)
    if method is None:
        return Claim("scaling", st, NO_DATA, note="This cache has no run with a scaled input gradient.",
                     needs="toylab")
    by_seed: dict[str, dict[float, dict]] = {}
    for run, r in t2[method].items():
        by_seed.setdefault(run.split("/")[-1], {})[float(r["input_grad_scale"])] = r
    pairs = [(d[1.0], d[max(d)]) for d in by_seed.values() if 1.0 in d and max(d) > 1.0]
    if not pairs:
        return Claim("scaling", st, NO_DATA, note="No seed has both a plain and a scaled tied run.",
                     needs="toylab")
    to_i = decide([u["I"] - b["I"] for b, u in pairs])
    from_o = decide([b["O"] - u["O"] for b, u in pairs])
    factor = max(max(d) for d in by_seed.values())

    def avg(which: int, m: str) -> float:
        return sum(p[which][m] for p in pairs) / len(pairs)

    paper = (f"{_paper_label(s)}: to I {reference.TABLE2[1.0]['I']:.3f} → {reference.TABLE2[5.0]['I']:.3f}, "
             f"to O {reference.TABLE2[1.0]['O']:.3f} → {reference.TABLE2[5.0]['O']:.3f} (x5)")
    name = "the paper's method" if method == reference.TABLE2_METHOD else f"map: {method}, not the paper's"
    return Claim("scaling", st, combine([to_i.verdict, from_o.verdict]),
                 _toy(s, f"to I {avg(0, 'I'):.3f} → {avg(1, 'I'):.3f}, to O {avg(0, 'O'):.3f} → {avg(1, 'O'):.3f} "
                         f"(x{factor:g}, {_runs(len(pairs))})"), paper,
                 f"Mean per-token cosine of the tied matrix to the untied I and O ({name}). Decided on both moves, "
                 f"towards I: {to_i.verdict} ({to_i.text}); away from O: {from_o.verdict} ({from_o.text}).",
                 n_runs=to_i.n)


def lens(s: Summary) -> Claim:
    st = STATEMENTS["lens"]
    g = (s.analysis("lens") or {}).get("gap")
    paper_kl = s.paper.tuned_lens_kl if s.paper else None
    if s.kind == "published":
        if not paper_kl:
            return Claim("lens", st, NO_DATA, needs="toylab")
        return Claim("lens", st, REPORTED, f"first 2 layers: tied {np.mean(paper_kl['tied'][:2]):.2f} vs untied "
                                           f"{np.mean(paper_kl['untied'][:2]):.2f} bits",
                     note=f"The paper's printed layerwise KL (OLMo-1B, the authors' indexing): {REPORTED_NOTE}.")
    diffs, tied_kl, untied_kl = _paired(s, "tuned-lens KL early tied", "tuned-lens KL early untied")
    if diffs:
        g = {"tied": _mean(tied_kl), "untied": _mean(untied_kl), "layers": EARLY_LAYERS}
    elif not g:
        return Claim("lens", st, NO_DATA, note="This cache holds no tuned lens.", needs="toylab")
    d = decide(diffs or [g["tied"] - g["untied"]])
    n = g["layers"]
    paper = ""
    if paper_kl:
        paper = (f"{_paper_label(s)}: tied {sum(paper_kl['tied'][:n]) / n:.2f} vs untied "
                 f"{sum(paper_kl['untied'][:n]) / n:.2f} bits, with the authors' shifted indexing (translator l-1 on "
                 "hidden state l): not the same quantity layer by layer, compare the direction only")
    which = "seed 0's twins, " if s.kind == "toylab" and d.n == 1 else ""
    return Claim("lens", st, d.verdict, _toy(s, f"first {n} layers: tied {g['tied']:.2f} vs untied {g['untied']:.2f} "
                                                f"bits ({which}{_runs(d.n)}, a by-the-book tuned lens per model)"),
                 paper, f"Mean tuned-lens KL to the final output over the first layers. Decided on tied minus untied: "
                 f"{d.text}.", n_runs=d.n)


def moved(s: Summary) -> list[tuple[str, list[float], list[float]]]:
    """(run, I, O): each untied run's mean cosine of I and of O to their start at every checkpoint
    (the summary's evolution; a toy-lab run or a released model)."""
    rows = []
    for run, m in (s.evolution or {}).items():
        if "I" in m and "O" in m and m["I"].get("cos_init") and m["O"].get("cos_init"):
            rows.append((run.split("/")[-1] if "/" in run and s.kind == "published" else run,
                         list(m["I"]["cos_init"]), list(m["O"]["cos_init"])))
    return rows


def published(s: Summary) -> Claim:
    """Faster and further: per model, O's cosine to its start below I's at every released
    checkpoint after the start (faster: ahead all along) and so at the last (further)."""
    st = STATEMENTS["published"]
    if s.kind != "published":
        return Claim("published", st, NO_DATA, note="The authors' released measurements are in the published "
                                                     "cache.", needs="published")
    rows = moved(s)
    if not rows:
        return Claim("published", st, NO_DATA, needs="published")
    ahead = [[o < i for i, o in zip(cos_i[1:], cos_o[1:])] for _, cos_i, cos_o in rows]
    holds = [bool(a) and all(a) for a in ahead]
    further = [cos_o[-1] < cos_i[-1] for _, cos_i, cos_o in rows]
    verdict = HOLDS if all(holds) else FAILS if not any(further) else MIXED
    shown = "; ".join(f"{name} I {cos_i[-1]:.2f}, O {cos_o[-1]:.2f} at the last step, O below I at {sum(a)} of "
                      f"{len(a)} released steps" for (name, cos_i, cos_o), a in zip(rows, ahead))
    ours = f"cosine to the start: {shown}"
    if verdict == MIXED:
        ours += f" (faster and further in {sum(holds)} of {len(holds)} models)"
    return Claim("published", st, verdict, ours,
                 note="The authors' released checkpoint measurements (Figure 3), not recomputed here. Decided model by "
                      "model (different models are not repeats of one run, so no interval over them): 'faster' where "
                      "O is further from its start than I at every released step after the first, 'further' at the "
                      f"last; both in {sum(holds)} of {len(holds)}.", n_runs=len(holds))


CLAIMS: dict[str, Callable[[Summary], Claim]] = {
    "alignment": alignment, "overlap": overlap, "map": spectral_map, "gradient": gradient,
    **mechanism_claims.CLAIMS, "scaling": scaling, "lens": lens, "published": published,
    **sweep_claims.CLAIMS,
}
assert tuple(CLAIMS) == IDS


NEEDS_TWIN = ("alignment", "overlap", "map", "scaling", "lens")
"""The claims that compare the tied matrix (or model) with an untied twin: none holds data on one
tied model alone (a cache of kind ``model``)."""


def one_model(s: Summary, c: Claim) -> Claim:
    """A claim ``c`` on a cache of one tied model: those that need an untied twin read "no data" and
    say what would answer them, with what the cache does hold beside the question."""
    if s.kind != "model" or c.key not in NEEDS_TWIN:
        return c
    held = ""
    tuned = (((s.analysis("lens") or {}).get("kl") or {}).get("tied") or {}).get("tuned") or []
    first = [x for x in tuned[:EARLY_LAYERS] if x is not None]
    if c.key == "lens" and first:
        held = (f" This model's mean tuned-lens KL over its first {len(first)} hidden states is "
                f"{sum(first) / len(first):.2f} bits, a number with nothing to set it against here.")
    what = ("a tied/untied pair trained alike (`python -m precompute pair --tied A --untied B`)" if c.key != "scaling"
            else "tied runs trained with a scaled input gradient (the toy lab)")
    return Claim(c.key, c.statement, NO_DATA, note=f"This cache holds one tied model and no untied twin; the claim "
                 f"compares it with one: {what} would answer it, as the toy lab's twins do.{held}", needs="toylab")


def claims(s: Summary) -> dict[str, Claim]:
    """Every claim for this cache's summary, in the tour's order."""
    return {k: one_model(s, f(s)) for k, f in CLAIMS.items()}


def as_json(s: Summary) -> dict[str, dict[str, str]]:
    """``summary --json``'s ``claims``: {id: {"verdict", "ours", "paper", "note", "statement", "n_runs"}}."""
    return {k: {f: getattr(c, f) for f in ("verdict", "ours", "paper", "note", "statement", "n_runs")}
            for k, c in claims(s).items()}
