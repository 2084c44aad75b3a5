"""Refusing one message: a log line, an entry in the dead-letter list, and FAILURE where its id is known.

Two places refuse: screening in the transport (before Celery sees a message) and the consumer's
guard (worker/celery_ext/consumer.py: anything that goes wrong while the main process handles a message that
passed screening). Both end here, so a refusal looks the same to producers and operators whatever
step it came from.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from inference_tasks.redis_access.keys import DEAD_LETTER_KEY

logger = logging.getLogger(__name__)

# Each dead-lettered message keeps at most this much of its raw bytes, so a flood of enormous
# payloads cannot grow Redis without bound (entries x this = the list's worst case).
DEAD_LETTER_RAW_BYTES = 64 * 1024


class UnhandledMessage(RuntimeError):
    """A message that passed screening but failed in the worker's main process; it was dead-lettered."""


@dataclass(frozen=True)
class DeadLetterPolicy:
    """How long the dead-letter list may grow and live (INFERENCE_DEAD_LETTER_MAX, _TTL_S)."""

    max_entries: int
    ttl_s: int


@dataclass(frozen=True)
class Refusal:
    """What is known of one refused message."""

    queue: str
    reason: str
    raw: bytes
    task_id: str | None = None
    task_name: str | None = None
    # The message's sidekiq_reply request, when it is itself valid: the FAILURE reply job is pushed.
    reply: dict[str, Any] | None = None


def refuse(client: Any, refusal: Refusal, error: Exception, policy: DeadLetterPolicy) -> bool:
    """Log, dead-letter (on `client`, the broker's Redis), and fail the task's result. Never raises;
    False when Redis refused a write (full, failing over): the caller may try again later."""
    recorded = record(client, refusal, policy)
    if refusal.task_id:
        return fail_result(refusal, error) and recorded
    return recorded


def record(client: Any, refusal: Refusal, policy: DeadLetterPolicy) -> bool:
    """Log the refusal and keep the message in the dead-letter list; its result is someone else's.
    Never raises; False when the dead-letter write failed."""
    logger.error(
        "refused a message from queue %r (task %s, id %s): %s; kept in Redis list %r",
        refusal.queue,
        refusal.task_name,
        refusal.task_id,
        refusal.reason,
        DEAD_LETTER_KEY,
    )
    entry = {
        "reason": refusal.reason,
        "queue": refusal.queue,
        "task_id": refusal.task_id,
        "task": refusal.task_name,
        "refused_at": time.time(),
        "size": len(refusal.raw),
        "raw": refusal.raw[:DEAD_LETTER_RAW_BYTES].decode("utf-8", errors="replace"),
    }
    try:
        with client.pipeline() as pipe:
            pipe.lpush(DEAD_LETTER_KEY, json.dumps(entry))
            pipe.ltrim(DEAD_LETTER_KEY, 0, policy.max_entries - 1)
            pipe.expire(DEAD_LETTER_KEY, policy.ttl_s)
            pipe.execute()
    except Exception:
        logger.exception("could not dead-letter the refused message")
        return False
    return True


def fail_result(refusal: Refusal, error: Exception) -> bool:
    """Store FAILURE for the refused task through the worker's own result backend, which also pushes
    the reply job the message asked for (result_backend.py). Never raises; False when not stored."""
    from celery import current_app
    from celery.app.task import Context

    request = Context(id=refusal.task_id, task=refusal.task_name, sidekiq_reply=refusal.reply)
    try:
        current_app.backend.mark_as_failure(refusal.task_id, error, request=request)
    except Exception:
        logger.exception("could not store the FAILURE result of refused task %s", refusal.task_id)
        return False
    return True
