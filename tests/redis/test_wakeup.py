"""Waking an idle consumer (broker/wakeup.py) on a real redis-server: a write to any list it consumes rings
its doorbell while it waits (when the list holds a message in its database), or makes it take again
instead of waiting; a write elsewhere does neither; a Redis that refuses tracking leaves it waiting as
before, and says so once.
"""

from __future__ import annotations

import logging
import select
from typing import Any

import pytest
import redis

from inference_tasks.broker import wakeup
from inference_tasks.broker.fetch import Fetcher, Step
from inference_tasks.broker.wakeup import Waker, broadcast_prefixes
from inference_tasks.redis_access.keys import FETCH_RETRY_KEY, UNACKED_INDEX_KEY, UNACKED_KEY
from tests.support.local import redis_client
from tests.support.waiting import wait_until

LISTS = [("q", "q"), ("q.e5", "q.e5"), ("q:5", "q"), ("q.e5:5", "q.e5")]


class EventLoop:
    """What a Waker asks of the worker's hub (kombu's event loop): readers by file descriptor, and
    callbacks for its next turn (run when the test says)."""

    def __init__(self) -> None:
        self.readers: dict[int, object] = {}
        self.soon: list[tuple[Any, tuple[object, ...]]] = []

    def add_reader(self, fd: int, callback: object) -> None:
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> None:
        self.readers.pop(fd, None)

    def call_soon(self, callback: Any, *args: object) -> None:
        self.soon.append((callback, args))

    def next_turn(self) -> None:
        soon, self.soon = self.soon, []
        for callback, args in soon:
            callback(*args)


def found_nothing(fetcher: Fetcher) -> None:
    """A take sent and answered empty: the fetcher's next step is a wait."""
    assert fetcher.next_command(LISTS, 1.0)[0] == "EVAL"
    fetcher.on_reply(None)
    assert fetcher.step is Step.WAIT


def read_notices(waker: Waker) -> None:
    """Wait (bounded) until a notice has arrived, then let the waker read it, as the hub would, and the
    answers of the rings it sent."""
    notice_without_answers(waker)
    read_answers(waker)


def notice_without_answers(waker: Waker) -> None:
    readable, _, _ = select.select([waker.reading], [], [], 10)
    assert readable, "no tracking notice within 10 s"
    waker.on_readable()


def read_answers(waker: Waker) -> None:
    """Read the answer of every ring sent (bounded), as the hub would."""
    while waker.unanswered:
        readable, _, _ = select.select([waker.answering], [], [], 10)
        assert readable, "no answer to a ring within 10 s"
        waker.on_answers()


@pytest.fixture
def waker(fresh_redis_url):
    url = fresh_redis_url()
    built = Waker(redis.ConnectionPool.from_url(url), EventLoop(), wait_s=0.01)
    yield built, redis_client(url)
    built.stop()


def test_broadcast_prefixes_cover_every_list_and_never_overlap():
    assert broadcast_prefixes(key for key, _ in LISTS) == ["q"]
    assert broadcast_prefixes(["inference.minilm", "inference", "training:3", "inference:9"]) == [
        "inference",
        "training:3",
    ]


def test_a_write_to_any_consumed_list_rings_the_doorbell_of_a_waiting_consumer(waker):
    waker, client = waker
    assert waker.listening(key for key, _ in LISTS)
    command = waker.wait_command(1.0)
    assert command == ("BLPOP", waker.doorbell_key, 0.01) and waker.waiting
    client.lpush("q.e5:5", "a message on a list nobody watches")
    read_notices(waker)
    assert client.lrange(waker.doorbell_key, 0, -1) == [b"1"] and not waker.waiting
    assert 0 < client.ttl(waker.doorbell_key) <= 600


def test_a_write_while_a_take_is_in_flight_makes_the_consumer_take_again_instead_of_waiting(waker):
    waker, client = waker
    fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY)
    fetcher.waker = waker
    found_nothing(fetcher)
    assert fetcher.next_command(LISTS, 1.0)[:2] == ("BLPOP", waker.doorbell_key)
    fetcher.on_reply(None)  # the wait ended on its own: take again, find nothing
    found_nothing(fetcher)
    client.lpush("q", "arrived while the take was in flight")
    read_notices(waker)
    assert waker.pending and not client.exists(waker.doorbell_key)
    assert fetcher.next_command(LISTS, 1.0)[0] == "EVAL"  # the wait is skipped
    assert not waker.pending


