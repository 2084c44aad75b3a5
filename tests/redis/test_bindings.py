"""kombu's binding tables in the form stock clients read, with our priority list names (broker/bindings.py),
on a real redis-server: what our channel writes, what a stock kombu channel reads of it, a table left
by a fleet from before, and a member in neither form."""

from __future__ import annotations

import logging

from kombu import Connection, Exchange, Queue

from inference_tasks.app import create_app
from inference_tasks.broker.bindings import KOMBU_SEPARATOR, parse_member
from inference_tasks.config import Settings
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.local import redis_client

TABLE = f"_kombu.binding.{INFERENCE_QUEUE}"
LEGACY_MEMBER = f"{INFERENCE_QUEUE}::{INFERENCE_QUEUE}"


def stock_member(routing_key: str, queue: str) -> str:
    return KOMBU_SEPARATOR.join([routing_key, "", queue])


def declare_inference_queue(app) -> None:
    with app.connection_for_write() as connection:
        queue = Queue(INFERENCE_QUEUE, Exchange(INFERENCE_QUEUE), routing_key=INFERENCE_QUEUE)
        queue(connection.default_channel).declare()


def test_members_parse_in_kombus_form_and_the_legacy_form_and_nothing_else():
    assert parse_member(stock_member("rk", "q")) == ("rk", "", "q")
    assert parse_member("rk::q") == ("rk", "", "q")
    assert parse_member("rk:*.x:a:b") == ("rk", "*.x", "a:b")  # a queue name may hold colons
    assert parse_member("no separator") is None
    assert parse_member(KOMBU_SEPARATOR.join(["a", "b"])) is None


def test_our_bindings_are_readable_by_a_stock_client_and_priorities_keep_their_list_names(fresh_redis_url):
    """A stock kombu channel (default transport, no project settings) routes a message through the
    table our channel wrote; our priority pushes land on "inference:<n>" as every producer expects."""
    url = fresh_redis_url()
    client = redis_client(url)
    client.sadd(TABLE, LEGACY_MEMBER)  # left by a fleet from before this change
    app = create_app(Settings(redis_url=url))
    declare_inference_queue(app)
    assert client.smembers(TABLE) == {stock_member(INFERENCE_QUEUE, INFERENCE_QUEUE).encode()}
    assert client.smembers(f"_kombu.binding_permanent.{INFERENCE_QUEUE}") == {
        stock_member(INFERENCE_QUEUE, INFERENCE_QUEUE).encode()
    }

    app.send_task(EMBED_TASK, args=[["priority three"]], queue=INFERENCE_QUEUE, priority=3)
    assert client.llen(f"{INFERENCE_QUEUE}:3") == 1
    with Connection(url) as stock:  # kombu's own Redis transport and separator
        stock.default_channel.basic_publish(
            stock.default_channel.prepare_message("{}"), exchange=INFERENCE_QUEUE, routing_key=INFERENCE_QUEUE
        )
    assert client.llen(INFERENCE_QUEUE) == 1


def test_a_table_in_either_form_routes_and_a_member_in_neither_costs_one_line(fresh_redis_url, caplog):
    """A reply table written by stock clients and by this project's older clients: both route; garbage
    is skipped with one warning per member and channel, never an exception."""
    url = fresh_redis_url()
    client = redis_client(url)
    table = "_kombu.binding.reply.celery.pidbox"
    client.sadd(table, stock_member("stock-id", "stock-id.reply.celery.pidbox"), "old-id::old-id.reply.celery.pidbox")
    client.sadd(table, "garbage")
    app = create_app(Settings(redis_url=url))
    with app.connection_for_write() as connection, caplog.at_level(logging.WARNING):
        channel = connection.default_channel
        for _ in range(3):
            assert channel._lookup("reply.celery.pidbox", "stock-id") == {"stock-id.reply.celery.pidbox"}
            assert channel._lookup("reply.celery.pidbox", "old-id") == {"old-id.reply.celery.pidbox"}
    warnings = [record.getMessage() for record in caplog.records if "garbage" in record.getMessage()]
    assert len(warnings) == 1 and "ignored" in warnings[0]
