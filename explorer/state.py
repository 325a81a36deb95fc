"""The view's state (pair, token, k, method, layer, runs, ...) kept in the URL, so a view is a link.

The URL is the source of truth. Every run starts by reading it (``read_url``, in app.py
before anything else) into ``st.session_state``; a widget is keyed ``w_<name>`` and seeded
from that value before it renders (``widget_key``), so a Back or Forward rerun, which
brings the older URL, restores the older view. The URL is written only from the callback of
a user's action (``sync``, ``put``), once per action with every change of that action
batched, and it holds only values that differ from their defaults. Streamlit's frontend
pushes one browser-history entry for every URL write and one for every page change, so one
action makes one entry and loading a page, which writes nothing, makes none beyond its own.
A page change keeps the state because the menu's links carry the query string
(``carried``): Streamlit's own menu would drop every parameter not bound to a widget.

Junk in the URL never raises: the value falls back to its default with a note in the
sidebar, and the next action's write leaves the junk out.

Why not Streamlit's ``bind="query-params"``: the token is no widget's value (search, dice,
most-changed list and chart clicks all set it); ``k`` is Neighbours' slider but Projection
reads it too, and a bound parameter is dropped on the way to another page; a bound junk
value is dropped silently, with a URL rewrite on page load (an extra history entry).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from explorer import data
from explorer.render import tour
from explorer.render.map_colours import COLOUR_KEYS, parse_select
from explorer.render.presenter import PRESENTER
from tying.cache.schema import METHOD_LABELS, TABLE1_METHODS

METHODS = TABLE1_METHODS
METHOD_LABEL = METHOD_LABELS
SPLITS = ("in_sample", "held_out")
VIEWS = ("side by side", "overlaid")
RENDERERS = ("auto", "vega", "webgl")  # the Projection page's: explorer/deck.py decides "auto"
TRUE = ("yes", "on", "true", "1")
FALSE = ("no", "off", "false", "0")


def _last(raws: list[str]) -> str:
    return raws[-1]


def _int_in(lo: int, hi: int) -> Callable[[list[str]], int]:
    def parse(raws: list[str]) -> int:
        text = _last(raws).strip()
        if not text or len(text) > 12:  # int() of a very long string is slow, then refused
            raise ValueError(text)
        value = int(text)
        if not lo <= value <= hi:
            raise ValueError(text)
        return value

    return parse


def _choice(options) -> Callable[[list[str]], str]:
    def parse(raws: list[str]) -> str:
        if _last(raws) not in options:
            raise ValueError(raws)
        return _last(raws)

    return parse


def _text(raws: list[str]) -> str:
    text = _last(raws)
    if not 0 < len(text) <= 200 or not text.isprintable():
        raise ValueError(text)
    return text


def _flag(raws: list[str]) -> bool:
    text = _last(raws).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ValueError(text)


def _names(raws: list[str]) -> list[str]:
    """Repeated parameters (``runs=a&runs=b``); a lone empty one (``runs=``) is an empty choice."""
    names = [r for r in raws if r != ""]
    if len(names) > 100 or not all(len(n) <= 200 and n.isprintable() for n in names):
        raise ValueError(raws)
    return list(dict.fromkeys(names))


def _pins(raws: list[str]) -> list[str]:
    """Pinned tokens, comma-separated (``pin=␣Paris,␣Lyon``; a leading space or ␣ is part of a token)."""
    pins = list(dict.fromkeys(p for p in _last(raws).split(",") if p != ""))
    if not pins or len(pins) > 8 or not all(len(p) <= 64 and p.isprintable() for p in pins):
        raise ValueError(raws)
    return pins


@dataclass(frozen=True)
class Param:
    """A URL parameter: its parser (raises on junk) and its default where it does not depend
    on the cache (else the page gives it to ``widget_key``)."""

    parse: Callable[[list[str]], Any]
    default: Any = None


PARAMS: dict[str, Param] = {
    "pair": Param(_text),
    "presentation": Param(_flag, False),
    "notes": Param(_flag, False),  # an old link's presenter view (now view=presenter)
    "token": Param(_int_in(0, 10_000_000)),
    "k": Param(_int_in(1, 1000)),
    "method": Param(_choice(METHODS), "linear"),
    "split": Param(_choice(SPLITS), "held_out"),
    "view": Param(_choice(VIEWS + (PRESENTER,)), "side by side"),  # a projection's layout; the tour's presenter view
    "density": Param(_flag, False),
    "points": Param(_int_in(1, 10_000_000), 5000),
    "renderer": Param(_choice(RENDERERS), "auto"),
    "colour": Param(_choice(COLOUR_KEYS), "matrix"),  # what the Projection map is coloured by
    "select": Param(parse_select),  # the Projection map's selected tokens: ids, comma-separated
    "layer": Param(_int_in(0, 10_000)),
    "model": Param(_text),
    "sample": Param(_int_in(0, 100_000)),
    "pin": Param(_pins),  # the Lens page's pinned tokens
    "pos": Param(_int_in(0, 10_000)),  # the Lens page's followed position
    "runs": Param(_names),
    "evo_runs": Param(_names),
    "axis": Param(_text, "d_model"),
    "step": Param(_int_in(1, len(tour.STEPS)), 1),  # the tour's step
}
# What belongs to one cache: a change of pair leaves these out of the URL.
PER_CACHE = ("token", "k", "layer", "model", "sample", "pos", "runs", "evo_runs", "select")


def _shown(raws: list[str]) -> str:
    text = raws[-1] if raws else ""
    return repr(text[:40] + ("…" if len(text) > 40 else ""))


def read_url() -> list[str]:
    """Read the URL into the session state (every run); return notes on the junk in it."""
    values, notes, junk = {}, [], set()
    for name, param in PARAMS.items():
        raws = st.query_params.get_all(name)
        if not raws:
            continue
        try:
            values[name] = param.parse([str(r) for r in raws])
        except Exception:  # a parser's every failure is junk in the URL, never an error
            notes.append(f"ignored the link's {name}={_shown(raws)}")
            junk.add(name)
    st.session_state["_url"] = values
    st.session_state["_url_junk"] = junk
    for name in PARAMS:  # plain names too, for code that reads st.session_state (export.py)
        if name in values:
            st.session_state[name] = values[name]
        else:
            st.session_state.pop(name, None)
    return notes


def get(name: str, default: Any = None) -> Any:
    """The URL's value of ``name`` in this run (after ``read_url``), else ``default``."""
    return st.session_state.get("_url", {}).get(name, default)


