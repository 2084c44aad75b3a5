"""kombu's Redis transport with our own read: the atomic take (fetch.py), then admission (screening,
bounded redeliveries: admission.py) before Celery sees a message.

Selected with Celery's `broker_transport` setting; the URL stays redis:// or rediss://. Refused
messages go to a capped, expiring dead-letter list in Redis (never decoded further, never run),
a log line names the problem, and where a task id is known its result becomes FAILURE so the
producer's poll ends (dead_letter.py). The worker keeps consuming.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.scheduling import cycle_by_name
from redis.exceptions import ResponseError

from inference_tasks.broker.admission import CONTROL_QUEUE_SUFFIX, Admission, AdmissionDeferred
from inference_tasks.broker.bindings import StockBindings
from inference_tasks.broker.dead_letter import Refusal, UnhandledMessage
from inference_tasks.broker.envelope import requested_reply
from inference_tasks.broker.fetch import DEFAULT_WAIT_S, Fetcher, Taken
from inference_tasks.broker.qos import QoS
from inference_tasks.broker.wakeup import Waker
from inference_tasks.redis_access.keys import FETCH_RETRY_KEY

logger = logging.getLogger(__name__)


class ScreenedMessage(virtual.Message):
    """kombu's message, keeping the envelope it was built from (`envelope`): the unacked record and
    the dead-letter list store it as it arrived."""

    def __init__(self, payload: dict[str, Any], channel: Any = None, **kwargs: Any) -> None:
        self.envelope = payload
        super().__init__(payload, channel=channel, **kwargs)


class Channel(StockBindings, Admission):
    """kombu's Redis channel whose reads are atomic takes (fetch.py), admitted (admission.py) before
    delivery.

    A take is sent only while the channel may consume; should Celery lower the prefetch before its
    reply is read, kombu's poller keeps the reply unread until a slot frees, while its record ages
    like any held message's (a pause longer than the visibility timeout would run it twice)."""

    QoS = QoS
    Message = ScreenedMessage

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
        "fetch_wait_s",
        "trace_stamps",
        "wake_on_push",
    )
    fetch_wait_s = DEFAULT_WAIT_S
    wake_on_push = False
    # Whether the command in flight on the BRPOP connection is fetch.py's (take, wait, retry) or
    # kombu's BRPOP (remote-control reply queues).
    taking = False
    fetcher: Fetcher | None = None
    no_ack_queues: frozenset[str] = frozenset()
    consumer_callbacks: dict[str, Any] = {}  # noqa: RUF012 - replaced whole, never mutated in place
    # The order queues are served in (kombu's queue_order_strategy), built on first use.
    queue_order: Any = None

    def close(self) -> None:
        """Write the acks still pending (QoS.ack) while the channel's connection pool is still there;
        then kombu's close (which drops the pool, then restores unacked messages: QoS says when not)."""
        self.qos.write_acks()
        if self.fetcher is not None and self.fetcher.waker is not None:
            self.fetcher.waker.stop()
        super().close()

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        """kombu's, sharing one client per connection pool: kombu builds a new redis.Redis for every
        ack, every message's unacked bookkeeping and every event published (each with a fresh table
        of ~200 response callbacks), a visible share of a busy worker's main process
        (docs/upstream.md, "Speed only"). redis-py clients are safe to share (each command borrows a
        connection from the pool); the client is built again when kombu replaces its pool."""
        if client is not None:
            yield client
            return
        pool = self.pool
        shared = self.__dict__.get("shared_client")
        if shared is None or shared[0] is not pool:
            with super().conn_or_acquire() as built:
                shared = self.shared_client = (pool, built)
        yield shared[1]

    def basic_consume(self, queue: str, no_ack: bool, callback: Any, consumer_tag: Any, **kwargs: Any) -> Any:
        """kombu's, keeping the consumer's callback and whether it acks: a taken message is delivered
        to it here (`deliver`), and no unacked record is kept for a queue consumed without acks."""
        self.no_ack_queues = self.no_ack_queues | {queue} if no_ack else self.no_ack_queues - {queue}
        self.consumer_callbacks = {**self.consumer_callbacks, queue: callback}
        return super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        """kombu's synchronous read (no consumer), screened: the oldest message of `queue`'s lists,
        priority 0 first, or None. Not the atomic take: basic_get may be called without acks, and
        nothing would remove the record. A message whose refusal Redis cannot record goes back to
        where it was, the next to be read."""
        with self.conn_or_acquire() as client:
            for step in self.priority_steps:
                key = self._q_for_pri(queue, step)
                item = client.rpop(key)
                if not item:
                    continue
                try:
                    envelope = self.admit(item, queue)
                except AdmissionDeferred:
                    client.rpush(key, item)
                    return None
                if envelope is None:
                    return None
                message = self.Message(envelope, channel=self)
                if not no_ack:
                    self.qos.append(message, message.delivery_tag)
                return message
        return None

    def queues_in_turn(self) -> list[str]:
        """The consumed queues in the order to serve them: kombu's `queue_order_strategy` (round robin
        by default: the queue a message last came from goes last), on a cycle of our own."""
        order = self.queue_order
        if order is None:
            order = self.queue_order = cycle_by_name(self.queue_order_strategy)()
        active = self.active_queues
        if set(order.items) != set(active):
            order.update(active)
        return list(order.consume(len(active)))

    def _brpop_start(self, timeout: Any = None) -> None:
        """Send the consumer's next read: fetch.py's atomic take (or its wait), except on remote-control
        reply queues (kombu's own messages, consumed without acks): kombu's BRPOP there."""
        queues = self.queues_in_turn()
        if not queues:
            return
        if any(queue.endswith(CONTROL_QUEUE_SUFFIX) for queue in queues):
            self.taking = False
            return super()._brpop_start(timeout)
        prefix = self.global_keyprefix or ""  # kombu's client adds it to each key; a raw command does not
        if self.fetcher is None:
            unacked = (prefix + self.unacked_key, prefix + self.unacked_index_key)
            self.fetcher = Fetcher(*unacked, prefix + FETCH_RETRY_KEY, self.fetch_wait_s)
            if self.wake_on_push and (loop := getattr(self.connection, "event_loop", None)) is not None:
                self.fetcher.waker = Waker(self.pool, loop, self.fetch_wait_s)
        lists = [(prefix + self._q_for_pri(queue, step), queue) for step in self.priority_steps for queue in queues]
        command = self.fetcher.next_command(lists, self.brpop_timeout if timeout is None else timeout)
        self.taking = True
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()  # type: ignore[assignment]  # kombu's health check reads it
        self.client.connection.send_command(*command)
        return None

    def _brpop_read(self, **options: Any) -> bool:
        if not self.taking or self.fetcher is None:
            return bool(super()._brpop_read(**options))
        fetcher = self.fetcher
        try:
            try:
                reply = self.client.parse_response(self.client.connection, fetcher.reply_name(), **options)
            except self.connection_errors:
                fetcher.on_lost()  # a take whose reply is lost left its record: the sweep returns it
                self.client.connection.disconnect()
                raise
            except ResponseError as error:
                fetcher.on_error(error)
                raise Empty() from None
            taken = fetcher.on_reply(reply)
            if taken is None:
                raise Empty()
            self.queue_order.rotate(taken.queue)
            self._take(taken)
            return True
        finally:
            self._in_poll = None  # type: ignore[assignment]  # as kombu's own read does
            self.maybe_reauth()  # the connection is idle: a rotated credential's AUTH may go now

    def _take(self, taken: Taken) -> None:
        """Deliver a message the take script recorded as unacked under `taken.tag` (its delivery tag
        from now on), or refuse it and remove the record; a consumer without acks never acks it, so
        its record goes once it is delivered."""
        try:
            envelope = self.admit(taken.message, taken.queue)
        except AdmissionDeferred as deferred:
            # Redis refused a write the decision needs: the take's record stays, and the sweep
            # returns the message to its queue once its lease has run out, to be admitted again.
            logger.warning("message %s left for the visibility sweep: %s", taken.tag, deferred)
            return
        if envelope is None:
            self.qos.discard(taken.tag)
            return
        envelope["properties"]["delivery_tag"] = taken.tag
        self.qos.recorded_by_take.add(taken.tag)
        self._deliver_screened(envelope, taken.message, taken.queue)
        if taken.queue in self.no_ack_queues:
            self.qos.discard(taken.tag)

    def _deliver_screened(self, envelope: dict[str, Any], item: bytes, queue: str) -> None:
        """Hand a screened message to its consumer; a failure there costs the message, not the worker.

        Delivery builds kombu's Message, writes the unacked record and runs the consumer's callback
        (Celery's task handler, itself guarded: worker/celery_ext/consumer.py). Anything else that raises on the
        way, except a lost connection (kombu reconnects; the record returns the message), is the
        message's: it is refused like a malformed one, and its unacked record, if written, removed.
        """
        try:
            self.deliver(envelope, queue)
        except Exception as error:
            if isinstance(error, tuple(self.connection.connection_errors)):
                raise
            logger.exception("delivering message %s failed", envelope["headers"].get("id"))
            reason = f"the worker could not take it ({type(error).__name__}: {error})"
            headers = envelope["headers"]
            refusal = Refusal(queue, reason, item, headers.get("id"), headers.get("task"), requested_reply(headers))
            tag = envelope["properties"]["delivery_tag"]
            if self.refuse(refusal, UnhandledMessage(f"{headers.get('task')}: {reason}; dead-lettered")):
                self.qos.discard(tag)
            else:  # its record stays: the sweep returns it, and it is refused again
                self.qos.leave_for_sweep(tag)

    def deliver(self, envelope: dict[str, Any], queue: str) -> None:
        """What kombu's delivery does for a consumed queue: the Message, its unacked bookkeeping (none
        without acks), the consumer's callback. A queue no longer consumed (its consumer cancelled
        while the take was in flight) gets the message back, first in line, as kombu does."""
        message = self.Message(envelope, channel=self)
        callback = self.consumer_callbacks.get(queue) if queue in self.active_queues else None
        if callback is None:
            logger.warning("message %s taken from %s, no longer consumed: returned to it", message.delivery_tag, queue)
            self.qos.append(message, message.delivery_tag)
            self.basic_reject(message.delivery_tag, requeue=True)
            return
        if queue not in self.no_ack_queues:
            self.qos.append(message, message.delivery_tag)
        callback(message)


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with the screening channel."""

    Channel = Channel
    # The worker's event loop (kombu's hub), where a channel's Waker reads tracking notices; None in a
    # producer, or a consumer without one (its channels wait as before).
    event_loop: Any = None

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """kombu's (the channels' reads driven by the hub), keeping the hub for the wakers (wakeup.py)."""
        self.event_loop = loop
        super().register_with_event_loop(connection, loop)


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