def test_a_take_that_leaves_every_list_empty_is_followed_by_a_wait_not_another_take(waker, monkeypatch):
    """The take script says whether a list still holds a message: if one does the consumer takes again at
    once; if none does, a consumer told of every write waits instead of taking what is not there, the
    notice of its own pop costs a ring that finds nothing, not a take, and a message pushed to that list
    meanwhile still rings; a write to another list makes it take; without notices it takes again."""
    waker, client = waker
    fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY)
    fetcher.waker = waker
    assert waker.listening(key for key, _ in LISTS)
    # The steps between a take and the next command are the test's, not an event loop's turn: slower.
    monkeypatch.setattr(wakeup, "OWN_POP_WINDOW_S", 60.0)

    def take() -> object:
        return fetcher.on_reply(client.execute_command(*fetcher.next_command(LISTS, 1.0)))

    def wait_and_ring() -> None:
        assert fetcher.next_command(LISTS, 1.0)[:2] == ("BLPOP", waker.doorbell_key) and not waker.pending
        assert not waker.unanswered and len(waker.loop.soon) == 1
        waker.loop.next_turn()  # the ring for the list taken from, at the loop's next turn
        read_answers(waker)

    client.lpush("q", "first")
    client.lpush("q.e5:5", "second, on another list")
    assert take().message == b"first" and fetcher.step is Step.TAKE  # type: ignore[union-attr]
    assert take().message == b"second, on another list" and fetcher.step is Step.WAIT  # type: ignore[union-attr]
    read_notices(waker)  # both pops, read while no wait was in flight: "q" is not the list last taken from
    assert waker.pending == {"q", "q.e5:5"} and fetcher.next_command(LISTS, 1.0)[0] == "EVAL"
    fetcher.on_reply(None)  # found nothing: wait
    assert fetcher.next_command(LISTS, 1.0)[:2] == ("BLPOP", waker.doorbell_key)
    fetcher.on_reply(None)  # the wait ended on its own: take next

    client.lpush("q", "third")
    assert take().message == b"third" and fetcher.step is Step.WAIT  # type: ignore[union-attr]
    read_notices(waker)  # its own pop
    wait_and_ring()
    assert waker.waiting and not client.exists(waker.doorbell_key)  # rang for nothing: still waiting
    fetcher.on_reply(None)

    client.lpush("q", "fourth")
    assert take().message == b"fourth" and fetcher.step is Step.WAIT  # type: ignore[union-attr]
    client.lpush("q", "fifth, pushed after the take")
    read_notices(waker)
    wait_and_ring()
    assert client.lrange(waker.doorbell_key, 0, -1) == [b"1"] and not waker.waiting  # its wait returns at once
    fetcher.on_reply(client.lpop(waker.doorbell_key))
    assert take().message == b"fifth, pushed after the take"  # type: ignore[union-attr]
    client.lpush("q", "pushed while the pool was full")
    read_notices(waker)
    assert waker.own_pop is not None
    waker.own_pop = (waker.own_pop[0], waker.own_pop[1] - 61)  # the next command is sent long after the take
    command = fetcher.next_command(LISTS, 1.0)
    assert command[0] == "EVAL"  # so the notice is a push, not the take's own pop: take at once
    assert fetcher.on_reply(client.execute_command(*command)).message == b"pushed while the pool was full"  # type: ignore[union-attr]
    read_notices(waker)  # its own pop
    wait_and_ring()
    fetcher.on_reply(None)  # the wait ended on its own
    found_nothing(fetcher)  # after a take that found nothing, no notice is its own pop:
    client.lpush("q", "sixth, while no wait is in flight")
    read_notices(waker)
    command = fetcher.next_command(LISTS, 1.0)
    assert command[0] == "EVAL"  # a write to the list last taken from: take, not wait
    assert fetcher.on_reply(client.execute_command(*command)).message == b"sixth, while no wait is in flight"  # type: ignore[union-attr]

    fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY)  # no notices: it cannot know of writes,
    client.lpush("q", "seventh")  # so it takes again after a take
    assert take().message == b"seventh" and fetcher.step is Step.TAKE  # type: ignore[union-attr]


def test_a_rings_answer_read_after_its_wait_ended_leaves_the_next_wait_ringable(waker):
    """Rings are answered asynchronously: an answer "rang" read only after the wait it rang for has ended
    and the next wait began must not mark the new wait as rung, or the next push would ring nothing and
    its message wait for Redis' timer (~100 ms: the p99 of a first version of the asynchronous ring)."""
    waker, client = waker
    assert waker.listening(key for key, _ in LISTS)
    waker.wait_command(1.0)
    client.lpush("q", "first")
    notice_without_answers(waker)  # rings; its answer is not read yet
    wait_until(lambda: client.llen(waker.doorbell_key) == 1, 30, "the doorbell to ring")
    client.lpop(waker.doorbell_key)
    waker.waiting = False  # the wait returned (Fetcher.on_reply), the message was taken
    client.rpop("q")
    notice_without_answers(waker)  # the take's pop, pending while no wait is in flight
    assert waker.take_pending() == {"q"} and waker.unanswered
    waker.wait_command(1.0)  # the next wait
    read_answers(waker)  # the first ring's late "rang"
    assert waker.waiting
    client.lpush("q", "second")
    read_notices(waker)
    assert client.lrange(waker.doorbell_key, 0, -1) == [b"1"] and not waker.waiting


