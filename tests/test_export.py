"""Figures: built once per key and shared, their data sent as Arrow that reads back unchanged."""

import json

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa

from explorer import export
from explorer.render.spec import vega_lite_spec


def _chart(df):
    return alt.Chart(df).mark_line().encode(x="step:Q", y="value:Q").properties(width="container", height=200)


def test_a_figure_is_built_once_per_key_and_mode():
    calls = []
    df = pd.DataFrame({"step": [1, 2, 3], "value": [0.5, 0.25, 0.125]})

    def build():
        calls.append(1)
        return _chart(df), df

    key = ("test-figure", np.random.default_rng().integers(1 << 30))
    first = export.figure(key, build)
    again = export.figure(key, build)
    assert again is first and len(calls) == 1
    big = export.figure(key, build, presentation=True)  # another mode is another figure
    assert big is not first and len(calls) == 2
    assert big.spec["height"] == round(200 * export.PRESENTATION_SIZE) and first.spec["height"] == 200
    assert big.spec["config"]["axis"]["labelFontSize"] > first.spec["config"]["axis"]["labelFontSize"]


def test_chart_data_goes_as_arrow_and_reads_back_unchanged():
    df = pd.DataFrame({"step": np.arange(5), "value": np.linspace(0, 1, 5), "run": list("abcde")})
    spec = export.wire_spec(_chart(df))
    (name, raw), = spec["datasets"].items()
    assert spec["data"] == {"name": name} and isinstance(raw, bytes)
    back = pa.ipc.open_stream(raw).read_all().to_pandas()
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    assert "config" in spec and "usermeta" not in spec  # styled, no Altair theme defaults
    # the same data gives the same name (a content hash): the browser can reuse what it has
    assert next(iter(export.wire_spec(_chart(df.copy()))["datasets"])) == name


def test_scaled_sizes_leave_container_widths_and_flags_alone():
    spec = {"width": "container", "height": 300, "hconcat": [{"width": 100, "height": 50, "mark": {"filled": True}}]}
    out = export.scaled_sizes(spec, 1.5)
    assert out == {"width": "container", "height": 450,
                   "hconcat": [{"width": 150, "height": 75, "mark": {"filled": True}}]}


def test_compact_keeps_values_and_odd_columns():
    df = pd.DataFrame({"run": ["a"] * 5 + ["b"], "step": np.arange(1, 7, dtype="int64"),
                       "x": np.linspace(0, 1, 6), "std": pd.array([None] * 6, dtype="Int64"),
                       "note": [None] * 6, "big": np.array([0] * 5 + [2**40])})
    out = export.compact(df)
    assert str(out["run"].dtype) == "category" and out["step"].dtype == "int32" and out["x"].dtype == "float32"
    assert out["big"].dtype == "int64" and out["std"].isna().all()  # too large for int32; nullable kept
    back = pa.ipc.open_stream(export.arrow_bytes(df)).read_all().to_pandas()
    assert list(back["run"]) == ["a"] * 5 + ["b"] and list(back["step"]) == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(back["x"], df["x"], rtol=1e-6)


def _export_page():
    import altair as alt
    import pandas as pd

    from explorer import export, frame

    df = pd.DataFrame({"step": [1, 2, 3], "value": [0.5, None, 0.125], "note": ["a", None, "c"]})
    for key in ("one", "two"):
        export.show(lambda: (alt.Chart(df).mark_line().encode(x="step:Q", y="value:Q")
                             .properties(width="container", height=100), df),
                    f"chart {key}", key=key, spec_key=("export-page", key))
    frame.table(df, numbers=("value",), help={"note": "what the note says"})


def test_each_chart_has_one_compact_export_control_and_tables_pin_their_first_column():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_export_page).run(timeout=60)
    assert not at.exception
    pops = at.get("popover")
    # one "Export" control per chart (a button the width of its label), not three full-width buttons
    assert [p.proto.popover.label for p in pops] == ["Export", "Export"]
    assert all(p.proto.width_config.use_content for p in pops)
    # closed, a popover draws no buttons (every run of every session would send them); open, its three
    assert not at.get("download_button")
    at.session_state["export_one"] = True
    at.run(timeout=60)
    assert not at.exception
    pops = at.get("popover")
    for pop, key, shown in zip(pops, ("one", "two"), (True, False)):
        buttons = [c for c in pop.children.values() if c.type == "download_button"]
        assert [b.key for b in buttons] == ([f"png_{key}", f"svg_{key}", f"csv_{key}"] if shown else [])
    table = at.dataframe[0].proto
    config = json.loads(table.columns)
    assert config["step"]["pinned"] is True and config["note"]["help"] == "what the note says"
    assert "pinned" not in config["value"]  # only the first column by default
    assert table.placeholder == "—"  # a missing value reads "—", never "None"


def test_a_chart_at_its_containers_width_keeps_its_plot_height_under_a_legend():
    df = pd.DataFrame({"step": [1, 2], "value": [0.5, 0.25]})
    spec = export.wire_spec(_chart(df))
    assert spec["autosize"] == {"type": "fit-x", "contains": "padding"} and spec["height"] == 200
    # legends under the plot side by side, stacked on a narrow one (a phone): a signal of the width
    assert "width <" in spec["config"]["legend"]["layout"]["bottom"]["direction"]["signal"]
    assert "layout" in json.loads(vega_lite_spec(_chart(df)))["config"]["legend"]  # the files too
    fixed = export.wire_spec(_chart(df).properties(width=300))
    assert "autosize" not in fixed  # a fixed width: Streamlit's own sizing
