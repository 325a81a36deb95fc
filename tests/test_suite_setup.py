"""The test suite's own machinery (tests/conftest.py, tests/umap_warmup.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_the_umap_warmup_runs_only_on_a_core_nothing_else_wants():
    """The warm-up compiles beside the workers: at SCHED_IDLE it takes no CPU a test would have had."""
    probe = "from tests.umap_warmup import lowest_priority; import os; lowest_priority(); print(os.sched_getscheduler(0))"
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # this process is left as it was
