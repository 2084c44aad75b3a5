"""Which raw messages a worker runs: screening, bounded redelivery, one run per durable task id, and
dead-lettering of the rest (mixed into broker/transport.py's Channel, which calls `admit` on each
message it takes, before Celery decodes it)."""

from __future__ import annotations

import functools
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from kombu.utils.encoding import bytes_to_str

from inference_tasks.broker import dead_letter
from inference_tasks.broker.dead_letter import DeadLetterPolicy, Refusal
from inference_tasks.broker.envelope import MalformedMessage, Screening, TooManyRedeliveries, screen
from inference_tasks.broker.limits import LIMIT_OPTIONS, ScreeningLimits, limits_from_options
from inference_tasks.config.defaults import (
    DEFAULT_DEAD_LETTER_MAX,
    DEFAULT_DEAD_LETTER_TTL_S,
    DEFAULT_DURABLE_CLAIM_TTL_S,
    DEFAULT_MAX_ARGUMENT_DEPTH,
    DEFAULT_MAX_ETA_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_MESSAGE_ITEMS,
    DEFAULT_MAX_NESTING_DEPTH,
    DEFAULT_MAX_REDELIVERIES,
)
from inference_tasks.redis_access.durable import DURABLE_HEADER
from inference_tasks.redis_access.keys import durable_claim_key, redelivery_key
from inference_tasks.routing import PUBLIC_TASKS
from inference_tasks.tracing.config import ADMITTED_AT_HEADER, TAKEN_AT_HEADER

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

# Remote-control replies (ping, inspect) travel on lists named "<uuid>.reply.celery.pidbox";
# they are kombu's own messages, not tasks, and are not screened.
CONTROL_QUEUE_SUFFIX = ".pidbox"


class AdmissionDeferred(Exception):
    """Redis refused a write admitting or refusing a message needs (full, failing over): the message
    must stay where it is (a take's unacked record, which the sweep returns) and be admitted again."""


