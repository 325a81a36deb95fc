"""The paper's claims, each with this cache's numbers and a verdict computed from them.

One function per claim reads :func:`tying.cache.summary.summarize`'s dict and returns a
:class:`Claim`; the tour, the Overview's first screen, the figure pack's captions and the
static site all say the same sentences. Nothing here is hard-coded: a cache whose numbers
go the other way gets "does not hold", a cache without the data gets "no data" and names
the kind of cache that has it.

Verdicts:
- ``holds``: the direction the paper reports, in every seed the cache has;
- ``mixed``: in some seeds only (the sentence says how many);
- ``does not hold``: in no seed;
- ``no claim``: the data exist but cannot decide (the sweep's intervals include zero);
- ``no data``: this cache does not hold the measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tying.cache import reference

HOLDS, MIXED, FAILS, NO_CLAIM, NO_DATA = "holds", "mixed", "does not hold", "no claim", "no data"
VERDICTS = (HOLDS, MIXED, FAILS, NO_CLAIM, NO_DATA)


@dataclass(frozen=True)
class Claim:
    key: str
    statement: str  # the paper's claim, one line
    verdict: str  # one of VERDICTS
    ours: str = ""  # this cache's numbers, e.g. "O→T 0.865 vs I→T 0.456 (mean of 3 seeds)"
    paper: str = ""  # the paper's numbers beside them, where it has some
    note: str = ""  # what the numbers are, or which cache holds them (no data)
    needs: str = ""  # the cache kind that holds the data ("toylab", "published", "sweep")

    @property
    def headline(self) -> str:
        """The large line: the numbers and the verdict."""
        return f"{self.ours}: {self.verdict}" if self.ours else self.verdict

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "statement": self.statement, "verdict": self.verdict, "ours": self.ours,
                "paper": self.paper, "note": self.note, "headline": self.headline}


def _verdict(holds: list[bool]) -> str:
    if not holds:
        return NO_DATA
    if all(holds):
        return HOLDS
    return MIXED if any(holds) else FAILS


def _seeds_text(holds: list[bool]) -> str:
    n = len(holds)
    if n <= 1:
        return ""
    if all(holds) or not any(holds):
        return f" (mean of {n} seeds)"
    return f" (mean of {n} seeds; in {sum(holds)} of {n})"


def _direction(s: dict, name: str, fallback: bool) -> list[bool]:
    d = (s.get("directions") or {}).get(name)
    return [bool(h) for h in d["holds"]] if d and d.get("holds") else [bool(fallback)]


def _mean(s: dict, metric: str, value: float) -> float:
    v = (s.get("seeds") or {}).get(metric)
    return v["mean"] if v and v.get("n", 0) > 1 and v.get("mean") is not None else value


def _paper_label(s: dict) -> str:
    preset = (s.get("paper") or {}).get("preset")
    return "paper (OLMo-1B)" if preset in (None, "olmo") else f"paper ({preset})"


STATEMENTS = {
    "alignment": "The tied matrix T resembles the untied output matrix O, not the input matrix I.",
    "overlap": "T's nearest neighbours agree with O's more than with I's.",
    "map": "On the aligned map, T's neighbourhood graph lies closer to O's than to I's.",
    "gradient": "Output-side gradients dominate what reaches the tied matrix early in training.",
    "scaling": "Scaling up the input-side gradient moves T towards I and away from O.",
    "lens": "Early layers of tied models are harder to read: higher tuned-lens KL.",
    "published": "In real models the output matrix moves away from its start faster than the input matrix.",
    "sweep": "Beyond the paper: the tied matrix stays output-like at every width; untying's pay-off is what the "
             "intervals show.",
}


def alignment(s: dict) -> Claim:
    st = STATEMENTS["alignment"]
    if s.get("kind") == "published":
        t1 = (s.get("paper") or {}).get("table1") or reference.TABLE1["olmo"]
        o, i = t1["O->T"]["linear"], t1["I->T"]["linear"]
        return Claim("alignment", st, _verdict([o > i]), f"O→T {o:.3f} vs I→T {i:.3f}",
                     note="The paper's printed Table 1 (OLMo-1B, linear map, in-sample).")
    al = s.get("alignment") or {}
    o = ((al.get("O->T") or {}).get("linear") or {}).get("held_out")
    i = ((al.get("I->T") or {}).get("linear") or {}).get("held_out")
    if o is None or i is None:
        return Claim("alignment", st, NO_DATA, note="This cache holds no alignment.", needs="toylab")
    holds = _direction(s, "O->T above I->T (linear, held-out)", o > i)
    o, i = _mean(s, "O->T linear held-out", o), _mean(s, "I->T linear held-out", i)
    t1 = (s.get("paper") or {}).get("table1")
    paper = (f"{_paper_label(s)}: O→T {t1['O->T']['linear']:.3f} vs I→T {t1['I->T']['linear']:.3f}"
             if t1 else "")
    return Claim("alignment", st, _verdict(holds), f"O→T {o:.3f} vs I→T {i:.3f}{_seeds_text(holds)}", paper,
                 "Mean per-token cosine after a linear map, scored on held-out tokens.")


def overlap(s: dict) -> Claim:
    st = STATEMENTS["overlap"]
    if s.get("kind") == "published":
        t5 = (s.get("paper") or {}).get("table5") or reference.TABLE5["olmo"]
        return Claim("overlap", st, _verdict([t5["T~O"] > t5["T~I"]]),
                     f"T~O {t5['T~O']:.3f} vs T~I {t5['T~I']:.3f}",
                     note="The paper's printed Table 5 (OLMo-1B, overlap@10).")
    ov = s.get("overlap_at_10") or {}
    to, ti = ov.get("T~O"), ov.get("T~I")
    if to is None or ti is None:
        return Claim("overlap", st, NO_DATA, note="This cache holds no neighbour lists.", needs="toylab")
    holds = _direction(s, "T~O above T~I (overlap@10)", to > ti)
    to, ti = _mean(s, "overlap@10 T~O", to), _mean(s, "overlap@10 T~I", ti)
    t5 = (s.get("paper") or {}).get("table5")
    paper = f"{_paper_label(s)}: T~O {t5['T~O']:.3f} vs T~I {t5['T~I']:.3f}" if t5 else ""
    return Claim("overlap", st, _verdict(holds), f"overlap@10 T~O {to:.3f} vs T~I {ti:.3f}{_seeds_text(holds)}",
                 paper, "Share of each token's 10 nearest neighbours two matrices have in common.")


def spectral_map(s: dict) -> Claim:
    st = STATEMENTS["map"]
    sp = s.get("spectral") or {}
    to, ti = sp.get("T~O"), sp.get("T~I")
    if to is None or ti is None:
        return Claim("map", st, NO_DATA, note="This cache holds no spectral distance.", needs="toylab")
    return Claim("map", st, _verdict([to < ti]), f"spectral distance T~O {to:.3f} vs T~I {ti:.3f}",
                 note="Distance between the k-NN graphs of two matrices; lower is more alike.")


def _first_tied_run(prov: dict) -> str | None:
    plain = [r for r in prov if not r.startswith("untied") and "scaled" not in r]
    return plain[0] if plain else None


def gradient(s: dict) -> Claim:
    st = STATEMENTS["gradient"]
    prov = s.get("gradient_provenance") or {}
    run = _first_tied_run(prov)
    if run is None:
        return Claim("gradient", st, NO_DATA, note="This cache holds no gradient log of a tied run.",
                     needs="toylab")
    p = prov[run]
    b = p.get("beside_paper") or {}
    early = b.get("early", p.get("early"))
    if early is None:
        return Claim("gradient", st, NO_DATA, note="The gradient log has no early steps.", needs="toylab")
    holds = _direction(s, "output share early above 1/2", early > 0.5)
    proxy = b.get("input") == "proxy"
    early = _mean(s, "output share early (proxy input)" if proxy else "output share early", early)
    ps = (s.get("paper") or {}).get("output_share")
    paper = f"{_paper_label(s)}: {ps['early']:.1%} over steps 1-{ps['early_steps']:,}" if ps else ""
    return Claim("gradient", st, _verdict(holds),
                 f"output share {early:.1%} over steps ≤ {p.get('early_steps', 0):,}{_seeds_text(holds)}", paper,
                 "Mean over early steps of output / (input + output) gradient norm; above 50%: the output side "
                 "dominates.")


def scaling(s: dict) -> Claim:
    st = STATEMENTS["scaling"]
    t2 = s.get("table2") or {}
    if s.get("kind") == "published":
        rows = t2.get("paper") or {}
        base = [r for k, r in rows.items() if r["input_grad_scale"] == 1 and "Table 2" in k]
        up = [r for k, r in rows.items() if r["input_grad_scale"] > 1 and "Table 2" in k]
        if not base or not up:
            return Claim("scaling", st, NO_DATA, needs="toylab")
        b, u = base[0], up[0]
        return Claim("scaling", st, _verdict([u["I"] > b["I"] and u["O"] < b["O"]]),
                     f"to I {b['I']:.3f} → {u['I']:.3f}, to O {b['O']:.3f} → {u['O']:.3f} (x{u['input_grad_scale']:g})",
                     note="The paper's printed Table 2 (OLMo-1B, 10k steps, " + reference.TABLE2_METHOD_LABEL + ").")
    method = reference.TABLE2_METHOD if reference.TABLE2_METHOD in t2 else next(iter(t2), None)
    if method is None:
        return Claim("scaling", st, NO_DATA, note="This cache has no run with a scaled input gradient.",
                     needs="toylab")
    rows = t2[method]
    by_seed: dict[str, dict[float, dict]] = {}
    for run, r in rows.items():
        seed = run.split("/")[-1]
        by_seed.setdefault(seed, {})[float(r["input_grad_scale"])] = r
    pairs = [(d[1.0], d[max(d)]) for d in by_seed.values() if 1.0 in d and max(d) > 1.0]
    if not pairs:
        return Claim("scaling", st, NO_DATA, note="No seed has both a plain and a scaled tied run.",
                     needs="toylab")
    holds = [u["I"] > b["I"] and u["O"] < b["O"] for b, u in pairs]
    factor = max(max(d) for d in by_seed.values())

    def avg(which: int, m: str) -> float:
        return sum(p[which][m] for p in pairs) / len(pairs)

    paper = (f"{_paper_label(s)}: to I {reference.TABLE2[1.0]['I']:.3f} → {reference.TABLE2[5.0]['I']:.3f}, "
             f"to O {reference.TABLE2[1.0]['O']:.3f} → {reference.TABLE2[5.0]['O']:.3f} (x5)")
    name = "the paper's method" if method == reference.TABLE2_METHOD else f"map: {method}, not the paper's"
    return Claim("scaling", st, _verdict(holds),
                 f"to I {avg(0, 'I'):.3f} → {avg(1, 'I'):.3f}, to O {avg(0, 'O'):.3f} → {avg(1, 'O'):.3f} "
                 f"(x{factor:g}){_seeds_text(holds)}", paper,
                 f"Mean per-token cosine of the tied matrix to the untied I and O ({name}).")


def lens(s: dict) -> Claim:
    st = STATEMENTS["lens"]
    g = (s.get("lens") or {}).get("gap")
    if not g:
        return Claim("lens", st, NO_DATA, note="This cache holds no tuned lens.", needs="toylab")
    printed = s.get("kind") == "published"
    paper_kl = (s.get("paper") or {}).get("tuned_lens_kl")
    paper = ""
    if paper_kl and not printed:
        n = g["layers"]
        paper = (f"{_paper_label(s)}: tied {sum(paper_kl['tied'][:n]) / n:.2f} vs untied "
                 f"{sum(paper_kl['untied'][:n]) / n:.2f} bits")
    return Claim("lens", st, _verdict([g["tied"] > g["untied"]]),
                 f"first {g['layers']} layers: tied {g['tied']:.2f} vs untied {g['untied']:.2f} bits", paper,
                 "The paper's printed layerwise KL (OLMo-1B)." if printed else
                 "Mean tuned-lens KL to the final output over the first layers.")


def moved(s: dict) -> list[tuple[str, float, float]]:
    """(run, I, O): each untied run's mean cosine of I and of O to their start at its last
    checkpoint (the summary's evolution; a toy-lab run or a released model)."""
    rows = []
    for run, m in (s.get("evolution") or {}).items():
        if "I" in m and "O" in m and m["I"].get("cos_init") and m["O"].get("cos_init"):
            rows.append((run.split("/")[-1] if "/" in run and s.get("kind") == "published" else run,
                         m["I"]["cos_init"][-1], m["O"]["cos_init"][-1]))
    return rows


def published(s: dict) -> Claim:
    st = STATEMENTS["published"]
    if s.get("kind") != "published":
        return Claim("published", st, NO_DATA, note="The authors' released measurements are in the published "
                                                     "cache.", needs="published")
    rows = moved(s)
    if not rows:
        return Claim("published", st, NO_DATA, needs="published")
    holds = [o < i for _, i, o in rows]
    shown = "; ".join(f"{name} I {i:.2f}, O {o:.2f}" for name, i, o in rows)
    verdict = _verdict(holds)
    ours = f"cosine to the start at the last released step: {shown}"
    if verdict == MIXED:
        ours += f" (in {sum(holds)} of {len(holds)} models)"
    return Claim("published", st, verdict, ours,
                 note="The authors' released checkpoint measurements (Figure 3), not recomputed here.")


def sweep(s: dict) -> Claim:
    st = STATEMENTS["sweep"]
    cells = s.get("sweep_cells") or []
    if not cells:
        return Claim("sweep", st, NO_DATA, note="The width sweep is in the sweep cache.", needs="sweep")
    cells = sorted(cells, key=lambda c: (c["vocab_size"], c["d_model"]))
    bias_ok = [c["bias_linear"] - (c.get("bias_linear_half") or 0) > 0 for c in cells]
    gap = "loss_gap_matched" if all(c.get("loss_gap_matched") is not None for c in cells) else "loss_gap"
    ahead, behind = [], []
    for c in cells:
        mean, half = c.get(gap), c.get(f"{gap}_half")
        if mean is None or half is None:
            continue
        if mean + half < 0:
            ahead.append(c["d_model"])
        elif mean - half > 0:
            behind.append(c["d_model"])
    against = "the parameter-matched tied model" if gap == "loss_gap_matched" else "the tied twin"
    parts = [f"T output-like (bias > 0) at {sum(bias_ok)} of {len(cells)} widths"]
    if ahead:
        parts.append(f"untied ahead of {against} at d = {', '.join(map(str, ahead))}")
    if behind:
        parts.append(f"behind it at d = {', '.join(map(str, behind))}")
    if not ahead and not behind:
        parts.append(f"loss gap against {against}: every 95% interval includes zero, no claim")
    verdict = _verdict(bias_ok)
    return Claim("sweep", st, verdict, "; ".join(parts),
                 note="95% intervals of the mean over seeds; a claim only where an interval excludes zero.")


CLAIMS: dict[str, Callable[[dict], Claim]] = {
    "alignment": alignment, "overlap": overlap, "map": spectral_map, "gradient": gradient, "scaling": scaling,
    "lens": lens, "published": published, "sweep": sweep,
}


def claims(s: dict[str, Any]) -> dict[str, Claim]:
    """Every claim for this cache's summary, in the tour's order."""
    return {k: f(s) for k, f in CLAIMS.items()}
