"""Redis stays bounded under load: results leave when read, expire within an hour, travel compact on
request, producers stop at a queue limit, and a Redis at maxmemory loses no task. Real Redis, real
workers, the real model, real Ruby."""

from __future__ import annotations

import json
import os
import signal
import uuid

import numpy as np
import pytest

from inference_tasks import codec, producer
from inference_tasks.redis_access.keys import DEAD_LETTER_KEY, UNACKED_KEY
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE
from tests.support.local import redis_client, start_redis
from tests.support.ruby_runner import ruby
from tests.support.waiting import wait_until
from tests.support.wire import encode, task_message

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
PROBES = "tests.support.worker_probes"
TEXTS = ["The cat sleeps on the sofa.", "Quarterly revenue grew.", "Reset my password"]
BATCH = [f"Support ticket number {i}: the export to PDF produced an empty file again." for i in range(64)]
# Small enough to fill in a moment, large enough for a worker's own bookkeeping.
MAXMEMORY = "32mb"
FILLER_BYTES = 512 * 1024
FILLER_KEYS = 16


def result_key(task_id: str) -> str:
    return f"celery-task-meta-{task_id}"


@pytest.mark.external
def test_ruby_client_deletes_results_it_read_keeps_them_on_request_and_stops_at_the_queue_limit(inference_worker):
    """Ruby: the read that returns a finished result (success or failure) deletes it; keep: true keeps
    it (with its TTL); f32-base64 decodes to the JSON vectors; QueueFull at max_queue_depth pushes nothing."""
    report = ruby("memory_contract.rb", inference_worker.redis_url)
    assert report["read_key_exists"] is False
    assert report["failed_key_exists"] is False
    assert report["kept_key_exists"] is True
    assert 0 < report["kept_ttl"] <= 3600
    assert report["f32_encoding"] == "f32-base64"
    np.testing.assert_allclose(np.array(report["f32"]), np.array(report["json"]), rtol=0, atol=1e-6)
    assert report["parked_before"] == 3
    full = report["queue_full"]
    assert full["class"] == "InferenceTasks::QueueFull" and full["is_error"]
    assert (full["depth"], full["limit"]) == (3, 3)
    assert '"parked" holds 3 waiting messages' in full["message"]
    assert report["parked_after"] == 3
    assert report["parked_lists"]["2"] == 0


def test_inference_results_expire_within_an_hour(inference_worker):
    """A fresh embed result's key carries a TTL of at most INFERENCE_RESULT_EXPIRES_S (1 hour by default)."""
    result = inference_worker.app.send_task(EMBED_TASK, args=[["expires"]])
    result.get(timeout=RESULT_TIMEOUT_S)
    ttl = redis_client(inference_worker.redis_url).ttl(result_key(result.id))
    assert 3000 < ttl <= 3600


def test_compact_embeddings_equal_the_json_vectors_at_a_quarter_of_the_size(inference_worker):
    """encoding="f32-base64": the same vectors to float32 precision, in at most 35 % of the JSON result's bytes."""
    app = inference_worker.app
    client = redis_client(inference_worker.redis_url)
    as_json = app.send_task(EMBED_TASK, args=[BATCH])
    compact = app.send_task(EMBED_TASK, args=[BATCH], kwargs={"encoding": "f32-base64"})
    json_value = as_json.get(timeout=RESULT_TIMEOUT_S)
    compact_value = compact.get(timeout=RESULT_TIMEOUT_S)
    json_bytes, compact_bytes = client.strlen(result_key(as_json.id)), client.strlen(result_key(compact.id))
    assert compact_bytes <= 0.35 * json_bytes, (compact_bytes, json_bytes)
    assert {k: compact_value[k] for k in ("model", "dim", "count", "encoding")} == {
        "model": "all-MiniLM-L6-v2",
        "dim": 384,
        "count": 64,
        "encoding": "f32-base64",
    }
    vectors = codec.decode_vectors(compact_value["embeddings"], compact_value["dim"])
    np.testing.assert_allclose(vectors, np.array(json_value["embeddings"], dtype=np.float32), rtol=0, atol=0)
    print(f"\n[memory] 64-text embed result: JSON {json_bytes} B, f32-base64 {compact_bytes} B")


