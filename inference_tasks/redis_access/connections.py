"""Redis clients for our own commands (heads, corpus pages, queue state, replies), one per process and URL.

Created lazily in the process that uses it, never inherited across a fork: a client's socket
shared by a parent and its children would interleave their commands.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import redis

from inference_tasks.config.checks import sentinel_addresses

if TYPE_CHECKING:
    from inference_tasks.config import Settings

# A sentinel that does not answer within this is skipped for the next; a primary command that hangs
# this long (a primary gone without a reset) fails, and the next one asks the sentinels again.
SENTINEL_TIMEOUT_S = 1.0
COMMAND_TIMEOUT_S = 10.0


@functools.cache
def redis_for(
    url: str,
    ca_file: str | None = None,
    sentinel_master: str | None = None,
    sentinel_tls: bool = False,
    cert_reqs: str = "required",
) -> redis.Redis:
    """One client per process and URL (new_redis's), created lazily in the process that uses it
    (never across a fork)."""
    return new_redis(url, ca_file, sentinel_master, sentinel_tls, cert_reqs)


def new_redis(
    url: str,
    ca_file: str | None = None,
    sentinel_master: str | None = None,
    sentinel_tls: bool = False,
    cert_reqs: str = "required",
) -> redis.Redis:
    """A new client for `url`.

    A sentinel:// URL (`;`-separated sentinels) gives a client on the current primary of
    `sentinel_master`: redis-py asks the sentinels again whenever its connection fails, so commands
    after a failover go to the new primary. With `sentinel_tls` the sentinels and the primary are
    both reached over TLS.
    """
    if url.startswith("sentinel://"):
        return _sentinel_master(url, sentinel_master, tls_options(ca_file, cert_reqs) if sentinel_tls else None)
    options = tls_options(ca_file, cert_reqs) if url.startswith("rediss://") else {}
    return redis.Redis.from_url(url, **options)


def tls_options(ca_file: str | None, cert_reqs: str) -> dict[str, Any]:
    """redis-py's TLS keywords: the certificate check (INFERENCE_REDIS_TLS_CERT_REQS) and its CA."""
    return {"ssl_cert_reqs": cert_reqs, **({"ssl_ca_certs": ca_file} if ca_file else {})}


def _client_for(settings: Settings, url: str, master: str | None) -> redis.Redis:
    return redis_for(url, settings.redis_tls_ca_file, master, settings.redis_sentinel_tls, settings.redis_tls_cert_reqs)


def uncached_broker_redis(settings: Settings) -> redis.Redis:
    """A client on the broker's Redis that is not this process's shared one: for a worker's main
    process before it forks (a cached client would follow every child), to be closed after use."""
    client = new_redis(
        settings.redis_url, settings.redis_tls_ca_file, settings.redis_sentinel_master, settings.redis_sentinel_tls,
        settings.redis_tls_cert_reqs,
    )  # fmt: skip
    # A Redis that does not answer must not hold the worker's start for the OS's TCP timeout.
    client.connection_pool.connection_kwargs.update(socket_connect_timeout=SENTINEL_TIMEOUT_S * 5,
                                                    socket_timeout=COMMAND_TIMEOUT_S)  # fmt: skip
    return client


def broker_redis(settings: Settings) -> redis.Redis:
    """This process's client for the broker's Redis (REDIS_URL): heads, corpus pages, queue state."""
    return _client_for(settings, settings.redis_url, settings.redis_sentinel_master)


def result_redis(settings: Settings) -> redis.Redis:
    """This process's client for results' Redis (INFERENCE_RESULT_REDIS_URL, else the broker's):
    embed_corpus pages, and what doctor, status and the exporter report about results."""
    return _client_for(settings, settings.results_url, settings.results_sentinel_master)


def sidekiq_redis(settings: Settings) -> redis.Redis:
    """The client for reply jobs: INFERENCE_SIDEKIQ_REDIS_URL (Sidekiq's Redis), else the broker's."""
    if not settings.sidekiq_redis_url:
        return broker_redis(settings)
    master = settings.sidekiq_redis_sentinel_master or settings.redis_sentinel_master
    return _client_for(settings, settings.sidekiq_redis_url, master)


def cache_redis(settings: Settings) -> redis.Redis:
    """A new client on the embedding cache's Redis (INFERENCE_CACHE_URL; TLS, Sentinel and ACL as the other
    URLs), every connect and command bounded by INFERENCE_CACHE_TIMEOUT_MS: a slow cache costs a miss."""
    if not settings.cache_url:
        raise ValueError("no cache: INFERENCE_CACHE_URL is not set")
    master = settings.cache_sentinel_master or settings.redis_sentinel_master
    tls = (settings.redis_tls_ca_file, master, settings.redis_sentinel_tls, settings.redis_tls_cert_reqs)
    client = new_redis(settings.cache_url, *tls)
    timeout = settings.cache_timeout_ms / 1000
    client.connection_pool.connection_kwargs.update(socket_connect_timeout=timeout, socket_timeout=timeout)
    return client


def _sentinel_master(url: str, master: str | None, tls: dict[str, Any] | None) -> redis.Redis:
    from urllib.parse import urlsplit

    from redis.sentinel import Sentinel

    if not master:
        raise ValueError("a sentinel:// URL needs the master name (INFERENCE_REDIS_SENTINEL_MASTER)")
    parts = [urlsplit(part) for part in url.split(";")]
    # As kombu and Celery read it: the password and database come with the first part that has them.
    password = next((part.password for part in parts if part.password), None)
    database = next((int(part.path.strip("/")) for part in parts if part.path.strip("/")), 0)
    over_tls = {"ssl": True, **tls} if tls is not None else {}
    sentinels = Sentinel(
        sentinel_addresses("a sentinel:// URL", url),
        sentinel_kwargs={"socket_timeout": SENTINEL_TIMEOUT_S, **over_tls},
    )
    return sentinels.master_for(master, password=password, db=database, socket_timeout=COMMAND_TIMEOUT_S, **over_tls)