NOTE_ICON = ":material/warning:"  # a note's sign: a Material symbol, drawn without an emoji font


def note(text: str) -> None:
    """A note on the URL: in the sidebar, and where the page is drawing (the sidebar is folded
    away on a phone)."""
    line = NOTE_ICON + " " + data.escape_markdown(text, entities=False)
    st.sidebar.caption(line)
    if st.session_state.get("_drawing_sidebar"):  # a sidebar widget's note: the page shows it after the sidebar
        st.session_state.setdefault("_sidebar_notes", []).append(line)
    else:
        st.caption(line)


def sidebar_block(drawing: bool) -> list[str]:
    """Mark the start (True) or end (False) of the app's sidebar block; at the end, return the
    notes its widgets made, for the page to show too."""
    st.session_state["_drawing_sidebar"] = drawing
    return [] if drawing else st.session_state.pop("_sidebar_notes", [])


def reject(name: str, why: str) -> None:
    """The URL's ``name`` does not fit this page (a token the cache lacks): a note, and the
    next write leaves it out."""
    raws = st.query_params.get_all(name)
    note(f"ignored the link's {name}={_shown(raws)}: {why}")
    st.session_state.setdefault("_url_junk", set()).add(name)


def widget_key(name: str, default: Any, valid: Callable[[Any], bool] = lambda v: True,
               why: str = "not on offer here", fit: Callable[[Any], Any] | None = None) -> str:
    """Seed the widget key ``w_<name>`` from the URL (or ``default``, with a note when the
    URL's value is not ``valid`` here) and return it. ``fit`` maps a URL value onto the
    widget's own options first (e.g. any number of points above a cache's tokens means all of
    them). The widget's ``on_change`` is ``sync`` with ``args=(name,)``."""
    url = st.session_state.get("_url", {})
    value = url.get(name, default)
    if name in url:
        try:
            value = fit(value) if fit is not None else value
            ok = bool(valid(value))
        except Exception:  # a value of the wrong type is junk, never an error
            ok = False
        if not ok:
            reject(name, why)
            value = default
    st.session_state.setdefault("_defaults", {})[name] = default
    key = f"w_{name}"
    if key not in st.session_state or st.session_state[key] != value:
        st.session_state[key] = value
    return key


def _serialize(value: Any) -> list[str]:
    if isinstance(value, bool):
        return ["on" if value else "off"]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value] or [""]
    return [str(value)]


def correct(name: str) -> None:
    """Leave the URL's ``name`` out of the URL when it was junk (its note says so), so the address
    shows what the page shows: its default."""
    if name in st.session_state.get("_url_junk", set()) and name in st.query_params:
        del st.query_params[name]


def put(changes: dict[str, Any] | None = None, **more: Any) -> None:
    """Write the URL once: ``changes`` set (or, at ``None`` or the default, removed), the
    junk of the last run left out, every other parameter kept. For callbacks only."""
    changes = {**(changes or {}), **more}
    current = {k: st.query_params.get_all(k) for k in st.query_params}
    junk = st.session_state.get("_url_junk", set())
    new = {k: v for k, v in current.items() if k not in junk}
    defaults = st.session_state.get("_defaults", {})
    for name, value in changes.items():
        default = defaults.get(name, PARAMS[name].default)
        if value is None or (default is not None and _serialize(value) == _serialize(default)):
            new.pop(name, None)
        else:
            new[name] = _serialize(value)
    if new != current:
        st.query_params.from_dict(new)


def carried() -> dict[str, list[str]]:
    """The URL's parameters less its junk: what a link to another page carries."""
    junk = st.session_state.get("_url_junk", set())
    return {k: st.query_params.get_all(k) for k in st.query_params if k not in junk}


def sync(name: str) -> None:
    """``on_change`` of the widget keyed ``w_<name>``: its value into the URL."""
    put({name: st.session_state.get(f"w_{name}")})


def change_pair(name: str | None = None) -> None:
    """Callback of the pair picker (or of a button naming ``name``): the new pair in the URL,
    the old one's tokens, runs and samples out of it (one write)."""
    put({"pair": name if name is not None else st.session_state.get("w_pair"), **{n: None for n in PER_CACHE}})
