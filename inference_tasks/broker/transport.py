"""kombu's Redis transport, screening every raw message and bounding redeliveries before Celery sees it.

Selected with Celery's `broker_transport` setting; the URL stays redis:// or rediss://. Refused
messages go to a capped, expiring dead-letter list in Redis (never decoded further, never run),
a log line names the problem, and where a task id is known its result becomes FAILURE so the
producer's poll ends (dead_letter.py). The worker keeps consuming.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from queue import Empty
from typing import Any

from kombu.asynchronous import get_event_loop
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str

from inference_tasks import codec
from inference_tasks.broker import dead_letter
from inference_tasks.broker.dead_letter import DeadLetterPolicy, Refusal
from inference_tasks.broker.envelope import MalformedMessage, Screening, TooManyRedeliveries, screen
from inference_tasks.broker.keys import redelivery_key
from inference_tasks.broker.limits import ScreeningLimits, task_name_patterns
from inference_tasks.broker.redis_errors import is_out_of_memory
from inference_tasks.config import (
    DEFAULT_DEAD_LETTER_MAX,
    DEFAULT_DEAD_LETTER_TTL_S,
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
# While Redis is full, how often a popped message's unacked record is tried again, and how often
# that wait is logged.
FULL_REDIS_RETRY_S = 0.5
FULL_REDIS_LOG_EVERY_S = 10.0


class QoS(kombu_redis.QoS):
    """kombu's Redis QoS, except that a full Redis (maxmemory, noeviction) never drops a message.

    kombu records each delivered message in the `unacked` hash after BRPOP took it off its list.
    With Redis full that write is refused, and kombu dropped the message: it was in neither the
    list nor the hash. Here the record is retried until Redis accepts it; meanwhile the message
    exists only in this worker's memory (the one loss window left: the process killed during the
    wait), and this worker's main loop waits with it: nothing else could be written anyway.
    A requeue that Redis refuses leaves the message in the unacked hash, where the sweep returns
    it to its queue after the visibility timeout, once Redis accepts writes again.

    Two round-trip savings on the worker's main process, which handles every message:
    - the unacked record (ZADD to the index, HSET of the message) goes in a plain pipeline, not
      MULTI/EXEC: both writes are idempotent, and a retry rewrites both (kombu's transaction cost
      a third of the main process's Python time per one-text task, profiled);
    - acks made on the worker's event loop are written together once the loop's current callbacks
      are done (a zero-delay timer): a micro-batch's tasks, acked one by one by Celery, cost one
      round trip. A channel that closes writes what is pending first.
    """

    _acks_pending: list[str] | None = None
    _acks_due: Any = None

    def append(self, message: Any, delivery_tag: str) -> None:
        started = time.monotonic()
        last_log: float | None = None
        while True:
            try:
                return self._record_unacked(message, delivery_tag)
            except Exception as error:
                if not is_out_of_memory(error):
                    raise
                now = time.monotonic()
                if last_log is None or now - last_log >= FULL_REDIS_LOG_EVERY_S:
                    last_log = now
                    logger.error(
                        "Redis is full: cannot record delivered message %s as unacked (%s); holding it "
                        "and retrying every %.1f s (waiting %.0f s so far)",
                        delivery_tag,
                        error,
                        FULL_REDIS_RETRY_S,
                        now - started,
                    )
                time.sleep(FULL_REDIS_RETRY_S)

    def _record_unacked(self, message: Any, delivery_tag: str) -> None:
        """kombu's QoS.append with a plain pipeline instead of a transaction (pinned, docs/upstream.md)."""
        delivery = message.delivery_info
        # The same JSON kombu writes (it reads it back with its json), by orjson: ~7 % of the main
        # process's Python time per message with the standard library's encoder.
        record = codec.dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()}).hset(self.unacked_key, delivery_tag, record)
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)

    def ack(self, delivery_tag: str) -> None:
        hub = get_event_loop()
        if hub is None or threading.current_thread() is not threading.main_thread():
            super().ack(delivery_tag)  # no worker event loop here: at once, as kombu does
            return
        virtual.QoS.ack(self, delivery_tag)
        if self._acks_pending is None:
            self._acks_pending = []
        self._acks_pending.append(delivery_tag)
        if self._acks_due is None:
            self._acks_due = hub.call_later(0, self.write_acks)
        return None

    def write_acks(self) -> None:
        """Remove every pending ack's message from Redis' unacked records, in one round trip.

        If that fails the messages stay there, as when kombu's own ack fails (logged by
        ack_log_error): the sweep returns them to their queues after the visibility timeout and
        they run again (at least once, as documented in docs/reliability.md).
        """
        if self._acks_due is not None:
            self._acks_due.cancel()
            self._acks_due = None
        tags, self._acks_pending = self._acks_pending, None
        if not tags:
            return
        try:
            with self.pipe_or_acquire() as pipe:
                for tag in tags:
                    self._remove_from_indices(tag, pipe)
                pipe.execute()
        except Exception as error:  # noqa: BLE001 - as kombu's ack_log_error: logged, left to the sweep
            logger.error(
                "could not write %d acks (%s); those messages return to their queues after the visibility timeout",
                len(tags),
                error,
            )

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue)
        except Exception as error:
            if not (requeue and is_out_of_memory(error)):
                raise
            logger.error(
                "Redis is full: could not requeue message %s (%s); it stays unacked in Redis and returns "
                "to its queue after the visibility timeout",
                delivery_tag,
                error,
            )
            virtual.QoS.ack(self, delivery_tag)  # forget it here only; Redis keeps its record


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

    def close(self) -> None:
        """Write the acks still pending (QoS.ack) before kombu closes the channel."""
        qos = getattr(self, "_qos", None)
        if qos is not None and hasattr(qos, "write_acks"):
            qos.write_acks()
        super().close()

    def _create_client(self, asynchronous: bool = False) -> Any:
        """kombu builds a new redis.Redis for every ack, every message's unacked bookkeeping and every
        event published (each with a fresh table of ~200 response callbacks): profiled at ~10 % of
        a busy worker's main process. One client per connection pool serves them all; redis-py
        clients are safe to share (each command borrows a connection from the pool)."""
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
                    self.connection._deliver(envelope, dest)
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
        return envelope

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
