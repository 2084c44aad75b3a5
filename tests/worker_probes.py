"""Test-only tasks, loaded into test workers with `--include tests.worker_probes`; never shipped."""

from __future__ import annotations

import os
import time

import redis
from celery import shared_task


@shared_task(name="tests.hold", bind=True)
def hold(self, marker_key: str, seconds: float) -> dict:
    """Record this attempt's pid under `marker_key`, then keep the child busy for `seconds`."""
    client = redis.Redis.from_url(self.app.settings.redis_url)
    attempt = client.rpush(marker_key, os.getpid())
    time.sleep(seconds)
    return {"pid": os.getpid(), "attempt": attempt}
