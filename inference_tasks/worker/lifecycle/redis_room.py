"""A worker waits for room in a full Redis before its consumer starts, instead of exiting.

At maxmemory (noeviction) Redis refuses every command inside MULTI, reads included, and every
command that may add memory (SADD, SET NX) even when it would not; a starting consumer sends both
(kombu declares its queues with a MULTI of LLENs, binds them with SADD, and takes the visibility
sweep's mutex with SET NX), so a worker started while Redis was full stopped with
OutOfMemoryError: the chaos soak's rolling restart during its full-Redis fault lost both workers
that way (docs/reliability.md, "Chaos soak"). Waiting here, in the main process before the
consumer connects, keeps the worker up; it starts as soon as producers and readers have made
room. Redis filling again between this check and the declaration still stops the worker (its
supervisor starts it again).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis

logger = logging.getLogger(__name__)

CHECK_EVERY_S = 1.0
LOG_EVERY_S = 10.0


def redis_is_full(client: Any) -> bool | None:
    """True when Redis is over its maxmemory (it refuses writes), False when not, None when it
    cannot say (no INFO for this ACL user, or Redis unreachable: the consumer's own retry handles that)."""
    try:
        memory = client.info("memory")
    except redis.RedisError:
        return None
    limit = int(memory.get("maxmemory", 0) or 0)
    return bool(limit) and int(memory["used_memory"]) > limit


def wait_until_redis_has_room(client: Any, what: str = "the worker's consumer") -> float:
    """Block while Redis is over maxmemory, logging every LOG_EVERY_S; the seconds waited."""
    began = time.monotonic()
    logged_at = -LOG_EVERY_S
    while redis_is_full(client):
        waited = time.monotonic() - began
        if waited - logged_at >= LOG_EVERY_S:
            logged_at = waited
            logger.warning("Redis is full (maxmemory, noeviction): %s waits for room to start (%.0f s so far)",
                           what, waited)  # fmt: skip
        time.sleep(CHECK_EVERY_S)
    waited = time.monotonic() - began
    if waited > CHECK_EVERY_S / 2:
        logger.warning("Redis has room again after %.1f s: %s starts", waited, what)
    return waited