def test_an_unknown_encoding_fails_with_a_clear_message(inference_worker):
    """encoding must be one of json, f32-base64 and the quantized ones; anything else fails naming them."""
    result = inference_worker.app.send_task(EMBED_TASK, args=[["x"]], kwargs={"encoding": "float16"})
    with pytest.raises(
        Exception,
        match=r"encoding must be one of 'json', 'f32-base64', 'int8', 'uint8', 'binary', 'ubinary', got 'float16'",
    ):
        producer.collect(result, RESULT_TIMEOUT_S)
    assert redis_client(inference_worker.redis_url).exists(result_key(result.id)) == 0
    aliased = inference_worker.app.send_task(EMBED_TASK, args=[["x"]], kwargs={"encoding": "f32le-base64"})
    assert producer.collect(aliased, RESULT_TIMEOUT_S)["encoding"] == "f32-base64"  # the old corpus name


def test_python_producer_collects_once_and_refuses_a_full_queue(inference_worker):
    """producer.collect deletes the result it read (keep=True keeps it); producer.send raises QueueFull at
    max_queue_depth and pushes nothing."""
    app = inference_worker.app
    client = redis_client(inference_worker.redis_url)
    read = producer.send(app, EMBED_TASK, args=[TEXTS])
    assert len(producer.collect(read, RESULT_TIMEOUT_S)["embeddings"]) == 3
    assert client.exists(result_key(read.id)) == 0
    kept = producer.send(app, EMBED_TASK, args=[TEXTS])
    producer.collect(kept, RESULT_TIMEOUT_S, keep=True)
    assert client.exists(result_key(kept.id)) == 1

    queue = f"parked-{uuid.uuid4().hex[:8]}"
    for priority in (0, 4):
        producer.send(app, EMBED_TASK, args=[["waiting"]], queue=queue, priority=priority, max_queue_depth=2)
    with pytest.raises(producer.QueueFull, match=rf"queue '{queue}' holds 2 waiting messages"):
        producer.send(app, EMBED_TASK, args=[["one too many"]], queue=queue, max_queue_depth=2)
    assert sum(client.llen(key) for key in [queue] + [f"{queue}:{step}" for step in range(1, 10)]) == 2


@pytest.fixture
def full_redis_worker(tmp_path, start_worker):
    """A worker on its own Redis with a small maxmemory and noeviction, and a way to fill that Redis."""
    yield from _full_redis_worker(tmp_path, start_worker)


@pytest.fixture
def full_redis_worker_replying_elsewhere(tmp_path, start_worker, fresh_redis_url):
    """The same, its Sidekiq reply jobs going to another Redis (INFERENCE_SIDEKIQ_REDIS_URL) that has room."""
    sidekiq_url = fresh_redis_url()
    for parts in _full_redis_worker(tmp_path, start_worker, sidekiq_redis_url=sidekiq_url):
        yield (*parts, redis_client(sidekiq_url))


@pytest.fixture
def worker_with_full_result_redis(tmp_path, start_worker, fresh_redis_url):
    """A worker whose results go to a Redis of their own (INFERENCE_RESULT_REDIS_URL) that can be
    filled; its broker has room. Yields the worker, the result Redis' client, fill, make_room."""
    broker_url = fresh_redis_url()
    yield from _full_redis_worker(tmp_path, start_worker, broker_url=broker_url)


def _full_redis_worker(tmp_path, start_worker, broker_url=None, **settings):
    server = start_redis(tmp_path / "redis", extra_args=("--maxmemory", MAXMEMORY, "--maxmemory-policy", "noeviction"))
    if broker_url is not None:
        settings["result_redis_url"] = server.url(1)
    worker = start_worker(
        redis_url=broker_url or server.url(1),
        include=PROBES,
        concurrency=1,
        microbatch_max_texts=0,
        result_write_patience_s=3,
        visibility_timeout_s=6,
        lease_renew_interval_s=2,
        **settings,
    )
    client = redis_client(server.url(1))

    def fill() -> None:
        """Put Redis decisively over its maxmemory: some filler data, then a limit 4 MB below what it uses
        (a pop or a small delete must not bring it back under)."""
        for number in range(FILLER_KEYS):
            client.set(f"filler:{number}", b"x" * FILLER_BYTES)
        used = client.info("memory")["used_memory"]
        client.config_set("maxmemory", used - 4 * 1024 * 1024)

    def make_room() -> None:
        client.config_set("maxmemory", MAXMEMORY)

    yield worker, client, fill, make_room
    worker.stop()
    server.process.terminate()
    server.process.wait(timeout=10)


