"""tests/apptest_runs.py: AppTest with each script compiled once and a run's end awaited without
polling, and nothing else about a run changed."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from tests import apptest_runs


def test_installed_on_this_streamlit():
    """The pinned Streamlit is the one the patches know (else install says False and every AppTest
    of the suite runs at Streamlit's own cost, unseen)."""
    assert apptest_runs.install() is True and apptest_runs.install() is True  # idempotent


def test_a_script_is_compiled_once_and_again_when_it_changes(tmp_path):
    apptest_runs.install()
    script = tmp_path / "page.py"
    script.write_text('import streamlit as st\nst.markdown("one")\n"magic " + "on"\n')
    before = apptest_runs.compiled_count()
    at = AppTest.from_file(str(script)).run()
    assert [m.value for m in at.markdown] == ["one", "magic on"]  # Streamlit's magic still writes the bare line
    AppTest.from_file(str(script)).run()
    at.run()
    assert apptest_runs.compiled_count() == before + 1  # three runs, two AppTests: one compile
    script.write_text('import streamlit as st\nst.markdown("two")\n')
    at.run()
    assert [m.value for m in at.markdown] == ["two"] and apptest_runs.compiled_count() == before + 2


def test_a_run_past_its_timeout_is_stopped_with_streamlits_error(tmp_path):
    apptest_runs.install()
    script = tmp_path / "slow.py"
    script.write_text("import time\nimport streamlit as st\nst.markdown('started')\nfor _ in range(300):\n"
                      "    time.sleep(0.01)\n    st.empty()  # where a stop request is heard\nst.markdown('finished')\n")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"timed out after 0.3"):
        AppTest.from_file(str(script)).run(timeout=0.3)
    assert time.monotonic() - start < 2.5  # stopped, not left to run its 3 s


def test_an_exception_and_widgets_still_come_back(tmp_path):
    apptest_runs.install()
    script = tmp_path / "page.py"
    script.write_text("import streamlit as st\nn = st.number_input('n', value=1)\nst.markdown(f'n={n}')\n"
                      "if n > 2:\n    raise ValueError('too big')\n")
    at = AppTest.from_file(str(script)).run()
    assert at.markdown[0].value == "n=1" and not at.exception
    at.number_input[0].set_value(3).run()
    assert at.markdown[0].value == "n=3" and len(at.exception) == 1  # (its message withheld: .streamlit/config.toml)
