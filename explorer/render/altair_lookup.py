"""Altair's class lookup built once per process instead of once per channel.

Every string or dict given to ``encode`` (``x="count:Q"``, a tooltip's list) goes through Altair's
``SchemaBase.from_dict``, which builds its table from schema to wrapper class afresh each call:
hundreds of classes, each schema hashed through ``json.dumps``, some 8 ms a channel. The table
depends only on the classes that ``_default_wrapper_classes`` lists (Vega-Lite's for a Vega-Lite
class, every schema class for the others), so :func:`install` makes ``from_dict`` reuse one table
for each class that defines that list, built at its first call. What it returns is unchanged
(tests/test_altair_lookup.py compares every figure's spec both ways); drawing every figure of the
four shipped caches takes about a fifth less CPU, imports included (``python bench/bench_charts.py``).
Upstream: vega/altair#3547 proposes the same. Where Altair's internals differ from the ones this
expects, :func:`install` leaves Altair as it is.
"""

from __future__ import annotations

import threading

from altair.utils import schemapi

_lock = threading.Lock()
_converters: dict[type, object] = {}  # the class that lists the wrapper classes -> its lookup, once built
_original = schemapi.SchemaBase.__dict__.get("from_dict")


def _lookup(cls):
    """The lookup Altair would build for ``cls``: from the wrapper classes of the first class in its
    MRO that defines ``_default_wrapper_classes``."""
    owner = next(c for c in cls.__mro__ if "_default_wrapper_classes" in c.__dict__)
    converter = _converters.get(owner)
    if converter is None:
        with _lock:
            converter = _converters.get(owner)
            if converter is None:
                converter = _converters[owner] = schemapi._FromDict(owner._default_wrapper_classes())
    return converter


def _from_dict(cls, dct, validate: bool = True):
    """``SchemaBase.from_dict`` as Altair writes it, with each lookup built once."""
    if validate:
        cls.validate(dct)
    return _lookup(cls).from_dict(dct, cls)


def compatible() -> bool:
    """Whether Altair has the internals this replaces, in the shape it expects."""
    return (isinstance(_original, classmethod) and hasattr(schemapi, "_FromDict")
            and hasattr(schemapi.SchemaBase, "_default_wrapper_classes"))


def install() -> bool:
    """Make ``SchemaBase.from_dict`` reuse one lookup (idempotent); False where Altair differs."""
    if not compatible():
        return False
    schemapi.SchemaBase.from_dict = classmethod(_from_dict)
    return True


def uninstall() -> None:
    """Altair's own ``from_dict`` again (for the tests that compare both)."""
    if _original is not None:
        schemapi.SchemaBase.from_dict = _original
