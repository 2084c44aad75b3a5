"""kombu's Redis transport, screening every raw message and bounding redeliveries before Celery sees it.

Selected with Celery's `broker_transport` setting; the URL stays redis:// or rediss://. Refused
messages go to a capped, expiring dead-letter list in Redis (never decoded further, never run),
a log line names the problem, and where a task id is known its result becomes FAILURE so the
producer's poll ends (dead_letter.py). The worker keeps consuming.
"""

from __future__ import annotations

import json
import logging
from queue import Empty
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str

from inference_tasks.broker import dead_letter
from inference_tasks.broker.dead_letter import DeadLetterPolicy, Refusal, UnhandledMessage
from inference_tasks.broker.envelope import MalformedMessage, Screening, TooManyRedeliveries, requested_reply, screen
from inference_tasks.broker.limits import ScreeningLimits, task_name_patterns
from inference_tasks.broker.qos import QoS
from inference_tasks.clients.durable import DURABLE_HEADER
from inference_tasks.clients.keys import durable_claim_key, redelivery_key
from inference_tasks.defaults import (
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
from inference_tasks.routing import PUBLIC_TASKS

logger = logging.getLogger(__name__)

# Remote-control replies (ping, inspect) travel on lists named "<uuid>.reply.celery.pidbox";
# they are kombu's own messages, not tasks, and are not screened.
CONTROL_QUEUE_SUFFIX = ".pidbox"


class Channel(kombu_redis.Channel):
    """A Redis channel whose reads pass through `screen` and the redelivery limit."""

    QoS = QoS

    # Our settings arrive through broker_transport_options like kombu's own.
    from_transport_options = (  # type: ignore[assignment]  # kombu types its own tuple by length
        *kombu_redis.Channel.from_transport_options,
        "max_message_bytes",
        "max_nesting_depth",
        "max_argument_depth",
        "max_message_items",
        "max_eta_s",
        "accepted_tasks",
        "max_redeliveries",
        "dead_letter_max",
        "dead_letter_ttl",
        "redelivery_counter_ttl",
        "durable_claim_ttl",
    )
    max_message_bytes = DEFAULT_MAX_MESSAGE_BYTES
    max_nesting_depth = DEFAULT_MAX_NESTING_DEPTH
    max_argument_depth = DEFAULT_MAX_ARGUMENT_DEPTH
    max_message_items = DEFAULT_MAX_MESSAGE_ITEMS
    max_eta_s = DEFAULT_MAX_ETA_S
    accepted_tasks: tuple[str, ...] = PUBLIC_TASKS
    max_redeliveries = DEFAULT_MAX_REDELIVERIES
    dead_letter_max = DEFAULT_DEAD_LETTER_MAX
    dead_letter_ttl = DEFAULT_DEAD_LETTER_TTL_S
    redelivery_counter_ttl = 86_400
    durable_claim_ttl = DEFAULT_DURABLE_CLAIM_TTL_S

    def close(self) -> None:
        """Write the acks still pending (QoS.ack) while the channel's connection pool is still there;
        then kombu's close (which drops the pool, then restores unacked messages: QoS says when not)."""
        self.qos.write_acks()
        super().close()

    def _create_client(self, asynchronous: bool = False) -> Any:
        """kombu builds a new redis.Redis for every ack, every message's unacked bookkeeping and every
        event published (each with a fresh table of ~200 response callbacks), a visible share of a
        busy worker's main process (docs/benchmarks.md, "Figures behind the code"). One client per
        connection pool serves them all; redis-py clients are safe to share (each command borrows a
        connection from the pool)."""
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        cached = self.__dict__.get("_shared_client")
        if cached is None or cached[0] is not pool:
            cached = self._shared_client = (pool, super()._create_client())
        return cached[1]

    # Copied from kombu 5.7's Channel._brpop_read (pinned <5.8 in pyproject.toml); the only change
    # is that the popped item goes through _admit instead of straight into json.loads.
    def _brpop_read(self, **options: Any) -> bool:
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if dest__item:
                dest, item = dest__item
                dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
                self._queue_cycle.rotate(dest)
                envelope = self._admit(item, dest)
                if envelope is not None:
                    self._deliver_screened(envelope, item, dest)
                return True
            raise Empty()
        finally:
            self._in_poll = None  # type: ignore[assignment]  # as in kombu's own copy
            self._flush_brpop_reauth()

    # Copied from kombu 5.7's Channel._get (the synchronous path), screening likewise.
    def _get(self, queue: str, timeout: Any = None) -> dict[str, Any]:
        with self.conn_or_acquire() as client:
            for pri in self.priority_steps:
                item = client.rpop(self._q_for_pri(queue, pri))
                if item:
                    self._maybe_update_queues_expire(client, queue)
                    envelope = self._admit(item, queue)
                    if envelope is None:
                        raise Empty()
                    return envelope
            self._maybe_update_queues_expire(client, queue)
            raise Empty()

    def _deliver_screened(self, envelope: dict[str, Any], item: bytes, queue: str) -> None:
        """Hand a screened message to its consumer; a failure there costs the message, not the worker.

        Delivery builds kombu's Message, writes the unacked record and runs the consumer's callback
        (Celery's task handler, itself guarded: worker/consumer.py). Anything else that raises on the
        way, except a lost connection (kombu reconnects; the record returns the message), is the
        message's: it is refused like a malformed one, and its unacked record, if written, removed.
        """
        try:
            self.connection._deliver(envelope, queue)
        except Exception as error:
            if isinstance(error, tuple(self.connection.connection_errors)):
                raise
            logger.exception("delivering message %s failed", envelope["headers"].get("id"))
            reason = f"the worker could not take it ({type(error).__name__}: {error})"
            headers = envelope["headers"]
            refusal = Refusal(queue, reason, item, headers.get("id"), headers.get("task"), requested_reply(headers))
            self.refuse(refusal, UnhandledMessage(f"{headers.get('task')}: {reason}; dead-lettered"))
            tag = envelope["properties"]["delivery_tag"]
            if tag in self.qos._delivered:  # the unacked record was written: remove it
                self.qos.ack(tag)

    @property
    def screening_limits(self) -> ScreeningLimits:
        limits = self.__dict__.get("_screening_limits")
        if limits is None:
            names, prefixes = task_name_patterns(self.accepted_tasks)
            limits = self._screening_limits = ScreeningLimits(
                max_bytes=self.max_message_bytes,
                max_depth=self.max_nesting_depth,
                max_argument_depth=self.max_argument_depth,
                max_items=self.max_message_items,
                max_eta_s=self.max_eta_s,
                task_names=names,
                task_prefixes=prefixes,
            )
        return limits

    def _admit(self, item: bytes, queue: str) -> dict[str, Any] | None:
        """The envelope to deliver, or None after dead-lettering a refused message."""
        if queue.endswith(CONTROL_QUEUE_SUFFIX):
            return json.loads(bytes_to_str(item))  # kombu's own remote-control replies
        screening = screen(item, self.screening_limits)
        error: Exception
        if not screening.accepted:
            error = MalformedMessage(f"malformed message: {screening.problem}")
            self.refuse(_refusal(item, queue, screening, screening.problem), error)
            return None
        envelope = screening.envelope
        assert envelope is not None
        if envelope["headers"].get("redelivered") or envelope["properties"]["delivery_info"].get("redelivered"):
            redeliveries = self._count_redelivery(screening.task_id or "")
            if redeliveries > self.max_redeliveries:
                problem = (
                    f"redelivered {redeliveries} times without completing: its worker process died or "
                    f"the worker stopped during every attempt; dead-lettered after "
                    f"INFERENCE_MAX_REDELIVERIES={self.max_redeliveries}"
                )
                error = TooManyRedeliveries(f"{screening.task_name}: {problem}")
                self.refuse(_refusal(item, queue, screening, problem), error)
                return None
        if envelope["headers"].get(DURABLE_HEADER) and not self._first_durable_message(envelope):
            return None
        return envelope

    def _first_durable_message(self, envelope: dict[str, Any]) -> bool:
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

    def _count_redelivery(self, task_id: str) -> int:
        key = redelivery_key(task_id)
        with self.conn_or_acquire() as client, client.pipeline() as pipe:
            count, _ = pipe.incr(key).expire(key, self.redelivery_counter_ttl).execute()
        return int(count)

    def refuse(self, refusal: Refusal, error: Exception) -> None:
        """Log, dead-letter, and fail the task's result when its id is known (dead_letter.py). Never raises."""
        try:
            with self.conn_or_acquire() as client:
                dead_letter.refuse(client, refusal, error, self._dead_letter_policy())
        except Exception:
            logger.exception("could not refuse a message from queue %r", refusal.queue)

    def dead_letter(self, refusal: Refusal) -> None:
        """Log and dead-letter a message whose FAILURE is stored elsewhere (worker/request.py). Never raises."""
        try:
            with self.conn_or_acquire() as client:
                dead_letter.record(client, refusal, self._dead_letter_policy())
        except Exception:
            logger.exception("could not dead-letter a message from queue %r", refusal.queue)

    def _dead_letter_policy(self) -> DeadLetterPolicy:
        return DeadLetterPolicy(self.dead_letter_max, self.dead_letter_ttl)


def _refusal(item: bytes, queue: str, screening: Screening, reason: str | None) -> Refusal:
    return Refusal(queue, reason or "refused", item, screening.task_id, screening.task_name, screening.reply)


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with the screening channel."""

    Channel = Channel


class SentinelChannel(Channel, kombu_redis.SentinelChannel):
    """The screening channel on a Sentinel-managed Redis: kombu's SentinelChannel finds the current
    primary (and finds it again after a failover, on reconnect); reads still pass through `screen`."""

    from_transport_options = (  # type: ignore[assignment]  # as above
        *Channel.from_transport_options,
        *(
            name
            for name in kombu_redis.SentinelChannel.from_transport_options
            if name not in Channel.from_transport_options
        ),
    )


class SentinelTransport(Transport):
    """REDIS_URL=sentinel://...: kombu's Sentinel transport with the screening channel."""

    default_port = 26379  # type: ignore[assignment]  # kombu's base leaves it None; its Sentinel transport sets it so
    Channel = SentinelChannel
