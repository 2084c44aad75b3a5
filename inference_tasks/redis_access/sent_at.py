"""Stamp each inference task with the time it was sent, so its result can say how long it queued.

Celery's public before_task_publish signal lets a producer add message headers; every Python
producer using this package's app (producer.send, app.send_task, task.delay) stamps
routing.SENT_AT_HEADER with its Unix time, as the Ruby client does. A header already set (a
producer forwarding another's stamp) is kept.
"""

from __future__ import annotations

import time
from typing import Any

from celery.signals import before_task_publish

from inference_tasks.routing import PUBLIC_TASKS, SENT_AT_HEADER, WORKER_INFO_TASK

STAMPED_TASKS = frozenset(PUBLIC_TASKS) - {WORKER_INFO_TASK}


def stamp_sent_at(sender: Any = None, headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None and sender in STAMPED_TASKS and SENT_AT_HEADER not in headers:
        headers[SENT_AT_HEADER] = time.time()


def connect() -> None:
    """Idempotent: Celery's signals are process-wide, one connection serves every app."""
    before_task_publish.connect(stamp_sent_at, weak=False, dispatch_uid="inference_tasks.sent_at")
