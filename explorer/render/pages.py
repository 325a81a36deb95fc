"""The app's pages: the fourth registry joined by analysis name (tying/registry.py says which).

A :class:`Page` is a script ``views/<path>.py`` served at ``/<path>`` (the default page at "/"),
its menu title and icon, and the analyses whose tables it shows (by name, as the cache's
registry spells them). The app's menu and page list, the README's page table and the tests'
page lists read from here; no Streamlit, so the read-side commands (the README generator) can.
"""

from __future__ import annotations

from dataclasses import dataclass

from tying import registry


@dataclass(frozen=True)
class Page:
    """A page of the app and the analyses it shows."""

    path: str  # the script views/<path>.py and the address /<path>
    title: str
    icon: str  # a Material Symbols icon (":material/<name>:"): no emoji font needed, as lecture-hall PCs may lack one
    shows: tuple[str, ...] = ()  # analyses (registry names) whose tables it shows
    default: bool = False  # served at "/", for every cache
    folder: str | None = None  # the kind of cache of the folder it shows ("sweep", "mechanism"), not the picked cache
    about: str = ""  # what it shows, one line (the README's page table)
    lacks: str = ""  # what a cache without its table lacks, as the page says so ("alignment results")
    adds: str | None = None  # the command that adds it; None: the pair command without --skip of its analysis

    @property
    def script(self) -> str:
        return f"{self.path}.py"

    @property
    def command(self) -> str:
        """The command that adds the page's table to a cache that lacks it."""
        return self.adds or f"python -m precompute pair ... (without --skip {self.shows[0]})"

    @property
    def needs(self) -> str | None:
        """The table of the picked cache whose rows the page shows (its first analysis's first
        table); None: every cache has the page (the default page, and a page that shows no analysis)."""
        return None if self.default or not self.shows else next(iter(registry.BY_NAME[self.shows[0]].tables))


PAGES: tuple[Page, ...] = (
    Page("tour", "Tour", ":material/school:",
         about="the paper's argument in eleven steps, one screen and one verdict each, for a class or a talk"),
    # the default page, served at "/" (explorer/frame.py: /overview and /home are its aliases)
    Page("overview", "Overview", ":material/home:", default=True, shows=("spectral",),
         about="the set-up diagram, T, I and O in one sentence and a Start the tour button; then the paper's claims "
               "with this cache's numbers and verdicts, the headline numbers beside the paper's"),
    Page("alignment", "Alignment", ":material/compare_arrows:", shows=("alignment", "load"),
         about="per-token cosine of O->T against I->T by map and split (Figure 1); best- and worst-aligned tokens; "
               "norm vs frequency (Figure 5)",
         lacks="alignment results"),
    Page("neighbours", "Neighbours", ":material/hub:", shows=("neighbours",),
         about="a token's nearest neighbours in T, I and O side by side; overlap@k (Table 5)",
         lacks="neighbour lists"),
    Page("cka", "CKA", ":material/grid_on:", shows=("cka",),
         about="linear CKA (debiased) of T~O, T~I and I~O: how alike the matrices are as wholes, blind to rotations "
               "and scale",
         lacks="CKA results"),
    Page("projection", "Projection", ":material/map:", shows=("umap",),
         about="aligned UMAP maps of I, T and O; click or search a token to follow it across the three",
         lacks="UMAP projection"),
    Page("lens", "Lens", ":material/layers:", shows=("lens",),
         about="tuned- and logit-lens KL per layer, and the prediction trajectory of your own text",
         lacks="lens results", adds="python -m precompute lens ..."),
    Page("dynamics", "Training dynamics", ":material/trending_up:", shows=("training",),
         about="gradient provenance (Figure 4), embedding evolution (Figure 3), input-gradient scaling (Table 2), "
               "beside the paper's real runs",
         lacks="training dynamics", adds="python -m precompute demo (or evolution / grads)"),
    Page("mechanism", "Why?", ":material/psychology_alt:", folder="mechanism",
         about="the mechanism lab: does balancing the output side's size (gradient or AdamW update), matching its "
               "reach, or SGD move T toward I, or only away from O, beyond what a rerun changes? 95% intervals over "
               "seeds"),
    Page("sweep", "Sweep", ":material/straighten:", folder="sweep",
         about="the width sweep: T's bias and the loss gap against width, with 95% intervals over seeds"),
)
"""The app's pages in menu order: the tour and the overview (every cache), the analyses' pages,
and the mechanism lab and the width sweep of the cache folder."""

BY_PATH = {p.path: p for p in PAGES}

TAB_ICON = ("<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'>"
            "<rect x='2' y='3' width='12' height='12' rx='3' fill='#0072B2'/>"
            "<rect x='18' y='3' width='12' height='12' rx='3' fill='#D55E00'/>"
            "<rect x='2' y='18' width='28' height='11' rx='3' fill='#CC79A7'/></svg>")
"""The browser tab's icon: I (blue) and O (vermillion) above, one T (reddish purple, style.PALETTE)
spanning both below. SVG markup, which Streamlit sends as a data: URI: a Material symbol as the
page icon is fetched from Google's font server (nothing offline in a lecture hall), an emoji
needs an emoji font."""


def page_of(analysis: str) -> Page | None:
    """The page that shows an analysis's tables: one that lists it, else the page its figures name
    (an analysis that brings its own figures draws them on an existing page)."""
    from explorer.render import figures

    named = {f.page for f in figures.BY_ANALYSIS.get(analysis, ()) if f.page}
    return next((p for p in PAGES if analysis in p.shows or p.path in named), None)
