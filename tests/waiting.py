"""Waiting for a condition in a test: poll it until it holds or a deadline passes (no fixed sleeps)."""

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
