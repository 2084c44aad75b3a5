"""Deliver a finished task's outcome to the producer's own job system: a job in Sidekiq's Redis format.

A producer asks for it with the message header `sidekiq_reply: {"class": "EmbeddingReadyJob",
"queue": "default", "context": {...}}`. When the task's final state is stored (SUCCESS, FAILURE,
REVOKED: result_backend.py), the worker pushes one Sidekiq job whose single argument is the
outcome (see docs/wire-protocol.md), exactly as Sidekiq's own client does: SADD queues <queue>;
LPUSH queue:<queue> <job JSON>. A successful result then stays in the result backend only as a
small stub naming the reply job.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from typing import Any

import redis

from inference_tasks import codec
from inference_tasks.broker.connections import redis_for
from inference_tasks.broker.keys import SIDEKIQ_QUEUES_KEY, sidekiq_queue_key

logger = logging.getLogger(__name__)

SIDEKIQ_REPLY_HEADER = "sidekiq_reply"
DEFAULT_SIDEKIQ_QUEUE = "default"
_RUBY_CLASS = re.compile(r"^[A-Z][A-Za-z0-9_]*(::[A-Z][A-Za-z0-9_]*)*$")
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def reply_spec_problem(spec: Any) -> str | None:
    """Why a sidekiq_reply header cannot be honoured, or None if it can."""
    if not isinstance(spec, dict):
        return f"headers.{SIDEKIQ_REPLY_HEADER} must be an object"
    if not isinstance(spec.get("class"), str) or not _RUBY_CLASS.match(spec["class"]):
        return f"headers.{SIDEKIQ_REPLY_HEADER}.class must be a Ruby class name such as 'EmbeddingReadyJob'"
    queue = spec.get("queue", DEFAULT_SIDEKIQ_QUEUE)
    if not isinstance(queue, str) or not _QUEUE_NAME.match(queue):
        return f"headers.{SIDEKIQ_REPLY_HEADER}.queue must be a Sidekiq queue name"
    unknown = set(spec) - {"class", "queue", "context"}
    if unknown:
        return f"headers.{SIDEKIQ_REPLY_HEADER} has unknown keys {sorted(unknown)}"
    return None


def outcome(task_id: str, task: str, state: str, result: Any = None, error: BaseException | None = None,
            context: Any = None) -> dict[str, Any]:  # fmt: skip
    """The one argument of the reply job: what happened to the task."""
    return {
        "task_id": task_id,
        "task": task,
        "state": state,
        "result": result,
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
        "context": context,
    }


def sidekiq_job(spec: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A job hash as Sidekiq's client writes it (class, queue, args, jid, timestamps, retry)."""
    now = time.time()
    return {
        "class": spec["class"],
        "queue": spec.get("queue", DEFAULT_SIDEKIQ_QUEUE),
        "args": [payload],
        "retry": True,
        "jid": secrets.token_hex(12),
        "created_at": now,
        "enqueued_at": now,
    }


def push_sidekiq_job(client: redis.Redis, job: dict[str, Any]) -> None:
    """Enqueue `job` for Sidekiq in one MULTI, like Sidekiq::Client#push."""
    with client.pipeline(transaction=True) as pipe:
        pipe.sadd(SIDEKIQ_QUEUES_KEY, job["queue"])
        pipe.lpush(sidekiq_queue_key(job["queue"]), codec.dumps(job))
        pipe.execute()


def requested_reply(request: Any) -> dict[str, Any] | None:
    """The sidekiq_reply spec a task's message carries (screened already), or None."""
    spec = getattr(request, SIDEKIQ_REPLY_HEADER, None) if request is not None else None
    return spec if isinstance(spec, dict) else None


def reply(
    spec: dict[str, Any], request: Any, settings: Any, state: str, result: Any = None,
    error: BaseException | None = None,
) -> bool:  # fmt: skip
    """Push the reply job `spec` asks for; True once it is in Sidekiq's queue, False (logged) if not."""
    try:
        payload = outcome(request.id, request.task, state, result, error, spec.get("context"))
        job = sidekiq_job(spec, payload)
        push_sidekiq_job(redis_for(settings.sidekiq_redis_url or settings.redis_url, settings.redis_tls_ca_file), job)
    except Exception:
        logger.exception("could not push the Sidekiq reply for task %s", getattr(request, "id", "?"))
        return False
    return True


def stub_result(spec: dict[str, Any]) -> dict[str, Any]:
    """What the result backend keeps of a successful task whose result went out in its reply job.

    The full result travels once, in the reply; keeping a second copy in Redis for the result's
    lifetime doubled the memory of every replied task for nobody (the reply's reader has it).
    """
    return {"delivered_in_reply": {"class": spec["class"], "queue": spec.get("queue", DEFAULT_SIDEKIQ_QUEUE)}}
