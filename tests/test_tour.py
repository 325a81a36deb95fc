"""The tour (views/tour.py): every step on the shipped caches, the step in the URL, verdicts
computed from the cache (a cache where a claim fails says so)."""

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.render import tour
from precompute.fixtures import build_synthetic_cache
from tests.apppage import open_page

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SHIPPED = ROOT / "cache"


N = {s.slug: s.number for s in tour.STEPS}
"""A step's number by its slug (inserting a step renumbers those after it)."""


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


@pytest.mark.slow
@pytest.mark.parametrize("pair,steps", [(p, range(1, len(tour.STEPS) + 1)) for p in ("demo", "paper", "sweep", "mechanism")])
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
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=N["published"])  # the authors' measurements: the paper cache
    assert "From the cache 'paper'" in _text(at) and "✓ holds" in _html(at)
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=N["why"])  # the mechanism lab's runs
    assert "From the cache 'mechanism'" in _text(at) and "toy mechanism lab (1.57M parameters" in _html(at)
    assert _html(at).count("class='tour-also'") == 3  # the update, reach and optimiser claims under the size claim
    for n in (N["sweep-bias"], N["sweep-gap"]):  # the sweep's two claims, each its own step, verdict and chart
        at = _tour(SHIPPED, monkeypatch, pair="demo", step=n)
        assert "From the cache 'sweep'" in _text(at)
        assert tour.step_at(n).claim in ("sweep_bias", "sweep_gap")


def test_a_bad_step_falls_back_to_step_one_with_a_note(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step="42")
    assert not at.exception
    assert f"Step 1 of {len(tour.STEPS)}" in _html(at)
    assert any("ignored the link's step='42'" in c.value for c in at.caption)
    assert "step" not in at.query_params and at.query_params["pair"] == "demo"  # the URL says step 1 too


def test_home_end_space_and_shift_space_have_their_buttons(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=4)
    last = len(tour.STEPS)
    for key, n in (("tour_space", 5), ("tour_shift_space", 4), ("tour_end", last), ("tour_home", 1)):
        at.button(key=key).click().run()
        assert f"Step {n} of {last}" in _html(at), key
    assert at.button(key="tour_home").disabled and at.button(key="tour_shift_space").disabled


def test_every_step_has_speaker_notes_of_its_own():
    from explorer.render.tour_notes import NOTES

    assert set(NOTES) == {s.slug for s in tour.STEPS}
    for field in ("say", "ask", "caveat"):
        texts = [getattr(s.notes, field) for s in tour.STEPS]
        assert all(len(t) > 40 for t in texts) and len(set(texts)) == len(texts), field  # none empty, none copied


def test_the_presenter_view_shows_the_notes_the_next_step_and_a_clock(monkeypatch):
    """The audience's window (a screen or a slide) never shows notes: its sidebar links to the
    presenter view (``?view=presenter``, opened in a window of its own, as the N key does), and its
    script follows the other window. The presenter view: the slide in a column, beside it this
    step's notes, the next step's title, the clock's element and script, and a link to the
    audience's window in presentation mode; Next keeps it, with the next step's notes; an old
    link's ``?notes=on`` opens it too; a page link from it does not carry it."""
    import html

    from explorer.render import presenter

    step, ahead = tour.step_at(2), tour.step_at(3)
    for extra in ({}, {"presentation": "on"}):
        at = _tour(SHIPPED, monkeypatch, pair="demo", step=2, **extra)
        page = _html(at)
        assert "class='presenter'" not in page and html.escape(step.notes.say) not in page
        assert "tourFollow" in page and "STEP = 2" in page  # the windows follow each other
        link = next(str(h.proto.body) for h in at.sidebar.get("html") if "Presenter view" in str(h.proto.body))
        assert "view=presenter" in link and f"target='{presenter.PRESENTER_WINDOW}'" in link
        assert "presentation" not in link
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=2, view="presenter", presentation="on")
    page = _html(at)
    for text in (step.notes.say, step.notes.ask, step.notes.caveat, f"Next: step 3, {ahead.title}"):
        assert html.escape(text) in page, text
    assert "id='tour-clock'" in page and "sessionStorage" in page
    assert "window.slideFit" not in page and "--slide-zoom" not in page  # no full-screen slide in the presenter's window
    assert "presentation=on" in page and f"target='{presenter.AUDIENCE_WINDOW}'" in page
    more = [p.proto for p in at.get("page_link") if p.proto.label.startswith("More on")]
    assert more and all("view" not in p.query_string for p in more)
    at.button(key="tour_next").click().run()  # moving on keeps the view, with the next step's notes
    assert at.query_params["view"] == "presenter" and html.escape(ahead.notes.say) in _html(at)
    old = _tour(SHIPPED, monkeypatch, pair="demo", step=len(tour.STEPS), notes="on")
    assert "Next: the end of the tour" in _html(old)


