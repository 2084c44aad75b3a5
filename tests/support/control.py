"""Asking a running worker's main process what it runs (the inference_processes control command).

A broadcast answers only within its deadline: a main process busy forking or warming children can
miss one, so a test asks until it answers (with a deadline) instead of reading an empty reply list.
"""

from __future__ import annotations

from typing import Any

from inference_tasks.worker.lifecycle.control import COMMAND
from tests.support.waiting import wait_until

BROADCAST_TIMEOUT_S = 5.0


def ask_once(app: Any) -> dict[str, Any] | None:
    """The one worker's report on `app`'s broker, or None if none answered this broadcast."""
    replies = app.control.broadcast(COMMAND, reply=True, timeout=BROADCAST_TIMEOUT_S) or []
    return next((report for reply in replies for report in reply.values()), None)


def worker_report(app: Any, timeout: float = 60) -> dict[str, Any]:
    """The one worker's report, asked until it answers."""
    return wait_until(lambda: ask_once(app), timeout, "the worker to answer inference_processes")
