"""Record the events workers send (task-progress, task-succeeded, heartbeats), as Flower sees them.

Celery's events travel on Redis pub/sub: an event sent while nobody listens is gone. The recorder
counts as ready once it has received a worker heartbeat (workers send one every 2 s), so a test
that starts it first and then sends its task sees every event the task sends: no polling race.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from tests.support.waiting import wait_until

READY_TIMEOUT_S = 30


class EventRecorder:
    """Context manager: every event received while open, in order, in `events`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> EventRecorder:
        self.connection = self.app.connection_for_read()
        self.receiver = self.app.events.Receiver(self.connection, handlers={"*": self._record})
        self.thread = threading.Thread(target=self._capture, name="event-recorder", daemon=True)
        self.thread.start()
        wait_until(lambda: self.of_type("worker-heartbeat"), READY_TIMEOUT_S, "a worker heartbeat (events subscribed)")
        return self

    def _capture(self) -> None:
        with contextlib.suppress(Exception):  # closed under it at exit
            self.receiver.capture(limit=None, timeout=None, wakeup=True)

    def _record(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.events.append(event)

    def of_type(self, kind: str, task_id: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("type") == kind and task_id in (None, e.get("uuid"))]

    def __exit__(self, *_: object) -> None:
        self.receiver.should_stop = True
        self.thread.join(timeout=10)
        self.connection.release()
