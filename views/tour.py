"""Tour: the paper's argument one step per screen, for a class or a talk (``?step=N``).

Each step: the claim in one line, a large verdict computed from the cache, one chart drawn by
the pages' own builders, one sentence on how to read it, and a link to the page with more.
Previous / Next, the arrow keys, PageUp / PageDown (what presentation clickers send), Space / Shift+Space and Home / End move
between steps; the step is in the URL. N opens the presenter view in a window of its own
(``?view=presenter``: the slide small, the step's speaker notes, the next step and a clock); the
two windows follow each other (explorer/render/presenter.py), and the audience's never shows notes.
"""

import contextlib
import html
import os
from urllib.parse import urlencode

import streamlit as st

from explorer import data, export, frame, phone, sections, state
from explorer.render import figures, presenter, qr, setup_diagram, slide, tour, tour_notes
from explorer.render.style import ON, PALETTE
from explorer.words import claims as claims_mod

N = len(tour.STEPS)

COMMON_CSS = """
.tour-verdict {border-radius: 10px; padding: 0.7rem 1rem; color: white; margin-bottom: 0.6rem;}
.tour-verdict .v {font-weight: 700; line-height: 1.1;}
.tour-verdict .n {line-height: 1.35; margin-top: 0.35rem;}
.tour-paper {opacity: 0.85; line-height: 1.35;}
.tour-claim {font-weight: 600; line-height: 1.3; margin: 0;}
.tour-head {margin: 0 0 0.2rem 0;}
.tour-head .n {opacity: 0.7; font-weight: 600;}
.tour-head h2 {margin: 0; padding: 0.1rem 0 0.3rem 0; line-height: 1.2;}
.tour-also {line-height: 1.35; margin: 0.3rem 0;}
.tour-also span {color: white; border-radius: 6px; padding: 0 0.4em; font-weight: 700; white-space: nowrap;}
.tour-read {line-height: 1.4; margin-top: 0.6rem;}
.st-key-tour_keys {display: none !important;}
.stMainBlockContainer button kbd {color: inherit !important; opacity: 1 !important;}  /* a shortcut's key at the
  button's own contrast (Streamlit greys it: 2.8:1 on the dark theme's accent) */
.tour-qr {display: flex; gap: 0.7rem; align-items: center; margin: 0.5rem 0 0 0;}
.tour-qr img {height: auto; flex: none; image-rendering: pixelated; background: #ffffff;}
.tour-qr figcaption {opacity: 0.8; overflow-wrap: anywhere;}
.presenter {border: 2px solid #57606a; border-radius: 10px; padding: 0.6rem 1rem; margin-top: 0.6rem; line-height: 1.4;}
.presenter .pn-top {display: flex; justify-content: space-between; font-weight: 600; margin-bottom: 0.4rem;}
.presenter .pn-clock {font-variant-numeric: tabular-nums;}
.presenter .pn-row {display: grid; grid-template-columns: 6.5em 1fr; gap: 0.6em; margin: 0.25rem 0;}
.st-key-tour_slide {border: 2px solid #57606a; border-radius: 10px; padding: 0.5rem 0.8rem;}
.st-key-tour_notes_col .presenter {margin-top: 0;}
.st-key-tour_notes_col .pn-top {flex-wrap: wrap; gap: 0.3rem 1rem;}
.st-key-tour_notes_col .pn-clock {font-size: 1.6rem;}
"""
# sizes on a screen, and on a phone in presentation mode
SCREEN_SIZES = """
.tour-verdict .v, .tour-head h2 {font-size: 2rem;}
.tour-verdict .n {font-size: 1.05rem;}
.tour-claim {font-size: 1.25rem;}
.tour-paper, .tour-head .n, .tour-also, .tour-read {font-size: 0.95rem;}
.stMainBlockContainer {padding-top: 3.6rem !important; padding-bottom: 1rem !important;}
.tour-qr img {width: 120px;}
.tour-qr figcaption {font-size: 0.85rem;}
.presenter {font-size: 1rem;}
"""
SCREEN_CSS = COMMON_CSS + SCREEN_SIZES
# Presentation mode: the step is a slide laid out for 1920x1080 in CSS pixels (every size below is
# at that screen) and zoomed to fit the window (slide.fit_js): no sidebar, no page padding to spare
SLIDE = ".stMainBlockContainer > [data-testid='stVerticalBlock']"
SLIDE_PAD_PX, COLUMNS_GAP_PX = 24, 32  # the page's side padding; the gap between the chart's and verdict's columns
COLUMNS = {"wide": (2.5, 1.4), "tall": (1.1, 1.0)}  # the chart's and verdict's columns, by the slide's shape


