"""Celery's mingle only when another worker can answer it.

At start a worker's Mingle step broadcasts `hello` to every worker and collects replies for a fixed
second (it cannot know how many will answer), to merge their revoked task ids and logical clocks.
A worker with no other worker running (a pool scaled up from zero, the first pod of a deployment, a
laptop) waited that second for nothing: a third of a torch worker's cold start (docs/benchmarks-log.md,
"Cold start per runtime"). Before the consumer is built, `nobody_to_mingle_with` asks Redis how many
clients listen on the remote-control broadcast channel: PUBLISH answers with that count, and kombu
drops an empty payload on receipt without decoding or logging it (`Channel._receive_one`, pinned).
Nobody: the consumer starts without mingle, as `--without-mingle` would (Celery would have found
itself alone a second later). Anybody, or no answer from Redis: Celery's mingle, unchanged.
"""

from __future__ import annotations

import logging

import redis

from inference_tasks.config import Settings
from inference_tasks.redis_access.connections import uncached_broker_redis
from inference_tasks.redis_access.keys import CONTROL_BROADCAST_CHANNEL

logger = logging.getLogger(__name__)


def broadcast_listeners(client: redis.Redis) -> int:
    """How many clients listen on the remote-control broadcast channel of `client`'s database (an empty
    message, which every listener's kombu ignores)."""
    db = int(client.connection_pool.connection_kwargs.get("db", 0))
    return int(client.publish(CONTROL_BROADCAST_CHANNEL.format(db=db), ""))


def nobody_to_mingle_with(settings: Settings) -> bool:
    """Whether no other worker listens for broadcasts on the broker's Redis (False when it cannot tell)."""
    client = uncached_broker_redis(settings)
    try:
        return broadcast_listeners(client) == 0
    except redis.RedisError as error:
        logger.info("mingle: could not count the workers listening for broadcasts (%s); mingling as Celery does", error)
        return False
    finally:
        client.close()