@pytest.mark.external
def test_a_full_redis_refuses_producers_clearly_and_a_waiting_message_stays_queued_until_redis_has_room(
    full_redis_worker,
):
    """Redis at maxmemory: Python and Ruby producers get RedisFull (nothing pushed). The worker's take
    (broker/fetch.py) writes the unacked record before it pops, so Redis refuses it whole: a message
    waiting while Redis is full stays on its queue, and runs once room is made."""
    worker, client, fill, make_room = full_redis_worker
    os.killpg(worker.process.pid, signal.SIGSTOP)  # the whole worker, so the take happens once Redis is full
    try:
        waiting = worker.app.send_task(EMBED_TASK, args=[TEXTS])
        fill()
    finally:
        os.killpg(worker.process.pid, signal.SIGCONT)
    with pytest.raises(producer.RedisFull, match="Redis is full"):
        producer.send(worker.app, EMBED_TASK, args=[["no room"]])
    from_ruby = ruby("push_when_full.rb", worker.redis_url)
    assert from_ruby["error"] == "InferenceTasks::RedisFull" and "Redis is full" in from_ruby["message"]
    wait_until(lambda: "cannot take a message" in worker.log(), 60, "the worker to find Redis full")
    assert client.llen(INFERENCE_QUEUE) == 1 and client.hlen(UNACKED_KEY) == 0  # still waiting, nothing popped
    make_room()
    assert len(producer.collect(waiting, RESULT_TIMEOUT_S)["embeddings"]) == 3
    wait_until(lambda: worker.successes()[waiting.id] > 0, 30, "the success log line")
    assert worker.successes()[waiting.id] == 1


def test_a_result_redis_refuses_is_retried_then_the_task_goes_back_to_its_queue(full_redis_worker):
    """The result write is refused (Redis full): the child retries for INFERENCE_RESULT_WRITE_PATIENCE_S, then
    gives the task back (Reject, requeue); the requeue itself is refused, so the message stays unacked and the
    sweep returns it once Redis has room. The task runs again and its result arrives: nothing lost."""
    worker, client, fill, make_room = full_redis_worker
    marker = f"attempts:{uuid.uuid4().hex}"
    result = worker.app.send_task("tests.result_when_redis_full", args=[marker, 300_000])
    wait_until(lambda: client.llen(marker) == 1, RESULT_TIMEOUT_S, "the task to start")
    fill()
    wait_until(lambda: "returning it to its queue" in worker.log(), 60, "the child to give the task back")
    wait_until(lambda: "could not requeue message" in worker.log(), 30, "the refused requeue")
    assert "retrying to store SUCCESS" in worker.log()
    assert client.hlen("unacked") == 1  # still recorded in Redis: the sweep can return it
    make_room()
    value = producer.collect(result, RESULT_TIMEOUT_S)
    assert value["attempt"] == 2 and len(value["payload"]) == 300_000
    assert client.llen(marker) == 2


def test_a_worker_started_on_a_full_redis_waits_for_room_then_serves(full_redis_worker):
    """A starting consumer's queue declaration (MULTI), bindings (SADD) and first sweep (SET NX) are
    all refused at maxmemory, and a worker started then used to exit (the chaos soak's rolling
    restart during a full Redis lost both workers). It now waits, says so, and serves once there is
    room."""
    worker, _, fill, make_room = full_redis_worker
    assert worker.stop() == 0
    fill()
    try:
        worker.launch(wait_ready=False)
        wait_until(lambda: "waits for room to start" in worker.log(), 120, "the worker to wait for room")
        assert worker.process.poll() is None
    finally:
        make_room()
    worker.wait_ready()
    assert "Redis has room again after" in worker.log()
    result = worker.app.send_task(EMBED_TASK, args=[["served after the room came back"]])
    assert result.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384


def replying_task_then_fill(worker, client, fill, record_id: int):
    """Send a task that asks for a Sidekiq reply job and, once it runs, fill Redis (its first attempt
    returns only then: tests.result_when_redis_full). Returns its result, marker and reply queue."""
    marker, sidekiq_queue = f"attempts:{uuid.uuid4().hex}", f"replies-{uuid.uuid4().hex[:8]}"
    spec = {"class": "EmbeddingReadyJob", "queue": sidekiq_queue, "context": {"record_id": record_id}}
    result = worker.app.send_task("tests.result_when_redis_full", args=[marker, 100], headers={"sidekiq_reply": spec})
    wait_until(lambda: client.llen(marker) == 1, RESULT_TIMEOUT_S, "the task to start")
    fill()
    return result, marker, sidekiq_queue