def chart_px(shape: str) -> int:
    """The chart column's width on a slide of ``shape`` (slide.SHAPES): Streamlit would measure the
    zoomed width, so the chart is given its own."""
    cols = COLUMNS[shape]
    return round((slide.SHAPES[shape][0] - 2 * SLIDE_PAD_PX - COLUMNS_GAP_PX) * cols[0] / sum(cols))


CHART_PX = chart_px("wide")
SLIDE_CSS = COMMON_CSS + f"""
@media (min-width: {slide.NARROW_PX}px) {{  /* a phone (one that opened a step's QR code) is no projector */
.stMainBlockContainer {{padding: 3.4rem {SLIDE_PAD_PX}px 0.4rem !important; max-width: none !important;}}
{SLIDE} {{zoom: var(--slide-zoom, 1); width: var(--slide-width, auto) !important; max-width: none !important;
  flex: none !important;}}
{SLIDE} p, {SLIDE} li, {SLIDE} td, {SLIDE} th, {SLIDE} a, {SLIDE} span, {SLIDE} div, {SLIDE} code,
{SLIDE} [data-testid='stCaptionContainer'] p, {SLIDE} button p {{font-size: {slide.TEXT_PX}px !important;
  line-height: 1.3 !important;}}
{SLIDE} .tour-claim {{font-size: {slide.CLAIM_PX}px !important;}}
{SLIDE} button kbd {{font-size: {slide.TEXT_PX}px !important;}}  /* a button's shortcut key, as large as its label */
{SLIDE} .tour-head h2 {{font-size: {slide.TITLE_PX}px !important;}}
{SLIDE} .tour-verdict .v {{font-size: {slide.VERDICT_PX}px !important; line-height: 1.1 !important;}}
{SLIDE} .tour-dots {{font-size: {slide.TEXT_PX + 4}px !important; letter-spacing: 0.35em;}}
{SLIDE} .tour-qr img {{width: 150px;}}
{SLIDE}:has([data-slide-shape='tall']) .tour-qr img {{width: 120px;}}
{SLIDE}:has([data-slide-shape='tall']) .tour-claim {{font-size: {slide.TALL_CLAIM_PX}px !important;}}
{SLIDE}, {SLIDE} [data-testid='stVerticalBlock'] {{gap: 6px;}}  /* a slide's height is its scarce room */
}}
@media (max-width: {slide.NARROW_PX - 1}px) {{  /* a phone: a screen's sizes (slide.fit_js shrinks the chart) */
{SCREEN_SIZES}}}
"""
number = state.get("step", 1)
state.correct("step")  # a bad step opens step 1 with a note, and the URL says step 1 too
step = tour.step_at(number)
listing = data.caches(str(data.cache_dir()))
refs = [r for r in (frame._ref(c) for c in listing) if r is not None]
picked = frame._ref(frame.picked(listing)) if listing else None


def go(n: int) -> None:
    state.put(step=max(1, min(N, n)))


# the presenter view (?view=presenter, or an old link's ?notes=on): the slide small beside the notes
in_presenter = state.get("view") == presenter.PRESENTER or bool(state.get("notes"))
big = bool(state.get("presentation")) and not in_presenter
if big or in_presenter:  # a slide, or the presenter's window, takes the whole screen: the sidebar opens with its arrow
    st.set_page_config(initial_sidebar_state="collapsed")
shape = st.session_state.get("slide_shape", "wide") if big else "wide"  # told by the slide's script (slide.fit_js)

if big:  # a full-screen slide: laid out for 1920x1080, zoomed to fit any screen (explorer/render/slide.py)
    st.html(f"<style>{SLIDE_CSS}</style>")
    st.html(f"<script>{slide.fit_js(SLIDE)}</script>", unsafe_allow_javascript=True)
