"""Celery's consumer, except that one message's failure in the main process costs that message, never the worker.

Celery's task handler (Consumer.create_task_handler) catches only the errors it expects of a
message (unknown task, invalid task, undecodable body); anything else raised while decoding it,
building its Request, running the strategy (micro-batching included) or handing it to the pool
escaped into the event loop, which logged "Unrecoverable error" and stopped the worker. The
message went back to the queue and the next worker to take it died the same way.

Here that handler is wrapped (the public `worker_consumer` setting selects this class): the
message is refused (dead-lettered, FAILURE and its reply job where it has an id, a log line naming
queue and id, acked) and the worker takes the next one. Two kinds of error are not the message's
fault and keep Celery's handling: a lost broker connection (Celery reconnects; the message returns
to its queue) and a full Redis (the message is put back for later).

A worker that no other worker could answer skips Celery's mingle and its one-second wait
(celery_ext/mingle.py).

And when Redis refuses the worker's ACL user a command, key or channel while the consumer starts or
runs (a grant missing from an old aclfile), the worker stops with a message naming the user, what
Redis refused and where the grants come from, where Celery said only "Unrecoverable error:
auth:NoPermissionError".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from vine import promise as vine_promise

from inference_tasks.app import is_inference_app
from inference_tasks.redis_access.redis_errors import is_out_of_memory, missing_grant_message, permission_error_in
from inference_tasks.worker.celery_ext.mingle import nobody_to_mingle_with
from inference_tasks.worker.celery_ext.request import refuse_message, requeue_message
from inference_tasks.worker.lifecycle.context import current

logger = logging.getLogger(__name__)


class MissingRedisGrant(RuntimeError):
    """Redis refuses this worker's ACL user something the consumer needs: the worker cannot serve."""


class Consumer(CeleryConsumer):
    """`worker_consumer` of this app."""

    # (the connection it serves, the micro-batcher) for the coalesced tasks (worker/batching/strategy.py):
    # state of this consumer, replaced when it reconnects.
    inference_batcher: tuple[Any, Any] | None = None

    def __init__(
        self, *args: Any, app: Any = None, worker_options: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        options = dict(worker_options or {})
        mingles = app is not None and is_inference_app(app) and not options.get("without_mingle")
        if mingles and nobody_to_mingle_with(app.settings):  # celery_ext/mingle.py: saves its one-second wait
            logger.info("mingle: no other worker listens for broadcasts; starting without mingle")
            options["without_mingle"] = True
        super().__init__(*args, app=app, worker_options=options, **kwargs)

    def start(self) -> None:
        try:
            super().start()
        except Exception as error:
            refused = permission_error_in(error)
            if refused is None:
                raise
            role = "trainer" if current().process.profile == "trainer" else "worker"
            raise MissingRedisGrant(missing_grant_message(refused, self.app.conf.broker_url, role)) from error

    def create_task_handler(self, promise: Any = vine_promise) -> Callable[[Any], Any]:
        handle_message = super().create_task_handler(promise)

        def on_task_received(message: Any) -> Any:
            try:
                return handle_message(message)
            except Exception as error:
                if isinstance(error, tuple(self.connection_errors)):
                    raise  # Celery reconnects; the unacked message returns to its queue
                self.on_message_failed(message, error)
                return None

        return on_task_received

    def on_message_failed(self, message: Any, error: Exception) -> None:
        """The main process could not take `message`: refuse it, unless Redis is only full for now."""
        headers = message.headers if isinstance(message.headers, dict) else {}
        task_id, task_name = headers.get("id"), headers.get("task")
        if is_out_of_memory(error):
            logger.error("Redis is full while taking task %s (%s); it goes back to its queue", task_id, error)
            requeue_message(message, task_id, self.connection_errors)
            return
        logger.error("the worker could not take task %s[%s]", task_name, task_id, exc_info=error)
        reason = f"the worker could not take it ({type(error).__name__}: {_shortened(error)})"
        refuse_message(message, reason, task_id, task_name)


def _shortened(error: Exception, limit: int = 300) -> str:
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "..."
