"""Taking a message off its queue and recording it as unacked in one step, so that no fault loses it.

kombu's Redis transport takes a message with BRPOP and then, in a second command, writes its
unacked record (the hash the visibility sweep restores from). A consumer killed, or cut off by a
partition, between the two lost the message: Redis had popped it and the reply never arrived (the
chaos soak lost 0-2 tasks per quick run that way: docs/reliability.md). Here one Lua script takes
the oldest message of the first non-empty list and writes its record in the same step: a reply
that never arrives leaves a record, and the sweep puts the message back after the visibility
timeout.

Lua cannot block, so a consumer with nothing to take waits, then takes again. With a `Waker`
(wakeup.py: Redis tells the main process of every write to the consumer's lists) it waits on a
doorbell list of its own, rung by such a write: a message on any of its lists is taken at once; and
after a take that left every list empty (the script says so) it waits at once instead of sending a
take that would find nothing.
Without one (tracking refused or failed) it waits with `BLMOVE list list RIGHT RIGHT`, which returns
as soon as its list has a message without taking it (the list is unchanged): one list per wait, the
priority 0 list of the queue the last message came from (where traffic is). Redis ends a blocking
command's timeout on its own timer (every 100 ms at its default `hz` 10), so the wait is `wait_s`
rounded up to that tick: there, a message on another list (a priority list, a second queue) waits
for the tick while the consumer is idle (docs/benchmarks.md measures both), and is taken at once
while the consumer is busy.

The record is kombu's format, `[message, exchange, routing key]`, with the anonymous exchange and
the queue the message came from as routing key, so kombu's sweep, requeue and close put it back
on that queue. Its tag is made here, one per take (the message's own delivery tag may repeat: a
redelivered message keeps it), and becomes the delivered message's delivery tag.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Any

from inference_tasks.broker.wakeup import Waker
from inference_tasks.lua import script
from inference_tasks.redis_access.redis_errors import is_out_of_memory

logger = logging.getLogger(__name__)


DEFAULT_WAIT_S = 0.01
DEFAULT_RETRY_S = 0.5
LOG_EVERY_S = 10.0


class Step(Enum):
    TAKE = "take"
    WAIT = "wait"
    RETRY = "retry"


@dataclass(frozen=True)
class Taken:
    """A message the script took: its queue, its bytes, and the tag its unacked record has."""

    queue: str
    message: bytes
    tag: str


# (A wait on a waker's doorbell is a BLPOP; its reply, like BLMOVE's, is read and dropped.)
REPLY_NAMES = {Step.TAKE: "EVAL", Step.WAIT: "BLMOVE", Step.RETRY: "BLPOP"}


class Fetcher:
    """One consumer's next command (take, wait or retry) and what its reply means."""

    def __init__(self, unacked_key: str, unacked_index_key: str, retry_key: str, wait_s: float = DEFAULT_WAIT_S,
                 retry_s: float = DEFAULT_RETRY_S) -> None:  # fmt: skip
        self.unacked_key = unacked_key
        self.unacked_index_key = unacked_index_key
        self.retry_key = retry_key
        self.wait_s = wait_s
        self.retry_s = retry_s
        self.step = Step.TAKE
        self.last_queue: str | None = None
        self.in_flight: tuple[Step, list[tuple[str, str]], str] | None = None
        self.failing_since: float | None = None
        self.last_log: float | None = None
        # Set by the channel where the worker's event loop can read tracking notices (wakeup.py).
        self.waker: Waker | None = None

    def next_command(self, lists: list[tuple[str, str]], timeout: float) -> tuple[Any, ...]:
        """The command's arguments, for `send_command`. `lists`: (list key, queue) in the order to
        serve, priority 0 first (kombu's order)."""
        step = self.step
        waker = self.waker
        if step is Step.WAIT and waker is not None and waker.listening(key for key, _ in lists):
            written, own_pop = waker.take_pending(), waker.take_own_pop()
            if not written - own_pop:
                # Nothing written since the take, or only the list the take that left every list
                # empty took from, which its own pop names: wait, and ring for that list at the event
                # loop's next turn in case a message was pushed there meanwhile (wakeup.py).
                self.in_flight = (step, lists, "")
                command = waker.wait_command(timeout)
                if written:
                    waker.ring_soon(sorted(written))
                return command
            step = self.step = Step.TAKE  # another list was written since the last take: take again
        if step is Step.TAKE:
            if waker is not None:
                waker.pending.clear()  # this take sees every write notified so far
            tag = str(uuid.uuid4())
            keys = [self.unacked_key, self.unacked_index_key, *(key for key, _ in lists)]
            queues = [json.dumps(queue) for _, queue in lists]
            self.in_flight = (step, lists, tag)
            return ("EVAL", script("take"), len(keys), *keys, tag, time.time(), *queues)
        self.in_flight = (step, lists, "")
        if step is Step.WAIT:
            watched = next((key for key, queue in lists if queue == self.last_queue), lists[0][0])
            return ("BLMOVE", watched, watched, "RIGHT", "RIGHT", min(timeout, self.wait_s))
        return ("BLPOP", self.retry_key, self.retry_s)

    def reply_name(self) -> str:
        """The command whose reply is awaited, as redis-py names it to parse the reply."""
        return REPLY_NAMES[self.in_flight[0] if self.in_flight else Step.TAKE]

    def on_lost(self) -> None:
        """The connection failed before the reply: take again once it is back (a take already done
        left its unacked record, which the sweep returns to its queue)."""
        self.in_flight = None
        self.step = Step.TAKE
        if self.waker is not None:
            self.waker.waiting = False

    def on_reply(self, reply: Any) -> Taken | None:
        """The message taken, if the command was a take that found one; the next step is set."""
        sent, self.in_flight = self.in_flight, None
        if self.waker is not None:
            self.waker.waiting = False
            self.waker.took_last(None)
        if sent is None or sent[0] is not Step.TAKE:
            self.step = Step.TAKE
            return None
        if not reply:  # nothing to take (no write was tried: a full Redis says nothing here)
            self.step = Step.WAIT
            return None
        self.recovered()
        _, lists, tag = sent
        index, message, more = reply[0], reply[1], reply[2] if len(reply) > 2 else 1
        # Take again at once while a list still holds a message. When none did at the take, a consumer
        # told of every write (wakeup.py) waits instead: a write since the take was sent makes it take
        # (Waker.pending), a later one rings its doorbell; the take that would find nothing is skipped.
        told_of_writes = self.waker is not None and self.waker.notices is not None
        self.step = Step.WAIT if told_of_writes and not int(more) else Step.TAKE
        key, self.last_queue = lists[int(index)]
        if self.waker is not None:
            self.waker.took_last(key if self.step is Step.WAIT else None)
        return Taken(self.last_queue, message, tag)

    def on_error(self, error: Exception) -> None:
        """A take Redis refused (full, or anything else a script can fail with): retry after a pause."""
        self.in_flight = None
        if self.waker is not None:
            self.waker.waiting = False
        self.step = Step.RETRY
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        if self.last_log is None or now - self.last_log >= LOG_EVERY_S:
            self.last_log = now
            what = "Redis is full" if is_out_of_memory(error) else "Redis refused the take"
            logger.error(
                "%s: cannot take a message and record it as unacked (%s); the messages stay on their "
                "queues, retrying every %.1f s (failing for %.0f s)",
                what, error, self.retry_s, now - self.failing_since,
            )  # fmt: skip

    def recovered(self) -> None:
        if self.failing_since is not None:
            logger.warning("taking messages again after %.0f s", time.monotonic() - self.failing_since)
        self.failing_since = self.last_log = None
