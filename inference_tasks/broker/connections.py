"""Redis clients for our own commands (heads, corpus pages, queue state, replies), one per process and URL.

Created lazily in the process that uses it, never inherited across a fork: a client's socket
shared by a parent and its children would interleave their commands.
"""

from __future__ import annotations

import functools
from typing import Any

import redis


@functools.cache
def redis_for(url: str, ca_file: str | None = None) -> redis.Redis:
    """One client per process and URL, created lazily in the process that uses it (never across a fork)."""
    options = {"ssl_ca_certs": ca_file} if url.startswith("rediss://") and ca_file else {}
    return redis.Redis.from_url(url, **options)


def broker_redis(settings: Any) -> redis.Redis:
    """This process's client for the broker's Redis (REDIS_URL): heads, corpus pages, queue state."""
    return redis_for(settings.redis_url, settings.redis_tls_ca_file)