def test_a_reply_job_redis_refuses_is_retried_then_the_task_goes_back_and_replies_once(full_redis_worker):
    """The reply job's push is refused (Redis full; a failover refuses it the same way): the child
    retries it like a result write, then gives the task back. The task runs again once Redis has
    room, and exactly one reply job arrives (before, the push was logged and dropped)."""
    worker, client, fill, make_room = full_redis_worker
    result, marker, sidekiq_queue = replying_task_then_fill(worker, client, fill, record_id=3)
    wait_until(lambda: f"could not push the reply job for task {result.id} yet" in worker.log(), 60, "a retried push")
    wait_until(lambda: "returning it to its queue" in worker.log(), 60, "the child to give the task back")
    make_room()
    value = producer.collect(result, RESULT_TIMEOUT_S)
    assert value == {"delivered_in_reply": {"class": "EmbeddingReadyJob", "queue": sidekiq_queue, "format": "sidekiq"}}
    [job] = [json.loads(raw) for raw in client.lrange(f"queue:{sidekiq_queue}", 0, -1)]
    [outcome] = job["args"]
    assert outcome["state"] == "SUCCESS" and outcome["result"]["attempt"] == 2
    assert outcome["context"] == {"record_id": 3}
    assert client.llen(marker) == 2


def test_a_task_whose_reply_job_was_pushed_is_not_run_again_when_its_result_stub_is_refused(
    full_redis_worker_replying_elsewhere,
):
    """The reply job reaches the Sidekiq Redis, which has room; the result Redis, full, refuses the stub.
    The child retries the stub for INFERENCE_RESULT_WRITE_PATIENCE_S, then acks: giving the task back
    would run it again and push a second reply job (a quick chaos run in CI once saw one)."""
    worker, client, fill, make_room, sidekiq = full_redis_worker_replying_elsewhere
    result, marker, sidekiq_queue = replying_task_then_fill(worker, client, fill, record_id=4)
    wait_until(lambda: f"task {result.id} replied, its result stub not stored" in worker.log(), 60, "the skipped stub")
    wait_until(lambda: client.hlen(UNACKED_KEY) == 0, 30, "the ack")
    make_room()
    assert "returning it to its queue" not in worker.log()
    [job] = [json.loads(raw) for raw in sidekiq.lrange(f"queue:{sidekiq_queue}", 0, -1)]
    [outcome] = job["args"]
    assert outcome["state"] == "SUCCESS" and outcome["result"]["attempt"] == 1
    assert client.llen(marker) == 1 and client.llen(INFERENCE_QUEUE) == 0


def test_a_message_refused_while_its_failure_cannot_be_stored_stays_recorded_and_fails_once_there_is_room(
    worker_with_full_result_redis,
):
    """A hostile message is taken (the broker has room) and refused, but the result Redis is full and
    refuses its FAILURE. Before, the refusal was logged and the message discarded: its caller would
    wait for ever. Now the take's unacked record stays; the sweep returns the message once its lease
    has run out, and once there is room it is refused again and its FAILURE stored."""
    worker, results, fill, make_room = worker_with_full_result_redis
    broker = redis_client(worker.redis_url)
    task_id = f"refused-{uuid.uuid4()}"
    fill()
    broker.lpush(INFERENCE_QUEUE, encode(task_message("celery.backend_cleanup", [], task_id=task_id)))
    wait_until(lambda: "left for the visibility sweep" in worker.log(), 60, "the refusal to be deferred")
    assert broker.hlen(UNACKED_KEY) == 1 and results.exists(result_key(task_id)) == 0
    make_room()
    stored = wait_until(lambda: results.get(result_key(task_id)), 90, "the FAILURE once there is room")
    meta = json.loads(stored)
    assert meta["status"] == "FAILURE" and "is not a task producers may send here" in meta["result"]["exc_message"][0]
    wait_until(lambda: broker.hlen(UNACKED_KEY) == 0 and broker.llen(INFERENCE_QUEUE) == 0, 30, "the record removed")
    assert any(json.loads(entry)["task_id"] == task_id for entry in broker.lrange(DEAD_LETTER_KEY, 0, -1))
