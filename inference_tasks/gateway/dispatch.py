"""One request, one task: push it onto its model's queue unless the queue is full, await its result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from inference_tasks.config.catalogue import model_queue
from inference_tasks.gateway.results import ResultWaiter
from inference_tasks.gateway.wire import new_task_id, task_message
from inference_tasks.lua import script
from inference_tasks.redis_access.keys import priority_list_key, queue_keys


class QueueFull(Exception):
    """The model's queue already holds max_queue_depth waiting tasks; nothing was pushed."""

    def __init__(self, queue: str, depth: int, limit: int) -> None:
        self.queue, self.depth, self.limit = queue, depth, limit
        super().__init__(f"queue {queue!r} holds {depth} waiting tasks, at or over its limit of {limit}")


class TaskFailed(Exception):
    """The task ran and failed; `remote_type` is the worker's exception class (InvalidInput: bad arguments)."""

    def __init__(self, task_id: str, remote_type: str, message: str) -> None:
        self.task_id, self.remote_type, self.message = task_id, remote_type, message
        super().__init__(f"{remote_type}: {message}")


@dataclass
class Dispatcher:
    """Sends tasks and awaits their results over asyncio Redis clients (broker's and results')."""

    broker: aioredis.Redis
    waiter: ResultWaiter
    max_queue_depth: int

    def __post_init__(self) -> None:
        self._push = self.broker.register_script(script("push_unless_full"))

    async def run(
        self, task: str, args: list[Any], kwargs: dict[str, Any], alias: str, timeout: float, tenant: str | None = None,
        priority: int = 0,
    ) -> Any:  # fmt: skip
        """The task's result on model `alias`'s queue at `priority` (0 first, 9 last); QueueFull, TaskFailed, or
        TimeoutError past `timeout`."""
        queue = model_queue(alias)
        task_id = new_task_id()
        message = task_message(task, args, {**kwargs, "model": alias}, task_id, queue, tenant, priority)

        async def push() -> None:
            target = priority_list_key(queue, priority)
            depth = await self._push(keys=[target, *queue_keys(queue)], args=[message, self.max_queue_depth])
            if depth < 0:
                raise QueueFull(queue, -depth - 1, self.max_queue_depth)

        meta = await self.waiter.wait(task_id, timeout, push)
        if meta["status"] != "SUCCESS":
            raise failure(task_id, meta)
        return meta["result"]


def failure(task_id: str, meta: dict[str, Any]) -> TaskFailed:
    """The stored FAILURE (or REVOKED) state as TaskFailed."""
    payload = meta.get("result")
    if isinstance(payload, dict):
        words = payload.get("exc_message")
        message = " ".join(str(word) for word in words) if isinstance(words, list) else str(words)
        return TaskFailed(task_id, str(payload.get("exc_type") or meta["status"]), message)
    return TaskFailed(task_id, str(meta["status"]), str(payload))
