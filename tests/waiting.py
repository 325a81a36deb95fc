"""Waiting for a condition in a test: poll it until it holds or a deadline passes (no fixed sleeps);
and the one span a steady state needs, polled so that it fails as soon as the state breaks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.1, what: str | None = None) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy, and return that.

    Raises AssertionError (naming ``what``, or the predicate) when ``timeout`` seconds pass
    first; the predicate is always tried once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{what or getattr(predicate, '__name__', 'the condition')} did not hold "
                                 f"within {timeout:g} s")
        time.sleep(min(interval, left))


def holds_for(predicate: Callable[[], object], seconds: float, interval: float = 0.1, what: str | None = None) -> None:
    """Call ``predicate`` every ``interval`` seconds for ``seconds`` seconds: it must hold every time.

    For a steady state that only a span of time can show (a process at rest uses little CPU over
    it), not for waiting: a condition that becomes true is ``wait_until``'s. Raises AssertionError
    (naming ``what``, or the predicate) at the first call that fails, without waiting out the span;
    the predicate is always tried once more at the end.
    """
    end = time.monotonic() + seconds
    while True:
        if not predicate():
            raise AssertionError(f"{what or getattr(predicate, '__name__', 'the condition')} stopped holding "
                                 f"within {seconds:g} s")
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(interval, left))
