"""Send tasks and read results the way a production producer should: bounded queues, results read once.

Redis holds three things per task: the queued message, the result, and (if asked) a reply job.
A producer that pushes faster than the workers serve grows the queue without bound; one that
never deletes the results it read leaves each one in Redis for its whole lifetime (~0.5 MB for a
64-text JSON embedding). `send` refuses to enqueue onto a queue that already holds
`max_queue_depth` waiting messages (QueueFull), and turns Redis' own refusal at maxmemory into
RedisFull with what to do; `collect` waits for a result and deletes it once read (keep=True
keeps it). The Ruby client (deploy/rails) offers the same three.

The depth check and the push are two commands, so producers racing each other can overshoot the
limit by at most one message each; the Ruby client does both in one Lua script (exact).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery.exceptions import TimeoutError as ResultTimeout
from celery.result import AsyncResult
from kombu.exceptions import OperationalError

from inference_tasks.config.catalogue import model_queue
from inference_tasks.config.defaults import DEFAULT_DURABLE_REPLICAS, DEFAULT_DURABLE_TIMEOUT_S
from inference_tasks.redis_access.connections import broker_redis
from inference_tasks.redis_access.durable import DURABLE_HEADER, check_durable_options, confirm_replicated
from inference_tasks.redis_access.queue_state import queue_depth
from inference_tasks.redis_access.redis_errors import is_out_of_memory
from inference_tasks.routing import INFERENCE_QUEUE, MODEL_TASKS, TASK_ROUTES

# While waiting for room in a queue (wait_for_room), the first and longest pause between checks.
FIRST_ROOM_CHECK_S = 0.05
LONGEST_ROOM_CHECK_S = 1.0


class ProducerError(Exception):
    """Base of what `send` raises instead of enqueueing."""


class QueueFull(ProducerError):
    """The queue already holds max_queue_depth waiting messages; nothing was pushed."""

    def __init__(self, queue: str, depth: int, limit: int) -> None:
        self.queue, self.depth, self.limit = queue, depth, limit
        super().__init__(
            f"queue {queue!r} holds {depth} waiting messages, at or over max_queue_depth={limit}; "
            "nothing was pushed: retry later, or add workers"
        )


class RedisFull(ProducerError):
    """Redis refused the push: it is at maxmemory with noeviction; nothing was pushed."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(
            f"Redis is full (maxmemory reached, it refuses writes): nothing was pushed ({error}). "
            "Results not read and deleted by their producers are the usual cause: see docs/operations.md"
        )


class NotReplicated(ProducerError):
    """A durable push was not acknowledged by enough replicas in time. The task may or may not
    exist: the primary took the push, and may still replicate it or lose it in a failover. Sending
    again with the same task_id is safe: a worker runs the first message with that id only."""

    def __init__(self, task_id: str, acknowledged: int, replicas: int, timeout_s: float, cause: str = "") -> None:
        self.task_id, self.acknowledged, self.replicas = task_id, acknowledged, replicas
        why = cause or f"{acknowledged} of {replicas} replicas acknowledged it within {timeout_s:g} s"
        super().__init__(
            f"task {task_id} was pushed but not confirmed durable ({why}): it may or may not exist; "
            f"send it again with task_id={task_id!r} (safe: a worker runs one message per durable task id), "
            "and check the replicas (docs/reliability.md)"
        )


def queue_for(task_name: str, options: dict[str, Any]) -> str:
    """The queue a task goes to: the caller's choice, else its route."""
    return options.get("queue") or TASK_ROUTES.get(task_name, {}).get("queue", INFERENCE_QUEUE)


