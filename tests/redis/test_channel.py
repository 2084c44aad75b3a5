"""The screening channel's own parts (broker/transport.py) on a real redis-server: the synchronous
read (`basic_get`), the order queues are served in, and a taken message whose queue is no longer
consumed. These replaced kombu's private `_get`, `_queue_cycle` and `_deliver` (docs/upstream.md)."""

from __future__ import annotations

import json

import pytest
from kombu import Consumer, Queue

from inference_tasks.app import create_app
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, UNACKED_INDEX_KEY, UNACKED_KEY
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.local import redis_client
from tests.support.waiting import wait_until

OTHER_QUEUE = "inference.other"


def test_basic_get_screens_what_it_reads_and_records_it_as_unacked(fresh_redis_url):
    url = fresh_redis_url()
    client = redis_client(url)
    app = create_app(Settings(redis_url=url))
    sent = app.send_task(EMBED_TASK, args=[["read synchronously"]], queue=INFERENCE_QUEUE)
    client.rpush(INFERENCE_QUEUE, b"not json {")  # the oldest: read first

    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert channel.basic_get(INFERENCE_QUEUE) is None  # refused, dead-lettered
        assert b"not json {" in client.lindex(DEAD_LETTER_KEY, 0)
        message = channel.basic_get(INFERENCE_QUEUE)
        assert message.headers["id"] == sent.id and message.envelope["headers"]["id"] == sent.id
        record = json.loads(client.hget(UNACKED_KEY, message.delivery_tag))
        assert record[0] == message.envelope and record[2] == INFERENCE_QUEUE
        assert channel.basic_get(INFERENCE_QUEUE) is None  # empty
        message.ack()
        channel.qos.write_acks()
    assert client.hlen(UNACKED_KEY) == 0 and client.zcard(UNACKED_INDEX_KEY) == 0


@pytest.mark.parametrize("strategy", ["priority", "round_robin"])
def test_a_consumer_of_two_queues_serves_them_in_the_configured_order(fresh_redis_url, strategy):
    """kombu's queue_order_strategy, on our own cycle: "priority" (this app's: the first queue
    declared first, always) or kombu's default round robin (the queue a message came from goes last)."""
    url = fresh_redis_url()
    app = create_app(Settings(redis_url=url))
    app.conf.broker_transport_options = {**app.conf.broker_transport_options, "queue_order_strategy": strategy}
    for queue in (INFERENCE_QUEUE, OTHER_QUEUE):
        for number in range(3):
            app.send_task(EMBED_TASK, args=[[f"{queue} {number}"]], queue=queue)
    served: list[str] = []

    def on_message(body: object, message: object) -> None:
        served.append(message.delivery_info["routing_key"])  # type: ignore[attr-defined]
        message.ack()  # type: ignore[attr-defined]

    with app.connection_for_write() as connection:
        channel = connection.channel()
        queues = [Queue(name, routing_key=name, channel=channel) for name in (INFERENCE_QUEUE, OTHER_QUEUE)]
        with Consumer(channel, queues=queues, callbacks=[on_message], accept=["json"]):
            while len(served) < 6:
                connection.drain_events(timeout=10)
        channel.qos.write_acks()
    if strategy == "priority":
        assert served == [INFERENCE_QUEUE] * 3 + [OTHER_QUEUE] * 3
    else:
        assert served == [INFERENCE_QUEUE, OTHER_QUEUE] * 3
    client = redis_client(url)
    assert client.hlen(UNACKED_KEY) == 0 and client.llen(INFERENCE_QUEUE) == 0 and client.llen(OTHER_QUEUE) == 0


def test_a_message_taken_for_a_queue_no_longer_consumed_goes_back_to_it(fresh_redis_url):
    """Its consumer was cancelled while the take was in flight: as kombu's delivery does, the message
    is requeued (behind what is queued, as kombu's requeue puts it) and its record removed."""
    url = fresh_redis_url()
    client = redis_client(url)
    app = create_app(Settings(redis_url=url))
    app.send_task(EMBED_TASK, args=[["queued behind"]], queue=INFERENCE_QUEUE)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        taken = channel.basic_get(INFERENCE_QUEUE, no_ack=True)  # the bytes a take would have popped
        app.send_task(EMBED_TASK, args=[["queued later"]], queue=INFERENCE_QUEUE)
        envelope = {**taken.envelope, "properties": {**taken.envelope["properties"], "delivery_tag": "tag-1"}}
        client.hset(UNACKED_KEY, "tag-1", json.dumps([envelope, "", INFERENCE_QUEUE]))
        client.zadd(UNACKED_INDEX_KEY, {"tag-1": 1})
        channel.qos.recorded_by_take.add("tag-1")  # as the take does

        channel.deliver(envelope, INFERENCE_QUEUE)  # nobody consumes it

        wait_until(lambda: client.llen(INFERENCE_QUEUE) == 2, 30, "the message back on its queue")
    last_out = json.loads(client.lindex(INFERENCE_QUEUE, 0))  # consumers pop from the right
    assert last_out["headers"]["id"] == taken.headers["id"]
    assert client.hlen(UNACKED_KEY) == 0 and client.zcard(UNACKED_INDEX_KEY) == 0


def test_the_qos_counts_the_messages_it_holds_within_the_prefetch_window(fresh_redis_url):
    """What a channel closing without its connection reports as left to the sweep (qos.held_count)."""
    url = fresh_redis_url()
    app = create_app(Settings(redis_url=url))
    for number in range(2):
        app.send_task(EMBED_TASK, args=[[f"held {number}"]], queue=INFERENCE_QUEUE)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        assert channel.qos.held_count() == 0  # no prefetch limit: nothing to tell
        channel.basic_qos(prefetch_count=5)
        first, second = channel.basic_get(INFERENCE_QUEUE), channel.basic_get(INFERENCE_QUEUE)
        assert channel.qos.held_count() == 2
        first.ack()
        assert channel.qos.held_count() == 1
        second.ack()
        channel.qos.write_acks()