else:
    st.html(f"<style>{SCREEN_CSS}</style>")
st.html(f"<script>{presenter.app_js(number, N)}</script>", unsafe_allow_javascript=True)  # the windows follow

if in_presenter:  # the presenter's window: the slide on the left, small; the notes on the right
    slide_col, notes_col = st.columns([3, 2], gap="medium")
slide_box = contextlib.ExitStack()  # what follows, down to the QR code, is the slide: in the presenter's column there
if in_presenter:
    slide_box.enter_context(slide_col.container(key="tour_slide"))
if big:
    st.html(f"<div data-slide-shape='{shape}' hidden></div>")  # the shape laid out, read by slide.fit_js
st.html(f"<div class='tour-head'><div class='n'>Step {number} of {N}</div><h2>{html.escape(step.title)}</h2></div>")

source = tour.source_for(step, refs, picked)
borrowed = source is not None and picked is not None and source != picked
if borrowed and step.needs == data.summary(picked).kind:
    source = None  # the picked cache is of the kind this step needs, yet lacks it: say so
example = tour.example_token(source) if source is not None and step.slug in ("neighbours", "map") else None
real = tour.real_example(refs) if step.slug == "lens" and source is not None else None  # a real tied model's text
if step.claim is None:
    claim = None
else:
    claim = tour.claim_for(step, source) if source is not None else None

if step.claim is not None:
    st.html(f"<p class='tour-claim'>{html.escape(claims_mod.STATEMENTS[step.claim])}</p>")

if step.claim is not None and source is None:
    name = picked.name if picked is not None else "(none)"
    st.info(f"The cache '{name}' has no data for this step, and no cache in `{data.cache_dir()}` has: build the "
            f"toy lab with `{frame.DEMO_COMMAND}`" + {"sweep": f" or the sweep with `{frame.SWEEP_COMMAND}`.",
                                                      "mechanism": f" or the mechanism lab with "
                                                                   f"`{frame.MECHANISM_COMMAND}`."}.get(step.needs, "."))
