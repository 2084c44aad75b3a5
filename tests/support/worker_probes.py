"""Test-only tasks, loaded into test workers with `--include tests.support.worker_probes`; never shipped."""

from __future__ import annotations

import os
import signal
import time

import redis
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from inference_tasks.worker.batching.strategy import CoalescedTask
from tests.support.waiting import poll_until

# Memory the leak probe keeps alive in its child, as a real leak would.
_LEAKED: list[bytearray] = []


def _attempt(app, marker_key: str) -> int:
    """Record this attempt's pid under `marker_key`; return the attempt number (1, 2, ...)."""
    client = redis.Redis.from_url(app.settings.redis_url)
    return client.rpush(marker_key, os.getpid())


@shared_task(name="tests.hold", bind=True)
def hold(self, marker_key: str, seconds: float, retry_seconds: float | None = None) -> dict:
    """Keep the child busy for `seconds` (later attempts: `retry_seconds`, default the same)."""
    attempt = _attempt(self.app, marker_key)
    time.sleep(seconds if attempt == 1 or retry_seconds is None else retry_seconds)
    return {"pid": os.getpid(), "attempt": attempt}


@shared_task(name="tests.crash", bind=True)
def crash(self, marker_key: str) -> None:
    """A poison task: kills its own child, as a segfault or the OOM killer would."""
    _attempt(self.app, marker_key)
    os.kill(os.getpid(), signal.SIGKILL)


@shared_task(name="tests.leak", bind=True)
def leak(self, megabytes: int) -> dict:
    """Grow this child's resident memory by `megabytes` and keep it (a simulated leak)."""
    block = bytearray(megabytes * 1024 * 1024)
    block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
    _LEAKED.append(block)
    return {"pid": os.getpid()}


@shared_task(name="tests.result_when_redis_full", bind=True)
def result_when_redis_full(self, marker_key: str, size: int, timeout: float = 60.0) -> dict:
    """First attempt: wait until Redis is over its maxmemory (the test fills it), then return a
    `size`-byte result, so its write is refused; later attempts return at once."""
    attempt = _attempt(self.app, marker_key)
    client = redis.Redis.from_url(self.app.settings.redis_url)

    def over_maxmemory() -> bool:
        memory = client.info("memory")
        return memory["used_memory"] > memory["maxmemory"] > 0

    if attempt == 1 and not poll_until(over_maxmemory, timeout):
        raise RuntimeError("Redis never filled up")
    return {"attempt": attempt, "payload": "x" * size}


@shared_task(name="tests.wait_for_gate", bind=True)
def wait_for_gate(self, gate_key: str, timeout: float = 60.0) -> dict:
    """Occupy this child until the test pushes onto `gate_key` (BLPOP): a busy child, by condition."""
    client = redis.Redis.from_url(self.app.settings.redis_url, socket_timeout=timeout + 5)
    opened = client.blpop([gate_key], timeout=timeout)
    return {"pid": os.getpid(), "opened": opened is not None}


@shared_task(name="tests.hold_until_gate", bind=True)
def hold_until_gate(self, marker_key: str, gate_key: str, timeout: float = 120.0) -> dict:
    """Record this attempt, then keep the process busy until the test pushes onto `gate_key` (BLPOP)."""
    attempt = _attempt(self.app, marker_key)
    client = redis.Redis.from_url(self.app.settings.redis_url, socket_timeout=timeout + 5)
    opened = client.blpop([gate_key], timeout=timeout)
    return {"pid": os.getpid(), "attempt": attempt, "opened": opened is not None}


@shared_task(name="tests.record", bind=True)
def record(self, order_key: str, label: str) -> str:
    """Append `label` to the list `order_key`: the order tasks ran in."""
    redis.Redis.from_url(self.app.settings.redis_url).rpush(order_key, label)
    return label


@shared_task(name="tests.outlast_soft_limit", bind=True)
def outlast_soft_limit(self, seconds: float) -> str:
    """Ignore the soft time limit and keep going (only the hard limit can stop it). The whole loop is
    inside the try: the limit's exception is raised wherever the child is when it next runs Python,
    which on a loaded host was the loop's condition as often as the sleep."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            while time.monotonic() < deadline:
                time.sleep(0.05)
            return "finished"
        except SoftTimeLimitExceeded:
            continue


@shared_task(name="tests.coalesced_wait", bind=True, base=CoalescedTask)
def coalesced_wait(self, texts: list, marker_key: str, gate_key: str, timeout: float = 60.0) -> dict:
    """Micro-batched like embed (same base, same texts argument): the first attempt waits on `gate_key`,
    later attempts (after a requeue) return at once. Lets a test hold a batch running in a child."""
    attempt = _attempt(self.app, marker_key)
    if attempt == 1:
        redis.Redis.from_url(self.app.settings.redis_url, socket_timeout=timeout + 5).blpop([gate_key], timeout=timeout)
    return {"pid": os.getpid(), "attempt": attempt, "texts": len(texts)}
