"""The view's state (pair, token, k, method, layer, ...) kept in the URL, so a view is a link.

Values live in ``st.session_state`` under their own names and are mirrored to
``st.query_params``. Widgets use a separate key (``w_<name>``) seeded from the state before
they render, because Streamlit drops a widget's key when a page without it runs.
Junk in the URL is ignored (with a note), never an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from tying.cache.schema import METHOD_LABELS, TABLE1_METHODS

METHODS = TABLE1_METHODS
METHOD_LABEL = METHOD_LABELS
SPLITS = ("in_sample", "held_out")


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(text)
        return value

    return parse


def _choice(options) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(text)
        return text

    return parse


# name -> parser of the URL text (raises ValueError on junk)
PARSERS: dict[str, Callable[[str], Any]] = {
    "pair": lambda s: s if 0 < len(s) <= 200 else (_ for _ in ()).throw(ValueError(s)),
    "token": _int_in(0, 10_000_000),
    "k": _int_in(1, 1000),
    "method": _choice(METHODS),
    "split": _choice(SPLITS),
    "layer": _int_in(0, 10_000),
    "view": _choice(("side by side", "overlaid")),
    "presentation": lambda s: {"true": True, "1": True, "false": False, "0": False}[s.strip().lower()],
}


def load_from_url() -> list[str]:
    """Copy valid URL parameters into the session state once per session; return notes on junk
    (kept for the session, so every page shows them)."""
    if st.session_state.get("_url_loaded"):
        return st.session_state.get("_url_notes", [])
    notes = []
    for name, parse in PARSERS.items():
        raw = st.query_params.get(name)
        if raw is None:
            continue
        try:
            st.session_state[name] = parse(str(raw))
        except (ValueError, TypeError):
            notes.append(f"ignored the link's {name}={str(raw)[:40]!r}")
    st.session_state["_url_loaded"] = True
    st.session_state["_url_notes"] = notes
    return notes


def get(name: str, default: Any = None) -> Any:
    return st.session_state.get(name, default)


def put(name: str, value: Any) -> None:
    """Set a state value and mirror it to the URL."""
    st.session_state[name] = value
    if value is None:
        if name in st.query_params:
            del st.query_params[name]
    else:
        st.query_params[name] = str(value)


def widget_key(name: str, default: Any, valid: Callable[[Any], bool] = lambda v: True) -> str:
    """Seed ``w_<name>`` from the state (or ``default`` when the state is missing or invalid)."""
    value = st.session_state.get(name, default)
    if not valid(value):
        value = default
    key = f"w_{name}"
    if st.session_state.get(key) != value:
        st.session_state[key] = value
    return key


def sync(name: str) -> None:
    """After a widget keyed ``w_<name>`` rendered: store and mirror its value."""
    value = st.session_state.get(f"w_{name}")
    if st.session_state.get(name) != value or st.query_params.get(name) != str(value):
        put(name, value)
