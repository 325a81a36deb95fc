"""Projection: aligned UMAP views of T, I and O; click a point to pick its token, search, zoom and pan.

Two renderers (explorer/deck.py decides): Vega for a vocabulary of at most
``deck.VEGA_MAX_TOKENS`` projected tokens (a sample or a density grid past the slider's
limit), WebGL (deck.gl) above it, every token in every view. Exports always draw with Vega.
"""

import numpy as np
import pandas as pd
import streamlit as st

from explorer import data, deck, deck_backdrop, deck_grid, export, frame, state
from explorer.render import map_colours, projection_charts
from explorer.words import MATRIX_NAMES, ONE_MODEL_NOTE, OVERLAP_K, projection_text

ref = frame.opened("projection")
coords = data.umap_shown(ref)
order = tuple(m for m in projection_charts.PROJECTION_ORDER if m in data.matrices(ref, "umap"))
single = len(order) == 1  # one tied model: T's map alone
if single:
    st.markdown("A 2-D UMAP map of the tied matrix T: tokens whose rows point the same way sit together. "
                + ONE_MODEL_NOTE)
else:
    st.markdown("2-D UMAP maps of the three matrices, computed jointly (AlignedUMAP) so that a token sits in "
                "comparable places. If T is output-like, its map's neighbourhoods echo O's rather than I's.")

toks = data.tokens(ref)
projected = data.projected_tokens(ref)
n_proj = len(projected)
c1, c2, c3, c4 = st.columns([2, 2, 2, 2])
ENGINE_LABEL = {"auto": "auto (by size)", "vega": "Vega", "webgl": "WebGL"}  # short: the column is narrow
choice = c4.selectbox("Drawn with", state.RENDERERS, format_func=ENGINE_LABEL.get,
                      key=state.widget_key("renderer", "auto", state.RENDERERS.__contains__),
                      on_change=state.sync, args=("renderer",),
                      help=f"auto: WebGL above {deck.VEGA_MAX_TOKENS:,} projected tokens, else Vega. Vega draws a "
                           "sample of at most "
                           f"{deck.VEGA_MAX_TOKENS:,} tokens and exports the same figure; WebGL (deck.gl) draws every "
                           f"token, up to {deck.WEBGL_MAX_POINTS:,} per view, and needs a browser with WebGL.")
engine = deck.renderer(n_proj, choice)  # "vega" or "webgl": the one place the page decides
density = c2.toggle("Density instead of points", key=state.widget_key("density", False, lambda v: isinstance(v, bool)),
                    on_change=state.sync, args=("density",),
                    help="Bin every token into a grid, one grid per matrix (drawn with Vega).")
view = c1.radio("Layout", state.VIEWS, horizontal=True, disabled=density or single,
                key=state.widget_key("view", "side by side", lambda v: v in state.VIEWS),
                on_change=state.sync, args=("view",),
                help="Density is drawn per matrix, so it is always side by side." if density else None)
mode = "side by side" if density or single else view
POINTS = (2000, 5000, 12000, 25000)
# no choice past the projected tokens: the first step that holds them all reads "all N"
offered = tuple(p for p in POINTS if p < n_proj) + tuple(p for p in POINTS if p >= n_proj)[:1] or POINTS[-1:]
if engine == "vega":
    limit = c3.select_slider("Points drawn per view", options=offered,
                             key=state.widget_key("points", min(5000, offered[-1]), offered.__contains__,
                                                  fit=lambda p: offered[-1] if p >= n_proj else p),
                             format_func=lambda p: f"all {n_proj:,}" if p >= n_proj else f"{p:,}",
                             on_change=state.sync, args=("points",))
else:  # WebGL draws every token; the exports (Vega) draw a sample of the most Vega draws
    limit = deck.VEGA_MAX_TOKENS

token = state.get("token")  # picked here or on Neighbours: both read it from the URL
if token is not None and token not in projected:
    state.reject("token", "not among this cache's projected tokens")
    token = None
if token is None:
    token = data.default_token(toks, among=projected)  # the same default as Neighbours
k = min(int(state.get("k", OVERLAP_K)), data.max_k(ref) or OVERLAP_K)
colours = map_colours.offered(ref)  # what the map may be coloured by (colour=), and the tokens selected (select=)
selected = tuple(t for t in (state.get("select") or ()) if t in projected)

