"""The gem's blocking calls wake when the result is stored (deploy/rails/lib/inference_tasks/result_waiter.rb),
on a real Redis with the result written by this project's own result backend (the worker's write and
PUBLISH): stored before the wait begins, during it (after a STARTED), never (the timeout, with nothing
left subscribed or open, also while states keep coming), a failure, a refused push, and a Sentinel
failover in the middle of a wait."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from celery import states

from inference_tasks.app import create_app
from inference_tasks.config import Settings
from inference_tasks.redis_access.keys import RESULT_KEY_PREFIX
from tests.support.local import clean_env, redis_client
from tests.support.ruby_runner import RUBY_DIR, need, ruby
from tests.support.sentinel import start_sentinel_cluster
from tests.support.waiting import wait_until

VALUE = {"model": "stored-by-python", "dim": 2, "embeddings": [[0.6, 0.8]]}


def store(url: str, task_id: str, state: str, result: object, **settings: object) -> None:
    """Store a state as a worker does: our result backend's write and PUBLISH."""
    app = create_app(Settings(redis_url=url, **settings))  # type: ignore[arg-type]
    app.backend.store_result(task_id, result, state)


def waiting_ruby(url: str, task_id: str, timeout_s: float, **env: str) -> subprocess.Popen[str]:
    command = [need("ruby"), str(RUBY_DIR / "wait_for_result.rb")]
    environment = clean_env(REDIS_URL=url, TASK_ID=task_id, TIMEOUT=str(timeout_s), **env)
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report_of(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def wait_for_subscriber(client, task_id: str) -> None:
    channel = RESULT_KEY_PREFIX + task_id
    wait_until(lambda: dict(client.pubsub_numsub(channel)).get(channel.encode(), 0) == 1, 30, "the gem to subscribe")


def test_a_result_stored_before_the_wait_is_returned_and_deleted(fresh_redis_url):
    url = fresh_redis_url()
    store(url, "stored-before", states.SUCCESS, VALUE)
    [outcome] = ruby("wait_for_result.rb", url, TASK_ID="stored-before", TIMEOUT="5")["outcomes"]
    assert outcome["value"] == VALUE
    assert redis_client(url).exists(RESULT_KEY_PREFIX + "stored-before") == 0


def test_a_result_stored_during_the_wait_wakes_it_after_a_started(fresh_redis_url):
    """The wait is subscribed before anything is stored; a STARTED does not end it; the SUCCESS does,
    and its connection goes back to the pool, unsubscribed."""
    url = fresh_redis_url()
    client = redis_client(url)
    process = waiting_ruby(url, "stored-during", 30)
    wait_for_subscriber(client, "stored-during")
    store(url, "stored-during", states.STARTED, {"pid": 1})
    wait_for_subscriber(client, "stored-during")  # subscribed again after the STARTED
    store(url, "stored-during", states.SUCCESS, VALUE)
    report = report_of(process)
    [outcome] = report["outcomes"]
    assert outcome["value"] == VALUE and outcome["waited_s"] < 30
    assert report["idle_connections"] == 1 and report["subscribers"] == 0
    assert report["connections"] == 2  # the client's own and the pooled subscriber connection
    assert client.exists(RESULT_KEY_PREFIX + "stored-during") == 0


def test_a_failure_is_raised_and_a_wait_that_never_ends_times_out_leaving_nothing_open(fresh_redis_url):
    url = fresh_redis_url()
    store(url, "failed", states.FAILURE, ValueError("texts must be a list"))
    [failed] = ruby("wait_for_result.rb", url, TASK_ID="failed", TIMEOUT="5")["outcomes"]
    assert failed["error"] == "InferenceTasks::TaskFailed" and "texts must be a list" in failed["message"]

    report = ruby("wait_for_result.rb", url, TASK_ID="never", TIMEOUT="0.2", REPEAT="10")
    assert [outcome["error"] for outcome in report["outcomes"]] == ["InferenceTasks::Timeout"] * 10
    assert all(0.2 <= outcome["waited_s"] < 2 for outcome in report["outcomes"]), report
    # A timed-out subscription is closed, never pooled: only the client's own connection is open.
    assert report["idle_connections"] == 0 and report["subscribers"] == 0 and report["connections"] == 1


def test_states_that_keep_coming_do_not_stretch_the_timeout(fresh_redis_url):
    """A task that keeps publishing STARTED (as a progress-reporting task would) restarts the read timeout
    of a subscription with every message; the wait still ends at its own deadline, not when they stop."""
    url = fresh_redis_url()
    client = redis_client(url)
    process = waiting_ruby(url, "still-running", 1)
    wait_for_subscriber(client, "still-running")
    publishing_until = time.monotonic() + 10
    while process.poll() is None and time.monotonic() < publishing_until:
        store(url, "still-running", states.STARTED, {"pid": 1})
        threading.Event().wait(0.05)  # the pace of the states, not a wait for anything
    [outcome] = report_of(process)["outcomes"]
    assert outcome["error"] == "InferenceTasks::Timeout" and 1 <= outcome["waited_s"] < 3, outcome


def test_a_refused_push_raises_and_leaves_nothing_subscribed(fresh_redis_url):
    """A blocking call whose push is refused (the queue at max_queue_depth) raises QueueFull at once, before
    any subscription."""
    url = fresh_redis_url()
    client = redis_client(url)
    client.lpush("inference", b"{}")
    report = ruby("wait_for_result.rb", url, TASK_ID="refused", TIMEOUT="30", PUSH="1", MAX_DEPTH="1")
    [outcome] = report["outcomes"]
    assert outcome["error"] == "InferenceTasks::QueueFull" and outcome["waited_s"] < 5
    assert report["idle_connections"] == 0 and report["subscribers"] == 0 and client.llen("inference") == 1


@pytest.mark.timeout(180)
def test_a_wait_survives_a_sentinel_failover_in_its_middle(tmp_path):
    """The gem subscribed on the primary; the primary is killed; the result is stored on the promoted
    one; the wait (subscribed again through the sentinels) returns it."""
    cluster = start_sentinel_cluster(tmp_path / "sentinel")
    try:
        url = cluster.url()
        ports = ",".join(str(port) for port, _ in cluster.sentinels)
        first_primary = cluster.master_port()
        process = waiting_ruby(url, "across", 60, SENTINEL_PORTS=ports, SENTINEL_MASTER=cluster.master_name)
        wait_for_subscriber(redis_client(cluster.primary.url()), "across")
        cluster.kill_primary()
        wait_until(lambda: cluster.master_port() not in (None, first_primary), 60, "a replica to be promoted")
        store(url, "across", states.SUCCESS, VALUE, redis_sentinel_master=cluster.master_name)
        [outcome] = report_of(process)["outcomes"]
        assert outcome["value"] == VALUE
    finally:
        cluster.stop()
