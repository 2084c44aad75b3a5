"""The embedding cache at a worker's start: refused on a Redis that queues or stores results, opened
once in the main process (the model's files hashed there), inherited by every child.

A cache runs with maxmemory and allkeys-lru (docs/cache.md): on the broker's Redis that policy
would evict queued tasks and leases, on the results' Redis results nobody has read yet. So a worker
whose INFERENCE_CACHE_URL names either stops before it consumes anything.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from inference_tasks.config.checks import redact
from inference_tasks.worker.lifecycle.start_checks import RefusedToStart

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.lifecycle.context import WorkerContext

logger = logging.getLogger(__name__)


def server_of(url: str, master: str | None) -> tuple[object, ...]:
    """Which Redis server a URL reaches, whatever its database (maxmemory-policy is per server, not per
    database): host and port, a socket's path, or a Sentinel group's sentinels and master name."""
    parts = [urlsplit(part) for part in url.split(";")]
    if parts[0].scheme == "unix":
        return ("unix", parts[0].path)
    if parts[0].scheme == "sentinel":
        return ("sentinel", frozenset((part.hostname, part.port) for part in parts), master)
    return ("tcp", parts[0].hostname, parts[0].port or 6379)


def refuse_cache_on_a_queue_redis(settings: Settings) -> None:
    """Stop the worker if INFERENCE_CACHE_URL reaches the broker's or the results' Redis server (any database)."""
    if not settings.cache_url:
        return
    cache = server_of(settings.cache_url, settings.cache_sentinel_master or settings.redis_sentinel_master)
    for variable, url, master in (
        ("REDIS_URL", settings.redis_url, settings.redis_sentinel_master),
        ("INFERENCE_RESULT_REDIS_URL", settings.results_url, settings.results_sentinel_master),
    ):
        if cache == server_of(url, master):
            message = (
                f"INFERENCE_CACHE_URL is on the server of {variable} ({redact(url)}): the embedding cache needs a "
                "Redis server of its own, run with maxmemory and maxmemory-policy allkeys-lru, a policy that would "
                "evict queued tasks and unread results there, in any database (docs/cache.md); point it at another "
                "Redis server, or unset it"
            )
            logger.critical(message)
            raise RefusedToStart(message)


def open_worker_cache(ctx: WorkerContext, settings: Settings) -> None:
    """Give the model holder its cache when INFERENCE_CACHE_URL is set and the served kind's rows can be
    kept; a model whose files could not be read for its identity (model_identity.py, run first) runs
    without one, saying why."""
    from inference_tasks.worker.cache.lookup import open_cache
    from inference_tasks.worker.kinds.registry import kind_of

    refuse_cache_on_a_queue_redis(settings)
    if not settings.cache_url:
        return
    entry = settings.served_model
    output = kind_of(entry).cached_rows
    if output is None:
        ctx.model.cache_off = f"model {entry.alias!r} is of kind {entry.kind!r}, whose results are not cached"
        logger.warning("embedding cache off: model %r is of kind %r, whose results are not cached", entry.alias,
                       entry.kind)  # fmt: skip
        return
    if ctx.model.files_digest is None:
        error = ctx.model.identity_error
        ctx.model.cache_off = f"the files of model {entry.alias!r} could not be read for its identity ({error})"
        logger.warning("embedding cache off: the files of model %r could not be read (%s)", entry.alias, error)
        return
    ctx.model.cache = open_cache(settings, output, ctx.model.files_digest)
    logger.info("embedding cache on (%s rows, entries kept %d s)", output, settings.cache_ttl_s)
