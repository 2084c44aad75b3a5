"""Micro-batching, child side: one encode for a batch of tasks, then Celery's own tracer for each.

The main process (batcher.py) sends a prefork child one job holding several small tasks.
Here their texts are encoded together in one forward pass per normalize flag; then each task
runs through the same tracer Celery uses for a lone task (task_prerun, STARTED, the task body
with its own validation, the result stored in the backend, task_success/failure, Sidekiq
replies), picking up its vectors instead of encoding again. A bad task fails alone: it was
either left out of the shared encode (its arguments looked wrong) or, if the shared encode
itself raises, every task encodes on its own.

STARTED is written for all of them at once, in one round trip, when the shared encode begins
(result_backend.store_started_together): that is when their work starts, and the tracer's
write of each just before its SUCCESS cost a round trip per task for a state that lasted
microseconds.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from celery import current_app
from celery.app.task import Context, get_actual_ignore_result

from inference_tasks.worker.batching.plan import NOT_RUN
from inference_tasks.worker.cache.lookup import rows_through_cache
from inference_tasks.worker.kinds.shared_pass import PlannedEncode, PreEncoded
from inference_tasks.worker.lifecycle.context import current
from inference_tasks.worker.lifecycle.jobs import job_ends, job_starts
from inference_tasks.worker.lifecycle.recycling import tasks_left
from inference_tasks.worker.lifecycle.task_traces import start_pass_span

if TYPE_CHECKING:
    from inference_tasks.worker.cache.lookup import VectorCache
    from inference_tasks.worker.kinds.model_holder import ModelHolder
    from inference_tasks.worker.kinds.model_kind import ModelKind
    from inference_tasks.worker.runtimes.capabilities import ServedModel

logger = logging.getLogger(__name__)


def encode_together(holder: ModelHolder, plans: Sequence[PlannedEncode]) -> dict[str, PreEncoded]:
    """Every planned task's share of its group's one pass (vectors, a pair scorer's scores or sparse rows),
    by task id, grouped as the model's kind says (worker/kinds/); {} for a group whose pass failed:
    its tasks then encode on their own."""
    if holder.served is None or holder.kind is None or not plans:
        return {}
    vectors: dict[str, PreEncoded] = {}
    cache = holder.cache if holder.kind.cached_rows else None
    for group in holder.kind.pass_groups(plans):
        if group:
            vectors.update(_encode_group(holder.kind, holder.served, group, cache))
    return vectors


def _pass_through_cache(
    kind: ModelKind, model: ServedModel, group: list[PlannedEncode], cache: VectorCache | None
) -> tuple[Any, list[bool]]:  # fmt: skip
    """The group's one pass, its texts read from the embedding cache first where it has them (the
    plans that sent cache=false bypass it): only the misses reach the model, and none when all hit."""
    texts = [text for plan in group for text in plan.texts]
    if cache is None or not any(plan.cache for plan in group):
        return kind.run_pass(model, group), [False] * len(texts)
    normalize = group[0].normalize
    space = cache.space(model, str(kind.cached_rows), normalize)
    wanted = [plan.cache for plan in group for _ in plan.texts]
    return rows_through_cache(
        cache, space, model, texts, lambda misses: kind.run_pass(model, [PlannedEncode("", misses, normalize)]), wanted
    )


def _encode_group(
    kind: ModelKind, model: ServedModel, group: list[PlannedEncode], cache: VectorCache | None = None
) -> dict[str, PreEncoded]:  # fmt: skip
    started_at, started = time.time(), time.perf_counter()
    texts = sum(len(plan.texts) for plan in group)
    pass_span = start_pass_span(texts, len(group))  # None unless this process traces
    try:
        encoded, from_cache = _pass_through_cache(kind, model, group, cache)
    except Exception as error:
        logger.warning("the shared encode of a micro-batch failed; its tasks encode one by one", exc_info=True)
        if pass_span is not None:
            pass_span.record_exception(error)
            pass_span.end()
        return {}
    per_text = (time.perf_counter() - started) / max(1, texts)
    link = None
    if pass_span is not None:
        pass_span.end()
        link = pass_span.get_span_context()
    vectors: dict[str, PreEncoded] = {}
    offset = 0
    for plan in group:
        share = encoded[offset : offset + len(plan.texts)]
        cached = sum(from_cache[offset : offset + len(plan.texts)])
        vectors[plan.task_id] = PreEncoded(
            plan.texts, plan.normalize, share, plan.query, started_at, per_text * len(plan.texts), link, cached
        )
        offset += len(plan.texts)
    return vectors


def record_started_together(entries: Sequence[tuple[Any, ...]]) -> Any:
    """Write STARTED for the entries whose tasks track it (as the tracer decides); the backend, or None."""
    backend = current_app.backend
    if not hasattr(backend, "store_started_together"):
        return None
    tracked = []
    for name, task_id, request, *_ in entries:
        task = current_app.tasks.get(name)
        if task is not None and task.track_started and not get_actual_ignore_result(task, Context(request)):
            tracked.append((task_id, request))
    if tracked:
        backend.store_started_together(tracked, os.getpid())
    return backend


def run_batch(trace: Callable[..., Any], entries: list[tuple[Any, ...]], plans: list[PlannedEncode]) -> list[Any]:
    """The pool job of a micro-batch: one outcome per entry, as Celery's tracer returns it for one task.

    An entry whose tracing itself raised (not the task: the tracer catches those) gets None,
    and the main process returns that task to its queue. A child whose recycle limit leaves room
    for fewer tasks than the batch holds runs that many and answers NOT_RUN for the rest, which
    the main process sends on as jobs of their own (to a sibling or this child's replacement).
    """
    entries, deferred = _within_task_limit(entries)
    if deferred:
        running = {entry[1] for entry in entries}
        plans = [plan for plan in plans if plan.task_id in running]
        logger.info("recycle limit: running %d tasks of this batch, %d go on alone", len(entries), len(deferred))
    return _run(trace, entries, plans) + [NOT_RUN] * len(deferred)


def _within_task_limit(entries: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    left = tasks_left(current().process)
    if left is None or left >= len(entries):
        return entries, []
    return entries[:left], entries[left:]


def _run(trace: Callable[..., Any], entries: list[tuple[Any, ...]], plans: list[PlannedEncode]) -> list[Any]:
    if not entries:
        return []
    ctx = current()
    record, holder = ctx.process, ctx.model
    job_starts(ctx)
    record.in_batch = True
    outcomes: list[Any] = []
    backend = None
    try:
        backend = record_started_together(entries)
        holder.pre_encoded = encode_together(holder, plans)
        for entry in entries:
            try:
                outcomes.append(trace(*entry))
            except Exception:
                logger.exception("tracing task %s of a micro-batch failed", entry[1])
                outcomes.append(None)
    finally:
        if backend is not None:
            backend.forget_started_together()
        holder.pre_encoded = {}
        record.in_batch = False
        record.batches_run += 1
        record.batched_tasks += len(entries)
        record.largest_batch = max(record.largest_batch, len(entries))
        job_ends(ctx)
    return outcomes
