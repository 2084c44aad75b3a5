"""The served model's identity, hashed once in the worker's main process before it forks: a digest of the
model's files by content, which every child inherits.

Results carry its first digits as "revision" so a producer that stores vectors (deploy/rails: a pgvector
column) can store which model made them, and find the rows a new model makes stale; the fleet's embedding
cache keys its entries by the whole digest (worker/cache/identity.py). A restart with the same files reads
the digest back from the model cache directory instead of hashing the weights again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inference_tasks.config import Settings
    from inference_tasks.worker.lifecycle.context import WorkerContext

logger = logging.getLogger(__name__)


def identify_model(ctx: WorkerContext, settings: Settings) -> None:
    """Fill ctx.model.files_digest from the served model's files, or say in ctx.model.identity_error why
    they could not be read (results then carry "revision": null; the model itself may still load)."""
    from inference_tasks.worker.cache.identity import model_digest
    from inference_tasks.worker.runtimes.model_files import resolve_model_path

    entry = settings.served_model
    try:
        directory = Path(resolve_model_path(entry.source))
        ctx.model.files_digest = model_digest(directory, settings.model_cache_dir)
    except (OSError, ValueError) as error:
        ctx.model.identity_error = str(error)
        logger.warning("model %r: its files could not be read for its revision (%s)", entry.alias, error)
        return
    logger.info("model %r: revision %s", entry.alias, ctx.model.revision)
