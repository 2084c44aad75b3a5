"""Timing tasks through a real worker from the producer's side: one at a time (the worker idle at every
push: push-to-stored-result latency) and all at once (tasks per second)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from celery.signals import before_task_publish

from inference_tasks.producer import collect
from inference_tasks.routing import SENT_AT_HEADER

RESULT_TIMEOUT_S = 60


def one_at_a_time(send_one: Callable[[int], Any], count: int) -> list[float]:
    """Seconds from push to result of `count` tasks, each sent (`send_one(index)`) once the previous one's
    result is in."""
    took = []
    for index in range(count):
        began = time.perf_counter()
        collect(send_one(index), RESULT_TIMEOUT_S)
        took.append(time.perf_counter() - began)
    return took


def all_at_once(send_one: Callable[[int], Any], count: int) -> float:
    """Tasks per second when `count` tasks are pushed at once, then collected."""
    began = time.perf_counter()
    sent = [send_one(index) for index in range(count)]
    for result in sent:
        collect(result, RESULT_TIMEOUT_S)
    return count / (time.perf_counter() - began)


class PushStamps:
    """Each task's send stamp (routing.SENT_AT_HEADER), by task id: the Unix time its producer took just
    before the push (Celery's before_task_publish: the message built, kombu's LPUSH next). Latency
    "from push" is measured from it, so the Python producer's own work before the push (its result
    subscription, building the message) is not counted as the queue's; a Ruby producer has its own."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        before_task_publish.connect(self._stamped, weak=False, dispatch_uid="benchmarks.push_stamps")

    def _stamped(self, headers: dict[str, Any] | None = None, **_: Any) -> None:
        if headers is not None and "id" in headers:
            # Set here if the app's own stamp (redis_access/sent_at.py) has not run yet: it keeps one set.
            self.at[headers["id"]] = headers.setdefault(SENT_AT_HEADER, time.time())

    def close(self) -> None:
        before_task_publish.disconnect(dispatch_uid="benchmarks.push_stamps")
