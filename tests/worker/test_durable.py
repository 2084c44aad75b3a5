"""Durable enqueue on real redis-servers: a primary without a replica (NotReplicated; the task may
still exist), a primary with a replica (confirmed, then served by a real worker), and a retry with
the same task id, which a worker runs once; the Python producer and the Ruby client alike."""

from __future__ import annotations

import gc
import json
import time
import uuid

import pytest
import redis
from kombu.exceptions import OperationalError

from inference_tasks.producer import NotReplicated, collect, send
from inference_tasks.redis_access.durable import DURABLE_HEADER
from inference_tasks.redis_access.keys import durable_claim_key, queue_keys, result_key
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.localstack import producer_app, start_redis, start_replica
from tests.support.ruby_runner import ruby
from tests.support.waiting import wait_until
from tests.support.wire import encode, task_message

pytestmark = pytest.mark.worker

RESULT_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def replicated_primary(tmp_path_factory):
    """A redis-server with one replica, in sync."""
    workdir = tmp_path_factory.mktemp("durable")
    primary = start_redis(workdir / "primary")
    replica = start_replica(primary, workdir / "replica")
    yield primary
    for server in (replica, primary):
        server.process.terminate()
        server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def replicated_worker(start_worker, replicated_primary):
    worker = start_worker(redis_url=replicated_primary.url(0), concurrency=1)
    yield worker
    gc.collect()  # the tests' results unsubscribe (their finalizers) while their Redis still answers
    worker.stop()  # before its Redis goes


def queued(client: redis.Redis) -> list[dict]:
    return [json.loads(raw) for key in queue_keys(INFERENCE_QUEUE) for raw in client.lrange(key, 0, -1)]


def test_without_a_replica_a_durable_push_raises_and_the_task_may_still_exist(fresh_redis_url):
    url = fresh_redis_url()
    app = producer_app(url)
    started = time.monotonic()
    with pytest.raises(NotReplicated) as raised:
        send(app, EMBED_TASK, args=[["not replicated"]], durable=True, durable_timeout=0.2)
    waited = time.monotonic() - started
    error = raised.value
    assert error.acknowledged == 0 and error.replicas == 1 and waited >= 0.2
    assert "0 of 1 replicas" in str(error) and "may or may not exist" in str(error)
    assert f"task_id={error.task_id!r}" in str(error)
    # The primary took it: the task exists, marked durable, so a retry with its id is safe.
    [message] = queued(redis.Redis.from_url(url))
    assert message["headers"]["id"] == error.task_id and message["headers"][DURABLE_HEADER] is True
    # A plain push is untouched: no header, no wait.
    plain = send(app, EMBED_TASK, args=[["plain"]])
    assert (
        DURABLE_HEADER
        not in next(m for m in queued(redis.Redis.from_url(url)) if m["headers"]["id"] == plain.id)["headers"]
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"durable_replicas": 0}, "durable_replicas must be an integer of 1 or more, got 0"),
        ({"durable_replicas": "1"}, "durable_replicas must be an integer of 1 or more, got '1'"),
        ({"durable_timeout": 0}, "durable_timeout must be a number of seconds above 0 and at most 60, got 0"),
        ({"durable_timeout": 120}, "durable_timeout must be a number of seconds above 0 and at most 60, got 120"),
    ],
)
def test_bad_durable_options_fail_naming_the_argument(fresh_redis_url, options, named):
    with pytest.raises(ValueError, match=named):
        send(producer_app(fresh_redis_url()), EMBED_TASK, args=[["x"]], durable=True, **options)


def test_with_a_replica_a_durable_push_is_confirmed_and_served(replicated_worker):
    app = producer_app(replicated_worker.redis_url)
    result = send(app, EMBED_TASK, args=[["durable and replicated"]], durable=True)
    assert len(collect(result, RESULT_TIMEOUT_S)["embeddings"]) == 1


