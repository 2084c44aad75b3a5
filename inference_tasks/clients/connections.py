"""Redis clients for our own commands (heads, corpus pages, queue state, replies), one per process and URL.

Created lazily in the process that uses it, never inherited across a fork: a client's socket
shared by a parent and its children would interleave their commands.
"""

from __future__ import annotations

import functools
from typing import Any

import redis

# A sentinel that does not answer within this is skipped for the next; a primary command that hangs
# this long (a primary gone without a reset) fails, and the next one asks the sentinels again.
SENTINEL_TIMEOUT_S = 1.0
COMMAND_TIMEOUT_S = 10.0


@functools.cache
def redis_for(url: str, ca_file: str | None = None, sentinel_master: str | None = None) -> redis.Redis:
    """One client per process and URL, created lazily in the process that uses it (never across a fork).

    A sentinel:// URL (`;`-separated sentinels) gives a client on the current primary of
    `sentinel_master`: redis-py asks the sentinels again whenever its connection fails, so commands
    after a failover go to the new primary.
    """
    if url.startswith("sentinel://"):
        return _sentinel_master(url, sentinel_master)
    options = {"ssl_ca_certs": ca_file} if url.startswith("rediss://") and ca_file else {}
    return redis.Redis.from_url(url, **options)


def broker_redis(settings: Any) -> redis.Redis:
    """This process's client for the broker's Redis (REDIS_URL): heads, corpus pages, queue state."""
    return redis_for(settings.redis_url, settings.redis_tls_ca_file, settings.redis_sentinel_master)


def sidekiq_redis(settings: Any) -> redis.Redis:
    """The client for reply jobs: INFERENCE_SIDEKIQ_REDIS_URL (Sidekiq's Redis), else the broker's."""
    if not settings.sidekiq_redis_url:
        return broker_redis(settings)
    master = settings.sidekiq_redis_sentinel_master or settings.redis_sentinel_master
    return redis_for(settings.sidekiq_redis_url, settings.redis_tls_ca_file, master)


def _sentinel_master(url: str, master: str | None) -> redis.Redis:
    from urllib.parse import urlsplit

    from redis.sentinel import Sentinel

    if not master:
        raise ValueError("a sentinel:// URL needs the master name (INFERENCE_REDIS_SENTINEL_MASTER)")
    parts = [urlsplit(part) for part in url.split(";")]
    # As kombu and Celery read it: the password and database come with the first part that has them.
    password = next((part.password for part in parts if part.password), None)
    database = next((int(part.path.strip("/")) for part in parts if part.path.strip("/")), 0)
    sentinels = Sentinel([(part.hostname, part.port) for part in parts], socket_timeout=SENTINEL_TIMEOUT_S)
    return sentinels.master_for(master, password=password, db=database, socket_timeout=COMMAND_TIMEOUT_S)