def test_the_first_and_last_steps_show_a_code_of_their_public_address(monkeypatch):
    """Served at a public address, steps 1 and N draw a QR code of their own address (the pair
    carried, not presentation mode: a phone reads it) as a PNG image (st.html keeps no inline
    SVG); on localhost, none. The browser test reads it back from a screenshot."""
    import base64
    import io
    import re

    import numpy as np
    import zxingcpp
    from PIL import Image

    at = _tour(SHIPPED, monkeypatch, pair="demo", presentation="on")
    assert "class='tour-qr'" not in _html(at)  # AppTest's page has no public address
    monkeypatch.setenv("TYING_PUBLIC_URL", "https://someone-weight-tying.hf.space/tour")
    for number in (1, len(tour.STEPS)):
        at = _tour(SHIPPED, monkeypatch, pair="demo", presentation="on", step=number)
        body = next(str(h.proto.body) for h in at.get("html") if "class='tour-qr'" in str(h.proto.body))
        assert "<svg" not in body
        png = base64.b64decode(re.search(r"src='data:image/png;base64,([^']+)'", body).group(1))
        image = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
        expected = f"https://someone-weight-tying.hf.space/tour?pair=demo&step={number}"
        assert [r.text for r in zxingcpp.read_barcodes(image)] == [expected]
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=2)
    assert "class='tour-qr'" not in _html(at)


def test_next_and_previous_write_the_step_to_the_url(monkeypatch):
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=3)
    at.button(key="tour_next").click().run()
    assert at.query_params["step"] == "4" and f"Step 4 of {len(tour.STEPS)}" in _html(at)
    at.button(key="tour_prev").click().run()
    at.button(key="tour_prev").click().run()
    assert at.query_params["step"] == "2"
    at.button(key="tour_prev").click().run()
    assert "step" not in at.query_params and f"Step 1 of {len(tour.STEPS)}" in _html(at)  # step 1 is the default: not written
    assert at.button(key="tour_prev").disabled



def test_menu_icons_need_no_emoji_font_and_tour_buttons_name_their_arrow_once(monkeypatch):
    """Material icons (Streamlit draws them with its own font), not emoji a lecture-hall PC may lack;
    the tour's buttons read Previous and Next, and Streamlit shows the arrow of their shortcut once."""
    import re

    from explorer.render import pages

    assert all(re.fullmatch(r":material/[a-z_]+:", p.icon) for p in pages.PAGES), [p.icon for p in pages.PAGES]
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=3)
    assert at.button(key="tour_prev").label == "Previous" and at.button(key="tour_next").label == "Next"

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


@pytest.mark.slow
def test_a_cache_where_the_claim_fails_says_so(failing, monkeypatch):
    at = _tour(failing, monkeypatch, pair="failing", step=2)
    assert not at.exception
    assert "✗ does not hold" in _html(at)
    at = _tour(failing, monkeypatch, pair="failing", step=3)  # its neighbours were not swapped
    assert "✓ holds" in _html(at)


def test_toy_numbers_beside_the_paper_name_their_scale(monkeypatch):
    """Every step that sets toy numbers beside the paper's says on the same screen that they come
    from toys and at what scale (parameters, training tokens)."""
    for n in (N[s] for s in ("alignment", "neighbours", "gradient", "scaling", "lens")):
        html = _html(_tour(SHIPPED, monkeypatch, pair="demo", step=n))
        assert "toy (1.57M/2.10M parameters, 0.26M training tokens)" in html, n
    assert "toy sweep (" in _html(_tour(SHIPPED, monkeypatch, pair="demo", step=N["sweep-gap"]))


def test_the_example_token_shows_the_claim_on_the_map():
    """Step 4's token: its T neighbours close to O's (overlap), spread in I's view of the map; the
    app and the static site both call tour.example_token."""
    from explorer import data, frame

    ref = next(frame._ref(c) for c in data.caches(str(SHIPPED)) if c.name == "demo")
    tok = tour.example_token(ref)
    lists = tour.neighbour_lists(ref, tok, 10)
    assert len(set(lists["T"]) & set(lists["O"])) > len(set(lists["T"]) & set(lists["I"]))
    coords = data.umap(ref)
    def spread(m):
        view = coords[coords["matrix"] == m].set_index("token")[["x", "y"]]
        nb = [t for t in data.neighbour_ids(ref, m)[tok, :10] if t in view.index]
        scale = float((view.var().sum()) ** 0.5)
        return float((((view.loc[nb] - view.loc[tok]) ** 2).sum(axis=1) ** 0.5).mean()) / scale
    assert spread("I") > max(spread("T"), spread("O"))


def test_the_overview_opens_on_the_verdicts(failing, monkeypatch):
    monkeypatch.setenv("TYING_CACHE_DIR", str(failing))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["pair"] = "failing"
    at.run()
    assert not at.exception
    first = at.get("html")[0]
    assert "does not hold" in str(first.proto.body) and "holds" in str(first.proto.body)
    assert at.subheader[0].value == "The paper's claims, checked on these models"  # after the set-up and the tour's link


def test_a_presentation_slide_gives_its_chart_a_width_large_axes_and_no_sidebar(monkeypatch):
    """Presentation mode: the step's chart carries its slide column's width (Streamlit would measure
    the zoomed column), axis labels at slide.AXIS_PX (22 px at 1920x1080), the slide's zoom script
    and stylesheet on the page; a plain tour keeps charts at their container's width."""
    import json

    from explorer.render import slide

    for n in (N["alignment"], N["map"]):
        at = _tour(SHIPPED, monkeypatch, pair="demo", step=n, presentation="on")
        assert not at.exception
        spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
        assert spec["config"]["axis"]["labelFontSize"] >= slide.AXIS_PX == 22
        if n == N["alignment"]:
            assert isinstance(spec["width"], int) and 1000 < spec["width"] < slide.DESIGN[0], spec["width"]
        assert "--slide-zoom" in _html(at) and "--slide-width" in _html(at)
    at = _tour(SHIPPED, monkeypatch, pair="demo", step=N["alignment"])
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["width"] == "container" and "--slide-zoom" not in _html(at)
