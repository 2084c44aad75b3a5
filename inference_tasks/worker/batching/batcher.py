"""Micro-batching, parent side: coalesce small embed/classify tasks into one pool job, one encode.

Rails apps enqueue one record at a time; one task per text means one forward pass per text,
and a transformer encodes 32 short texts in little more time than one. The worker's main
process (which receives every message before a child runs it) holds small tasks of
`inference.embed` and `inference.classify` for at most INFERENCE_MICROBATCH_WAIT_MS, or until
they add up to INFERENCE_MICROBATCH_MAX_TEXTS texts, and hands them to one child as one job
(batch_job.py). Each task keeps its own message, result, events and signals: the child runs
Celery's own tracer per task, with the texts already encoded together.

Delivery is unchanged. Every task is still a Celery Request of its own: reserved (so its
lease is renewed) while held, acked late after its result is stored, rejected back to its queue
if the child dies (tasks whose SUCCESS was already stored are not run again: Celery checks).

When a batch goes: as soon as it holds MAX_TEXTS texts; at once if its first task found every
child idle (at low load there is nothing to wait for, so a lone task is never delayed);
otherwise once the wait is over and a child is free to take it. While every child is busy and
nothing waits in the pool, flushing would not start the work any sooner, only make the batch
smaller: the batch keeps gathering until a child frees up (the pool tells the batcher, pool.py).
While other jobs already wait in the pool for a child, the batch joins them once its wait is over.

Prefetch: the worker reserves `concurrency` messages (prefetch multiplier 1). A held task does
not count against that: each adds one to the prefetch window while held, and a dispatched batch
counts as one, like a single task, until it completes; one more unit lets the next batch gather
while every child is busy. So a busy worker holds at most one batch per child, one waiting for
the next free child, and the one gathering; other workers get the rest of the queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from weakref import ref

from celery.app.trace import fast_trace_task, trace_task_ret

from inference_tasks.worker.batching.batch_job import run_batch
from inference_tasks.worker.batching.completion import BatchCompletion
from inference_tasks.worker.batching.plan import planned_encode
from inference_tasks.worker.kinds.shared_pass import PlannedEncode
from inference_tasks.worker.lifecycle.context import current

logger = logging.getLogger(__name__)

# While every child is busy, a batch whose wait is over checks for a free child this often.
RECHECK_S = 0.01


class Batcher:
    """One per consumer connection, shared by the coalesced tasks; runs on the worker's event loop only."""

    def __init__(self, consumer: Any, max_texts: int, wait_s: float, max_text_chars: int) -> None:
        self.consumer = consumer
        self.handle: Callable[[Any], None] = consumer.on_task_request  # the normal path: one task, one pool job
        self.max_texts = max_texts
        self.wait_s = wait_s
        self.max_text_chars = max_text_chars
        app = consumer.app
        self.entry = app.settings.served_model  # prompts and kind: what each task will encode
        self.trace = fast_trace_task if app.use_fast_trace_task else trace_task_ret
        self.held: list[tuple[Any, PlannedEncode | None]] = []
        self.held_texts = 0
        self.flush_timer: Any = None
        self.wait_over = False
        self.closed = False
        # The pool's view of its children (pool.py); without it every child counts as free.
        self.pool: Any = current().pool
        if hasattr(self.pool, "on_child_free"):
            self.pool.on_child_free.append(self.on_child_free)
        else:
            logger.warning(
                "micro-batching without the pool's view of free children (pool %s, not "
                "inference_tasks.worker.celery_ext.pool:TaskPool): batches wait their full %.0f ms and may queue "
                "behind busy children; if the pool is ours, re-check billiard's AsynPool (docs/upstream.md)",
                type(consumer.pool).__name__,
                self.wait_s * 1000,
            )
        self.window_opened = False  # the gathering batch's unit of the prefetch window (first add)

    def add(self, request: Any) -> None:
        """Called for each coalescable task the consumer reserved (instead of sending it to the pool)."""
        if self.closed:
            return self.handle(request)
        if not self.window_opened:  # not at construction: the strategy is built before the QoS
            self.consumer.qos.increment_eventually()
            self.window_opened = True
        plan = self.plan(request)
        count = len(plan.texts) if plan else 0
        if count >= self.max_texts:
            return self.handle(request)  # already a full batch on its own
        if self.held_texts + count > self.max_texts:
            self.flush()
        self.held.append((request, plan))
        self.held_texts += count
        self.consumer.qos.increment_eventually()  # held tasks do not use up the prefetch window
        try:
            if self.held_texts >= self.max_texts or (len(self.held) == 1 and self.children_all_idle()):
                self.flush()
            elif self.flush_timer is None and not self.wait_over:
                self.flush_timer = self.consumer.timer.call_after(self.wait_s, self.on_wait_over)
        except Exception:
            # The consumer's guard refuses this task's message (worker/celery_ext/consumer.py): it must not
            # also go out later with a batch.
            self.drop(request)
            raise
        return None

    def plan(self, request: Any) -> PlannedEncode | None:
        """What the task will encode, or None to run it on its own (the child then validates it)."""
        try:
            plan = planned_encode(request, self.entry)
        except Exception:
            logger.exception("could not plan task %s for a micro-batch; it runs on its own", request.id)
            return None
        if plan is not None and any(len(text) > self.max_text_chars for text in [*plan.texts, plan.query or ""]):
            return None  # the task fails in the child with the length limit's own message
        return plan

    def drop(self, request: Any) -> None:
        """Forget a held task (its message is being refused) and the prefetch unit it added."""
        for index, (held, plan) in enumerate(self.held):
            if held is request:
                del self.held[index]
                self.held_texts -= len(plan.texts) if plan else 0
                self.consumer.qos.decrement_eventually()
                return

    def children_all_idle(self) -> bool:
        return bool(self.pool.all_children_idle()) if hasattr(self.pool, "all_children_idle") else False

    def child_is_free(self) -> bool:
        return self.pool.has_idle_child() if hasattr(self.pool, "has_idle_child") else True

    def jobs_queued_in_pool(self) -> bool:
        return bool(self.pool.has_queued_jobs()) if hasattr(self.pool, "has_queued_jobs") else False

    def may_go(self) -> bool:
        """A child can take the batch now, or jobs already wait in the pool for the next free child.

        In the second case the batch joins that queue: held on, it would be overtaken by every task
        the consumer hands the pool directly (full-size tasks are never held), and under a steady
        backfill of those a held task waited forever (docs/benchmarks-log.md, "Blocking calls")."""
        return bool(self.child_is_free() or self.jobs_queued_in_pool())

    def on_wait_over(self) -> None:
        """The first held task has waited the wait: go now if it may (`may_go`).

        Otherwise on_child_free sends it the moment a child finishes a job; a child that comes
        free another way (a recycled child's replacement starting) sends no such notice, so
        the batch also looks again every RECHECK_S: without that, two children recycling at
        once left a held batch waiting forever.
        """
        self.flush_timer = None
        if self.may_go():
            self.flush()
        else:
            self.wait_over = True
            self.flush_timer = self.consumer.timer.call_after(RECHECK_S, self.on_wait_over)

    def on_child_free(self) -> None:
        if self.wait_over and self.held and self.may_go():
            self.flush()

    def flush(self) -> None:
        """Send what is held to the pool: one task alone as usual, several as one batch job."""
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        self.wait_over = False
        held, self.held, self.held_texts = self.held, [], 0
        live = []
        for request, plan in held:
            try:
                revoked = request.revoked()  # revoked or expired while held: acked and announced by Celery
            except Exception:
                # Celery could not read the request's revocation headers: it cannot go with others.
                # Celery's own path then fails it alone; the batch and the worker go on.
                logger.exception("task %s: could not check whether it was revoked; sending it alone", request.id)
                self.consumer.qos.decrement_eventually()
                self.send_alone_or_refuse(request)
                continue
            if revoked:
                self.consumer.qos.decrement_eventually()
            else:
                live.append((request, plan))
        if not live:
            return
        self.consumer.qos.decrement_eventually()  # from here the batch counts as one reserved task
        if len(live) == 1:
            self.handle(live[0][0])
            return
        self.dispatch(live)

    def dispatch(self, live: list[tuple[Any, PlannedEncode | None]]) -> None:
        requests = [request for request, _ in live]
        plans = [plan for _, plan in live if plan is not None]
        entries = [(r.type, r.id, r.request_dict, r.body, r.content_type, r.content_encoding) for r in requests]
        completion = BatchCompletion(requests, self.consumer.qos, self.send_alone)
        hard_limit, soft_limit = _longest_time_limits(requests)
        try:
            result = self.consumer.pool.apply_async(
                run_batch,
                args=(self.trace, entries, plans),
                accept_callback=completion.on_accepted,
                timeout_callback=completion.on_timeout,
                callback=completion.on_results,
                error_callback=completion.on_failure,
                soft_timeout=soft_limit,
                timeout=hard_limit,
                correlation_id=requests[0].id,
            )
        except Exception:
            logger.exception("could not hand a batch of %d tasks to the pool; sending them one by one", len(requests))
            completion.send_each_alone()
            return
        if result is None:
            return  # not sent (the pool already told the completion) or the pool is closing
        for request in requests:
            # Lets `revoke(terminate=True)` find the job; it ends the whole batch's child.
            request.batch_job = ref(result)
        logger.info("coalesced %d tasks (%d texts) into one job", len(requests), sum(len(p.texts) for p in plans))

    def send_alone(self, request: Any) -> None:
        """One task as its own pool job (Celery's normal path), so a task that cannot go with others
        still runs or fails on its own."""
        self.handle(request)

    def send_alone_or_refuse(self, request: Any) -> None:
        """send_alone; if Celery's own path raises for it too, the consumer refuses the message
        (worker/celery_ext/consumer.py: dead-lettered, FAILURE, acked), as for any message it cannot take."""
        try:
            self.send_alone(request)
        except Exception as error:
            if isinstance(error, tuple(self.consumer.connection_errors)):
                raise
            self.consumer.on_message_failed(request.message, error)

    def close(self) -> None:
        """The consumer's connection is gone: its held messages go back to their queues with it."""
        self.closed = True
        if hasattr(self.pool, "on_child_free") and self.on_child_free in self.pool.on_child_free:
            self.pool.on_child_free.remove(self.on_child_free)
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        self.held, self.held_texts = [], 0


def _longest_time_limits(requests: list[Any]) -> tuple[float | None, float | None]:
    hard = [r.time_limits[0] or r.task.time_limit for r in requests]
    soft = [r.time_limits[1] or r.task.soft_time_limit for r in requests]
    return (max(hard) if all(hard) else None), (max(soft) if all(soft) else None)
