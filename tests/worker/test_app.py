"""The Celery configuration contract, and the app against password and TLS Redis servers."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import pytest
from celery import Celery

from inference_tasks.app import TASK_MODULES, celery_conf, create_app, is_inference_app
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import queue_keys
from inference_tasks.routing import EMBED_TASK, INFERENCE_QUEUE, WORKER_INFO_TASK
from tests.support.local import clean_env, start_redis
from tests.support.localstack import REPO_ROOT


def test_wire_format_is_json_only():
    """Messages and results are JSON; no other content type is accepted."""
    conf = create_app(Settings()).conf
    assert conf.accept_content == ["json"]
    assert conf.result_accept_content == ["json", "application/x-inference-json"]
    assert (conf.task_serializer, conf.result_serializer) == ("json", "inference-json")


def test_delivery_settings_never_lose_a_task_to_a_dead_child():
    """Late acks, requeue on worker loss, one prefetched task per child, leases renewed well within
    the visibility timeout and swept as often."""
    settings = Settings(max_tasks_per_child=77, max_memory_per_child_mb=512, result_expires_s=99)
    conf = create_app(settings).conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    options = conf.broker_transport_options
    assert options["visibility_timeout"] >= 3 * settings.lease_renew_interval_s
    assert options["unacked_restore_interval"] == settings.lease_renew_interval_s
    assert options["unacked_restore_throttle"] == 1
    assert conf.task_time_limit > conf.task_soft_time_limit
    assert conf.worker_max_tasks_per_child == 77
    assert conf.worker_max_memory_per_child == 512 * 1024
    assert conf.result_expires == 99
    assert create_app(Settings(max_tasks_per_child=0)).conf.worker_max_tasks_per_child is None
    assert conf.worker_pool == "inference_tasks.worker.celery_ext.pool:TaskPool"  # what `--pool prefork` selects


def test_plain_worker_consumes_only_its_models_queues(tmp_path):
    """Only the served model's queues are declared (never training), and the public tasks route to
    `inference`: the default model's `inference` and `inference.minilm`; another model's own alone."""
    conf = create_app(Settings()).conf
    assert [queue.name for queue in conf.task_queues] == [INFERENCE_QUEUE, "inference.minilm"]
    assert conf.task_routes[EMBED_TASK] == {"queue": INFERENCE_QUEUE}
    (tmp_path / "models.toml").write_text("[models.e5]\n")
    other = create_app(Settings(models_file=str(tmp_path / "models.toml"), model="e5")).conf
    assert [queue.name for queue in other.task_queues] == ["inference.e5"]


def test_priority_lists_have_readable_names():
    """Priority n of queue q waits in the Redis list 'q:n' (0 is the bare name, served first)."""
    assert queue_keys("inference")[:3] == ["inference", "inference:1", "inference:2"]


def test_rediss_urls_get_certificate_checks_for_broker_and_backend():
    """rediss:// turns on TLS for both the broker and the result backend, verifying by default."""
    conf = celery_conf(Settings(redis_url="rediss://:pw@cache:6380/0", redis_tls_ca_file="/etc/ca.pem"))
    expected = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": "/etc/ca.pem"}
    assert conf["broker_use_ssl"] == expected
    assert conf["redis_backend_use_ssl"] == expected
    assert "broker_use_ssl" not in celery_conf(Settings())


PASSWORD = "correct-horse-battery-staple"


@pytest.mark.worker
def test_worker_serves_through_a_password_protected_tls_redis(start_worker, tls_files, tmp_path):
    """rediss:// with a password and a private CA: a real worker embeds, and the password never
    appears in its log or in worker_info."""
    server = start_redis(tmp_path / "redis-tls", password=PASSWORD, tls=tls_files)
    try:
        worker = start_worker(concurrency=1, redis_url=server.url(0), redis_tls_ca_file=str(tls_files.ca))
        client = create_app(Settings(redis_url=server.url(0), redis_tls_ca_file=str(tls_files.ca)))
        result = client.send_task(EMBED_TASK, args=[["over TLS"]]).get(timeout=60)
        info = client.send_task(WORKER_INFO_TASK).get(timeout=60)
        worker.stop()
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    assert result["dim"] == 384
    assert info["redis_url"].startswith("rediss://:***@127.0.0.1:")
    assert PASSWORD not in str(info)
    assert PASSWORD not in worker.log()
    assert "rediss://" in worker.log()


