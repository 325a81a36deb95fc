"""explorer/render/altair_lookup.py: Altair's class lookup built once gives the specs Altair's own
``from_dict`` gives, and is built once however many channels are encoded."""

from __future__ import annotations

import altair as alt
import pandas as pd
import pytest
from altair.utils import schemapi

from explorer.render import altair_lookup, figures, read
from explorer.render.spec import vega_lite_spec


@pytest.fixture
def own_then_lookup():
    """Run a body under Altair's own from_dict, then under the lookup; the lookup left installed."""
    def both(build):
        altair_lookup.uninstall()
        try:
            own = build()
        finally:
            assert altair_lookup.install()
        return own, build()
    return both


def test_style_installs_it():
    import explorer.render.style  # noqa: F401  (every chart module imports it)

    assert schemapi.SchemaBase.__dict__["from_dict"].__func__ is altair_lookup._from_dict


def test_channels_of_every_kind_give_the_same_spec(own_then_lookup):
    df = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", "y"], "t": ["2026-01-01", "2026-01-02"]})

    def build() -> dict:
        return (alt.Chart(df).mark_point()
                .encode(x="a:Q", y={"field": "b", "type": "nominal"}, color=alt.value("#000000"),
                        tooltip=["a:Q", "b:N", {"field": "t", "type": "temporal"}], detail="b")
                .to_dict())

    own, shared = own_then_lookup(build)
    assert own == shared
    assert own["encoding"]["x"] == {"field": "a", "type": "quantitative"}
    assert own["encoding"]["tooltip"][2] == {"field": "t", "type": "temporal"}


def test_the_lookup_is_built_once_for_many_channels(monkeypatch):
    assert altair_lookup.install()
    altair_lookup._converters.clear()
    built = []
    real = schemapi._FromDict.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(schemapi._FromDict, "__init__", counting)
    df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    for _ in range(5):
        alt.Chart(df).mark_line().encode(x="a:Q", y="b:Q", tooltip=["a", "b"]).to_dict()
    assert len(built) == 1  # every channel class is Vega-Lite's: one table
    altair_lookup.uninstall()  # Altair's own: a table a channel, as before
    built.clear()
    alt.Chart(df).mark_line().encode(x="a:Q", y="b:Q").to_dict()
    assert len(built) == 2
    assert altair_lookup.install()


@pytest.mark.slow  # every figure of four caches, drawn twice
def test_every_figure_of_the_synthetic_caches_gives_the_same_spec(synthetic_caches, own_then_lookup):
    n = 0
    for name in ("synthetic", "paper", "sweep", "mechanism"):
        ref = read.CacheRef.of(synthetic_caches / f"{name}.duckdb")
        for fig in figures.available(ref):
            def build(fig=fig, ref=ref):
                chart, _ = fig.build(ref)
                return None if chart is None else vega_lite_spec(chart)

            own, shared = own_then_lookup(build)
            assert own == shared, fig.name
            n += own is not None
    assert n >= 10


def test_an_altair_without_those_internals_is_left_as_it_is(monkeypatch):
    before = schemapi.SchemaBase.__dict__["from_dict"]
    monkeypatch.delattr(schemapi, "_FromDict")
    assert not altair_lookup.compatible() and not altair_lookup.install()
    assert schemapi.SchemaBase.__dict__["from_dict"] is before
