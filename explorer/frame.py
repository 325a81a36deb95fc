"""What every page starts with: the picked cache, or a clear message and a stop; and which
pages a cache fills (the navigation lists only those)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import streamlit as st

from explorer import data, state
from explorer.render import identity, pages

DEMO_COMMAND = "python -m precompute demo"
SWEEP_COMMAND = "python -m precompute sweep"
MECHANISM_COMMAND = "python -m precompute mechanism"
NEEDS = {p.path: p.needs for p in pages.PAGES if p.needs}
"""Page (url path) -> the table whose rows it shows (the registry's); the tour and the Overview
show every cache, the Sweep the folder's sweep."""


def _page(views: str, spec: pages.Page, url_path: str | None = None) -> st.Page:
    """The page's st.Page; the default page's own address is reserved ("index": nobody types it) and it
    answers at "/", and at each alias as another st.Page of its script (``url_path``)."""
    own = "index" if spec.default else spec.path
    return st.Page(Path(views) / spec.script, title=spec.title, icon=spec.icon, url_path=url_path or own,
                   default=spec.default and url_path is None)


ALIASES = ("overview", "home")
"""Other addresses of the default page: /overview (what the menu links to: a link to "/" would
carry no path, and a copied link or a new tab would open the page it was on) and /home."""


@st.cache_resource(show_spinner=False)
def page_models(views: str) -> tuple[dict[str, st.Page], dict[str, st.Page]]:
    """The registry's pages (in menu order) and the default page's aliases (:data:`ALIASES`),
    built once per server from the scripts in ``views`` (building them resolves and checks every
    script: 6% of a loaded server's time when every run did it; and decorated here, not in app.py,
    so the decorator too runs once). The default page is served at "/"; the same script under
    each alias answers that address with no "Page not found"."""
    default = next(p for p in pages.PAGES if p.default)
    return ({spec.path: _page(views, spec) for spec in pages.PAGES},
            {name: _page(views, default, name) for name in ALIASES})


def default_pair(names: list[str]) -> str:
    """The cache a link without ``pair`` opens: the toy lab when there is one, else the first."""
    return "demo" if "demo" in names else names[0]


def picked(listing: list[data.CacheListing]) -> data.CacheListing:
    """The listing entry the URL's pair names (or the default one); ``listing`` is not empty."""
    names = [c.name for c in listing]
    name = state.get("pair")
    return listing[names.index(name if name in names else default_pair(names))]


def _ref(entry: data.CacheListing) -> data.CacheRef | None:
    """The entry's cache when it opens, else None."""
    if entry.error is not None:
        return None
    try:
        ref = data.CacheRef.of(Path(entry.path))
    except FileNotFoundError:
        return None
    return ref if data.open_error(ref) is None else None


def filled(listing: list[data.CacheListing]) -> set[str] | None:
    """The pages (url paths) with something to show for the picked cache; None when it does
    not open (every page then says so) or there is none."""
    if not listing:
        return None
    ref = _ref(picked(listing))
    if ref is None:
        return None
    shown = {p.path for p in pages.PAGES if not p.needs and not p.folder}
    shown |= {page for page, table in NEEDS.items() if data.has_rows(ref, table)}
    shown |= {p.path for p in pages.PAGES if p.folder and find_kind(p.folder) is not None}
    return shown


def current() -> data.CacheRef:
    """The cache picked in the sidebar; stops the page with a message when there is none."""
    listing = data.caches(str(data.cache_dir()))
    if not listing:
        st.info(f"No caches in `{data.cache_dir()}` yet. Build the toy lab with `{DEMO_COMMAND}`, "
                "or a real pair with `python -m precompute pair --tied A --untied B`.")
        st.stop()
    entry = picked(listing)
    if entry.error is None:
        try:
            ref = data.CacheRef.of(Path(entry.path))
            err = data.open_error(ref)
        except FileNotFoundError:
            ref, err = None, None
            entry = data.CacheListing(entry.name, entry.path, "the cache file disappeared", DEMO_COMMAND)
        if err is None and ref is not None:
            return ref
        if err is not None:
            entry = data.CacheListing(entry.name, entry.path, err.message, err.rebuild)
    st.error(f"Cannot open the cache '{entry.name}': {entry.error}")
    st.markdown("Rebuild it with:")
    st.code(entry.rebuild or DEMO_COMMAND, language="bash")
    st.stop()


FOLDER_KINDS = {"sweep": ("width sweep", SWEEP_COMMAND, "13-18 minutes on 2 cores", "sweep_cells"),
                "mechanism": ("mechanism lab", MECHANISM_COMMAND, "about 30 minutes on 2 cores", "mechanism")}
"""A folder page's cache kind -> (what it is, the command that builds one, how long it takes, the
summary field that holds its rows)."""


def find_kind(kind: str) -> data.CacheRef | None:
    """The picked cache when it is of ``kind`` ("sweep", "mechanism") with rows, else the first such
    cache in the folder (the one named like the kind first)."""
    listing = [c for c in data.caches(str(data.cache_dir())) if c.error is None]
    chosen = state.get("pair")
    ordered = sorted(listing, key=lambda c: (c.name != chosen, c.name != kind, c.name))
    field = FOLDER_KINDS[kind][3]
    for entry in ordered:
        ref = _ref(entry)
        if ref is not None and getattr(data.summary(ref), field):
            return ref
    return None


def find_sweep() -> data.CacheRef | None:
    """The picked cache when it is a width sweep, else the first sweep cache in the folder."""
    return find_kind("sweep")


def current_of(kind: str) -> data.CacheRef:
    """``find_kind``, or the command that builds one and a stop."""
    ref = find_kind(kind)
    if ref is None:
        what, command, takes, _ = FOLDER_KINDS[kind]
        quick = f" or `{command} --quick` (a few minutes)" if kind == "sweep" else ""
        st.info(f"No {what} in `{data.cache_dir()}` yet. Build one with `{command}` ({takes}){quick}.")
        st.stop()
    return ref


def current_sweep() -> data.CacheRef:
    """The folder's width sweep (:func:`current_of`)."""
    return current_of("sweep")


def having(table: str, but: str) -> str | None:
    """The first cache of the folder other than ``but`` with rows in ``table`` (the toy lab first)."""
    listing = sorted(data.caches(str(data.cache_dir())), key=lambda c: (c.name != "demo", c.name))
    for entry in listing:
        if entry.name == but:
            continue
        ref = _ref(entry)
        if ref is not None and data.has_rows(ref, table):
            return entry.name
    return None


def opened(path: str, ref: data.CacheRef | None = None) -> data.CacheRef:
    """A page's start, from its entry in explorer.render.pages: the picked cache (``ref``, or the
    sidebar's: the page stops with a message when there is none), the table it shows required (the
    page stops with one line when the cache lacks it) and its title."""
    page = pages.BY_PATH[path]
    ref = ref if ref is not None else current()
    if page.needs:
        require(ref, page.needs, page.lacks, page.command)
    st.title(f"{page.title} · {ref.name}")
    return ref


def require(ref: data.CacheRef, table: str, what: str, command: str) -> None:
    """Stop the page with one line when the cache has no rows in ``table``: what the cache is,
    and a button to switch to a cache of the folder that has them (else how to add them)."""
    if data.has_rows(ref, table):
        return
    kind = data.summary(ref).kind
    other = having(table, ref.name)
    if kind == "sweep":
        line = f"The cache '{ref.name}' is a width sweep of tied and untied twins: it has no {what} (see the Sweep page)."
    elif kind == "mechanism":
        line = (f"The cache '{ref.name}' is the mechanism lab's runs, not a pair's matrices: it has no {what} (see the "
                "Why? page).")
    elif kind == "published":
        line = (f"The cache '{ref.name}' holds the paper's published measurements, not the models' matrices: it has "
                f"no {what}.")
    else:
        line = f"The cache '{ref.name}' has no {what}." + ("" if other else f" Add it with `{command}`.")
    if other:
        line += f" The cache '{other}' has them."
    st.info(line)
    if other:
        st.button(f"Switch to '{other}'", key="switch_pair", type="tertiary", icon=":material/swap_horiz:",
                  on_click=state.change_pair, args=(other,))
    st.stop()


MISSING = "—"  # what a table shows where it has no value (never "None")


def _static(df, numbers: tuple) -> object:
    """The presentation-mode table: three decimals, "—" for a missing value, markdown escaped."""
    shown = df.copy()
    for c in numbers:
        if c in shown:
            shown[c] = shown[c].map(lambda v: MISSING if v is None or v != v else f"{v:.3f}")
    shown = shown.astype(object).where(shown.notna(), MISSING)
    # a static table reads every cell and header as markdown: escape them (T~O would strike through)
    shown = shown.map(lambda v: data.escape_markdown(v, entities=False) if isinstance(v, str) else v)
    shown.columns = [data.escape_markdown(str(c), entities=False) for c in shown.columns]
    return shown


def _interactive(df, pin: int) -> tuple[object, frozenset]:
    """The Arrow table st.dataframe sends (the frame itself when Arrow cannot hold a column as it
    is: Streamlit then converts it its own way) and the pinned columns whose labels need width."""
    try:
        arrow = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        arrow = df
    wide = frozenset(c for c in df.columns[:pin]  # text: object under pandas 2, str under pandas 3
                     if (df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype)) and len(df)
                     and df[c].astype(str).str.len().max() > 22)
    return arrow, wide


