"""Timing tasks through a real worker from the producer's side: one at a time (the worker idle at every
push: push-to-stored-result latency) and all at once (tasks per second)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from celery.signals import before_task_publish

from benchmarks.harness.stats import percentile
from inference_tasks.producer import collect, send
from inference_tasks.routing import EMBED_TASK, SENT_AT_HEADER

RESULT_TIMEOUT_S = 60
# Issue 40's goal for one text at idle: push to stored result p50 <= the task's own work + this.
GOAL_OVER_OWN_WORK_MS = 3.0


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


def utc_seconds(stamp: datetime) -> float:
    """Celery's date_done (UTC; naive when stored without an offset) as Unix seconds."""
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def one_text_timed(app: Any, stamps: PushStamps, text: str) -> tuple[float, ...]:
    """One one-text embed, its result awaited: (call to result, call to stored, queue_ms, inference_ms,
    push to stored), in ms. Stored is the result's own `date_done` (same host); push, the send stamp."""
    called, began = time.time(), time.perf_counter()
    sent = send(app, EMBED_TASK, args=[[text]])
    usage = sent.get(timeout=RESULT_TIMEOUT_S)["usage"]
    took_ms = (time.perf_counter() - began) * 1000
    stored_at, pushed = utc_seconds(sent.date_done), stamps.at.pop(sent.id)
    sent.forget()
    return took_ms, (stored_at - called) * 1000, usage["queue_ms"], usage["inference_ms"], (stored_at - pushed) * 1000


def one_text_split(rows: list[tuple[float, ...]]) -> dict[str, float]:
    """p50s (and p99s) of `one_text_timed` rows: call to result (the producer has it) and to stored, push
    to stored, and push to stored's split (`queue_ms` runs from the push stamp; the rest is STARTED and
    the result's write up to its `date_done`)."""
    took, stored, queued, own, from_push = ([row[i] for row in rows] for i in range(5))
    to_stored, own_p50, push_p50 = statistics.median(stored), statistics.median(own), statistics.median(from_push)
    return {
        "tasks": len(rows), "p50_ms": statistics.median(took), "p99_ms": percentile(took, 0.99),
        "stored_p50_ms": to_stored, "stored_p99_ms": percentile(stored, 0.99),
        "push_to_stored_p50_ms": push_p50, "push_to_stored_p99_ms": percentile(from_push, 0.99),
        "queue_p50_ms": statistics.median(queued), "inference_p50_ms": own_p50,
        "rest_p50_ms": push_p50 - statistics.median(queued) - own_p50,
        "over_own_work_ms": push_p50 - own_p50, "over_own_work_from_call_ms": to_stored - own_p50,
    }  # fmt: skip
