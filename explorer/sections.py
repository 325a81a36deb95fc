"""Page sections that more than one page shows (layout only: the numbers come from explorer.render (the *_tables modules))."""

from __future__ import annotations

import html

import streamlit as st

from explorer import frame
from explorer.render import seed_tables, style, tour
from tying.cache import claims as claims_mod
from tying.cache.summary_types import Summary
from tying.cache.verdicts import NO_DATA, VERDICT_STYLE


def across_seeds(s: Summary, intro: str | None = None) -> None:
    """The "Across seeds" section of a toy-lab summary ``s``: the headline numbers' mean and
    spread over seeds, then whether each of the paper's directions holds seed by seed."""
    st.subheader("Across seeds")
    if intro:
        st.markdown(intro)
    per_seed = seed_tables.seeds(s)
    frame.table(per_seed, numbers=("mean", "std"), height=style.fit_height(per_seed))
    d = seed_tables.directions(s)
    if len(d):
        frame.table(d)


def brought_figures(ref, page: str) -> None:
    """The figures the analyses brought for ``page`` (explorer.render.figures.drawn_on), each with its
    title, chart (or table), caption and export buttons: a page draws what an analysis added to it
    with no code of its own."""
    from explorer import export
    from explorer.render import figures

    for fig in figures.drawn_on(ref, page):
        st.subheader(fig.title)
        if fig.is_table:
            frame.table(fig.build(ref)[1])
        else:
            export.show(lambda fig=fig: fig.build(ref), f"{fig.name}-{ref.name}", key=fig.name,
                        spec_key=(fig.name, ref))
        st.caption(fig.caption)


def verdict_badge(verdict: str) -> str:
    """An HTML badge for a verdict: its sign and word on its colour."""
    colour, sign = VERDICT_STYLE[verdict]
    return (f"<span style='background:{colour};color:white;border-radius:6px;padding:0.1em 0.45em;"
            f"white-space:nowrap;font-weight:700'>{sign} {html.escape(verdict)}</span>")


def verdicts(s: Summary, presentation: bool = False) -> int:
    """The paper's claims with this cache's numbers and verdicts, one row each (claims the cache
    has no data for are left out, but for one tied model those that need an untied twin, which
    say so and what would answer them); returns how many rows were drawn."""
    rows = [c for c in tour.all_claims(s).values()
            if c.verdict != NO_DATA or (s.kind == "model" and c.key in claims_mod.NEEDS_TWIN)]
    if not rows:
        return 0
    size = "1.3rem" if presentation else "1rem"
    body = "".join(
        f"<tr><td style='padding:0.3em 0.6em 0.3em 0;vertical-align:top'>{verdict_badge(c.verdict)}</td>"
        f"<td style='padding:0.3em 0.6em;vertical-align:top'><b>{html.escape(c.statement)}</b><br>"
        f"{html.escape(c.ours or c.note)}" + (f"<span style='opacity:0.7'> · {html.escape(c.paper)}</span>" if c.paper else "")
        + "</td></tr>" for c in rows)
    st.html(f"<table style='border:none;font-size:{size};line-height:1.35;margin-bottom:0.5rem'>{body}</table>")
    return len(rows)
