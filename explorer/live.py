"""The app's one door to running models: a child process (``python -m precompute trajectory``),
so the app's own process never imports torch.

A visitor's text is traced once per (cache, text) and the result shared; at most
``CONCURRENT`` traces run at a time (a roomful of visitors queues, it does not start twenty
copies of torch), and each has ``TIMEOUT_S`` seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import streamlit as st

from explorer import data
from tying.cache.store import stage_params
from tying.errors import UserError
from tying.loading.localmodels import model_dirs

ROOT = Path(__file__).resolve().parent.parent
MAX_CHARS = 400  # what the page lets a visitor type
CONCURRENT = 1
TIMEOUT_S = 120


@st.cache_resource(show_spinner=False)
def _slots() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(CONCURRENT)


def models_here(ref: data.CacheRef) -> dict[str, Path]:
    """{role: folder} of the cache's models found on this machine (empty: sample texts only)."""
    return model_dirs(stage_params(data.summary(ref).get("stages"), "load"), ref.path)


@st.cache_resource(max_entries=256, show_spinner=False)
def trajectory(ref: data.CacheRef, text: str) -> tuple[pd.DataFrame, dict]:
    """Rows (model, lens, layer, position, rank, token, prediction, prob) of both models on
    ``text``, tokens made visible, and which model folder and translator each used.
    Raises UserError with the command's one-line message when it fails."""
    if not text.strip():
        raise UserError("type some text first")
    if len(text) > MAX_CHARS:
        raise UserError(f"at most {MAX_CHARS} characters, please")
    cmd = [sys.executable, "-m", "precompute", "trajectory", ref.path, "--text", text]
    with _slots():
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UserError(f"the models took longer than {TIMEOUT_S} s on this text") from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
        raise UserError(lines[-1].removeprefix("error:").strip() if lines else
                        f"the trajectory command failed (exit {done.returncode})")
    out = json.loads(done.stdout)
    return data.visible_trajectory(pd.DataFrame(out["rows"])), out["models"]