class Admission:
    """The channel's admission of raw messages; its limits arrive as kombu transport options."""

    if TYPE_CHECKING:  # the channel's, which this is mixed into
        conn_or_acquire: Callable[..., Any]
        connection_errors: tuple[type[BaseException], ...]
        unacked_key: str
        qos: Any

    max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES
    max_nesting_depth = DEFAULT_MAX_NESTING_DEPTH
    max_argument_depth = DEFAULT_MAX_ARGUMENT_DEPTH
    max_message_items = DEFAULT_MAX_MESSAGE_ITEMS
    # A tracing worker (tracing.config) stamps each admitted message with when it was taken and when
    # screening let it through; the child running the task makes spans of them (worker/lifecycle/task_traces.py).
    trace_stamps = False
    max_eta_s = DEFAULT_MAX_ETA_S
    accepted_tasks: tuple[str, ...] = PUBLIC_TASKS
    max_redeliveries = DEFAULT_MAX_REDELIVERIES
    dead_letter_max = DEFAULT_DEAD_LETTER_MAX
    dead_letter_ttl = DEFAULT_DEAD_LETTER_TTL_S
    redelivery_counter_ttl = 86_400
    durable_claim_ttl = DEFAULT_DURABLE_CLAIM_TTL_S

    @functools.cached_property
    def screening_limits(self) -> ScreeningLimits:
        return limits_from_options({name: getattr(self, name) for name in LIMIT_OPTIONS})

    def admit(self, item: bytes, queue: str) -> dict[str, Any] | None:
        """The envelope to deliver, or None after dead-lettering a refused message. Raises
        AdmissionDeferred when Redis refused a write the decision needs: a refused message's FAILURE
        unstored would leave its caller waiting for ever."""
        if queue.endswith(CONTROL_QUEUE_SUFFIX):
            return json.loads(bytes_to_str(item))  # kombu's own remote-control replies
        taken_at = time.time() if self.trace_stamps else 0.0
        screening = screen(item, self.screening_limits)
        error: Exception
        if not screening.accepted:
            error = MalformedMessage(f"malformed message: {screening.problem}")
            self.refuse_or_defer(_refusal(item, queue, screening, screening.problem), error)
            return None
        envelope = screening.envelope
        assert envelope is not None
        if envelope["headers"].get("redelivered") or envelope["properties"]["delivery_info"].get("redelivered"):
            try:
                redeliveries = self.count_redelivery(screening.task_id or "")
            except self.connection_errors:
                raise
            except Exception as count_error:
                raise AdmissionDeferred(f"could not count a redelivery ({count_error})") from count_error
            if redeliveries > self.max_redeliveries:
                problem = (
                    f"redelivered {redeliveries} times without completing: its worker process died or "
                    f"the worker stopped during every attempt; dead-lettered after "
                    f"INFERENCE_MAX_REDELIVERIES={self.max_redeliveries}"
                )
                error = TooManyRedeliveries(f"{screening.task_name}: {problem}")
                self.refuse_or_defer(_refusal(item, queue, screening, problem), error)
                return None
        if envelope["headers"].get(DURABLE_HEADER) and not self.first_durable_message(envelope):
            return None
        if self.trace_stamps:
            envelope["headers"].update({TAKEN_AT_HEADER: taken_at, ADMITTED_AT_HEADER: time.time()})
        return envelope

    def first_durable_message(self, envelope: dict[str, Any]) -> bool:
        """Whether to run a durably pushed message: the first one taken with its task id (its
        redeliveries keep its delivery tag) yes; another message with that id, a producer's retry
        after NotReplicated, no (logged and dropped: the first one answers). Runs it if Redis fails:
        a task may run twice, never not at all."""
        task_id = envelope["headers"].get("id")
        tag = envelope["properties"].get("delivery_tag")
        if not isinstance(task_id, str) or not isinstance(tag, str):
            return True
        try:
            with self.conn_or_acquire() as client:
                first = client.set(durable_claim_key(task_id), tag, nx=True, ex=self.durable_claim_ttl, get=True)
        except self.connection_errors:
            raise
        except Exception:
            logger.exception("could not claim durable task %s: running it", task_id)
            return True
        if first is None or bytes_to_str(first) == tag:
            return True
        logger.warning(
            "durable task %s: dropped a second message with this id (delivery %s; the first, %s, answers): "
            "a producer's retry after NotReplicated", task_id, tag, bytes_to_str(first),
        )  # fmt: skip
        return False

    def dead_letter_unreadable_record(self, tag: Any, error: Exception) -> None:
        """An unacked record the sweep cannot read back (qos.py): refuse its message and remove it."""
        with self.conn_or_acquire() as client:
            record = client.hget(self.unacked_key, tag) or b""
        head, found, tail = record.rpartition(b',"",')
        try:
            message, queue = (head[1:], json.loads(tail[:-1])) if found else (record, "")
        except ValueError:
            message, queue = record, ""
        screening = screen(message, self.screening_limits)
        problem = f"its unacked record could not be restored ({type(error).__name__}: {error}); " + (
            screening.problem or "dead-lettered"
        )
        if self.refuse(_refusal(message, str(queue), screening, problem), MalformedMessage(problem)):
            self.qos.discard(bytes_to_str(tag))  # else the next sweep tries again

    def count_redelivery(self, task_id: str) -> int:
        key = redelivery_key(task_id)
        with self.conn_or_acquire() as client, client.pipeline() as pipe:
            count, _ = pipe.incr(key).expire(key, self.redelivery_counter_ttl).execute()
        return int(count)

    def refuse(self, refusal: Refusal, error: Exception) -> bool:
        """Log, dead-letter, and fail the task's result when its id is known (dead_letter.py). Never
        raises; False when Redis refused one of those writes."""
        try:
            with self.conn_or_acquire() as client:
                return dead_letter.refuse(client, refusal, error, self.dead_letter_policy())
        except Exception:
            logger.exception("could not refuse a message from queue %r", refusal.queue)
            return False

    def refuse_or_defer(self, refusal: Refusal, error: Exception) -> None:
        if not self.refuse(refusal, error):
            raise AdmissionDeferred(f"the refusal of task {refusal.task_id} could not be written")

    def dead_letter(self, refusal: Refusal) -> None:
        """Log and dead-letter a message whose FAILURE is stored elsewhere (worker/celery_ext/request.py).
        Never raises."""
        try:
            with self.conn_or_acquire() as client:
                dead_letter.record(client, refusal, self.dead_letter_policy())
        except Exception:
            logger.exception("could not dead-letter a message from queue %r", refusal.queue)

    def dead_letter_policy(self) -> DeadLetterPolicy:
        return DeadLetterPolicy(self.dead_letter_max, self.dead_letter_ttl)


def _refusal(item: bytes, queue: str, screening: Screening, reason: str | None) -> Refusal:
    return Refusal(queue, reason or "refused", item, screening.task_id, screening.task_name, screening.reply)