# -- search, and centring on a token ---------------------------------------------------------
# A token found by the search or clicked is centred, closer, in every WebGL view ("focus", this
# session's only: a shared link opens on the whole map). Each pick or "Whole map" counts up
# ``n``, which keys the views anew, so each is a fresh selection drawn at its new view.


def focused() -> dict:
    f = st.session_state.get("proj_focus") or {}
    return f if f.get("pair") == ref.name else {"n": f.get("n", 0)}


def focus_on(t: int | None) -> None:
    """Pick ``t`` (the URL, Neighbours) and centre every view on it; ``None``: the whole map."""
    n = focused().get("n", 0) + 1
    if t is None:
        st.session_state["proj_focus"] = {"pair": ref.name, "n": n}
        return
    state.put(token=int(t))
    st.session_state["proj_focus"] = {"pair": ref.name, "token": int(t), "n": n}


def found() -> list[int]:
    return [t for t in data.find_tokens(ref, st.session_state.get("proj_query", "")) if t in projected]


def on_search() -> None:
    hits = found()
    if hits:
        focus_on(hits[0])


s1, s2, s4, s3 = st.columns([3, 3, 2, 2], vertical_alignment="bottom")
colour = s4.selectbox("Colour by", colours, format_func=map_colours.LABELS.get,
                      key=state.widget_key("colour", "matrix", colours.__contains__), on_change=state.sync,
                      args=("colour",), help="What each point's colour shows; the legend says how it was measured.")
query = s1.text_input("Find a token (part of its text)", key="proj_query", placeholder="e.g. ␣the, import, (",
                      on_change=on_search, help="␣ or a leading space matches a space; the first match is picked")
if query:
    hits = found()
    if not hits:
        s2.warning("No projected token contains that text.")
    else:
        if st.session_state.get("proj_hits") != token:
            st.session_state["proj_hits"] = token if token in hits else None
        s2.selectbox(f"{len(hits)} match(es)" + (" (the first 200)" if len(hits) == 200 else ""), hits,
                     format_func=lambda t: f"{toks.at[t, 'shown']}  (#{t})", key="proj_hits",
                     placeholder="pick a match",
                     on_change=lambda: st.session_state["proj_hits"] is not None and focus_on(st.session_state["proj_hits"]))
        s3.button(f"Select {len(hits)}", key="proj_select", icon=":material/select:",
                  on_click=lambda: state.put(select=map_colours.select_text(hits)),
                  help="Highlight every match on the map, the rest faded (select= in the URL).")
if selected:
    s3.button(f"Clear selection ({len(selected):,})", key="proj_unselect", icon=":material/deselect:",
              on_click=lambda: state.put(select=None), help="Draw every token at full strength again.")
scale = map_colours.scale_for(ref, colour)
about, missing = map_colours.about_of(ref), map_colours.missing_sentence(ref)
legend_title = map_colours.legend_title(colour, about)
if missing:
    st.caption(missing)
elif colour == "under_trained":
    st.caption(f"Under-trained ({about.n_under_trained:,} tokens): {data.escape_markdown(about.rule)}.")
focus = focused()
centred = focus.get("token") == token
if engine == "webgl":
    s3.button("Whole map", key="proj_whole", icon=":material/zoom_out_map:", disabled=not centred,
              on_click=focus_on, args=(None,), help="Zoom every view out to its whole map.")


def highlighted() -> pd.DataFrame:
    """The picked token and its k nearest neighbours in each matrix's own view."""
    nb = (data.neighbours_of(ref, token, k) if data.has_rows(ref, "neighbours")
          else pd.DataFrame(columns=["neighbour", "matrix"]))
    parts = []
    for m in order:
        ids = [token] + nb[nb["matrix"] == m]["neighbour"].tolist()
        sub = coords[(coords["matrix"] == m) & coords["token"].isin(ids)].copy()
        sub["role"] = np.where(sub["token"] == token, "picked", "neighbour")
        parts.append(sub)
    return pd.concat(parts, ignore_index=True)


