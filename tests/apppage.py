"""One page of the app in Streamlit's AppTest, on a cache folder and a URL's parameters."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def open_page(cache_dir, monkeypatch, page: str, *, timeout: float = 120, **params) -> AppTest:
    """The app on ``cache_dir`` with ``params`` in its URL, run, then ``views/<page>.py`` run."""
    monkeypatch.setenv("TYING_CACHE_DIR", str(cache_dir))
    at = AppTest.from_file(APP, default_timeout=timeout)
    for k, v in params.items():
        at.query_params[k] = str(v)
    at.run()
    return at.switch_page(f"views/{page}.py").run()
