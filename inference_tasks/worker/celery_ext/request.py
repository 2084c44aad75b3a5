"""The Request of this package's tasks, and what the worker's main process does with a message it cannot run.

Celery builds one Request per message in the worker's main process and hands it to the pool.
Everything that can go wrong there must cost that one message, never the worker
(docs/reliability.md, "One message never stops a worker"): `refuse_message` is that cost, used by
the consumer's guard (consumer.py) and by GuardedRequest when the pool could not send its job.
"""

from __future__ import annotations

import logging
from typing import Any

from billiard.common import TERM_SIGNAME
from billiard.einfo import ExceptionInfo
from celery import Task
from celery.platforms import signals as platform_signals
from celery.worker import state as worker_state
from celery.worker.request import Request

from inference_tasks import codec
from inference_tasks.broker import dead_letter
from inference_tasks.broker.dead_letter import Refusal, UnhandledMessage
from inference_tasks.broker.envelope import requested_reply
from inference_tasks.validation import check_queue
from inference_tasks.worker.celery_ext.pool import JobNotSent

logger = logging.getLogger(__name__)


class GuardedRequest(Request):
    """Celery's Request, except that a job the pool could not hand to a child is dead-lettered.

    The pool reports such a job to its error_callback (this on_failure) as JobNotSent; Celery's own
    handling then stores FAILURE (with the reply job the message asked for), acks the message and
    forgets the request, as for a task that raised. The message also goes to the dead-letter list,
    like every refusal, since running it again could only fail the same way.

    A task the micro-batcher sent in a batch holds that batch's pool job (`batch_job`, a weak
    reference set by worker/batching/batcher.py): `revoke(terminate=True)` ends that job too, as Celery
    ends a task's own job.
    """

    batch_job: Any = None

    def terminate(self, pool: Any, signal: Any = None) -> None:
        super().terminate(pool, signal)
        self._end_batch_job(signal)

    def cancel(self, pool: Any, signal: Any = None, emit_retry: bool = True) -> None:
        super().cancel(pool, signal, emit_retry)
        self._end_batch_job(signal)

    def _end_batch_job(self, signal: Any) -> None:
        job = self.batch_job() if self.batch_job is not None else None
        if job is not None:
            job.terminate(platform_signals.signum(signal or TERM_SIGNAME))

    def on_failure(self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False) -> Any:
        error = getattr(exc_info, "exception", None)
        error = getattr(error, "exc", error)  # billiard may wrap it in ExceptionWithTraceback
        if isinstance(error, JobNotSent):
            reason = f"the worker could not hand it to a child process ({error})"
            record_refusal(self.message, reason, self.id, self.name)
            try:
                raise UnhandledMessage(f"{self.name}: {reason}; dead-lettered")
            except UnhandledMessage:
                exc_info = ExceptionInfo()
        return super().on_failure(exc_info, send_failed_event, return_ok)


class GuardedTask(Task):
    """Base of this package's tasks: their requests are GuardedRequests (named, so producers never import it)."""

    Request = "inference_tasks.worker.celery_ext.request:GuardedRequest"

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None:
        """Celery's public hook, run in the child just before the task: a training task taken from a queue
        that is not a training queue fails naming it. (Arguments are the task's own: each parses its
        call against its spec, contract/specs.py, which names what it takes.)"""
        check_queue(self.name, (self.request.delivery_info or {}).get("routing_key"))


def refuse_message(message: Any, reason: str, task_id: str | None, task_name: str | None) -> None:
    """Cost one message that passed screening but failed in the main process: log, dead-letter,
    FAILURE (and its reply job) where the id is known, forget its Request, ack it. Never raises."""
    try:
        error = UnhandledMessage(f"{task_name}: {reason}; dead-lettered")
        refusal = _refusal(message, reason, task_id, task_name)
        channel: Any = getattr(message, "channel", None)
        refuse = getattr(channel, "refuse", None)
        if refuse is not None:
            if not refuse(refusal, error):  # Redis refused the FAILURE: not acked, the sweep returns it
                request = _request_of(message, task_id)
                if request is not None:
                    worker_state.task_ready(request)
                channel.qos.leave_for_sweep(message.delivery_tag)
                logger.warning("message %s left for the visibility sweep: its refusal could not be written", task_id)
                return
        else:  # not our transport: no dead-letter list, but the outcome still reaches the producer
            logger.error(
                "refused a message from queue %r (task %s, id %s): %s", refusal.queue, task_name, task_id, reason
            )
            if task_id:
                dead_letter.fail_result(refusal, error)
        request = _request_of(message, task_id)
        if request is not None:  # the strategy got as far as making one: Celery forgets it, acks once
            worker_state.task_ready(request)
            request.acknowledge()
        elif not message.acknowledged:
            message.ack()
    except Exception:  # the guard itself must never take the worker down
        logger.exception("could not refuse message %s; it returns to its queue with the connection", task_id)


def requeue_message(message: Any, task_id: str | None, connection_errors: Any) -> None:
    """Put one message back on its queue (its failure was not its own fault) and forget its Request."""
    request = _request_of(message, task_id)
    if request is not None:
        worker_state.task_ready(request)
        request.reject(requeue=True)
    elif not message.acknowledged:
        message.reject_log_error(logger, connection_errors, requeue=True)


def record_refusal(message: Any, reason: str, task_id: str | None, task_name: str | None) -> None:
    """Log and dead-letter one message whose FAILURE someone else stores. Never raises."""
    try:
        refusal = _refusal(message, reason, task_id, task_name)
        record = getattr(getattr(message, "channel", None), "dead_letter", None)
        if record is not None:
            record(refusal)
        else:
            logger.error(
                "refused a message from queue %r (task %s, id %s): %s", refusal.queue, task_name, task_id, reason
            )
    except Exception:
        logger.exception("could not dead-letter message %s", task_id)


def _refusal(message: Any, reason: str, task_id: str | None, task_name: str | None) -> Refusal:
    headers = message.headers if isinstance(getattr(message, "headers", None), dict) else {}
    delivery_info = getattr(message, "delivery_info", None) or {}
    return Refusal(
        queue=str(delivery_info.get("routing_key", "?")),
        reason=reason,
        raw=_raw_bytes(message),
        task_id=task_id,
        task_name=task_name,
        reply=requested_reply(headers),
    )


def _raw_bytes(message: Any) -> bytes:
    """The message as it was popped from Redis (the transport's ScreenedMessage keeps its envelope)."""
    try:
        return codec.dumps(message.envelope)
    except Exception:  # noqa: BLE001 - keep what kombu decoded of the body instead
        body = getattr(message, "body", b"")
        return body if isinstance(body, bytes) else str(body).encode("utf-8", errors="replace")


def _request_of(message: Any, task_id: str | None) -> Any:
    """Celery's Request for this very message, if the strategy made one (a redelivered duplicate
    of the same id may be held too: it is not this message's)."""
    request = worker_state.requests.get(task_id) if task_id else None
    return request if request is not None and request.message is message else None