else:
    # three panels take a screen's width, and on a tall slide the map and the set-up diagram take the slide's:
    # the verdict goes above
    stacked = (step.figure == "projection-umap" and not big) or (shape == "tall" and step.figure in ("projection-umap", None))
    if stacked:
        verdict_col, chart_col = st.container(), st.container()
    else:
        chart_col, verdict_col = st.columns(list(COLUMNS[shape]), gap="medium")
    # a tall slide's chart is shorter; a map's panels (beside each other, keeping their shape) a little smaller
    chart_width = (slide.SHAPES[shape][0] - 2 * SLIDE_PAD_PX if stacked else chart_px(shape)) if big else None
    tall_scale = (1 if shape != "tall" or step.figure is None else slide.TALL_PANELS if step.figure == "projection-umap"
                  else slide.TALL_CHART)
    with chart_col:
        if real is not None:  # two sources on one slide: each labelled
            st.caption(f"**Toy lab** (cache '{source.name}'): tied and untied twins trained from scratch by "
                       "`python -m precompute demo`, tuned-lens KL per hidden state"
                       if data.summary(source).kind == "toylab" else f"Cache '{source.name}'")
        if step.figure is None:
            export.show(lambda: (setup_diagram.setup_diagram(big), None), "tour-setup", key="tour_chart",
                        spec_key=("tour-setup",), downloads=False, width_px=chart_width,
                        height_scale=tall_scale)
            phone.one_setup()  # a phone: the diagram in two columns (explorer/phone.py)
        else:
            fig = figures.BY_NAME[step.figure]
            export.show(lambda: tour.step_figure(step, source), f"{fig.name}-{source.name}", key="tour_chart",
                        spec_key=("tour", step.figure, source, example), downloads=False,
                        width_px=chart_width,
                        height_scale=tall_scale)
        if step.figure == "projection-umap":  # a phone: one of the three maps at a time (explorer/phone.py)
            phone.one_map(lambda: tour.step_figure(step, source), source.name, ("tour", step.figure, source, example))
        # how to read the chart, under it: the verdict's column keeps the verdict and its numbers
        st.html(f"<div class='tour-read'><b>How to read it.</b> {html.escape(step.read)}</div>")
    with verdict_col:
        if claim is not None:
            colour, sign = sections.VERDICT_STYLE[claim.verdict]
            st.html(f"<div class='tour-verdict' style='background:{colour}'><div class='v'>{sign} "
                    f"{html.escape(claim.verdict)}</div><div class='n'>{html.escape(claim.ours)}</div></div>")
            if claim.paper:
                st.html(f"<div class='tour-paper'>{html.escape(claim.paper)}</div>")
            for key in step.also:  # the other claims this figure answers: one line each
                more = tour.one_claim(key, data.summary(source))
                c2, s2 = sections.VERDICT_STYLE[more.verdict]
                st.html(f"<div class='tour-also'><span style='background:{c2}'>{s2} {html.escape(more.verdict)}"
                        f"</span> {html.escape(claims_mod.STATEMENTS[key])}</div>")
            if claim.note and example is None and real is None and not step.also:
                st.caption(data.escape_markdown(claim.note, entities=False))
        else:
            st.markdown("T = tied matrix · I = untied input · O = untied output.")
        if example is not None and step.slug == "neighbours":
            lists = tour.neighbour_lists(source, example)
            shown = data.tokens(source).at[example, "shown"]
            rows = "".join(
                f"<div><b style='background:{PALETTE[m]};color:{ON[m]};border-radius:4px;padding:0 0.3em'>{m}</b>&nbsp; " + ", ".join(
                    (f"<b>{html.escape(w)}</b>" if m != "T" and w in lists["T"] else html.escape(w))
                    for w in lists[m]) + "</div>" for m in ("T", "O", "I"))
            st.html(f"<div class='tour-read'><b>Example: {html.escape(shown)}</b>, its 5 nearest neighbours in each "
                    f"matrix (bold: also in T's list){rows}</div>")
        if real is not None:
            text, answer, through = tour.answer_through_layers(real)
            table = tour.guesses(through)
            head = "".join(f"<th style='padding:0 0.5em'>{int(c)}</th>" for c in table.columns)
            rows = "".join(f"<tr><td style='padding:0 0.5em 0 0'>{html.escape(lens)}</td>" + "".join(
                f"<td style='padding:0 0.5em'>{'<b>' if w == answer else ''}{html.escape(str(w))}"
                f"{'</b>' if w == answer else ''}</td>" for w in table.loc[lens]) + "</tr>" for lens in table.index)
            models = data.summary(real).models.get("tied") or {}
            query = urlencode({**{k: v[0] for k, v in state.carried().items() if k != "step"},
                               "pair": real.name, "sample": 0})  # the same text on the real model's Lens page
            st.html(f"<div class='tour-read'><b>A real model: <a href='lens?{html.escape(query)}' target='_self'>"
                    f"{html.escape(tour.model_label(models))}</a></b> (cache "
                    f"'{html.escape(real.name)}', tied, no untied twin). After “{html.escape(text)}” it predicts "
                    f"<b>{html.escape(answer)}</b>; each lens's guess at hidden state:<table style='border:none;"
                    f"margin-top:0.3em'><tr><th></th>{head}</tr>{rows}</table></div>")
        if borrowed:
            st.caption(f"From the cache '{source.name}'" + (f" (the picked '{picked.name}' has no such data)."
                                                           if picked is not None and not big else "."))
        if step.slug == "published" and picked is not None and source != picked:
            toy = claims_mod.moved(data.summary(picked))[:1]  # the picked cache's own untied run, seed 0
            for run, i, o in toy:
                st.caption(f"Beside it, the toy lab '{picked.name}' ({run}): cosine to the start at its last step "
                           f"I {i[-1]:.2f}, O {o[-1]:.2f}.")
        target = source if source is not None else picked
        carried = {k: v for k, v in state.carried().items() if k not in ("step", "view", "notes")}
        if target is not None:
            carried["pair"] = [target.name]
        if example is not None:
            carried["token"] = [str(example)]
        page_titles = {"home": "Overview", "alignment": "Alignment", "neighbours": "Neighbours",
                       "projection": "Projection", "lens": "Lens", "dynamics": "Training dynamics", "sweep": "Sweep",
                       "mechanism": "Why?"}
        script = "overview" if step.page == "home" else step.page
        st.page_link(f"views/{script}.py",
                     label=f"More on the {page_titles[step.page]} page", icon=":material/open_in_new:",
                     query_params=carried)
    with verdict_col:  # first and last step: a QR code of this step's address, for a room's phones (not on localhost)
        here = os.environ.get("TYING_PUBLIC_URL") or st.context.url or ""
        if number in (1, N) and qr.is_public(here):
            address = qr.app_step_url(here, number, state.carried())
            # an image (st.html keeps no inline SVG): a PNG in a data URI, drawn by every browser
            st.html(f"<figure class='tour-qr'><img src='{qr.qr_png_uri(address)}' alt='QR code of "
                    f"{html.escape(address)}'><figcaption>This step on your phone: "
                    f"{html.escape(address)}</figcaption></figure>")

