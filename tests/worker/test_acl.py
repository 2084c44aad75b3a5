"""Least-privilege Redis users (`inference-tasks acl`) on a real redis-server loaded with the file:
the whole stack works under them (the README's plain `celery -A inference_tasks worker` and the
`inference-tasks trainer` preset, both with Celery's gossip and mingle on; the Python app and the
Ruby client as producers; the exporter, `status` and Flower as the operator), a producer is refused
what it must not do, and a worker whose user lacks a grant stops naming the user and what Redis
refused."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest
import redis

from inference_tasks.ops.acl import ROLES, role_rules
from inference_tasks.producer import collect, send
from inference_tasks.redis_access.keys import UNACKED_KEY, classifier_key
from inference_tasks.routing import EMBED_TASK, TRAIN_CLASSIFIER_TASK, TRAINING_QUEUE
from tests.support.gateway import running_gateway
from tests.support.local import clean_env, running_flower
from tests.support.localstack import PLAIN_WORKER, PRESET_TRAINER, REPO_ROOT, producer_app, start_redis
from tests.support.operator_tools import exporter, flower_api, scrape
from tests.support.ruby_runner import ruby
from tests.support.tickets import dataset
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker

PASSWORDS = {role: f"{role}-secret-{index}" for index, role in enumerate(ROLES)}
ADMIN = "user admin on >admin-secret ~* &* +@all\n"  # the tests' own; the file keeps default off
RESULT_TIMEOUT_S = 120


def acl_redis(workdir, *options: str, extra_users: str = ""):
    """A redis-server loaded with `inference-tasks acl <options>` (fixed passwords) plus an admin and
    `extra_users` (aclfile lines)."""
    environment = {f"INFERENCE_ACL_PASSWORD_{role.upper()}": password for role, password in PASSWORDS.items()}
    printed = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "acl", *options],
        cwd=REPO_ROOT, env=clean_env(**environment), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert printed.stderr == ""  # no password was generated, so none is printed
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "users.acl").write_text(printed.stdout + ADMIN + extra_users)
    return start_redis(workdir, extra_args=("--aclfile", str(workdir / "users.acl")))


def url(server, role: str, db: int = 0) -> str:
    return f"redis://inference-{role}:{PASSWORDS[role]}@127.0.0.1:{server.port}/{db}"


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    server = acl_redis(tmp_path_factory.mktemp("acl"))
    yield server
    server.process.terminate()
    server.process.wait(timeout=10)


@pytest.fixture(scope="module")
def acl_worker(start_worker, acl_server):
    """The README's plain `celery -A inference_tasks worker` (gossip on: its event queue and pattern
    are in the worker's grants) under inference-worker."""
    worker = start_worker(concurrency=1, redis_url=url(acl_server, "worker"), command=PLAIN_WORKER)
    yield worker
    gc.collect()  # the tests' results unsubscribe (their finalizers) while their Redis still answers
    worker.stop()  # before its Redis goes


def test_generated_passwords_are_printed_once_and_only_hashes_are_in_the_file():
    made = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "acl"], cwd=REPO_ROOT, env=clean_env(),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    passwords = [line.rsplit(" ", 1)[1] for line in made.stderr.splitlines()]
    assert len(passwords) == len(ROLES) == 6 and not any(password in made.stdout for password in passwords)
    assert made.stdout.splitlines()[0] == "user default off"
    assert "~training" not in role_rules("producer") and "~training" in role_rules("producer", producer_trains=True)


@pytest.mark.external
def test_producers_enqueue_and_read_results_and_are_refused_the_rest(acl_server, acl_worker):
    app = producer_app(url(acl_server, "producer"))
    result = send(app, EMBED_TASK, args=[["under an ACL user"]], max_queue_depth=100)
    assert len(collect(result, RESULT_TIMEOUT_S)["embeddings"]) == 1
    from_ruby = ruby("durable_push.rb", url(acl_server, "producer"), TASK_ID="acl-ruby-1", WAIT="1")
    assert len(from_ruby["value"]["embeddings"]) == 1  # (not durable here: no replica, so NotReplicated)
    producer = redis.Redis.from_url(url(acl_server, "producer"))
    refused = {}
    for what, call in {
        "FLUSHALL": producer.flushall,
        "CONFIG GET": lambda: producer.config_get("maxmemory"),
        "writing a head": lambda: producer.set(classifier_key("spam", "latest"), "{}"),
        "pushing to the training queue": lambda: producer.lpush(TRAINING_QUEUE, "{}"),
        "reading the unacked records": lambda: producer.hgetall(UNACKED_KEY),
        "KEYS": lambda: producer.keys("*"),
    }.items():
        with pytest.raises(redis.exceptions.NoPermissionError) as error:
            call()
        refused[what] = str(error.value)
    assert all("NOPERM" in message or "no permissions" in message for message in refused.values()), refused


