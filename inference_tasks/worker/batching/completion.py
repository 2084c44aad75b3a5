"""Micro-batching, parent side: what happens to a batch job's tasks once the pool reports on it.

The pool calls one set of callbacks per job (accepted, results, failure, timeout); a batch job holds
several tasks, each with its own Celery Request. `BatchCompletion` fans each callback out to every
task's own handlers, so each task is acked, stored and announced as if it had run alone, and gives
back the prefetch window the batch held (batcher.py explains the window).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from billiard.einfo import ExceptionInfo
from billiard.exceptions import Terminated, WorkerLostError
from celery.worker import state as worker_state

from inference_tasks.worker.batching.plan import NOT_RUN
from inference_tasks.worker.celery_ext.pool import JobNotSent

logger = logging.getLogger(__name__)


class BatchCompletion:
    """The pool's callbacks for one batch job, fanned out to each task's own Request handlers."""

    def __init__(self, requests: list[Any], qos: Any, send_alone: Callable[[Any], None]) -> None:
        self.requests = requests
        self.qos = qos
        self.send_alone = send_alone
        self.released = False

    def on_accepted(self, pid: int, time_accepted: float) -> None:
        for request in self.requests:
            _each(request.on_accepted, pid, time_accepted)

    def on_results(self, results: Any) -> None:
        if not isinstance(results, list) or len(results) != len(self.requests):
            logger.error("a batch job returned %r instead of one outcome per task", type(results).__name__)
            results = [None] * len(self.requests)
        not_run = []
        for request, outcome in zip(self.requests, results, strict=True):
            if outcome is None:
                request.reject(requeue=True)
            elif isinstance(outcome, str) and outcome == NOT_RUN:
                not_run.append(request)  # its child's recycle limit was spent (batch_job.run_batch)
            else:
                _each(request.on_success, outcome)
        self.release()
        for request in not_run:
            _each(self.send_alone, request)

    def on_failure(self, exc_info: Any) -> None:
        """The job itself failed (its child died, or was killed at the time limit).

        A `revoke(terminate=True)` of one task kills the child running the whole batch; the pool
        reports the job as Terminated, which Celery turns into REVOKED for every task it is given
        to. Only the revoked ones are; their batch-mates lost their child like any task whose
        child died, so they get a WorkerLostError and go back to the queue (reject_on_worker_lost).
        """
        collateral = None
        error = getattr(exc_info, "exception", None)
        error = getattr(error, "exc", error)  # billiard may wrap it in ExceptionWithTraceback
        if isinstance(error, JobNotSent):
            self.send_each_alone()
            return
        if isinstance(error, Terminated):
            revoked_ids = [request.id for request in self.requests if request.id in worker_state.revoked]
            collateral = _worker_lost(f"its micro-batch was terminated to revoke {', '.join(revoked_ids)}")
        for request in self.requests:
            lost = collateral is not None and request.id not in worker_state.revoked
            _each(request.on_failure, collateral if lost else exc_info)
        self.release()

    def send_each_alone(self) -> None:
        """The pool could not send the batch job (one task's arguments would not serialise): each task
        goes as its own job instead, so the one at fault fails alone and its batch-mates run."""
        self.release()
        for request in self.requests:
            _each(self.send_alone, request)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        for request in self.requests:
            _each(request.on_timeout, soft, timeout)
        if not soft:
            self.release()

    def release(self) -> None:
        """Give back the prefetch window the batch's tasks beyond the first held, once."""
        if not self.released:
            self.released = True
            if len(self.requests) > 1:
                self.qos.decrement_eventually(len(self.requests) - 1)


def _worker_lost(reason: str) -> ExceptionInfo:
    try:
        raise WorkerLostError(reason)
    except WorkerLostError:
        return ExceptionInfo()


def _each(handler: Any, *args: Any) -> None:
    """Run one task's handler; an error there must not stop its batch-mates' acks."""
    try:
        handler(*args)
    except Exception:
        logger.exception("handling the outcome of a batched task failed")
