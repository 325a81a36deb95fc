"""The tour (views/tour.py): every step on the shipped caches, the step in the URL, verdicts
computed from the cache (a cache where a claim fails says so)."""

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from explorer import state, tour
from tests.apppage import open_page
from tying.cache.fixtures import build_synthetic_cache

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SHIPPED = ROOT / "cache"


def _tour(cache_dir, monkeypatch, **params) -> AppTest:
    return open_page(cache_dir, monkeypatch, "tour", timeout=90, **params)


def _html(at) -> str:
    return "\n".join(str(h.proto.body) for h in at.get("html"))


def _text(at) -> str:
    return "\n".join(str(x.value) for x in [*at.markdown, *at.caption, *at.info]) + _html(at)


def test_the_url_knows_every_step():
    parse = state.PARAMS["step"].parse
    assert parse([str(len(tour.STEPS))]) == len(tour.STEPS)
    with pytest.raises(ValueError):
        parse([str(len(tour.STEPS) + 1)])
    assert [s.number for s in tour.STEPS] == list(range(1, len(tour.STEPS) + 1))


@pytest.mark.parametrize("pair,steps", [("demo", range(1, 10)), ("paper", range(1, 10)), ("sweep", range(1, 10))])
def test_every_step_renders_on_the_shipped_caches(monkeypatch, pair, steps):
    for n in steps:
        at = _tour(SHIPPED, monkeypatch, pair=pair, step=n)
        assert not at.exception, (pair, n, [e.value for e in at.exception])
        assert f"Step {n} of {len(tour.STEPS)}" in _html(at), (pair, n)
        step = tour.step_at(n)
        if step.claim is not None:  # a verdict, or one line saying which cache has the data
            text = _text(at)
            assert "tour-verdict" in text or "has no data for this step" in text, (pair, n)


def test_a_step_borrows_the_cache_that_holds_its_data(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=8)  # the authors' measurements: the paper cache
    assert "From the cache 'paper'" in _text(at) and "✓ holds" in _html(at)
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=9)  # the sweep
    assert "From the cache 'sweep'" in _text(at)


def test_a_bad_step_falls_back_to_step_one_with_a_note(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step="12")
    assert not at.exception
    assert "Step 1 of 9" in _html(at)
    assert any("ignored the link's step='12'" in c.value for c in at.caption)


def test_next_and_previous_write_the_step_to_the_url(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=3)
    at.button(key="tour_next").click().run()
    assert at.query_params["step"] == "4" and "Step 4 of 9" in _html(at)
    at.button(key="tour_prev").click().run()
    at.button(key="tour_prev").click().run()
    assert at.query_params["step"] == "2"
    at.button(key="tour_prev").click().run()
    assert "step" not in at.query_params and "Step 1 of 9" in _html(at)  # step 1 is the default: not written
    assert at.button(key="tour_prev").disabled


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """A toy-lab cache whose O->T and I->T numbers are swapped: the paper's claim fails there."""
    d = tmp_path_factory.mktemp("failing")
    path = build_synthetic_cache(d, "failing")
    con = duckdb.connect(str(path))
    swap = "CASE WHEN {c} LIKE 'O->T%' THEN replace({c}, 'O->T', 'I->T') " \
           "WHEN {c} LIKE 'I->T%' THEN replace({c}, 'I->T', 'O->T') ELSE {c} END"
    con.execute(f"UPDATE alignment_summary SET comparison = {swap.format(c='comparison')}")
    con.execute(f"UPDATE seed_metrics SET metric = {swap.format(c='metric')}")
    con.close()
    return d


def test_a_cache_where_the_claim_fails_says_so(failing, monkeypatch):
    at = _tour(failing, monkeypatch, pair="failing", step=2)
    assert not at.exception
    assert "✗ does not hold" in _html(at)
    at = _tour(failing, monkeypatch, pair="failing", step=3)  # its neighbours were not swapped
    assert "✓ holds" in _html(at)


def test_the_overview_opens_on_the_verdicts(failing, monkeypatch):
    monkeypatch.setenv("TYING_CACHE_DIR", str(failing))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["pair"] = "failing"
    at.run()
    assert not at.exception
    first = at.get("html")[0]
    assert "does not hold" in str(first.proto.body) and "holds" in str(first.proto.body)
    assert at.subheader[0].value == "The paper's claims, checked on this cache"
