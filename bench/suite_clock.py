"""A pytest plugin for bench/bench_suite.py: each test's worker, start and end (wall clock) as
one tab-separated line in the file ``SUITE_CLOCK`` names, so the benchmark can say when each
worker started its first test and ended its last (the run's tail: one worker done, the other not)."""

from __future__ import annotations

import os
import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs where the test runs (an xdist worker, not the controller that relays its reports)."""
    start = time.time()
    try:
        return (yield)
    finally:
        if os.environ.get("SUITE_CLOCK"):
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            with open(os.environ["SUITE_CLOCK"], "a", encoding="utf-8") as f:
                f.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\n")
