"""The atomic take (broker/fetch.py) on a real redis-server: a message is popped and recorded as
unacked in one step, so a consumer that never reads the reply (killed, cut off) loses nothing: the
visibility sweep puts the message back. With kombu's BRPOP it was gone (the chaos soak's "lost in
flight to a cut-off consumer")."""

from __future__ import annotations

import json

import pytest
import redis

from inference_tasks.app import create_app
from inference_tasks.broker.fetch import Fetcher, Step
from inference_tasks.broker.leases import renew
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, FETCH_RETRY_KEY, UNACKED_INDEX_KEY, UNACKED_KEY
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.local import redis_client, start_redis
from tests.support.waiting import wait_until

QUEUE_LISTS = [(INFERENCE_QUEUE, INFERENCE_QUEUE), (f"{INFERENCE_QUEUE}:9", INFERENCE_QUEUE)]


def _take_and_vanish(url: str) -> str:
    """Send one take on a connection of its own, let Redis run it, and close without reading the
    reply: what a consumer killed or cut off at that moment does. Returns the record's tag."""
    fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY)
    command = fetcher.next_command(QUEUE_LISTS, 1.0)
    client = redis_client(url)
    connection = client.connection_pool.get_connection()
    connection.send_command(*command)
    wait_until(lambda: client.llen(INFERENCE_QUEUE) == 0, 30, "Redis to run the take")
    connection.disconnect()
    assert fetcher.in_flight is not None
    return fetcher.in_flight[2]


def _sweep(url: str, until: object) -> None:
    app = create_app(Settings(redis_url=url, visibility_timeout_s=3, lease_renew_interval_s=1))
    with app.connection_for_write() as connection:
        qos = connection.default_channel.qos
        wait_until(lambda: qos.restore_visible(num=10, interval=1) or until(), 20, "the sweep")  # type: ignore[operator]


def test_a_take_whose_reply_never_arrives_leaves_a_record_and_the_sweep_puts_the_message_back(fresh_redis_url):
    url = fresh_redis_url()
    client = redis_client(url)
    app = create_app(Settings(redis_url=url))
    app.send_task(EMBED_TASK, args=[["never lost"]], queue=INFERENCE_QUEUE)
    sent = json.loads(client.lindex(INFERENCE_QUEUE, 0))

    tag = _take_and_vanish(url)

    assert client.llen(INFERENCE_QUEUE) == 0
    assert client.zscore(UNACKED_INDEX_KEY, tag) is not None
    message, exchange, routing_key = json.loads(client.hget(UNACKED_KEY, tag))
    assert (message, exchange, routing_key) == (sent, "", INFERENCE_QUEUE)

    _sweep(url, lambda: client.llen(INFERENCE_QUEUE) == 1)
    back = json.loads(client.lindex(INFERENCE_QUEUE, 0))
    assert (
        back["headers"]["redelivered"] is True
        and back["properties"]["delivery_tag"] == sent["properties"]["delivery_tag"]
    )
    assert back["body"] == sent["body"] and back["headers"]["id"] == sent["headers"]["id"]
    assert client.hlen(UNACKED_KEY) == 0 and client.zcard(UNACKED_INDEX_KEY) == 0


def test_takes_serve_lists_in_order_then_wait_without_taking(fresh_redis_url):
    """The first list with a message is served (priority 0 before 9); with nothing to take the consumer
    waits with a BLMOVE that leaves its list as it was."""
    client = redis_client(fresh_redis_url())
    client.lpush(f"{INFERENCE_QUEUE}:9", b'{"n": 9}')
    client.lpush(INFERENCE_QUEUE, b'{"n": 0}')
    fetcher = Fetcher(UNACKED_KEY, UNACKED_INDEX_KEY, FETCH_RETRY_KEY, wait_s=0.05)

    def step() -> object:
        command = fetcher.next_command(QUEUE_LISTS, 1.0)
        return fetcher.on_reply(client.execute_command(*command))

    first, second, third = step(), step(), step()
    assert [first.message, second.message] == [b'{"n": 0}', b'{"n": 9}']  # type: ignore[union-attr]
    assert first.queue == second.queue == INFERENCE_QUEUE  # type: ignore[union-attr]
    assert third is None and fetcher.step is Step.WAIT and client.hlen(UNACKED_KEY) == 2

    client.lpush(INFERENCE_QUEUE, b'{"n": "waiting"}')
    assert step() is None and fetcher.step is Step.TAKE  # the wait saw the message and left it
    assert client.lrange(INFERENCE_QUEUE, 0, -1) == [b'{"n": "waiting"}']
    taken = step()
    assert taken.message == b'{"n": "waiting"}' and client.llen(INFERENCE_QUEUE) == 0  # type: ignore[union-attr]


def test_the_record_of_a_message_screening_would_refuse_is_dead_lettered_by_the_sweep(fresh_redis_url):
    """A consumer that dies between the take and screening leaves the record of whatever it took; one
    that is not JSON cannot be restored, and is dead-lettered instead of failing every sweep."""
    url = fresh_redis_url()
    client = redis_client(url)
    client.lpush(INFERENCE_QUEUE, b"not json {")
    _take_and_vanish(url)
    assert client.hlen(UNACKED_KEY) == 1

    _sweep(url, lambda: client.llen(DEAD_LETTER_KEY) == 1)
    entry = client.lindex(DEAD_LETTER_KEY, 0)
    assert b"could not be restored" in entry and b"not json {" in entry
    assert client.hlen(UNACKED_KEY) == 0 and client.zcard(UNACKED_INDEX_KEY) == 0 and client.llen(INFERENCE_QUEUE) == 0


def test_leases_and_acks_are_written_while_redis_is_full(tmp_path):
    """At maxmemory Redis refuses everything inside MULTI, deletes too: kombu's ack (ZREM and HDEL in
    MULTI/EXEC) failed, and one made outside the worker's event loop stopped the worker (the chaos
    soak). Plain deletes still work, and acks are plain now. A plain ZADD is refused too, so leases ran
    out during a full Redis and the sweep ran held tasks twice; the renewal is an allow-oom script."""
    server = start_redis(tmp_path / "full", extra_args=("--maxmemory", "64mb", "--maxmemory-policy", "noeviction"))
    try:
        client = redis_client(server.url(0))
        tags = [f"tag-{n}" for n in range(3)]
        for tag in tags:
            client.hset(UNACKED_KEY, tag, "[]")
            client.zadd(UNACKED_INDEX_KEY, {tag: 1})
        for number in range(20):
            client.set(f"filler:{number}", b"x" * 200_000)
        client.config_set("maxmemory", client.info("memory")["used_memory"] - 2 * 1024 * 1024)
        with pytest.raises(redis.exceptions.ResponseError), client.pipeline(transaction=True) as pipe:
            pipe.zrem(UNACKED_INDEX_KEY, tags[0]).hdel(UNACKED_KEY, tags[0]).execute()  # what kombu's ack sent
        app = create_app(Settings(redis_url=server.url(0)))
        with app.connection_for_write() as connection:
            renew(connection, tags)  # leases too: a plain ZADD is refused at maxmemory
            assert all(score > 1 for _, score in client.zrange(UNACKED_INDEX_KEY, 0, -1, withscores=True))
            qos = connection.default_channel.qos
            qos.remove_records(tags[:2])  # a batch of acks from the event loop
            message = type("Message", (), {"delivery_info": {}})()
            qos._delivered[tags[2]] = message  # held by this channel
            qos.ack(tags[2])  # outside a worker's event loop: written at once
        assert client.hlen(UNACKED_KEY) == 0 and client.zcard(UNACKED_INDEX_KEY) == 0
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