def test_a_retry_with_the_same_task_id_runs_once(replicated_worker):
    """Two durable pushes of one task id (a producer's retry after NotReplicated): the worker runs
    the first and drops the second; the result, read and deleted, never comes back."""
    app = producer_app(replicated_worker.redis_url)
    client = redis.Redis.from_url(replicated_worker.redis_url)
    task_id = str(uuid.uuid4())
    first = send(app, EMBED_TASK, args=[["retried"]], durable=True, task_id=task_id)
    send(app, EMBED_TASK, args=[["retried"]], durable=True, task_id=task_id)
    assert len(collect(first, RESULT_TIMEOUT_S)["embeddings"]) == 1
    wait_until(
        lambda: f"durable task {task_id}: dropped a second message" in replicated_worker.log(), 60, "the retry dropped"
    )
    # The worker logs a success just after storing it: wait for the line, not only the result.
    wait_until(lambda: replicated_worker.successes()[task_id] >= 1, 30, "the success in the worker's log")
    assert sum(client.llen(key) for key in queue_keys(INFERENCE_QUEUE)) == 0
    assert client.get(result_key(task_id)) is None and replicated_worker.successes()[task_id] == 1


def test_a_redelivered_durable_message_runs_and_another_with_its_id_does_not(replicated_worker):
    """The claim is the first message's delivery tag: the same message handed out again (after its
    worker died) runs; a message with the same id and another tag does not."""
    client = redis.Redis.from_url(replicated_worker.redis_url)
    outcomes = {}
    for case, same_tag in (("redelivered", True), ("another", False)):
        message = task_message(EMBED_TASK, [[f"claimed {case}"]])
        message["headers"][DURABLE_HEADER] = True
        task_id, tag = message["headers"]["id"], message["properties"]["delivery_tag"]
        client.set(durable_claim_key(task_id), tag if same_tag else str(uuid.uuid4()), ex=600)
        client.lpush(INFERENCE_QUEUE, encode(message))
        outcomes[case] = task_id
    wait_until(lambda: client.get(result_key(outcomes["redelivered"])) is not None, RESULT_TIMEOUT_S, "the result")
    wait_until(
        lambda: f"durable task {outcomes['another']}: dropped" in replicated_worker.log(), 60, "the other one dropped"
    )
    assert client.get(result_key(outcomes["another"])) is None


@pytest.mark.external
def test_the_ruby_client_pushes_durably(replicated_worker, fresh_redis_url):
    """durable: true raises NotReplicated without a replica (the task is in the queue) and is
    confirmed, then served, with one; bad durable options fail naming the option."""
    alone_url = fresh_redis_url()
    alone = ruby("durable_push.rb", alone_url, TASK_ID=str(uuid.uuid4()))
    assert alone["error"] == "InferenceTasks::NotReplicated" and alone["acknowledged"] == 0
    assert "0 of 1 replicas" in alone["message"] and "may or may not exist" in alone["message"]
    assert [m["headers"][DURABLE_HEADER] for m in queued(redis.Redis.from_url(alone_url))] == [True]
    served = ruby("durable_push.rb", replicated_worker.redis_url, TASK_ID=str(uuid.uuid4()), WAIT="1")
    assert served["error"] is None and len(served["value"]["embeddings"]) == 1
    assert served["bad_options"] == [
        "durable_replicas must be an Integer of 1 or more, got 0",
        "durable_timeout must be seconds above 0 and at most 60, got 0",
        'durable must be true, false or nil, got "yes"',
    ]


def test_a_send_through_a_producer_whose_channel_kombu_closed_fails_as_a_connection_error(fresh_redis_url):
    """kombu closes a channel after a lost connection (its `connection` becomes None); the pooled
    producer holding it then raised AttributeError from inside kombu on the next send (the chaos soak
    saw it during failovers). It now raises OperationalError, which producers retry, and the retry
    goes through."""
    app = producer_app(fresh_redis_url())
    send(app, EMBED_TASK, args=[["first"]])
    with app.producer_or_acquire() as pooled:
        pooled.channel.connection.close_channel(pooled.channel)
    with pytest.raises(OperationalError, match="send again with the same task id"):
        send(app, EMBED_TASK, args=[["through the closed channel"]], task_id="retried-id")
    assert send(app, EMBED_TASK, args=[["again"]], task_id="retried-id").id == "retried-id"