def table(df, *, numbers=(), height=None, where=None, help=None, pin: int = 1) -> None:
    """A table: sortable and scrollable on screen, its first ``pin`` columns pinned (a wide table
    scrolls under them); in presentation mode a static one whose text grows with the page (an
    interactive table is drawn on a canvas that CSS cannot enlarge). A missing value shows "—".

    ``numbers``: columns shown with three decimals; ``where``: a column or container;
    ``help``: {column: what it means} (a tooltip on the header on screen).
    """
    where = where if where is not None else st
    help = help or {}
    numbers = tuple(numbers)
    if state.get("presentation"):
        where.table(identity.once(df, ("static", numbers), lambda d: _static(d, numbers)), hide_index=True)
    else:
        # once per frame object: most frames come from the per-cache memos, and converting them
        # each run cost more than the rest of a page (issue 35)
        arrow, wide = identity.once(df, ("interactive", pin), lambda d: _interactive(d, pin))
        config = {}
        for i, c in enumerate(df.columns):
            kw = {"pinned": True} if i < pin else {}
            if c in wide:
                kw["width"] = "large"  # a pinned label column as wide as its labels need, not cut
            if c in help:
                kw["help"] = help[c]
            if c in numbers:
                config[c] = st.column_config.NumberColumn(format="%.3f", **kw)
            elif kw:
                config[c] = st.column_config.Column(**kw)
        where.dataframe(arrow, hide_index=True, width="stretch", height=height or "auto", column_config=config,
                        placeholder=MISSING)