def shown() -> pd.DataFrame:
    return coords if density else map_colours.frame_of(ref, data.umap_sample(ref, limit), colour, selected)


def on_pick(key: str) -> None:
    """A click on a point picks its token here, on Neighbours and in the URL. (Each chart's key
    names the token it was drawn for, so a click is always a new selection.)"""
    chosen = (st.session_state.get(key) or {}).get("selection", {})
    box = chosen.get(projection_charts.BOX) or {}
    if box.get("x") and box.get("y"):  # shift and drag: the box's points selected
        ms = [m for m in order if key.startswith(f"umap_{m}_")] or list(order)
        state.put(select=map_colours.select_text(map_colours.tokens_in_box(shown(), ms, box)) or None)
        return
    picked = chosen.get(projection_charts.PICK) or []
    if picked and "token" in picked[0]:
        state.put(token=int(picked[0]["token"]))


def on_deck_pick(key: str) -> None:
    """A click on a WebGL point: its layer and row name the token (explorer/deck.py)."""
    t = deck.picked_token(st.session_state.get(key), deck.points_of(ref)[1])
    if t is not None:
        focus_on(t)


presentation = bool(state.get("presentation"))
height = 420
if single:  # one map across the page: about as tall as a third of it is wide, and more
    height = int(height * 1.4)
webgl = engine == "webgl" and not density
if density:
    how = f"density of all {n_proj:,} projected tokens per view (a binned grid, drawn with Vega)"
elif webgl:
    drawn = min(n_proj, deck.WEBGL_MAX_POINTS)
    how = (f"all {n_proj:,} projected tokens per view" if drawn == n_proj else
           f"a random sample of {drawn:,} of {n_proj:,} projected tokens per view (same tokens in every view)")
    how += (f" with WebGL (deck.gl): more than {deck.VEGA_MAX_TOKENS:,} tokens, where Vega would draw only a "
            "sample" if choice == "auto" else " with WebGL (deck.gl)")
else:
    how = (f"a random sample of {limit:,} of {n_proj:,} projected tokens per view (same tokens in every view)"
           if n_proj > limit else f"all {n_proj:,} projected tokens")
    how += (f" with Vega: at most {deck.VEGA_MAX_TOKENS:,} tokens, which Vega draws smoothly and exports as the "
            "same figure" if engine == "vega" else "")
if n_proj < len(toks):
    how += f"; UMAP was computed on {n_proj:,} of the {len(toks):,} tokens (precompute --umap-tokens)"
umap_summary = data.summary(ref).analysis("umap")
if umap_summary:  # fitted and placed tokens, and how well the placed ones sit (a cache of schema 3)
    how += f". On the map: {projection_text(umap_summary)}"


