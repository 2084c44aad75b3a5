"""Micro-batching's Celery glue: the coalesced tasks' base and strategy, one Batcher per consumer
connection, and the consumer step that stops it.

The batcher itself (batcher.py) holds and flushes tasks; here Celery's default strategy is given a
view of the consumer whose reserved tasks go to that batcher instead of straight to the pool. The
batcher lives on the consumer it serves (no module state), replaced when the consumer reconnects.
"""

from __future__ import annotations

from typing import Any

from celery import Task, bootsteps
from celery.worker.strategy import default as default_strategy

from inference_tasks.worker.batching.batcher import Batcher
from inference_tasks.worker.celery_ext.request import GuardedTask

# The consumer's attribute holding (its connection, its Batcher): strategies are rebuilt on reconnect.
BATCHER_ATTRIBUTE = "inference_batcher"


class _ConsumerForBatching:
    """The consumer as Celery's default strategy sees it, except that reserved tasks go to the Batcher."""

    def __init__(self, consumer: Any, batcher: Batcher) -> None:
        self._consumer = consumer
        self.on_task_request = batcher.add

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def batcher_for(consumer: Any) -> Batcher:
    """The consumer's Batcher for its current connection (strategies are rebuilt on reconnect)."""
    settings = consumer.app.settings
    connection = consumer.connection
    current = getattr(consumer, BATCHER_ATTRIBUTE, None)
    if current is not None and current[0] is connection:
        return current[1]
    if current is not None:
        current[1].close()
    max_texts = min(settings.microbatch_max_texts, settings.task_max_texts)
    batcher = Batcher(consumer, max_texts, settings.microbatch_wait_ms / 1000, settings.max_text_chars)
    setattr(consumer, BATCHER_ATTRIBUTE, (connection, batcher))
    return batcher


def close_batcher(consumer: Any) -> None:
    """Drop what the consumer's batcher holds and stop it from sending anything more."""
    current = getattr(consumer, BATCHER_ATTRIBUTE, None)
    setattr(consumer, BATCHER_ATTRIBUTE, None)
    if current is not None:
        current[1].close()


class StopBatchingOnConsumerStop(bootsteps.StartStopStep):
    """Consumer step: when the consumer stops (warm shutdown, or a lost connection), held tasks are dropped.

    Their messages are still unacknowledged and go back to the queue with the consumer's
    connection; sending them to the pool during the shutdown ran them here while another worker
    got them back too (seen in the rolling-restart test: two tasks ran twice). A new connection
    gets a new batcher (strategies are rebuilt).
    """

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def stop(self, parent: Any) -> None:
        close_batcher(parent)

    shutdown = stop


def strategy(task: Task, app: Any, consumer: Any, **kwargs: Any) -> Any:
    """Task.Strategy of the coalesced tasks: Celery's default, with reserved tasks going to a Batcher.

    Only for a prefork worker on its event loop (the timer and pool callbacks then all run in
    the main thread) with micro-batching on; otherwise exactly Celery's default.
    """
    from celery.concurrency.prefork import TaskPool as PreforkTaskPool

    settings = app.settings
    controller = getattr(consumer, "controller", None)
    on_event_loop = bool(getattr(controller, "use_eventloop", False))
    if settings.microbatch_max_texts < 2 or not on_event_loop or not isinstance(consumer.pool, PreforkTaskPool):
        return default_strategy(task, app, consumer, **kwargs)
    return default_strategy(task, app, _ConsumerForBatching(consumer, batcher_for(consumer)), **kwargs)


class CoalescedTask(GuardedTask):
    """Base of inference.embed and inference.classify: small tasks may share one encode."""

    Strategy = "inference_tasks.worker.batching.strategy:strategy"
    # The result's repr in the success log line and in Flower's task-succeeded event. Celery renders
    # it for every task, and at its default 1,024 characters of vector numbers a one-text task's
    # child spent a visible share of its time there (docs/benchmarks.md); 256 show the same start.
    resultrepr_maxsize = 256
