"""Weight-tying explorer: ``streamlit run app.py``.

The shared frame around every page: the pair picker and presentation mode in the sidebar,
the view's state in the URL (explorer/state.py), and ``st.navigation`` over the page scripts
in ``views/``, with a menu of the pages the picked cache fills. (The scripts are not in a
folder named ``pages/``: beside the entry point such a folder puts Streamlit in its legacy
multipage mode until ``st.navigation`` has run once in the server, which shows "Page not
found" over a cold deep link.)
"""

from __future__ import annotations

import copy
from pathlib import Path

import streamlit as st

from explorer import data, frame, live, state
from explorer.render import pack, pages

HERE = Path(__file__).resolve().parent

st.set_page_config(page_title="Weight-tying explorer", page_icon=pages.TAB_ICON, layout="wide")

notes = state.read_url()  # first: the URL is the view's state (explorer/state.py)
listing = data.caches(str(data.cache_dir()))
# once per server, in the background: models slow to load (SmolLM2's GGUF) start before a first text
live.warm_at_start(str(data.cache_dir()))
filled = frame.filled(listing)  # the pages with something to show for the picked cache (None: all)


# Each run gets its own copies: st.navigation marks the page it returns as callable once.
models, aliases = frame.page_models(str(HERE / "views"))
DEFAULT = next(spec.path for spec in pages.PAGES if spec.default)
PAGES = {path: copy.copy(p) for path, p in models.items()}
ALIASES = {name: copy.copy(p) for name, p in aliases.items()}
# Every page answers its URL; the sidebar links below are the menu. (Streamlit's own menu
# clears the query string on a page change, so the view's state would not travel with it.)
current_page = st.navigation([*PAGES.values(), *ALIASES.values()], position="hidden")

state.sidebar_block(True)
with st.sidebar:
    # The picked cache's pages, each link carrying the URL's state: one history entry per
    # page change. A page the cache does not fill is left out; its URL still opens it, with
    # one line naming a cache that has its data.
    carried = state.carried()
    for path, p in PAGES.items():
        if filled is None or path in filled:
            # the default page's link goes to /overview: a link to "/" carries no path of its own
            st.page_link(ALIASES["overview"] if path == DEFAULT else p, query_params=carried)
    left_out = [p.title for path, p in PAGES.items() if filled is not None and path not in filled]
    if left_out:
        st.caption(f"Not in '{frame.picked(listing).name}': " + ", ".join(left_out) + ".")
    st.divider()
    st.markdown("### Weight-tying explorer")
    st.caption("Does a tied embedding look like an untied input or output matrix? "
               "T = tied, I = untied input, O = untied output.")
    if listing:
        names = [c.name for c in listing]
        st.selectbox("Models and results", names, on_change=state.change_pair,
                     help="Each entry is a cache: the results precomputed for a model pair, the toy lab, the "
                          "paper's published numbers, a sweep or the mechanism lab (docs/cache.md).",
                     key=state.widget_key("pair", frame.default_pair(names), lambda v: v in names, "no such cache here"),
                     format_func=lambda n: n + (" (cannot be opened)" if next(c for c in listing if c.name == n).error else ""))
    st.toggle("Presentation mode", on_change=state.sync, args=("presentation",),
              key=state.widget_key("presentation", False, lambda v: isinstance(v, bool)),
              help="Large headline numbers, text and chart fonts, for talks; kept in the URL.")
    if filled is not None:  # the picked cache opens: its figure pack, drawn only when clicked
        pack_of, pack_big = frame.picked(listing), bool(state.get("presentation"))
        st.download_button("Figure pack (zip)", data=lambda: pack.pack_zip(data.CacheRef.of(Path(pack_of.path)),
                                                                            presentation=pack_big),
                           file_name=f"{pack_of.name}-figures.zip", mime="application/zip", on_click="ignore",
                           icon=":material/folder_zip:", width="stretch", key="figure_pack",
                           help="Every figure and table of this cache as SVG, PDF and PNG, with their data, captions "
                                "and sources (`python -m precompute figures`); in presentation mode with its fonts.")
