"""The embedding cache at a worker's start: refused on a Redis that queues or stores results, opened
once in the main process (the model's files hashed there), inherited by every child.

A cache runs with maxmemory and allkeys-lru (docs/cache.md): on the broker's Redis that policy
would evict queued tasks and leases, on the results' Redis results nobody has read yet. So a worker
whose INFERENCE_CACHE_URL names either stops before it consumes anything.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from inference_tasks.config.checks import redact
from inference_tasks.worker.lifecycle.start_checks import RefusedToStart

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.lifecycle.context import WorkerContext

logger = logging.getLogger(__name__)


def refuse_cache_on_a_queue_redis(settings: Settings) -> None:
    """Stop the worker if INFERENCE_CACHE_URL is the broker's or the results' Redis URL."""
    if not settings.cache_url:
        return
    for variable, url in (("REDIS_URL", settings.redis_url), ("INFERENCE_RESULT_REDIS_URL", settings.results_url)):
        if settings.cache_url.rstrip("/") == url.rstrip("/"):
            message = (
                f"INFERENCE_CACHE_URL is {variable} ({redact(url)}): the embedding cache needs a Redis of its own, "
                "run with maxmemory and maxmemory-policy allkeys-lru, a policy that would evict queued tasks and "
                "unread results there (docs/cache.md); point it at another Redis, or unset it"
            )
            logger.critical(message)
            raise RefusedToStart(message)


def open_worker_cache(ctx: WorkerContext, settings: Settings) -> None:
    """Give the model holder its cache when INFERENCE_CACHE_URL is set and the served kind's rows can be
    kept; a model whose files cannot be read for its identity runs without one, saying why."""
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
    try:
        ctx.model.cache = open_cache(settings, output)
    except (OSError, ValueError) as error:
        ctx.model.cache_off = f"the files of model {entry.alias!r} could not be read for its identity ({error})"
        logger.warning("embedding cache off: the files of model %r could not be read (%s)", entry.alias, error)
        return
    logger.info("embedding cache on (%s rows, entries kept %d s)", output, settings.cache_ttl_s)
