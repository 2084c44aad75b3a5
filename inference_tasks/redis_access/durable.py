"""Durable enqueue: a push confirmed by Redis replicas, not only by the primary.

Redis acknowledges a write once the primary holds it; a primary that dies before its replica copies
the write loses it, and Sentinel promotes the replica without it (docs/reliability.md: 1 of 8
failover runs lost a push). `WAIT n timeout` blocks until n replicas acknowledge every write the
connection made. Celery's publish runs on a connection of the channel's pool that the caller
does not hold, so the confirmation writes a small fence key on the same pool and WAITs behind it:
the replication stream is ordered, so replicas that hold the fence hold the push before it.

Producer-safe: imports only redis and the key names.
"""

from __future__ import annotations

from typing import Any

from inference_tasks.redis_access.keys import DURABLE_FENCE_KEY

# A message header saying its producer pushed it durably, and may push it again with the same task
# id after NotReplicated; a worker then runs the first message it takes with that id only.
DURABLE_HEADER = "inference_durable"
FENCE_TTL_MS = 60_000


def confirm_replicated(client: Any, task_id: str, replicas: int, timeout_s: float) -> int:
    """Replicas that acknowledged everything up to and including the push before this call (at most
    waiting `timeout_s`). `client` must use the connection pool the push went through."""
    with client.pipeline(transaction=False) as pipe:
        pipe.set(DURABLE_FENCE_KEY, task_id, px=FENCE_TTL_MS)
        pipe.execute_command("WAIT", replicas, max(1, round(timeout_s * 1000)))
        _, acknowledged = pipe.execute()
    return int(acknowledged)


def check_durable_options(replicas: Any, timeout_s: Any) -> None:
    """ValueError naming the argument when a durable option is out of range."""
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
        raise ValueError(f"durable_replicas must be an integer of 1 or more, got {replicas!r}")
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not 0 < timeout_s <= 60:
        raise ValueError(f"durable_timeout must be a number of seconds above 0 and at most 60, got {timeout_s!r}")