for line in state.sidebar_block(False):  # the sidebar widgets' notes, at the top of the page too
    st.caption(line)
for line in notes:  # outside the sidebar block: each note shows there and at the top of the page
    state.note(line)

# Presentation mode: a room reads the headline numbers first (they grow most: the default is
# 2.25rem), then the paper's numbers under them (captions there lose their grey), the headings
# (the picked token's most) and the widgets' own text: inputs, select values, multiselect tags,
# radio labels. A slider's value sits above its thumb, not over it; a button's text wraps
# rather than being cut in a narrow column.
PRESENTATION_CSS = """
.stMainBlockContainer p, .stMainBlockContainer li, .stMainBlockContainer td {font-size: 1.35rem !important;}
.stMainBlockContainer h1 {font-size: 3rem !important;}
.stMainBlockContainer h2 {font-size: 2.6rem !important;}
.stMainBlockContainer h3 {font-size: 2.25rem !important;}
.stMainBlockContainer [data-testid='stMarkdown'] h3 {font-size: 3rem !important;}
.stMainBlockContainer [data-testid='stMetricValue'], .stMainBlockContainer [data-testid='stMetricValue'] p,
.stMainBlockContainer [data-testid='stMetricValue'] * {font-size: 3.6rem !important; line-height: 1.15 !important;}
.stMainBlockContainer [data-testid='stMetricLabel'] p {font-size: 1.3rem !important;}
.stMainBlockContainer [data-testid='stMetricDelta'], .stMainBlockContainer [data-testid='stMetricDelta'] * {
  font-size: 1.8rem !important;}
.stMainBlockContainer [data-testid='stCaptionContainer'] p {font-size: 1.15rem !important;}
.stMainBlockContainer [data-testid='stElementContainer']:has([data-testid='stMetric'])
  + [data-testid='stElementContainer'] [data-testid='stCaptionContainer'] {opacity: 0.85 !important;}
.stMainBlockContainer [data-testid='stElementContainer']:has([data-testid='stMetric'])
  + [data-testid='stElementContainer'] [data-testid='stCaptionContainer'] p {font-size: 1.8rem !important;
  line-height: 1.3 !important;}
.stMainBlockContainer input, .stMainBlockContainer textarea {font-size: 1.35rem !important;}
.stMainBlockContainer [data-testid='stMultiSelectTagsContainer'] [data-tag],
.stMainBlockContainer [data-testid='stMultiSelectTagsContainer'] [data-tag] span {font-size: 1.25rem !important;
  height: auto !important; line-height: 1.4 !important;}
[role='listbox'] [role='option'], [role='listbox'] [role='option'] * {font-size: 1.3rem !important;}
.stMainBlockContainer [data-testid='stSlider'] [role='group'] {margin-top: 1.25rem;}
.stMainBlockContainer [data-testid='stSliderThumbValue'] {top: auto !important; bottom: calc(100% + 4px) !important;}
.stMainBlockContainer [data-testid='stSliderThumbValue'] p {line-height: 1.2 !important;}
.stMainBlockContainer button [data-testid='stMarkdownContainer'],
.stMainBlockContainer button [data-testid='stMarkdownContainer'] p {white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important;}
"""
# Grey text in either theme: the theme's own text colour at 78% (Streamlit's captions are at about
# 60%: 3.8:1 on the light theme's white, under WCAG AA's 4.5:1)
READABLE_CSS = """
[data-testid='stCaptionContainer'] {color: inherit !important; opacity: 0.78;}
[data-testid='stCaptionContainer'] p {color: inherit !important;}
"""
st.html(f"<style>{READABLE_CSS}</style>")
if state.get("presentation"):
    st.html(f"<style>{PRESENTATION_CSS}</style>")

current_page.run()
