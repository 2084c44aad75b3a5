"""Renew the Redis lease of every message this worker holds, so dead workers' tasks return fast.

kombu's Redis transport emulates acks: a delivered message waits in the `unacked` hash, indexed
by delivery time in `unacked_index`, and any worker's periodic sweep puts it back on its queue
once it is older than the visibility timeout. With a long timeout a dead worker's tasks wait that
long (observed: ~99 s with kombu's defaults); with a short one, every task running longer than
it is handed to a second worker. Renewing the index entry of every held message while its worker
lives gives both: a short timeout for the dead, no limit for the living.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import bootsteps
from celery.worker import state as worker_state

from inference_tasks.lua import script
from inference_tasks.redis_access.redis_errors import is_out_of_memory

logger = logging.getLogger(__name__)


def held_delivery_tags() -> list[str]:
    """Delivery tags of the messages this worker holds: reserved, running, or waiting for an ETA."""
    for _ in range(3):
        try:
            requests = [
                *list(worker_state.reserved_requests),
                *list(worker_state.active_requests),
                *list(worker_state.scheduled_requests),
            ]
            break
        except RuntimeError:  # a set changed size while the main thread was mutating it
            continue
    else:
        logger.warning(
            "could not read this worker's held messages (worker.state kept changing): their leases are "
            "not renewed this round; if this repeats, re-check celery.worker.state (docs/upstream.md)"
        )
        return []
    return list({request.message.delivery_tag for request in requests if request.message is not None})


class LeaseRenewal(bootsteps.StartStopStep):
    """Consumer step: a daemon thread renews held messages' leases every LEASE_RENEW_INTERVAL_S.

    A thread, not the event loop timer, because the solo pool (trainer) runs tasks in the main
    thread and would stop renewing for the length of a training job.
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopping: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=renew_forever,
            args=(parent.app, parent.app.settings.lease_renew_interval_s, self._stopping),
            name="lease-renewal",
            daemon=True,
        )
        self._thread.start()

    def stop(self, parent: Any) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    shutdown = stop


def renew_forever(app: Any, interval: float, stopping: threading.Event) -> None:
    """Until `stopping` is set: push the lease of every held message to now. Never dies on an error:
    a dead renewal thread would let Redis hand running tasks to a second worker."""
    while not stopping.is_set():
        try:
            with app.connection_for_write() as connection:
                while not stopping.wait(interval):
                    renew(connection, held_delivery_tags())
        except Exception as error:
            # A full Redis refuses the renewal's ZADD every interval: one line, not a traceback each time.
            full = is_out_of_memory(error)
            logger.warning("message lease renewal failed%s; retrying in %.0f s", f" ({error})" if full else "",
                           interval, exc_info=not full)  # fmt: skip
            stopping.wait(interval)


def renew(connection: Any, tags: list[str]) -> None:
    """Set the lease of each still-unacknowledged message in `tags` to now, even while Redis is full."""
    if not tags:
        return
    channel = connection.default_channel
    with channel.conn_or_acquire() as client:
        client.eval(script("renew_leases"), 1, channel.unacked_index_key, time.time(), *tags)