@pytest.mark.worker
@pytest.mark.external
def test_the_whole_stack_serves_over_tls(start_worker, tls_files, tmp_path):
    """rediss:// end to end with a private CA: a worker, the Python app, the Ruby client (refused
    without the CA), the exporter, `status` and Flower, all on one TLS Redis with a password."""
    from tests.support.local import running_flower
    from tests.support.operator_tools import exporter, flower_api, scrape
    from tests.support.ruby_runner import ruby

    server = start_redis(tmp_path / "redis-tls", password=PASSWORD, tls=tls_files)
    ca = {"INFERENCE_REDIS_TLS_CA_FILE": str(tls_files.ca)}
    try:
        url = server.url(0)
        worker = start_worker(concurrency=1, redis_url=url, redis_tls_ca_file=str(tls_files.ca))
        app = create_app(Settings(redis_url=url, redis_tls_ca_file=str(tls_files.ca)))
        python = app.send_task(EMBED_TASK, args=[["over TLS, from Python"]]).get(timeout=60)
        from_ruby = ruby("tls_embed.rb", url, CA_FILE=str(tls_files.ca))
        with exporter(url, extra_env=ca) as port:
            metrics = scrape(port)
        status = subprocess.run(
            [sys.executable, "-m", "inference_tasks.ops.cli", "status"],
            cwd=REPO_ROOT, env=clean_env(REDIS_URL=url, **ca), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        with running_flower([], url, FLOWER_UNAUTHENTICATED_API="true", **ca) as (_, port):
            flower_workers = flower_api(port, "/api/workers?refresh=1")
        worker.stop()
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    assert python["dim"] == 384
    # Without the test's CA the same URL fails its TLS handshake: certificate verification is on.
    assert from_ruby == {"dim": 384, "count": 1, "without_the_ca": "OpenSSL::SSL::SSLError"}
    assert metrics[("inference_redis_up", ())] == 1 and metrics[("inference_workers", ())] >= 1
    assert status.returncode == 0, status.stdout + status.stderr
    assert any(name.startswith(worker.name) or worker.name in name for name in flower_workers)
    assert PASSWORD not in status.stdout + status.stderr


PRODUCER_SIDE = """
import json, sys
import inference_tasks
from celery import signals
app = inference_tasks.app
result = app.send_task("inference.embed", args=[["a producer's text"]])
hooks = ["worker_init", "worker_ready", "worker_process_init", "worker_process_shutdown",
         "task_prerun", "task_postrun", "task_failure", "task_success"]
print(json.dumps({
    "receivers": {name: len(getattr(signals, name).receivers) for name in hooks},
    "worker_modules": sorted(m for m in sys.modules if m == "torch" or m.startswith((
        "inference_tasks.worker", "inference_tasks.worker.batching", "inference_tasks.ml",
        "inference_tasks.broker.leases", "inference_tasks.ops.cli", "inference_tasks.ops.doctor"))),
    "sent": result.id is not None,
}))
"""


def test_a_producer_imports_no_worker_hook_and_allocates_nothing(redis_server):
    """Importing inference_tasks and sending a task (as a producer, Flower or the CLI does) connects no
    Celery signal receiver and imports none of the worker's modules (hooks, the pool's shared memory,
    the remote-control command, the task bodies, torch)."""
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER_SIDE],
        cwd=REPO_ROOT,
        env=clean_env(REDIS_URL=redis_server.url(0)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["sent"] is True
    assert set(report["receivers"].values()) == {0}, report["receivers"]
    assert report["worker_modules"] == []


def test_the_worker_imports_its_hooks_first_and_they_act_only_for_this_app():
    """The worker's loader imports `include` before sending worker_init: signals.py comes first; its hooks
    skip any other Celery app in the same process."""
    assert TASK_MODULES[0] == "inference_tasks.worker.lifecycle.signals"
    ours = create_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    assert is_inference_app(ours)
    assert not is_inference_app(Celery("someone-else"))
    # Through a proxy like the current_app the hooks read in worker_process_init.
    from celery.local import Proxy

    assert is_inference_app(Proxy(lambda: ours))
    assert not is_inference_app(Proxy(lambda: Celery("someone-else")))


def test_a_sentinel_connection_never_switches_to_kombus_own_transport():
    """kombu's URL failover (Connection.switch) re-parses the next sentinel:// part into kombu's own
    SentinelTransport; after a failover the worker then consumed without screening or the atomic
    take (found by the chaos soak). The app's failover strategy never switches."""
    urls = "sentinel://127.0.0.1:1;sentinel://127.0.0.1:2;sentinel://127.0.0.1:3"
    connection = create_app(Settings(redis_url=urls, redis_sentinel_master="m")).connection_for_write()
    assert connection.transport_cls == "inference_tasks.broker.transport:SentinelTransport"
    assert connection.alt == urls.split(";")  # kombu's SentinelChannel still asks every sentinel
    connection.maybe_switch_next()
    assert connection.transport_cls == "inference_tasks.broker.transport:SentinelTransport"
    assert (connection.hostname, connection.port) == ("127.0.0.1", 1)
