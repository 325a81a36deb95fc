"""tests/waiting.py: the polling helpers the tests wait with."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.waiting import holds_for, wait_until


def test_wait_until_returns_the_first_truthy_value_and_names_what_did_not_hold():
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) >= 3 and "third", timeout=5, interval=0.01) == "third"
    with pytest.raises(AssertionError, match="^the door did not hold within 0.05 s$"):
        wait_until(lambda: False, timeout=0.05, interval=0.01, what="the door")


def test_holds_for_fails_at_the_first_break_without_waiting_out_the_span():
    calls = itertools.count(1)
    start = time.monotonic()
    with pytest.raises(AssertionError, match="^the rest stopped holding within 30 s$"):
        holds_for(lambda: next(calls) < 3, seconds=30, interval=0.01, what="the rest")
    assert time.monotonic() - start < 5


def test_holds_for_spans_its_time_and_checks_at_the_end():
    seen = []
    start = time.monotonic()
    holds_for(lambda: seen.append(time.monotonic()) or True, seconds=0.2, interval=0.05)
    assert seen[-1] - start >= 0.2 and len(seen) >= 3
