"""Deliver a finished task's outcome to the producer's own job system: a job in Sidekiq's Redis format.

A producer asks for it with the message header `sidekiq_reply: {"class": "EmbeddingReadyJob",
"queue": "default", "context": {...}, "format": "sidekiq" | "active_job"}`. When the task's final
state is stored (SUCCESS, FAILURE, REVOKED: result_backend.py), the worker pushes one job whose
single argument is the outcome (see docs/wire-protocol.md), exactly as Sidekiq's own client does:
SADD queues <queue>; LPUSH queue:<queue> <job JSON>. With `"format": "active_job"` the job is
what ActiveJob's Sidekiq adapter enqueues (its JobWrapper around the serialized job), so a plain
`class EmbeddingReadyJob < ApplicationJob` runs it. A successful result then stays in the result
backend only as a small stub naming the reply job.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis

from inference_tasks import codec
from inference_tasks.redis_access.connections import sidekiq_redis
from inference_tasks.redis_access.keys import SIDEKIQ_QUEUES_KEY, sidekiq_queue_key
from inference_tasks.redis_access.redis_errors import is_out_of_memory
from inference_tasks.tracing.spans import current_trace_headers, span

if TYPE_CHECKING:
    from inference_tasks.config import Settings

logger = logging.getLogger(__name__)

SIDEKIQ_REPLY_HEADER = "sidekiq_reply"
DEFAULT_SIDEKIQ_QUEUE = "default"
SIDEKIQ_FORMAT = "sidekiq"
ACTIVE_JOB_FORMAT = "active_job"
REPLY_FORMATS = (SIDEKIQ_FORMAT, ACTIVE_JOB_FORMAT)
# The job class ActiveJob's Sidekiq adapter pushes; it runs the job named in "wrapped".
ACTIVE_JOB_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
# ActiveJob's marker on a serialized Hash argument listing its Symbol keys (ours are all strings).
ACTIVE_JOB_SYMBOL_KEYS = "_aj_symbol_keys"
_SPEC_KEYS = {"class", "queue", "context", "format", "locale", "timezone"}
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
    if spec.get("format", SIDEKIQ_FORMAT) not in REPLY_FORMATS:
        return f"headers.{SIDEKIQ_REPLY_HEADER}.format must be one of {list(REPLY_FORMATS)}"
    for name in ("locale", "timezone"):
        if spec.get(name) is not None and not (isinstance(spec[name], str) and 0 < len(spec[name]) <= 100):
            return f"headers.{SIDEKIQ_REPLY_HEADER}.{name} must be a string such as 'en' or 'UTC'"
    unknown = set(spec) - _SPEC_KEYS
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
    """A job hash as Sidekiq's client writes it (class, queue, args, jid, timestamps, retry), in the
    format the spec asks for."""
    if spec.get("format", SIDEKIQ_FORMAT) == ACTIVE_JOB_FORMAT:
        return _sidekiq_job(ACTIVE_JOB_WRAPPER, spec, [active_job_data(spec, payload)], wrapped=spec["class"])
    return _sidekiq_job(spec["class"], spec, [payload])


def _sidekiq_job(job_class: str, spec: dict[str, Any], args: list[Any], wrapped: str | None = None) -> dict[str, Any]:
    now = time.time()
    job = {
        "class": job_class,
        "queue": spec.get("queue", DEFAULT_SIDEKIQ_QUEUE),
        "args": args,
        "retry": True,
        "jid": secrets.token_hex(12),
        "created_at": now,
        "enqueued_at": now,
    }
    if wrapped is not None:
        job["wrapped"] = wrapped
    return job


def active_job_data(spec: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """The job as ActiveJob::Core#serialize writes it (Rails 6.1-7.x), with the outcome as its one argument.

    locale and timezone are the enqueuing process's when the Ruby client sent them (as ActiveJob
    records them at perform_later); null lets the job run in the app's defaults.
    """
    return {
        "job_class": spec["class"],
        "job_id": str(uuid.uuid4()),
        "provider_job_id": None,
        "queue_name": spec.get("queue", DEFAULT_SIDEKIQ_QUEUE),
        "priority": None,
        "arguments": [{**payload, ACTIVE_JOB_SYMBOL_KEYS: []}],
        "executions": 0,
        "exception_executions": {},
        "locale": spec.get("locale"),
        "timezone": spec.get("timezone"),
        "enqueued_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
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


class ReplyNotPushed(Exception):
    """Redis refused the reply job for now (full, failing over, unreachable): worth trying again."""


# What a push meets while Redis is full, restarting, or failing over (a replica promoted: the old
# primary answers READONLY, or the connection drops): all pass, so the push is tried again.
TRANSIENT_PUSH_ERRORS = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.OutOfMemoryError,
)


def reply(
    spec: dict[str, Any], request: Any, settings: Settings, state: str, result: Any = None,
    error: BaseException | None = None,
) -> bool:  # fmt: skip
    """Push the reply job `spec` asks for; True once it is in Sidekiq's queue. Raises ReplyNotPushed
    when Redis refused it for now (the caller retries, then gives the task back: result_backend.py);
    False (logged) when the job cannot be pushed at all."""
    try:
        payload = outcome(request.id, request.task, state, result, error, spec.get("context"))
        with span("reply job", **{"messaging.system": "sidekiq", "messaging.destination.name": spec.get("queue", "")}):
            # The trace goes on with the job: traceparent/tracestate as top-level keys of the job hash,
            # where OpenTelemetry's Sidekiq instrumentation reads them.
            job = sidekiq_job(spec, payload) | current_trace_headers()
            push_sidekiq_job(sidekiq_redis(settings), job)
    except Exception as problem:
        if isinstance(problem, TRANSIENT_PUSH_ERRORS) or is_out_of_memory(problem):
            raise ReplyNotPushed(f"{type(problem).__name__}: {problem}") from problem
        logger.exception("could not push the reply job for task %s", getattr(request, "id", "?"))
        return False
    return True


def stub_result(spec: dict[str, Any]) -> dict[str, Any]:
    """What the result backend keeps of a successful task whose result went out in its reply job.

    The full result travels once, in the reply; keeping a second copy in Redis for the result's
    lifetime doubled the memory of every replied task for nobody (the reply's reader has it).
    """
    return {
        "delivered_in_reply": {
            "class": spec["class"],
            "queue": spec.get("queue", DEFAULT_SIDEKIQ_QUEUE),
            "format": spec.get("format", SIDEKIQ_FORMAT),
        }
    }
