"""The gateway's asyncio Redis clients, built from the same URLs, TLS and Sentinel settings as every other
client (redis_access/connections.py): the broker's (pushes, queue depths) and the results' (the waits)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis

from inference_tasks.config.checks import sentinel_addresses
from inference_tasks.redis_access.connections import COMMAND_TIMEOUT_S, SENTINEL_TIMEOUT_S, tls_options

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# Connections one client keeps: a waiting request holds none (its wait is a subscription on the shared
# pub/sub connection), so this bounds only pushes and reads in flight at one moment.
MAX_CONNECTIONS = 64


def async_redis(settings: Settings, url: str, master: str | None) -> aioredis.Redis:
    """An asyncio client for `url` (redis://, rediss:// or sentinel://, ACL users in the URL)."""
    tls = tls_options(settings.redis_tls_ca_file, settings.redis_tls_cert_reqs)
    if urlsplit(url).scheme == "sentinel":
        return _sentinel_master(url, master, {"ssl": True, **tls} if settings.redis_sentinel_tls else {})
    options: dict[str, Any] = tls if url.startswith("rediss://") else {}
    # Blocking: past MAX_CONNECTIONS a command waits for a free connection (up to COMMAND_TIMEOUT_S)
    # instead of failing, so a burst of requests queues here rather than failing with 503.
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=MAX_CONNECTIONS, timeout=COMMAND_TIMEOUT_S,
        socket_connect_timeout=SENTINEL_TIMEOUT_S * 5, socket_timeout=COMMAND_TIMEOUT_S, **options,
    )  # fmt: skip
    return aioredis.Redis(connection_pool=pool)


def broker_client(settings: Settings) -> aioredis.Redis:
    return async_redis(settings, settings.redis_url, settings.redis_sentinel_master)


def results_client(settings: Settings) -> aioredis.Redis:
    return async_redis(settings, settings.results_url, settings.results_sentinel_master)


def _sentinel_master(url: str, master: str | None, tls: dict[str, Any]) -> aioredis.Redis:
    from redis.asyncio.sentinel import Sentinel

    if not master:
        raise ValueError("a sentinel:// URL needs the master name (INFERENCE_REDIS_SENTINEL_MASTER)")
    parts = [urlsplit(part) for part in url.split(";")]
    password = next((part.password for part in parts if part.password), None)
    username = next((part.username for part in parts if part.username), None)
    database = next((int(part.path.strip("/")) for part in parts if part.path.strip("/")), 0)
    sentinels = Sentinel(
        sentinel_addresses("a sentinel:// URL", url), sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S, **tls}
    )
    return sentinels.master_for(
        master, username=username, password=password, db=database, socket_timeout=COMMAND_TIMEOUT_S, **tls
    )
