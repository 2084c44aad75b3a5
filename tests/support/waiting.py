"""Wait on a condition with a deadline: tests set up what they assert by checking it, never by sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


def wait_until(condition: Callable[[], T], timeout: float, what: str) -> T:
    """Poll `condition` until it returns something truthy (returned); AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)
