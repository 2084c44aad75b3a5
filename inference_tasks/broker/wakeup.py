"""Waking an idle consumer as soon as any list it consumes is written, instead of at Redis' next timer tick.

An idle consumer waits with one blocking command, which can watch one list (fetch.py): a message on any
other list (a priority list, the worker's second queue) waited for the end of that command's timeout,
which Redis only notices on its timer (every 100 ms at its default `hz` 10): ~75 ms at the median
(docs/benchmarks-log.md, "The atomic take"). Here the worker's main process asks Redis to say whenever a key
under its queues' names is written (client-side tracking in broadcast mode, `CLIENT TRACKING on REDIRECT
<id> BCAST PREFIX <queue> ... NOLOOP`, the notices arriving on a second connection subscribed to
`__redis__:invalidate`), and the consumer waits on a doorbell list of its own instead: a notice for one
of its lists rings the doorbell (one script, only while the consumer waits, and only if a named list
holds a message in the consumer's database: notices name keys of every database, and pops as well as
pushes), the wait returns, and the next take finds the message. The ring is sent without waiting for
its answer (read when it arrives): the event loop goes on at once. A notice that arrives while a take is
in flight marks its lists as pending: the consumer then takes again instead of waiting, unless the only
list named is the one it just took from, which a take that left every list empty (fetch.py) names by
its own pop: then it waits, and rings for that list at the event loop's next turn (once the message
taken is on its way to a child), so a message pushed there meanwhile (whose notice Redis may have merged
with the pop's) still rings.

Nothing depends on it: a Redis that refuses tracking (an ACL without `client|tracking`, a provider that
disables it) or a notice connection that fails leaves the consumer waiting as before, on the list it
last took from, with one log line; a later idle moment tries again. Notices are read in the worker's
event loop (the hub), never in a thread (the main process forks).
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Iterable
from time import monotonic
from typing import Any

from inference_tasks.lua import script
from inference_tasks.redis_access.keys import DOORBELL_KEY_PREFIX, INVALIDATE_CHANNEL

logger = logging.getLogger(__name__)

# A doorbell outlives its consumer by this much at most (a killed worker leaves nothing behind).
DOORBELL_TTL_S = 600
# After a failure, how long before an idle consumer tries tracking again.
RETRY_AFTER_S = 30.0
# The longest the event loop waits on one of these connections' replies (a Redis that stopped
# answering must not hold the worker's main process).
REPLY_TIMEOUT_S = 5.0
# A notice naming the list just taken from counts as the take's own pop only if the wait that follows is
# sent this soon after the take's reply (at the event loop's next turn, normally): a wait sent later (a
# full pool paused consuming) follows real pushes, and a take goes first, as before.
OWN_POP_WINDOW_S = 0.005


def broadcast_prefixes(keys: Iterable[str]) -> list[str]:
    """The fewest prefixes that cover `keys` with none a prefix of another (Redis refuses overlapping
    broadcast prefixes): "inference" covers "inference:5" and "inference.minilm"."""
    chosen: list[str] = []
    for key in sorted(set(keys)):
        if not any(key.startswith(prefix) for prefix in chosen):
            chosen.append(key)
    return chosen


class Waker:
    """One consumer's doorbell and the two connections that ring it (see the module docstring)."""

    def __init__(self, pool: Any, loop: Any, wait_s: float) -> None:
        self.pool = pool
        self.loop = loop
        self.wait_s = wait_s
        self.doorbell_key = f"{DOORBELL_KEY_PREFIX}{uuid.uuid4()}"
        self.watched: frozenset[str] = frozenset()
        self.prefixes: list[str] = []
        self.tracking: Any = None  # the connection whose tracking is on; it also rings the doorbell
        self.notices: Any = None  # the connection the notices arrive on
        self.waiting = False  # a wait on the doorbell is in flight
        self.pending: set[str] = set()  # watched lists written since the last take was sent, unless rung
        self.waits = 0  # doorbell waits sent so far: each ring is for the wait then in flight
        self.unanswered: deque[int] = deque()  # the wait of each ring whose answer is still to be read
        # (list, when) of the take that left every list empty, until the wait that follows it (take_own_pop).
        self.own_pop: tuple[str, float] | None = None
        self.failed_at: float | None = None
        self.reading: int | None = None  # the descriptor the hub reads notices from
        self.answering: int | None = None  # the descriptor the hub reads the rings' answers from

    def listening(self, keys: Iterable[str]) -> bool:
        """Whether notices for `keys` (the consumer's lists) arrive: tracking is started, or restarted
        for a changed set of lists, here (never sooner than RETRY_AFTER_S after a failure)."""
        watched = frozenset(keys)
        if self.notices is not None and watched == self.watched:
            return True
        if self.failed_at is not None and monotonic() - self.failed_at < RETRY_AFTER_S:
            return False
        self.stop()
        try:
            self.start(watched)
        except Exception as error:  # noqa: BLE001 - any refusal leaves the consumer waiting as before
            self.stop()
            self.failed_at = monotonic()
            logger.warning(
                "waiting for messages on one list at a time (a message on another waits up to Redis' timer "
                "tick, ~100 ms): Redis refused client-side tracking (%s: %s); retrying in %.0f s",
                type(error).__name__, error, RETRY_AFTER_S,
            )  # fmt: skip
            return False
        self.failed_at = None
        return True

    def connect(self) -> Any:
        """A connection of the consumer's pool (same server, credentials, TLS, Sentinel primary) that
        speaks RESP2, where tracking notices arrive as pub/sub messages on a subscribed connection."""
        options = {"protocol": 2, "socket_timeout": REPLY_TIMEOUT_S, "socket_connect_timeout": REPLY_TIMEOUT_S}
        connection = self.pool.connection_class(**{**self.pool.connection_kwargs, **options})
        connection.connect()
        return connection

    def start(self, watched: frozenset[str]) -> None:
        notices = self.notices = self.connect()
        notices.send_command("CLIENT", "ID")
        client_id = notices.read_response()
        notices.send_command("SUBSCRIBE", INVALIDATE_CHANNEL)
        notices.read_response()
        tracking = self.tracking = self.connect()
        self.prefixes = broadcast_prefixes(watched)
        prefixes = [part for prefix in self.prefixes for part in ("PREFIX", prefix)]
        tracking.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", client_id, "BCAST", *prefixes, "NOLOOP")
        tracking.read_response()
        self.watched = watched
        self.reading = notices._sock.fileno()
        self.loop.add_reader(self.reading, self.on_readable)
        self.answering = tracking._sock.fileno()
        self.loop.add_reader(self.answering, self.on_answers)

    def stop(self) -> None:
        """Close both connections (tracking ends with its connection) and stop reading notices."""
        notices, tracking = self.notices, self.tracking
        self.notices = self.tracking = None
        self.waiting = False
        self.pending.clear()
        self.unanswered.clear()
        self.own_pop = None
        for descriptor in (self.reading, self.answering):
            if descriptor is not None:
                self.loop.remove_reader(descriptor)
        self.reading = self.answering = None
        if notices is not None:
            notices.disconnect()
        if tracking is not None:
            tracking.disconnect()

    def take_pending(self) -> set[str]:
        """The watched lists written since the last take was sent (and forget them)."""
        pending, self.pending = self.pending, set()
        return pending

    def took_last(self, key: str | None) -> None:
        """The take just answered left every list empty, popping from `key` (None: it did not): the
        notice of its own pop is on its way."""
        self.own_pop = None if key is None else (key, monotonic())

    def take_own_pop(self) -> set[str]:
        """The list whose notice is the own pop of the take that left every list empty, if the wait now
        sent follows that take within OWN_POP_WINDOW_S (and forget it): a notice naming only that list
        asks for a ring, not a take. A wait sent later (a full pool paused consuming) follows real pushes."""
        own_pop, self.own_pop = self.own_pop, None
        if own_pop is None or monotonic() - own_pop[1] > OWN_POP_WINDOW_S:
            return set()
        return {own_pop[0]}

    def wait_command(self, timeout: float) -> tuple[Any, ...]:
        self.waiting = True
        self.waits += 1
        return ("BLPOP", self.doorbell_key, min(timeout, self.wait_s))

    def on_readable(self) -> None:
        """Read every notice that has arrived; ring the doorbell once if one names a watched list."""
        try:
            written: set[str] = set()
            notices = self.notices
            while notices is not None and notices.can_read(timeout=0):
                notice = notices.read_response()
                if notice and notice[0] in (b"message", "message"):
                    names = ((key.decode() if isinstance(key, bytes) else key) for key in notice[2] or [])
                    written.update(name for name in names if name in self.watched)
            if written:
                self.ring(sorted(written))
        except Exception as error:  # noqa: BLE001 - the consumer falls back to waiting as before
            self.failed(error)

    def on_answers(self) -> None:
        """Read the answers of the rings sent. 1: it rang, so the wait it was sent for will return and
        needs no other ring; an answer read after that wait ended says nothing of the current one."""
        try:
            tracking = self.tracking
            while tracking is not None and self.unanswered and tracking.can_read(timeout=0):
                wait = self.unanswered.popleft()
                if tracking.read_response() and wait == self.waits:
                    self.waiting = False
        except Exception as error:  # noqa: BLE001 - the consumer falls back to waiting as before
            self.failed(error)

    def failed(self, error: Exception) -> None:
        logger.warning(
            "client-side tracking stopped (%s: %s); waiting on one list at a time", type(error).__name__, error
        )
        self.stop()
        self.failed_at = monotonic()

    def ring_soon(self, written: list[str]) -> None:
        """Ring for `written` at the event loop's next turn if the consumer is still waiting then (a take
        that follows a wait's end sees those lists anyway)."""
        self.loop.call_soon(self._ring_if_waiting, written)

    def _ring_if_waiting(self, written: list[str]) -> None:
        try:
            if self.waiting and self.tracking is not None:
                self.ring(written)
        except Exception as error:  # noqa: BLE001 - on the hub's turn: nothing may escape into the loop
            self.failed(error)

    def ring(self, written: list[str]) -> None:
        """Watched lists were written: wake a waiting consumer if one of them holds a message in its
        database (ring.lua; its answer is read by on_answers), or mark them pending while no wait is
        in flight."""
        if not self.waiting:
            self.pending.update(written)
            return
        keys = (self.doorbell_key, *written)
        self.tracking.send_command("EVAL", script("ring"), len(keys), *keys, DOORBELL_TTL_S)
        self.unanswered.append(self.waits)