def test_the_gateway_serves_and_reports_health_under_its_user(acl_server, acl_worker, tmp_path):
    """`inference-tasks gateway` as inference-gateway: an embedding through the queue (push, subscribe, read,
    delete) and /health's broadcast answered by the worker; the user may not push to the training queue."""
    tenants = tmp_path / "tenants.toml"
    tenants.write_text('[tenants.acl]\nkeys = ["acl-key"]\nrequests_per_minute = 100\nmax_in_flight = 4\n')
    settings = {"INFERENCE_GATEWAY_MODELS": "minilm", "INFERENCE_GATEWAY_HEALTH_TTL_S": "0",
                "INFERENCE_GATEWAY_TENANTS_FILE": str(tenants)}  # fmt: skip
    with running_gateway(url(acl_server, "gateway"), tmp_path, **settings) as gateway:
        status, _, body = gateway.request(
            "POST", "/v1/embeddings", {"input": ["under the gateway's user"]}, key="acl-key"
        )
        assert status == 200 and len(body["data"][0]["embedding"]) == 384, body
        status, _, health = gateway.request("GET", "/health")
        assert status == 200 and health["models"]["minilm"], health
    usage = subprocess.run([sys.executable, "-m", "inference_tasks.ops.cli", "usage", "--json"],
                           env=clean_env(REDIS_URL=url(acl_server, "operator")), capture_output=True, text=True,
                           timeout=60, check=True)  # fmt: skip
    assert json.loads(usage.stdout) == [{"tenant": "acl", "model": "minilm", "requests": 1, "texts": 1,
                                         "tokens": body["usage"]["total_tokens"]}], usage.stdout  # fmt: skip
    with pytest.raises(redis.exceptions.NoPermissionError):
        redis.Redis.from_url(url(acl_server, "gateway")).hgetall(classifier_key("spam", "latest"))


def test_the_worker_user_may_be_woken_on_push(acl_server, acl_worker):
    """Its grants include client-side tracking and the notices' channel (broker/wakeup.py): the idle
    worker tracks its lists under its own user, and never logs the fallback; and the PUBLISH that lets
    a worker alone skip mingle's wait."""
    app = producer_app(url(acl_server, "producer"))
    assert len(collect(send(app, EMBED_TASK, args=[["then idle"]], priority=5), RESULT_TIMEOUT_S)["embeddings"]) == 1
    admin = redis.Redis.from_url(f"redis://admin:admin-secret@127.0.0.1:{acl_server.port}/0")

    def tracking() -> list[str]:
        lines = admin.execute_command("CLIENT", "LIST").decode().splitlines()
        return [line for line in lines if "user=inference-worker" in line and "t" in line.split("flags=")[1].split()[0]]

    wait_until(lambda: tracking(), 30, "the idle worker's tracking connection")
    assert "refused client-side tracking" not in acl_worker.log()
    # And its count of listeners on the broadcast channel (worker/celery_ext/mingle.py) is granted: alone,
    # it started without mingle's wait instead of falling back to it.
    assert "starting without mingle" in acl_worker.log()


def test_the_operators_tools_work_under_the_operator_user(acl_server, acl_worker):
    operator = url(acl_server, "operator")
    with exporter(operator) as port:
        metrics = scrape(port)
    status = subprocess.run(
        [sys.executable, "-m", "inference_tasks.ops.cli", "status"],
        cwd=REPO_ROOT, env=clean_env(REDIS_URL=operator), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    with running_flower([], operator, FLOWER_UNAUTHENTICATED_API="true") as (_, port):
        workers = flower_api(port, "/api/workers?refresh=1")
    assert metrics[("inference_redis_up", ())] == 1 and metrics[("inference_workers", ())] >= 1
    assert status.returncode == 0, status.stdout + status.stderr
    assert workers, "Flower saw no worker"
    denied = redis.Redis.from_url(operator)
    for call in (denied.flushall, lambda: denied.set(classifier_key("spam", "latest"), "{}"),
                 lambda: denied.delete("inference-tasks:dead-letter")):  # fmt: skip
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()


def test_the_trainer_trains_under_its_user_when_producers_may_train(tmp_path, start_worker):
    server = acl_redis(tmp_path / "acl-trains", "--producer-trains")
    trainer = None
    try:
        trainer = start_worker(redis_url=url(server, "trainer"), command=PRESET_TRAINER)
        app = producer_app(url(server, "producer"))
        texts, labels = dataset()
        kwargs = {"name": "acl-head", "texts": texts[:120], "labels": labels[:120]}
        trained = collect(send(app, TRAIN_CLASSIFIER_TASK, kwargs=kwargs), 300)
        stored = redis.Redis.from_url(url(server, "worker")).get(classifier_key("acl-head", "latest"))
    finally:
        if trainer is not None:
            trainer.stop()
        server.process.terminate()
        server.process.wait(timeout=10)
    assert trained["version"] == 1 and stored is not None  # written by the trainer, readable by workers


def test_a_worker_whose_user_lacks_a_grant_stops_naming_the_user_and_what_was_refused(tmp_path, start_worker):
    """A user made from an older aclfile (the worker's grants without gossip's event queue): the plain
    worker exits 1 with a message naming the user, the refused command and key, and where the grants
    come from, not Celery's "Unrecoverable error: auth:NoPermissionError" alone."""
    stale = role_rules("worker").replace(" ~celeryev.*", "")
    assert stale != role_rules("worker")
    server = acl_redis(tmp_path / "acl-stale", extra_users=f"user stale-worker on >stale {stale}\n")
    try:
        stale_url = f"redis://stale-worker:stale@127.0.0.1:{server.port}/0"
        worker = start_worker(concurrency=1, redis_url=stale_url, command=PLAIN_WORKER, wait_ready=False)
        wait_until(lambda: worker.process.poll() is not None, 120, "the worker to exit")
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    assert worker.process.returncode == 1
    log = worker.log()
    assert "MissingRedisGrant" in log and "Redis refused user 'stale-worker'" in log, log[-3000:]
    assert "LLEN celeryev." in log and "`inference-tasks acl` prints for role worker" in log
