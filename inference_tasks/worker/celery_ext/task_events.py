"""Task events sent in batches on a short timer instead of once per turn of the event loop.

Celery's worker already buffers task events (task-received, task-started, task-succeeded) and
publishes each buffer as one `task.multi` message, but it flushes at the next turn of the event
loop, and a busy worker's loop turns once per message: one PUBLISH per task, a large share of the
main process's CPU with one-text tasks (figures: docs/benchmarks-log.md, "Figures behind the code").
Here the buffer is flushed every INFERENCE_TASK_EVENTS_FLUSH_MS (or when it holds
BUFFER_LIMIT events), so one PUBLISH carries every event of that interval.

Nothing else changes: each event keeps the time it happened (set when it is buffered), Flower and
any `app.events.Receiver` read `task.multi` lists as Celery sends them, and worker events
(heartbeats, online/offline) are not buffered. Monitors see task events up to the interval later.
The buffer is flushed when the consumer stops, before Celery's Events step closes the dispatcher
(which keeps, and on a clean shutdown drops, what is still buffered).

Overrides Celery's `Consumer.on_send_event_buffered` for the dispatcher the Events step builds
(pinned in tests/unit/test_upstream_canary.py, listed in docs/upstream.md).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps

logger = logging.getLogger(__name__)

# A flush is also due once this many events are buffered (Celery's own default is 24).
BUFFER_LIMIT = 1000


class FlushTaskEventsOnATimer(bootsteps.StartStopStep):
    """Consumer step: the Events step's dispatcher flushes on a timer instead of every loop turn."""

    requires = ("celery.worker.consumer.events:Events",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.interval_s = parent.app.settings.task_events_flush_ms / 1000
        self.due: Any = None

    def start(self, parent: Any) -> None:
        dispatcher = getattr(parent, "event_dispatcher", None)
        hub = getattr(parent, "hub", None)
        if dispatcher is None or hub is None or self.interval_s <= 0:
            return  # no event loop (Celery does not buffer then) or turned off: Celery's own flushing
        if getattr(dispatcher, "on_send_buffered", None) is None:
            logger.warning(
                "task events: Celery's dispatcher has no on_send_buffered hook; events flush once per loop "
                "turn as Celery does (re-check celery.worker.consumer.events, docs/upstream.md)"
            )
            return
        dispatcher.buffer_limit = BUFFER_LIMIT
        dispatcher.on_send_buffered = lambda: self._flush_later(parent, hub)
        self.due = None

    def _flush_later(self, parent: Any, hub: Any) -> None:
        if self.due is None:
            self.due = hub.call_later(self.interval_s, self._flush, parent)

    def _flush(self, parent: Any) -> None:
        self.due = None
        dispatcher = parent.event_dispatcher
        if dispatcher is not None:
            dispatcher.flush(errors=False)

    def stop(self, parent: Any) -> None:
        """Send what is buffered while the dispatcher can still publish it."""
        if self.due is not None:
            self.due.cancel()
            self.due = None
        dispatcher = getattr(parent, "event_dispatcher", None)
        if dispatcher is not None and getattr(dispatcher, "enabled", False):
            try:
                dispatcher.flush(errors=False)
            except Exception as error:  # noqa: BLE001 - the connection may already be gone
                logger.warning("task events: could not flush the last buffered events: %s", error)

    shutdown = stop
