"""Results on a Redis of their own (INFERENCE_RESULT_REDIS_URL): the broker keeps the queues, results
and embed_corpus pages go to the other server, and every reader follows the setting: a real worker,
the Python app, the Ruby client, `status`, `doctor` and the exporter, on a TLS results Redis with a
password beside a plain broker. Results on a Sentinel-managed Redis: tests/worker/test_sentinel_tls.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis

from inference_tasks.app import create_app
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import RESULT_KEY_PREFIX, corpus_page_key
from inference_tasks.routing import EMBED_CORPUS_TASK, EMBED_TASK, INFERENCE_QUEUE, TRAINING_QUEUE
from tests.support.local import clean_env, start_redis
from tests.support.localstack import REPO_ROOT
from tests.support.operator_tools import exporter, scrape
from tests.support.ruby_runner import ruby

PASSWORD = "results-only-password"
RESULT_TIMEOUT_S = 60


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", *args],
        cwd=REPO_ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def result_keys(client: redis.Redis) -> list[bytes]:
    return list(client.scan_iter(f"{RESULT_KEY_PREFIX}*"))


@pytest.mark.worker
@pytest.mark.external
def test_results_on_their_own_tls_redis_and_every_reader(start_worker, fresh_redis_url, tls_files, tmp_path):
    """Broker: a plain database. Results: a TLS redis-server with a password and a private CA. A task's
    result, a stored state and embed_corpus pages land on the results server only; Python and Ruby
    read them there; status, doctor and the exporter report that server, and say so when it is down."""
    broker_url = fresh_redis_url()
    server = start_redis(tmp_path / "results", password=PASSWORD, tls=tls_files)
    results_url = server.url(0)
    settings = {"result_redis_url": results_url, "redis_tls_ca_file": str(tls_files.ca)}
    env = {
        "REDIS_URL": broker_url,
        "INFERENCE_RESULT_REDIS_URL": results_url,
        "INFERENCE_REDIS_TLS_CA_FILE": str(tls_files.ca),
    }
    broker = redis.Redis.from_url(broker_url)
    results = redis.Redis.from_url(results_url, ssl_ca_certs=str(tls_files.ca))
    try:
        # The training queue too: embed_corpus is a training task, refused on an inference queue.
        worker = start_worker(
            concurrency=1, redis_url=broker_url, queues=f"{INFERENCE_QUEUE},{TRAINING_QUEUE}", **settings
        )
        app = create_app(Settings(redis_url=broker_url, **settings))  # type: ignore[arg-type]
        kept = app.send_task(EMBED_TASK, args=[["kept where results live"]])
        assert kept.get(timeout=RESULT_TIMEOUT_S)["dim"] == 384
        corpus = app.send_task(EMBED_CORPUS_TASK, kwargs={"texts": ["one", "two", "three"], "page_size": 2},
                               queue=TRAINING_QUEUE).get(timeout=RESULT_TIMEOUT_S)  # fmt: skip
        from_ruby = ruby("result_redis_embed.rb", broker_url, RESULTS_URL=results_url, CA_FILE=str(tls_files.ca))
        status = cli("status", **env)
        doctor = cli("doctor", "--skip-model", **env)
        with exporter(broker_url, extra_env={key: value for key, value in env.items() if key != "REDIS_URL"}) as port:
            metrics = scrape(port)
            on_the_results_server = result_keys(results)
            on_the_broker = result_keys(broker)
            pages = [results.exists(corpus_page_key(corpus["job_id"], page)) for page in range(corpus["pages"])]
            worker.stop()  # before its result Redis goes
            server.process.terminate()
            server.process.wait(timeout=10)
            metrics_down = scrape(port)
        status_down = cli("status", **env)
    finally:
        if server.process.poll() is None:
            server.process.terminate()
            server.process.wait(timeout=10)
    assert f"{RESULT_KEY_PREFIX}{kept.id}".encode() in on_the_results_server
    assert f"{RESULT_KEY_PREFIX}{corpus['job_id']}".encode() in on_the_results_server
    assert on_the_broker == [], "a result was written to the broker's Redis"
    assert corpus["pages"] == 2 and pages == [1, 1]
    assert broker.exists(corpus_page_key(corpus["job_id"], 0)) == 0
    assert from_ruby == {"dim": 384, "count": 2, "state_after_read": "PENDING", "on_the_broker": False}
    assert status.returncode == 0, status.stdout + status.stderr
    assert "results at rediss://:***@127.0.0.1" in status.stdout
    assert "result redis: reachable" in doctor.stdout and "redis: reachable" in doctor.stdout, doctor.stdout
    assert metrics[("inference_redis_up", ())] == 1 and metrics[("inference_result_redis_up", ())] == 1
    assert metrics[("inference_result_redis_used_memory_bytes", ())] > 0
    assert metrics_down[("inference_result_redis_up", ())] == 0 and metrics_down[("inference_redis_up", ())] == 1
    assert status_down.returncode == 1 and "result Redis unreachable" in status_down.stdout
    assert PASSWORD not in status.stdout + status_down.stdout + doctor.stdout
