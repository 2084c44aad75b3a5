"""kombu's Redis QoS (the unacked record of each delivered message, and its ack), safe on a full Redis.

Used by transport.py's Channel. kombu records each delivered message in Redis' `unacked` hash
after BRPOP took it off its list, and removes the record on ack; the visibility sweep returns
records older than the visibility timeout to their queues.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kombu.asynchronous import get_event_loop
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual

from inference_tasks import codec
from inference_tasks.redis_access.redis_errors import is_out_of_memory

logger = logging.getLogger(__name__)

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
      MULTI/EXEC: both writes are idempotent, and a retry rewrites both (kombu's transaction was
      a large share of the main process's Python time per one-text task: docs/benchmarks.md);
    - acks made on the worker's event loop are written together once the loop's current callbacks
      are done (a zero-delay timer): a micro-batch's tasks, acked one by one by Celery, cost one
      round trip. A channel that closes writes what is pending first.
    """

    _acks_pending: list[str] | None = None
    _acks_due: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Delivery tags whose unacked record the take script (fetch.py) wrote with the take itself.
        self.recorded_by_take: set[str] = set()

    def restore_unacked_once(self, stderr: Any = None) -> Any:
        """kombu's restore of this channel's unacked messages as it closes, unless the transport has
        let go of its connection.

        kombu restores through a pool rebuilt from the transport's connection details; once the
        transport has let go (seen once as the consumer closed after a Sentinel primary was killed),
        building it raised AttributeError out of the consumer's reconnect (which ignores only
        connection errors) and the whole worker exited ("Unrecoverable error"). Then nothing is
        restored here: the unacked messages stay recorded in Redis and come back through the
        visibility sweep, as a dead worker's do.
        """
        if self.channel_closed():
            if held := self.held_count():
                logger.warning(
                    "closing a channel whose transport has let go of its connection: its %d unacked message(s) "
                    "stay recorded in Redis and return through the visibility sweep",
                    held,
                )
            return None
        return super().restore_unacked_once(stderr)

    def append(self, message: Any, delivery_tag: str) -> None:
        if delivery_tag in self.recorded_by_take:  # written with the take: only kombu's own bookkeeping
            self.recorded_by_take.discard(delivery_tag)
            return virtual.QoS.append(self, message, delivery_tag)
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
        # The same JSON kombu writes (it reads it back with its json), by orjson: the standard
        # library's encoder was a visible share of the main process's time per message.
        record = codec.dumps([message.envelope, delivery["exchange"], delivery["routing_key"]])
        with self.channel.conn_or_acquire() as client:
            pipe = client.pipeline(transaction=False)
            pipe.zadd(self.unacked_index_key, {delivery_tag: time.time()}).hset(self.unacked_key, delivery_tag, record)
            pipe.execute()
        virtual.QoS.append(self, message, delivery_tag)

    def discard(self, delivery_tag: str) -> None:
        """Forget a message the worker refused after it was taken, and remove its unacked record
        (written with the take, or by append). If Redis cannot be reached the record stays, and the
        sweep returns the message, which is refused again."""
        self.recorded_by_take.discard(delivery_tag)
        if self.holds(delivery_tag):
            self.ack(delivery_tag)
            return
        self.remove_records([delivery_tag])

    def leave_for_sweep(self, delivery_tag: str) -> None:
        """Forget a taken message here (no lease renewal, no restore on close) and leave its unacked
        record in Redis: the sweep returns it once its lease has run out."""
        self.recorded_by_take.discard(delivery_tag)
        if self.holds(delivery_tag):
            virtual.QoS.ack(self, delivery_tag)  # forget it here only; Redis keeps its record

    def held_count(self) -> int:
        """How many delivered messages are not yet acked, from kombu's public estimate of what the
        prefetch window has left (0 when the consumer has no prefetch limit: nothing to tell)."""
        if not self.prefetch_count:
            return 0
        return self.prefetch_count - (self.can_consume_max_estimate() or 0)

    def holds(self, delivery_tag: str) -> bool:
        """Whether the message reached kombu's bookkeeping of delivered messages (and is not acked)."""
        try:
            self.get(delivery_tag)
        except KeyError:
            return False
        return True

    def restore_by_tag(self, tag: Any, client: Any = None, leftmost: bool = False) -> None:
        """kombu's, except that a record it cannot read back is dead-lettered instead of raising
        into the sweep. The take script writes the record before the worker screens the message,
        so a worker that dies in between leaves the record of a message screening would refuse."""
        try:
            super().restore_by_tag(tag, client, leftmost)
        except (ValueError, TypeError) as error:
            self.channel.dead_letter_unreadable_record(tag, error)

    def channel_closed(self) -> bool:
        """The channel closed (kombu set its connection to None), or its transport let go of its
        connection: nothing can reach Redis through it any more."""
        connection = getattr(self.channel, "connection", None)
        return connection is None or getattr(connection, "client", None) is None

    def forget_on_a_closed_channel(self, delivery_tag: str, what: str) -> bool:
        """An ack or reject that arrives after its channel closed (a task that finished, or was
        terminated, after a lost broker connection) cannot reach Redis through it: the message stays
        in Redis' unacked record, which returns it to its queue after the visibility timeout, and is
        forgotten here. Reaching Redis anyway meant rebuilding a pool from a detached transport:
        AttributeError out of the event loop, and the whole worker exited (seen once when a test
        restarted Redis under load). True when that was the case."""
        if not self.channel_closed():
            return False
        logger.warning(
            "message %s: its channel closed before it could be %s; it stays recorded in Redis and "
            "returns to its queue through the visibility sweep",
            delivery_tag,
            what,
        )
        virtual.QoS.ack(self, delivery_tag)  # forget it here only; Redis keeps its record
        return True

    def ack(self, delivery_tag: str) -> None:
        if self.forget_on_a_closed_channel(delivery_tag, "acknowledged"):
            return
        hub = get_event_loop()
        virtual.QoS.ack(self, delivery_tag)
        if hub is None or threading.current_thread() is not threading.main_thread():
            self.remove_records([delivery_tag])  # no worker event loop here: at once, as kombu does
            return
        if self._acks_pending is None:
            self._acks_pending = []
        self._acks_pending.append(delivery_tag)
        if self._acks_due is None:
            self._acks_due = hub.call_later(0, self.write_acks)
        return None

    def write_acks(self) -> None:
        """Remove every pending ack's message from Redis' unacked records, in one round trip."""
        if self._acks_due is not None:
            self._acks_due.cancel()
            self._acks_due = None
        tags, self._acks_pending = self._acks_pending, None
        if tags:
            self.remove_records(tags)

    def remove_records(self, tags: list[str]) -> None:
        """Remove the unacked records of acked messages: in a plain pipeline, not kombu's MULTI/EXEC,
        because at maxmemory Redis refuses every command inside MULTI, deletes too, while plain HDEL
        and ZREM still work (a worker whose acks were refused ran those tasks again after the sweep,
        and an ack refused outside the event loop stopped the worker: the chaos soak's full-Redis
        fault). Both deletes are idempotent; the record goes before its index entry, so a pipeline cut
        half-way leaves an index entry the sweep drops, never a record nothing points to.

        If that fails the messages stay recorded, as when kombu's own ack fails (logged by
        ack_log_error): the sweep returns them to their queues after the visibility timeout and
        they run again (at least once, as documented in docs/reliability.md)."""
        try:
            with self.channel.conn_or_acquire() as client:
                pipe = client.pipeline(transaction=False)
                for tag in tags:
                    pipe.hdel(self.unacked_key, tag).zrem(self.unacked_index_key, tag)
                pipe.execute()
        except Exception as error:  # noqa: BLE001 - as kombu's ack_log_error: logged, left to the sweep
            logger.error(
                "could not write %d acks (%s); those messages return to their queues after the visibility timeout",
                len(tags),
                error,
            )

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if self.forget_on_a_closed_channel(delivery_tag, "requeued" if requeue else "rejected"):
            return
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