def test_a_write_to_a_list_not_consumed_rings_nothing(waker):
    waker, client = waker
    assert waker.listening(key for key, _ in LISTS)
    waker.wait_command(1.0)
    client.lpush("q.other", "another model's queue, under the same prefix")
    read_notices(waker)
    assert waker.waiting and not waker.pending and not client.exists(waker.doorbell_key)


def test_a_write_that_leaves_nothing_to_take_here_rings_nothing(waker, fresh_redis_url):
    """Tracking notices name keys of every database, and a pop writes a list as a push does: the
    doorbell rings only for a list holding a message in the consumer's own database (ring.lua), so
    a push to another database's queue of the same name, or another worker's take, costs an idle
    consumer no take (three idle benchmark workers on one server added 1.2-2 ms to each other's
    one-text latency that way: docs/benchmarks.md)."""
    waker, client = waker
    assert waker.listening(key for key, _ in LISTS)
    waker.wait_command(1.0)
    other_database = redis_client(fresh_redis_url())
    other_database.lpush("q", "another fleet's message, same queue name")
    read_notices(waker)
    client.lpush("q:5", "taken by another worker at once")
    client.rpop("q:5")
    read_notices(waker)
    assert waker.waiting and not waker.pending and not client.exists(waker.doorbell_key)
    client.lpush("q", "for this consumer")
    read_notices(waker)
    assert client.lrange(waker.doorbell_key, 0, -1) == [b"1"] and not waker.waiting


def test_stopping_ends_tracking_and_the_reading(waker):
    waker, client = waker
    assert waker.listening(key for key, _ in LISTS)
    waker.tracking.send_command("CLIENT", "ID")
    tracking_id = waker.tracking.read_response()
    assert "t" in _flags(client, tracking_id)  # tracking on (the session's Redis has other clients too)
    waker.stop()
    assert waker.loop.readers == {} and waker.notices is None
    # Its connection, and so its tracking, is gone once Redis has read the close (asynchronously: a
    # CLIENT LIST right after the close could still list it, one CI run in a few dozen).
    wait_until(lambda: _flags(client, tracking_id) is None, 5, "Redis to drop the tracking connection")


def _flags(client: redis.Redis, client_id: int) -> str | None:
    """The CLIENT LIST flags of client `client_id`, or None once it is gone."""
    listed = client.execute_command("CLIENT", "LIST", "ID", client_id).decode().split()
    return next((field.split("=", 1)[1] for field in listed if field.startswith("flags=")), None)


def test_a_redis_that_refuses_tracking_leaves_the_consumer_waiting_as_before(fresh_redis_url, caplog):
    url = fresh_redis_url()
    admin = redis_client(url)
    admin.execute_command("ACL", "SETUSER", "no-tracking", "on", ">secret", "~*", "&*", "+@all", "-client|tracking")
    try:
        limited = url.replace("redis://", "redis://no-tracking:secret@")
        waker = Waker(redis.ConnectionPool.from_url(limited), EventLoop(), wait_s=0.01)
        fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY)
        fetcher.waker = waker
        found_nothing(fetcher)
        with caplog.at_level(logging.WARNING, logger="inference_tasks.broker.wakeup"):
            command = fetcher.next_command(LISTS, 1.0)
        assert command[0] == "BLMOVE"  # the list it last took from, as without a waker
        assert "Redis refused client-side tracking" in caplog.text and "NoPermissionError" in caplog.text
        assert waker.loop.readers == {} and waker.notices is None
        caplog.clear()
        fetcher.on_reply(None)
        found_nothing(fetcher)
        with caplog.at_level(logging.WARNING, logger="inference_tasks.broker.wakeup"):
            assert fetcher.next_command(LISTS, 1.0)[0] == "BLMOVE"
        assert caplog.text == ""  # said once; tried again only after RETRY_AFTER_S
    finally:
        admin.execute_command("ACL", "DELUSER", "no-tracking")


def test_a_ring_that_fails_on_the_loops_turn_falls_back_and_raises_nothing(waker, caplog, monkeypatch):
    """The ring for the list just taken from runs as a callback of the hub's next turn, where an
    exception would escape into the worker's event loop: a failure there stops tracking, says so, and
    leaves the consumer waiting as without it."""
    waker, _ = waker
    assert waker.listening(key for key, _ in LISTS)
    waker.wait_command(1.0)
    waker.ring_soon(["q"])

    def refuse(*args: object) -> None:
        raise redis.ConnectionError("the connection went away")

    monkeypatch.setattr(waker.tracking, "send_command", refuse)
    with caplog.at_level(logging.WARNING, logger="inference_tasks.broker.wakeup"):
        waker.loop.next_turn()
    assert "client-side tracking stopped (ConnectionError" in caplog.text
    assert waker.notices is None and waker.loop.readers == {} and waker.failed_at is not None
