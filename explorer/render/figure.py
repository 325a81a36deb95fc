"""One figure or table of the registry (:mod:`explorer.render.figures`): how it is named,
captioned, built from a cache and found available, and the stages its source line names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import altair as alt
import pandas as pd

from explorer.render import read
from tying.cache.summary_types import Summary


@dataclass(frozen=True)
class Figure:
    name: str  # file stem, the paper's numbering first: "figure1-alignment", "table1"
    title: str  # a short title
    caption: str  # what it shows and how to read it, one or two sentences
    build: Callable[[read.CacheRef], tuple[alt.TopLevelMixin | None, pd.DataFrame]]
    available: Callable[[read.CacheRef, Summary], bool]
    stages: tuple[str, ...] = ()  # the recorded stages its source line names ("sweep": every sweep cell); () all
    page: str | None = None  # the app page (explorer.render.pages) that draws it after its own content: a figure
    # an analysis brings in its own module (explorer/render/<analysis>.py) names the page it belongs on

    @property
    def is_table(self) -> bool:
        return self.name.startswith("table")


def has(table: str) -> Callable[[read.CacheRef, Summary], bool]:
    """Available when the cache's ``table`` has rows."""
    return lambda ref, s: read.has_rows(ref, table)


def kind(*kinds: str) -> Callable[[read.CacheRef, Summary], bool]:
    """Available for caches of these kinds."""
    return lambda ref, s: s.kind in kinds
