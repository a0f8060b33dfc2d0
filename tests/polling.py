"""Waiting on a state instead of sleeping a fixed time: the one `wait_for` of the test suite."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], Any], timeout: float = 120.0, what: str | Callable[[], str] = "", every: float = 0.2
) -> Any:
    """``predicate()``'s first truthy value, polled every ``every`` seconds; an AssertionError saying
    ``what`` (or what it returns: a run's logs) after ``timeout`` seconds (which only catches a hang)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    said = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout}s waiting for {said or 'the condition'}")