def draw_webgl() -> None:
    """Every token in deck.gl views, the highlighted ones on top; exports with Vega."""
    grid, points = deck.points_of(ref)
    views = [list(order)] if mode == "overlaid" else [[m] for m in order]
    # a map is about as tall as wide, and a view a third of the page: taller would only add margins
    h = int(height * (1.15 if presentation else 1) * (1.25 if mode == "overlaid" else 1))
    hi = highlighted()
    decks = []
    for ms in views:
        w = deck_grid.VIEW_WIDTH_PX * (3 if len(ms) > 1 or single else 1)
        centre = deck.centre_of(points, deck.highlight_rows(hi, grid, ms), ms, token if centred else None)
        back = deck.backdrop_of(ref, tuple(ms), None if centre is None else (int(centre[0]), int(centre[1])), w, h,
                                presentation, colour, selected)
        decks.append((deck.view_deck(points, hi, grid, ms, focus=token if centred else None, height_px=h, width_px=w,
                                     presentation=presentation, back=back), back))
    sent = len(decks[0][0].to_json())
    image = sum(r.n_bytes for r in decks[0][1].rasters)
    cells = sum(len(c.ids) for c, _ in decks[0][1].hits.values())
    st.caption(f"Drawing {how}. The picked token (large; named above the views, labelled when centred) and its "
               f"{k} nearest neighbours in each matrix (small), yellow outlined in black, are drawn on top. **Click a "
               "point** to pick its token (every view centres on it, drawn sharper around it; Neighbours follows), or "
               "find one above; scroll to zoom, drag to pan. "
               f"{'The view' if len(views) == 1 else 'Each view'} sends {deck.size_text(sent)}: its points drawn on the "
               f"server into an image ({deck.size_text(image)} of PNG), which the browser draws as one picture, and "
               f"{cells:,} transparent click cells ({deck_backdrop.HIT_PX} pixels a side) that each name the token nearest their "
               f"centre. Exports draw a sample of {deck.VEGA_MAX_TOKENS:,} with Vega." + chosen_text)
    if colour != "matrix":  # the images carry no legend: the colouring's own, above the views
        export.show(lambda: (projection_charts.colour_legend(scale, legend_title), pd.DataFrame()), "legend",
                    key="umap_legend", spec_key=("umap-legend", ref, colour), downloads=False)
    cols = [st.container()] if len(views) == 1 else st.columns(3)
    n = focus.get("n", 0)
    # the picked token is named here; on the map it is labelled only when centred (explorer/deck.py LABEL_LAYER)
    picked = None if centred else f"**{data.escape_markdown(str(toks.at[token, 'shown']))}**"
    for col, ms, (d, _) in zip(cols, views, decks):
        with col:
            name = "all" if len(ms) > 1 else ms[0]
            if len(ms) == 1:
                st.markdown(f"**{ms[0]}** ({MATRIX_NAMES[ms[0]]})" + (f" · picked: {picked}" if picked else ""))
            elif picked:
                st.markdown(f"Picked: {picked}")
            key = f"deck_{name}_{token}_{n}_{colour}_{hash(selected)}"
            st.pydeck_chart(d, height=h, key=key, on_select=lambda key=key: on_deck_pick(key),
                            selection_mode="single-object",
                            alt=f"UMAP map of {', '.join(ms)}: {len(points[ms[0]].ids):,} tokens")
    export.download_buttons(lambda: (projection_charts.projection(shown(), highlighted(), mode=mode, scale=scale,
                                                                  title=legend_title), shown()),
                            f"umap-{ref.name}", key="umap")


def draw_vega() -> None:
    """Vega views of a sample (or a density grid) with their exports."""
    st.caption(f"Drawing {how}. The picked token (◆, labelled) and its {k} nearest neighbours in each matrix (●) "
               "are always drawn. **Click a point** to pick its token (Neighbours follows), or find one above; scroll "
               "to zoom, drag to pan, double-click to reset" + ("" if density else "; **shift and drag** a box to select "
                                                                   "its points") + "." + chosen_text)
    params = (ref, token, k, density, limit, colour, selected)
    modes = [projection_charts.PICK] if density else [projection_charts.PICK, projection_charts.BOX]
    tag = f"{token}_{hash((colour, selected))}"  # a new selection or colouring: a fresh chart, no box left over
    if mode == "overlaid":
        export.show(lambda: (projection_charts.projection(shown(), highlighted(), mode="overlaid", height=height,
                                                          scale=scale, title=legend_title, box=True), shown()),
                    f"umap-{ref.name}", key=f"umap_all_{tag}", spec_key=("umap-overlaid",) + params,
                    on_select=lambda: on_pick(f"umap_all_{tag}"), selection_mode=modes)
        return
    for col, m in zip([st.container()] if single else st.columns(3), order):
        with col:  # one legend, under the last view
            export.show(lambda m=m: (projection_charts.projection_view(
                shown(), highlighted(), m, density=density, height=height, scale=scale, title=legend_title,
                show_legend=m == order[-1], box=not density), shown()),
                        f"umap-{ref.name}-{m}", key=f"umap_{m}_{tag}", spec_key=("umap-view", m) + params,
                        on_select=lambda m=m: on_pick(f"umap_{m}_{tag}"), selection_mode=modes, downloads=False)
    export.download_buttons(lambda: (projection_charts.projection(shown(), highlighted(), density=density, scale=scale,
                                                                  title=legend_title), shown()),
                            f"umap-{ref.name}", key="umap")


chosen_text = (f" **{len(selected):,} selected tokens** are drawn at full strength, the rest faded "
               f"(`select=` in the URL: token ids, comma-separated)." if selected else "")
if webgl:
    draw_webgl()
else:
    draw_vega()
