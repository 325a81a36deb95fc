"""Figures: built once per key and shared, their data sent as Arrow that reads back unchanged."""

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa

from explorer import export


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
