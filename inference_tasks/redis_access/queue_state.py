"""What Redis says about the queues: depth per priority list, unacked, dead letters, recent failures.

Read straight from Redis, so it answers with no worker alive (what a scaler needs to scale up
from zero) and never waits behind a backlog. Flower shows none of this: it sees tasks through
events only. Used by `inference-tasks status` and the metrics exporter (metrics.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, RECENT_FAILURES_KEY, UNACKED_KEY, queue_keys
from inference_tasks.routing import PRIORITY_STEPS, QUEUES

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# kombu's Redis transport keeps every delivered, not yet acked message in this hash.
# Workers push a line per failed task here (signals.py), newest first, capped.
RECENT_FAILURES_MAX = 100
RECENT_FAILURES_TTL_S = 7 * 86_400


@dataclass(frozen=True)
class QueueDepth:
    queue: str
    priority: int
    key: str
    depth: int


@dataclass(frozen=True)
class QueueSnapshot:
    """Everything `status` and the exporter show about the queues, read together."""

    depths: list[QueueDepth]
    unacked: int
    dead_letters: int
    recent_failures: list[dict[str, Any]]
    recent_failures_kept: int


def fleet_queues(settings: Settings) -> tuple[str, ...]:
    """inference, training, and the queue of every model in the catalogue (INFERENCE_MODELS_FILE);
    the first two alone while the catalogue cannot be read."""
    from inference_tasks.config.catalogue import watched_queues
    from inference_tasks.config.checks import ConfigError

    try:
        return watched_queues(settings.catalogue, QUEUES)
    except ConfigError:
        return QUEUES


def snapshot(client: Any, failures: int = 10, queues: tuple[str, ...] = QUEUES) -> QueueSnapshot:
    """Depth of every priority list of every queue, unacked, dead letters and the newest failures,
    in one round trip."""
    pipe = client.pipeline(transaction=False)
    listed = [
        (queue, step, key) for queue in queues for step, key in zip(PRIORITY_STEPS, queue_keys(queue), strict=True)
    ]
    for _, _, key in listed:
        pipe.llen(key)
    newest = (0, failures - 1) if failures > 0 else (1, 0)  # LRANGE 0 -1 would be the whole list
    pipe.hlen(UNACKED_KEY).llen(DEAD_LETTER_KEY).lrange(RECENT_FAILURES_KEY, *newest)
    pipe.llen(RECENT_FAILURES_KEY)
    *depths, unacked, dead, recent, kept = pipe.execute()
    return QueueSnapshot(
        [QueueDepth(queue, step, key, depth) for (queue, step, key), depth in zip(listed, depths, strict=True)],
        int(unacked),
        int(dead),
        [json.loads(line) for line in recent],
        int(kept),
    )


@dataclass(frozen=True)
class RedisMemory:
    used_bytes: int
    max_bytes: int  # 0: no maxmemory set (Redis grows until the host or container runs out)
    policy: str


def redis_memory(client: Any) -> RedisMemory:
    """Redis' own memory figures (INFO memory): what sizing and alerting are about (docs/operations.md)."""
    info = client.info("memory")
    return RedisMemory(int(info["used_memory"]), int(info.get("maxmemory", 0)), str(info.get("maxmemory_policy", "")))


def queue_depth(client: Any, queue: str) -> int:
    """Messages waiting in `queue`, all priority lists together, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for key in queue_keys(queue):
        pipe.llen(key)
    return sum(int(depth) for depth in pipe.execute())


def record_failure(client: Any, task_id: str, task: str, error: str, hostname: str) -> None:
    """Keep one line for a failed task where `status` finds it (results expire, logs are per host)."""
    line = json.dumps({"id": task_id, "task": task, "error": error[:500], "hostname": hostname, "at": time.time()})
    pipe = client.pipeline(transaction=False)
    pipe.lpush(RECENT_FAILURES_KEY, line)
    pipe.ltrim(RECENT_FAILURES_KEY, 0, RECENT_FAILURES_MAX - 1)
    pipe.expire(RECENT_FAILURES_KEY, RECENT_FAILURES_TTL_S)
    pipe.execute()
