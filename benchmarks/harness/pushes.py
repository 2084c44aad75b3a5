"""Timing tasks through a real worker from the producer's side: one at a time (the worker idle at every
push: push-to-stored-result latency) and all at once (tasks per second)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from inference_tasks.producer import collect

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
