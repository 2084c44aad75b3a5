"""The operator's tools against real Redis and real workers: `inference-tasks doctor`, `status`,
`metrics` (Prometheus) and `embed` / `classify` FILE, each run as the command an operator types."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from inference_tasks import producer
from inference_tasks.routing import EMBED_TASK
from tests.support.local import redis_client, start_redis
from tests.support.localstack import free_port, producer_app
from tests.support.operator_tools import cli, exporter, scrape

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
TEXTS = [f"Order {i}: the parcel arrived damaged and I want a refund." for i in range(11)]


@pytest.fixture(scope="module")
def aof_redis(tmp_path_factory):
    """Redis as production runs it (AOF on), so the doctor's persistence check can pass."""
    server = start_redis(tmp_path_factory.mktemp("aof-redis"), appendonly=True)
    yield server
    server.process.terminate()
    server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def shipped(start_worker, aof_redis):
    """The shipped inference profile (pinned, 2 children) on an AOF Redis."""
    return start_worker(concurrency=2, redis_url=aof_redis.url(1))


def test_doctor_passes_the_shipped_profile(shipped):
    """Redis reachable with AOF, the model loads, 2 children x 1 thread within the cores: exit 0."""
    done = cli("doctor", redis_url=shipped.redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "AOF on" in done.stdout
    assert "all-MiniLM-L6-v2 loads on torch/native-bert f32 (384 dims" in done.stdout
    assert "OK" in done.stdout and "OVERSUBSCRIBED" not in done.stdout
    assert "test" in done.stdout and "1, 1" in done.stdout  # the worker's row: one thread per child


def test_doctor_flags_an_unpinned_worker_as_oversubscribed(start_worker, aof_redis):
    """Pinning off: each child runs a pool as wide as the machine; the doctor says so and how to fix it."""
    worker = start_worker(concurrency=2, pin_threads="false", redis_url=aof_redis.url(2))
    done = cli("doctor", "--skip-model", redis_url=worker.redis_url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "OVERSUBSCRIBED" in done.stdout
    assert "INFERENCE_PIN_THREADS=true" in done.stdout


def test_doctor_fails_when_redis_is_unreachable():
    done = cli("doctor", "--skip-model", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert done.returncode == 1
    assert "unreachable" in done.stdout


CLI = (sys.executable, "-m", "inference_tasks.ops.cli")


def test_metrics_count_what_waits_per_queue_and_priority_with_no_worker(fresh_redis_url):
    """7 tasks at the default priority and 3 at priority 5, nobody consuming: the exporter says so."""
    url = fresh_redis_url()
    app = producer_app(url)
    for _ in range(7):
        app.send_task(EMBED_TASK, args=[["waiting"]])
    for _ in range(3):
        app.send_task(EMBED_TASK, args=[["waiting, urgent"]], priority=5)
    with exporter(url) as port:
        metrics = scrape(port)
    assert metrics[("inference_redis_up", ())] == 1
    assert metrics[("inference_queue_depth", (("model", "minilm"), ("priority", "0"), ("queue", "inference")))] == 7
    assert metrics[("inference_queue_depth", (("model", "minilm"), ("priority", "5"), ("queue", "inference")))] == 3
    assert metrics[("inference_queue_depth_total", (("model", "minilm"), ("queue", "inference")))] == 10
    assert metrics[("inference_queue_depth_total", (("model", "minilm"), ("queue", "training")))] == 0
    # Every catalogue model's own queue is watched too (here the built-in minilm's).
    assert metrics[("inference_queue_depth_total", (("model", "minilm"), ("queue", "inference.minilm")))] == 0
    assert metrics[("inference_workers", ())] == 0
    memory = redis_client(url).info("memory")
    # Redis' own figures (the session's redis-server runs without a maxmemory: 0).
    assert metrics[("inference_redis_maxmemory_bytes", ())] == memory["maxmemory"] == 0
    assert 0.5 < metrics[("inference_redis_used_memory_bytes", ())] / memory["used_memory"] < 2


def test_a_producer_waits_for_room_and_gives_up_with_queue_full(fresh_redis_url):
    """producer.wait_for_room returns the depth once the queue holds fewer than the limit; with the queue
    full it raises QueueFull after its timeout (the bulk CLI waits like this before each batch)."""
    url = fresh_redis_url()
    app = producer_app(url)
    for priority in (0, 3, 9):
        app.send_task(EMBED_TASK, args=[["waiting"]], priority=priority)
    assert producer.wait_for_room(app, "inference", 4, timeout=0) == 3
    with pytest.raises(producer.QueueFull, match="holds 3 waiting messages, at or over max_queue_depth=3"):
        producer.wait_for_room(app, "inference", 3, timeout=0.3)


def test_metrics_show_each_childs_threads_and_the_hosts_budget(shipped):
    served = shipped.app.send_task(EMBED_TASK, args=[["count my tokens", "and mine"]]).get(timeout=RESULT_TIMEOUT_S)
    with exporter(shipped.redis_url) as port:
        metrics = scrape(port)
    tokens = [value for (name, labels), value in metrics.items() if name == "inference_tokens_total"]
    assert len(tokens) == 1 and tokens[0] >= served["usage"]["tokens"] > 0
    assert metrics[("inference_workers", ())] == 1
    compute = {labels: value for (name, labels), value in metrics.items() if name == "inference_child_compute_threads"}
    assert sorted(compute.values()) == [1, 1], compute
    os_threads = [value for (name, _), value in metrics.items() if name == "inference_child_os_threads"]
    assert len(os_threads) == 2 and all(value >= 1 for value in os_threads)
    assert [value for (name, _), value in metrics.items() if name == "inference_host_oversubscribed"] == [0]
    assert next(value for (name, _), value in metrics.items() if name == "inference_worker_model_load_seconds") > 0


def test_status_shows_queues_workers_and_the_latest_failure(shipped):
    failed = shipped.app.send_task(EMBED_TASK, args=[["fine", "   "]])
    with pytest.raises(Exception, match="texts"):
        failed.get(timeout=RESULT_TIMEOUT_S)
    done = cli("status", redis_url=shipped.redis_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "inference" in done.stdout and "training" in done.stdout
    assert "workers online: 1" in done.stdout
    assert failed.id in done.stdout
    assert "InvalidInput" in done.stdout


def test_embed_a_file_in_order_resume_it_and_match_the_workers_own_results(shipped, tmp_path):
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS[:5]) + "\n\n" + "\n".join(TEXTS[5:]) + "\n")  # a blank line is skipped
    output = tmp_path / "out.jsonl"
    done = cli("embed", str(source), "-o", str(output), "--batch-size", "3", redis_url=shipped.redis_url)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [record["line"] for record in records] == [1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12]
    expected = shipped.app.send_task(EMBED_TASK, args=[TEXTS]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]
    assert np.allclose([record["embedding"] for record in records], expected, atol=1e-5)

    full = output.read_text()
    lines = full.splitlines(keepends=True)
    output.write_text("".join(lines[:4]) + lines[4][:40])  # a run that died mid-write
    done = cli("embed", str(source), "-o", str(output), "--batch-size", "3", redis_url=shipped.redis_url)
    assert done.returncode == 0, done.stderr
    assert "4 already done" in done.stderr
    resumed = [json.loads(line) for line in output.read_text().splitlines()]
    assert [record["line"] for record in resumed] == [record["line"] for record in records]
    assert np.allclose([r["embedding"] for r in resumed], [r["embedding"] for r in records], atol=1e-5)

    other = tmp_path / "other.txt"
    other.write_text("\n".join(reversed(TEXTS)) + "\n")
    refused = cli("embed", str(other), "-o", str(output), redis_url=shipped.redis_url)
    assert refused.returncode != 0 and "--restart" in refused.stderr


def test_embed_jsonl_to_npy_and_classify_to_jsonl(shipped, tmp_path):
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"id": f"r{i}", "text": text}) + "\n" for i, text in enumerate(TEXTS[:4])))
    vectors_path = tmp_path / "vectors.npy"
    done = cli("embed", str(source), "-o", str(vectors_path), redis_url=shipped.redis_url)
    assert done.returncode == 0, done.stderr
    assert np.load(vectors_path).shape == (4, 384)

    labels_path = tmp_path / "labels.jsonl"
    done = cli(
        "classify", str(source), "-o", str(labels_path), "-l", "refund request", "-l", "praise",
        redis_url=shipped.redis_url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in labels_path.read_text().splitlines()]
    assert [record["id"] for record in records] == ["r0", "r1", "r2", "r3"]
    assert {record["label"] for record in records} == {"refund request"}


def test_a_bad_line_stops_the_run_before_anything_is_sent(shipped, tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps({"text": 3}) + "\n")
    before = redis_client(shipped.redis_url).llen("inference")
    done = cli("embed", str(source), "-o", str(tmp_path / "out.jsonl"), redis_url=shipped.redis_url)
    assert done.returncode != 0
    assert "bad.jsonl:2" in done.stderr
    assert redis_client(shipped.redis_url).llen("inference") == before