def send(
    app: Any,
    task_name: str,
    args: list[Any] | tuple[Any, ...] | None = None,
    kwargs: dict[str, Any] | None = None,
    *,
    max_queue_depth: int | None = None,
    model: str | None = None,
    durable: bool = False,
    durable_replicas: int = DEFAULT_DURABLE_REPLICAS,
    durable_timeout: float = DEFAULT_DURABLE_TIMEOUT_S,
    **options: Any,
) -> AsyncResult:
    """app.send_task, refused with QueueFull when the queue is already at max_queue_depth.

    `model` (a catalogue alias) sends the task to that model's queue, `inference.<alias>` (the
    trainer's tasks: `training.<alias>`), and names the model in its arguments, so no other model can
    answer it; no catalogue is needed to route.

    `durable=True` returns only once `durable_replicas` replicas hold the push (Redis WAIT, at most
    `durable_timeout` seconds), else raises NotReplicated: a primary that dies right after a push
    can lose it otherwise. Costs one round trip plus the replicas' acknowledgement.
    """
    if durable:
        check_durable_options(durable_replicas, durable_timeout)
    if model is not None:
        if task_name not in MODEL_TASKS:
            raise ValueError(f"model= applies to {', '.join(MODEL_TASKS)}, not {task_name}")
        kwargs = {**(kwargs or {}), "model": model}
        options["queue"] = model_queue(model, TASK_ROUTES[task_name]["queue"])
    if max_queue_depth is not None:
        queue = queue_for(task_name, options)
        depth = queue_depth(broker_redis(app.settings), queue)
        if depth >= max_queue_depth:
            raise QueueFull(queue, depth, max_queue_depth)
    try:
        if not durable:
            return app.send_task(task_name, args=args, kwargs=kwargs, **options)
        options["headers"] = {**(options.get("headers") or {}), DURABLE_HEADER: True}
        with app.producer_or_acquire() as producer:
            result = app.send_task(task_name, args=args, kwargs=kwargs, producer=producer, **options)
            confirm_durable(producer, result.id, durable_replicas, durable_timeout)
            return result
    except Exception as error:
        if is_out_of_memory(error):
            raise RedisFull(error) from error
        if raised_by_a_detached_channel(error):
            raise OperationalError(
                f"the connection to Redis was lost under this send ({type(error).__name__}: {error}); "
                "send again with the same task id"
            ) from error
        raise


def raised_by_a_detached_channel(error: BaseException) -> bool:
    """An AttributeError raised inside kombu while publishing: the pooled producer's channel was
    closed by kombu after a lost connection (its `connection` is None; seen during failovers). The
    next send gets a working producer, so it is reported as the connection error it is, which
    producers already retry, instead of an AttributeError."""
    if not isinstance(error, AttributeError):
        return False
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and f"{os.sep}kombu{os.sep}" in frame.tb_frame.f_code.co_filename


def confirm_durable(producer: Any, task_id: str, replicas: int, timeout_s: float) -> None:
    """NotReplicated unless `replicas` replicas hold the push `producer` just made."""
    try:
        acknowledged = confirm_replicated(
            redis.Redis(connection_pool=producer.channel.pool), task_id, replicas, timeout_s
        )
    except redis.RedisError as error:
        raise NotReplicated(task_id, 0, replicas, timeout_s, f"the confirmation failed: {error}") from error
    if acknowledged < replicas:
        raise NotReplicated(task_id, acknowledged, replicas, timeout_s)


def collect(result: AsyncResult, timeout: float, keep: bool = False) -> Any:
    """The task's result (raising its error if it failed), deleted from Redis once read unless `keep`.

    A timeout leaves the result in place (it may still come; its lifetime bounds it).
    """
    try:
        value = result.get(timeout=timeout)
    except Exception as error:
        if not keep and not isinstance(error, ResultTimeout):
            result.forget()
        raise
    if not keep:
        result.forget()
    return value


def wait_for_room(app: Any, queue: str, max_queue_depth: int, timeout: float) -> int:
    """Wait until `queue` holds fewer than max_queue_depth messages; the depth seen. QueueFull on timeout."""
    client = broker_redis(app.settings)
    deadline = time.monotonic() + timeout
    pause = FIRST_ROOM_CHECK_S
    while True:
        depth = queue_depth(client, queue)
        if depth < max_queue_depth:
            return depth
        if time.monotonic() >= deadline:
            raise QueueFull(queue, depth, max_queue_depth)
        time.sleep(pause)
        pause = min(pause * 2, LONGEST_ROOM_CHECK_S)
