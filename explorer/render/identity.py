"""Results computed once per object, for objects that the per-cache memos hand out.

A cache's summary and its frames come from memos in :mod:`explorer.render.read`: every run of
a page gets the same object back. What a page derives from such an object (a table of the
summary's numbers, the Arrow table Streamlit sends for a frame) is then the same each run, and
under a class's load deriving it again each run cost more than the rest of the page's Python
(issue 35). Those objects are not hashable (a summary holds dicts, a frame is mutable), so these
memos key on the object's identity. An entry holds its object, so an id is not reused while
the entry lives; objects handed out by the memos are read-only by convention (a reader that
hands out copies, ``memo(copy=True)``, simply misses here).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")

MAX_ENTRIES = 512
_entries: OrderedDict[tuple, tuple[object, object]] = OrderedDict()
_lock = threading.Lock()


def once(obj: object, key: tuple, make: Callable[[object], R]) -> R:
    """``make(obj)`` the first time this object is asked for under ``key``, then the same result
    (the least recently used entries go first past :data:`MAX_ENTRIES`)."""
    k = (id(obj), key)
    with _lock:
        hit = _entries.get(k)
        if hit is not None and hit[0] is obj:
            _entries.move_to_end(k)
            return hit[1]  # type: ignore[return-value]
    value = make(obj)
    with _lock:
        _entries[k] = (obj, value)
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return value


def per_object(fn: Callable[..., R]) -> Callable[..., R]:
    """Decorate ``fn(obj, *args)`` (``args`` hashable) to run once per object and arguments."""

    @functools.wraps(fn)
    def wrapped(obj, *args):
        return once(obj, (fn.__module__, fn.__qualname__, args), lambda o: fn(o, *args))

    return wrapped


def clear() -> None:
    with _lock:
        _entries.clear()