if step.claim is not None and source is None and picked is not None:
    other = next((r for r in refs if tour.holds_data(step, r)), None)
    if other is not None:
        st.button(f"Switch to '{other.name}'", key="tour_switch", on_click=state.change_pair, args=(other.name,))
slide_box.close()  # the slide ends here

prev_col, dots_col, next_col = st.columns([1, 4, 1], vertical_alignment="center")
prev_col.button("Previous", key="tour_prev", on_click=go, args=(number - 1,), disabled=number == 1,
                shortcut="Left", width="stretch")
next_col.button("Next", key="tour_next", on_click=go, args=(number + 1,), disabled=number == N,
                shortcut="Right", type="primary", width="stretch")
dots_col.html("<div class='tour-dots' style='text-align:center;font-size:1.4rem;letter-spacing:0.35rem'>"
              + "".join("●" if i == number else "○" for i in range(1, N + 1)) + "</div>")
with st.container(key="tour_keys"):  # a clicker's PageDown / PageUp, Space, Home, End: hidden twins of the buttons
    st.button("next page", key="tour_pgdn", on_click=go, args=(number + 1,), disabled=number == N,
              shortcut="PageDown")
    st.button("previous page", key="tour_pgup", on_click=go, args=(number - 1,), disabled=number == 1,
              shortcut="PageUp")
    st.button("next (space)", key="tour_space", on_click=go, args=(number + 1,), disabled=number == N,
              shortcut="Space")
    st.button("previous (shift+space)", key="tour_shift_space", on_click=go, args=(number - 1,),
              disabled=number == 1, shortcut="Shift+Space")
    st.button("first step", key="tour_home", on_click=go, args=(1,), disabled=number == 1, shortcut="Home")
    st.button("last step", key="tour_end", on_click=go, args=(N,), disabled=number == N, shortcut="End")
    # the slide's shape, told by its script (slide.fit_js) when the screen wants the other one
    st.button("wide slide", key="slide_wide", on_click=st.session_state.__setitem__, args=("slide_shape", "wide"))
    st.button("tall slide", key="slide_tall", on_click=st.session_state.__setitem__, args=("slide_shape", "tall"))

if in_presenter:
    ahead = tour.step_at(number + 1).title if number < N else None
    audience = {k: v for k, v in state.carried().items() if k not in ("view", "notes")} | {"presentation": ["on"]}
    with notes_col.container(key="tour_notes_col"):
        st.html(tour_notes.presenter_html(step.notes, number, N, ahead))
        st.html(f"<p class='pn-open'><a href='tour?{html.escape(urlencode(audience, doseq=True))}' target="
                f"'{presenter.AUDIENCE_WINDOW}'>Open the audience's window</a> (presentation mode): put it on the "
                "projector; this window and that one follow each other.</p>")
    st.html(f"<script>{tour_notes.CLOCK_JS}</script>", unsafe_allow_javascript=True)
else:  # the audience's window: the presenter view opens in a window of its own (N, or this link)
    here = {k: v for k, v in state.carried().items() if k not in ("presentation", "notes")} | {
        "view": [presenter.PRESENTER]}
    st.sidebar.html(f"<a href='tour?{html.escape(urlencode(here, doseq=True))}' target='{presenter.PRESENTER_WINDOW}'>"
                    "Presenter view</a> (N): the notes, the next step and a clock in a window of their own")
