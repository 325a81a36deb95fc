"""The Lens page's "follow a token" section under the trajectory grid: the clicked cell's top 10,
the commitment strip of every position (tied beside untied) and the pinned tokens' probability at
every hidden state (``pin=`` in the URL). The charts and tables are explorer/render/lens_follow.py's.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import streamlit as st

from explorer import data, export, frame, state
from explorer.render import lens_follow, style
from explorer.render.shown import typed_text, visible_token

K = 10
"""Predictions stored per cell (the lens stage's and the worker's top k)."""


def pins() -> list[str]:
    """The URL's pinned tokens, as shown (a leading space as '␣')."""
    return list(dict.fromkeys(visible_token(typed_text(p)) for p in state.get("pin") or []))


def raw_pins() -> tuple[str, ...]:
    """The pinned tokens as the model decodes them: what the worker is asked to follow."""
    return tuple(typed_text(p) for p in pins())


def followed(t: pd.DataFrame) -> tuple[int, int]:
    """The followed (position, hidden state) of trajectory ``t``: the URL's, else the last of each."""
    pos, layer = state.get("pos"), state.get("layer")
    positions, layers = set(t["position"].astype(int)), set(t["layer"].astype(int))
    return (pos if pos in positions else max(positions), layer if layer in layers else max(layers))


def grid_key(spec_key: tuple, cell: tuple[int, int]) -> str:
    """The grid's widget key: one per chart and followed cell, so that a click is always a new selection."""
    return "traj_" + hashlib.sha1(repr((spec_key, cell)).encode()).hexdigest()[:12]


def on_cell(key: str) -> None:
    """A click on a grid cell: its position and hidden state, followed below and in the URL."""
    picked = (st.session_state.get(key) or {}).get("selection", {}).get(lens_follow.CELL) or []
    if picked and "position" in picked[0] and "layer" in picked[0]:
        state.put(pos=int(picked[0]["position"]), layer=int(picked[0]["layer"]))


def _on_pins() -> None:
    text = st.session_state.get("w_pin") or ""
    state.put(pin=",".join(p for p in text.split(",") if p) or None)


def section(ref: data.CacheRef, t: pd.DataFrame, both: pd.DataFrame, lens: str, *, model_label: str,
            pinned: tuple[pd.DataFrame, dict] | None, spec_key: tuple) -> None:
    """Under the grid of ``t`` (one model and lens): the clicked cell's top 10, the commitment strip
    of ``both`` (every model's rows, both lenses) under ``lens``, and the pinned curves at the
    followed position: from ``pinned`` (the worker's full softmax and its unknown pins) where a
    model ran, else from the stored top 10 with the gaps stated."""
    positions = sorted(int(p) for p in t["position"].unique())
    layers = sorted(int(v) for v in t["layer"].unique())
    tokens = t.drop_duplicates("position").set_index("position")["token"]
    c1, c2 = st.columns(2)
    pos = c1.selectbox("Follow the input token at", positions,
                       format_func=lambda p: f"{p}: {tokens.get(p, '')}",
                       key=state.widget_key("pos", positions[-1], positions.__contains__),
                       on_change=state.sync, args=("pos",))
    layer = c2.select_slider("Hidden state", layers, key=state.widget_key("layer", layers[-1], layers.__contains__),
                             on_change=state.sync, args=("layer",))
    top = lens_follow.cell_top(t, pos, layer)
    st.markdown(f"**Top {len(top)} of {model_label} at hidden state {layer}, after "
                f"“{data.escape_markdown(str(tokens.get(pos, '')))}”** (position {pos}; click a cell of the grid "
                "to pick another)")
    frame.table(top, height=style.fit_height(top))

    st.markdown("**Commitment**: for each input token, the first hidden state from which the final top-1 "
                "prediction stays top-1 at every later hidden state (0: the input embedding already predicts it).")
    strip = lens_follow.commitment_rows(both[both["lens"] == lens])
    export.show(lambda: (lens_follow.commitment_strip(strip), strip), f"commitment-{ref.name}-{lens}",
                key="commit", spec_key=("commit",) + spec_key + (lens,))

    chosen = pins()
    st.text_input("Pin tokens (comma-separated; a leading space is part of a token, shown as ␣)",
                  key=state.widget_key("pin", ",".join(chosen), fit=lambda v: ",".join(v)), on_change=_on_pins,
                  placeholder="e.g. ␣the,(,=", max_chars=300)
    if not chosen:
        st.caption("Pinned tokens are drawn here: each one's probability at every hidden state of the followed "
                   "position, for each model and lens. `pin=` in the page's address keeps them.")
        return
    if pinned is not None:
        full, unknown = pinned
        rows = lens_follow.pinned_full(full.assign(pin=full["pin"].map(lambda p: visible_token(p))), pos)
        missing = sorted({visible_token(p) for role in unknown.values() for p in role})
        st.caption("Read from the whole output distribution (the models ran on this text here).")
        if missing:
            st.caption("Not a single token of this vocabulary, so not drawn: "
                       + data.escape_markdown(", ".join(json.dumps(p, ensure_ascii=False) for p in missing),
                                              entities=False) + ".")
    else:
        rows = lens_follow.pinned_stored(both, chosen, pos)
        st.caption(f"From the stored top {K} of each cell (the models do not run on a sample text here).")
        gaps = lens_follow.gaps_line(rows, K)
        if gaps:
            st.caption(data.escape_markdown(gaps, entities=False))  # a caption shows an entity as typed
    drawn = [p for p in chosen if p in set(rows["pin"]) and rows.loc[rows["pin"] == p, "prob"].notna().any()]
    for pin in [p for p in chosen if p in set(rows["pin"]) and p not in drawn]:
        st.caption(data.escape_markdown(f"{json.dumps(pin, ensure_ascii=False)}: outside the stored top {K} at every "
                                        "hidden state of this position: nothing to draw.", entities=False))
    for i, pin in enumerate(drawn):
        if i % 2 == 0:  # two a row, a row at a time: a phone stacks them in the pins' order
            cols = st.columns(2 if len(drawn) > 1 else 1)
        with cols[i % 2]:
            export.show(lambda pin=pin: (lens_follow.pinned_chart(rows, pin), rows[rows["pin"] == pin]),
                        f"pinned-{ref.name}-{i}", key=f"pin_{i}", spec_key=("pin", pin, pos) + spec_key,
                        downloads=False)
