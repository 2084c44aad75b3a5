"""Wait on a condition with a deadline: tests set up what they assert by checking it, never by sleeping.

The one deadline helper of the suite, its helpers and its probe tasks: `poll_until` returns what
the condition returned (None at the deadline); `wait_until` fails naming what it waited for. A
condition may raise to stop the wait early (a process it depends on has exited).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


def poll_until(condition: Callable[[], T], timeout: float, poll_s: float = POLL_S) -> T | None:
    """Poll `condition` until it returns something truthy (returned), or None once `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(poll_s)


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    poll_s: float = POLL_S,
    details: Callable[[], str] | None = None,
) -> T:
    """Poll `condition` until it returns something truthy (returned); AssertionError naming `what` at the
    deadline, followed by `details()` (a log tail, say) where given."""
    value = poll_until(condition, timeout, poll_s)
    if not value:
        extra = f"\n{details()}" if details is not None else ""
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
    return value
