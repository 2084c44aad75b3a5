"""Celery's Redis result backend with three production rules: replies, lifetimes, and a full Redis.

Selected in app.py as `result_backend = "inference_tasks.broker.result_backend:ResultBackend+redis://..."`
(Celery's documented `<class>+<url>` form); everything else is RedisBackend's own. The one method
overridden, `store_result`, is Celery's public backend API (every state change goes through it).

- **Replies from the stored outcome.** When a task's final state (SUCCESS, FAILURE, REVOKED) is
  stored and its message asked for a reply job (replies.py), the reply is pushed first; a
  successful result is then kept only as a small stub naming the reply job, so the embedding is in
  Redis once (in the reply), not twice. If the reply cannot be pushed, the full result is stored.
  Any state stored by any process gets its reply: the child's own outcome, a revoke or time limit
  decided in the worker's main process.
- **Lifetimes.** Inference results expire after INFERENCE_RESULT_EXPIRES_S (1 hour); the final
  results of training tasks, small and read by people, after INFERENCE_TRAINING_RESULT_EXPIRES_S.
- **A full Redis loses no task.** Redis at maxmemory with `noeviction` refuses the write. A final
  state is retried for INFERENCE_RESULT_WRITE_PATIENCE_S (clients reading and deleting their
  results free memory) by the child running the task, which then gives it back to its queue
  (Celery's Reject with requeue) instead of being acked without a result; a task whose reply job
  was pushed is not given back (running it again would reply twice): only its stub goes unstored,
  and the error says so. Intermediate states
  (STARTED, PROGRESS) are advisory: one that cannot be written is logged and skipped.
- **One round trip per state.** Celery reads a task's stored state before every write (a
  SUCCESS is never overwritten: a redelivered duplicate must not clobber it), then writes and
  publishes in a MULTI: two round trips, and the read and the write are not atomic. Here one Lua
  script does all three atomically (`_store_result`) for values up to 64 KiB; bigger ones (where
  Lua's copy of the value costs Redis more than a round trip) take Celery's two steps. A
  micro-batch's STARTED states are written together, in one round trip, when its shared encode
  begins (`store_started_together`); the tracer's own STARTED write for each of those tasks is
  then skipped. Before this a one-text task cost its child four round trips to store two states;
  now one, plus a share of the batch's one.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from celery import states
from celery.app.task import Context
from celery.backends.redis import RedisBackend, SentinelBackend
from celery.exceptions import BackendStoreError, Reject
from kombu.utils.encoding import bytes_to_str

from inference_tasks.broker import replies
from inference_tasks.lua import script
from inference_tasks.redis_access.redis_errors import is_out_of_memory
from inference_tasks.routing import LONG_LIVED_RESULT_TASKS
from inference_tasks.tracing.spans import span

logger = logging.getLogger(__name__)
# The largest string Redis stores (proto-max-bulk-len's default): Celery's Redis backend refuses a
# bigger result with the same error before sending it.
REDIS_MAX_VALUE_BYTES = 512 * 1024 * 1024

# First and longest pause between attempts to store a final state while Redis is full.
FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 1.0

# Values up to this size are stored by the script below in one round trip; bigger ones (64-text
# results) the way Celery does, in two, because Lua's copy of a big argument costs Redis more CPU
# than the round trip saves.
LUA_MAX_VALUE_BYTES = 64 * 1024


if TYPE_CHECKING:
    # What the mixin is mixed into, for the type checker (Celery is untyped, so this is Any to it).
    from celery.backends.redis import RedisBackend as _MixedInto
else:
    _MixedInto = object


class ResultStore(_MixedInto):
    """Mixed into Celery's Redis backends: store_result pushes replies, sets lifetimes and outlasts a
    full Redis."""

    app: Any
    client: Any
    # Tasks whose STARTED a micro-batch already wrote (store_started_together); per process.
    _started_together: set[str]

    def store_result(
        self, task_id: str, result: Any, state: str, traceback: Any = None, request: Any = None, **kwargs: Any
    ) -> Any:
        if state == states.STARTED and task_id in self.__dict__.get("_started_together", ()):
            self._started_together.discard(task_id)
            return result
        if state not in states.READY_STATES:
            try:
                return super().store_result(task_id, result, state, traceback, request, **kwargs)
            except Exception as error:
                if not is_out_of_memory(error):
                    raise
                logger.warning("Redis is full: state %s of task %s not recorded (%s)", state, task_id, error)
                return result
        with span("result store", **{"celery.state": state}):
            return self._store_final(task_id, result, state, traceback, request, **kwargs)

    def _store_final(self, task_id: str, result: Any, state: str, traceback: Any, request: Any, **kwargs: Any) -> Any:
        settings = self.app.settings
        spec = replies.requested_reply(request)
        replied = False
        # Only the child running the task waits for room: the worker's main process (recording a
        # revoke or a time limit) must never block its event loop, and has no task to hand back.
        in_the_task = self._running(task_id)
        deadline = time.monotonic() + (settings.result_write_patience_s if in_the_task else 0)
        pause = FIRST_PAUSE_S
        while True:
            try:
                if spec is not None and not replied:
                    error = result if isinstance(result, BaseException) else None
                    value = None if error is not None else result
                    replied = replies.reply(spec, request, settings, state, value, error)
                kept = replies.stub_result(spec) if spec is not None and replied and state == states.SUCCESS else result
                stored = super().store_result(task_id, kept, state, traceback, request, **kwargs)
                self._extend_lifetime(task_id, request)
                return stored
            except Exception as error:
                not_pushed = isinstance(error, replies.ReplyNotPushed)
                if not (not_pushed or is_out_of_memory(error)):
                    raise
                if time.monotonic() >= deadline:
                    if replied:
                        # The caller has its outcome: running the task again would push a second reply.
                        logger.error(
                            "Redis refused for %.0f s: task %s replied, its result stub not stored (%s)",
                            settings.result_write_patience_s if in_the_task else 0, task_id, error,
                        )  # fmt: skip
                        return result
                    if in_the_task:
                        self._give_back(task_id, state, error)
                    if not not_pushed:
                        raise
                    # The main process never waits: the outcome is stored, its reply job dropped.
                    logger.error("could not push the reply job for task %s (%s): dropped", task_id, error)
                    spec = None
                    continue
                if not_pushed:
                    logger.warning("could not push the reply job for task %s yet (%s): retrying", task_id, error)
                else:
                    logger.warning("Redis is full: retrying to store %s of task %s (%s)", state, task_id, error)
                time.sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE_S)

    def _store_result(
        self, task_id: str, result: Any, state: str, traceback: Any = None, request: Any = None, **kwargs: Any
    ) -> Any:
        """Celery's BaseKeyValueStoreBackend._store_result in one atomic round trip (pinned, docs/upstream.md)."""
        key, value, lifetime = self._encoded_state(task_id, result, state, traceback, request)
        self.ensure(self._set_unless_succeeded, (key, value, lifetime))
        return result

    def _encoded_state(
        self, task_id: str, result: Any, state: str, traceback: Any, request: Any
    ) -> tuple[str, str, int]:
        """The key, the meta exactly as Celery encodes it, and its lifetime (RedisBackend._set_with_state)."""
        meta = self._get_result_meta(result=result, state=state, traceback=traceback, request=request)
        meta["task_id"] = bytes_to_str(task_id)
        value = self.encode(meta)
        if isinstance(value, str) and len(value) > REDIS_MAX_VALUE_BYTES:
            raise BackendStoreError("value too large for Redis backend", state=state, task_id=task_id)
        lifetime = self.failure_expires if state == states.FAILURE else None
        if lifetime is None:
            lifetime = self.expires
        return self.get_key_for_task(task_id), value, int(lifetime or 0)

    def _set_unless_succeeded(self, key: str, value: str | bytes, lifetime: int) -> bool:
        if len(value) <= LUA_MAX_VALUE_BYTES:
            return bool(self.client.eval(script("set_unless_succeeded"), 1, key, value, lifetime))
        # Celery's own two steps: Lua copies its arguments, and for a big value (a 64-text JSON
        # result is ~515 KB) that cost Redis more than the two plain commands (docs/benchmarks.md).
        current = self.get(key)
        if current and self.decode_result(current).get("status") == states.SUCCESS:
            return False
        with self.client.pipeline() as pipe:  # Celery's RedisBackend.set: the write and its PUBLISH together
            if lifetime:
                pipe.setex(key, lifetime, value)
            else:
                pipe.set(key, value)
            pipe.publish(key, value)
            pipe.execute()
        return True

    def store_started_together(self, requests: list[tuple[str, dict[str, Any]]], pid: int) -> None:
        """STARTED for every task of a micro-batch, in one round trip, as their shared encode begins.

        `requests` are (task id, Celery request dict). The tracer's own STARTED write for each is
        then skipped (store_result). Advisory like any STARTED: a failure is logged and each task
        writes its own STARTED as usual.
        """
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for task_id, request in requests:
                    started = {"pid": pid, "hostname": request.get("hostname")}
                    key, value, lifetime = self._encoded_state(task_id, started, states.STARTED, None, Context(request))
                    pipe.eval(script("set_unless_succeeded"), 1, key, value, lifetime)
                pipe.execute()
        except Exception as error:  # noqa: BLE001 - advisory; each task then records its own STARTED
            logger.warning("could not record STARTED for a micro-batch of %d tasks: %s", len(requests), error)
            return
        self.__dict__.setdefault("_started_together", set()).update(task_id for task_id, _ in requests)

    def forget_started_together(self) -> None:
        """The batch is over: a task not traced (its tracing failed) must not skip a later STARTED."""
        self.__dict__.get("_started_together", set()).clear()

    def _running(self, task_id: str) -> bool:
        """Whether this process is the one running `task_id` (a prefork child, or a solo worker)."""
        task = self.app.current_worker_task
        return task is not None and getattr(task.request, "id", None) == task_id

    def _extend_lifetime(self, task_id: str, request: Any) -> None:
        """Training results keep their longer lifetime (one EXPIRE, for those tasks only)."""
        if getattr(request, "task", None) in LONG_LIVED_RESULT_TASKS:
            key = self.get_key_for_task(task_id)
            self.client.expire(key, self.app.settings.training_result_expires_s)

    def _give_back(self, task_id: str, state: str, error: BaseException) -> None:
        """Hand the task back to its queue instead of acking it without a result or its reply job
        (raises Reject); it runs again and stores, and replies, then."""
        not_pushed = isinstance(error, replies.ReplyNotPushed)
        what = "push the reply job of" if not_pushed else f"store {state} of"
        logger.error(
            "Redis refused for %.0f s: could not %s task %s; returning it to its queue (%s)",
            self.app.settings.result_write_patience_s,
            what,
            task_id,
            error,
        )
        raise Reject(f"{'reply job not pushed' if not_pushed else 'result backend full'}: {error}", requeue=True)


class ResultBackend(ResultStore, RedisBackend):
    """REDIS_URL=redis://, rediss://, unix://."""


class SentinelResultBackend(ResultStore, SentinelBackend):
    """REDIS_URL=sentinel://...: Celery's Sentinel backend (the current primary, found again after a
    failover), with the same replies, lifetimes and full-Redis handling."""
