"""Delivery features end to end through real workers: priorities, time limits (alone and inside a
micro-batch), revoking queued and running tasks (alone and batched), and lease renewal on the solo
trainer. Each sets up the state it asserts about by checking it (a task STARTED, a revoke
acknowledged by the worker), never by sleeping."""

from __future__ import annotations

import time
import uuid

import pytest
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded

from inference_tasks.redis_access.keys import UNACKED_INDEX_KEY
from inference_tasks.routing import EMBED_TASK, TRAINING_QUEUE
from tests.support.local import redis_client
from tests.support.waiting import wait_until

pytestmark = pytest.mark.worker
RESULT_TIMEOUT_S = 120
PROBES = "tests.support.worker_probes"
# A queue only the solo trainer of the lease case consumes (no model's: any worker may be told to).
SOLO_QUEUE = "solo-leases"


def key(kind: str) -> str:
    return f"{kind}:{uuid.uuid4().hex}"


def started(result) -> bool:
    return result.state == "STARTED"


@pytest.fixture(scope="module")
def plain_worker(start_worker):
    """One child, micro-batching off: the prefetch window is exactly one message, so a busy child means
    nothing more is taken from Redis."""
    return start_worker(concurrency=1, include=PROBES, microbatch_max_texts=0)


@pytest.fixture(scope="module")
def batching_worker(start_worker):
    """One child, micro-batching on with a wait long enough to coalesce tasks sent in a loop."""
    return start_worker(concurrency=1, include=PROBES, microbatch_max_texts=32, microbatch_wait_ms=300)


def test_a_priority_0_task_overtakes_queued_priority_9_tasks(plain_worker):
    """While the only child is busy, five priority-9 tasks are queued, then one priority-0 task: once the
    child is free the priority-0 task runs first, then the others in the order they were sent."""
    app, redis = plain_worker.app, redis_client(plain_worker.redis_url)
    gate, order = key("gate"), key("order")
    busy = app.send_task("tests.wait_for_gate", args=[gate])
    wait_until(lambda: started(busy), RESULT_TIMEOUT_S, "the busy task to start")
    low = [app.send_task("tests.record", args=[order, f"low-{i}"], priority=9) for i in range(5)]
    urgent = app.send_task("tests.record", args=[order, "urgent"], priority=0)
    assert redis.llen("inference:9") == 5 and redis.llen("inference") == 1  # all still waiting in Redis
    redis.rpush(gate, "open")
    for result in [busy, urgent, *low]:
        result.get(timeout=RESULT_TIMEOUT_S)
    assert [item.decode() for item in redis.lrange(order, 0, -1)] == ["urgent"] + [f"low-{i}" for i in range(5)]


def test_soft_and_hard_time_limits_fail_the_task_and_the_worker_serves_on(plain_worker):
    """soft_time_limit raises SoftTimeLimitExceeded in the task (FAILURE); a task that ignores it is killed
    at time_limit (FAILURE, TimeLimitExceeded) and its child replaced; the next task is served."""
    app = plain_worker.app
    soft = app.send_task("tests.hold", args=[key("soft"), 60.0], soft_time_limit=1, time_limit=10)
    with pytest.raises(SoftTimeLimitExceeded):
        soft.get(timeout=RESULT_TIMEOUT_S)
    hard = app.send_task("tests.outlast_soft_limit", args=[60.0], soft_time_limit=1, time_limit=3)
    with pytest.raises(TimeLimitExceeded):
        hard.get(timeout=RESULT_TIMEOUT_S)
    assert soft.state == hard.state == "FAILURE"
    wait_until(lambda: "Hard time limit (3" in plain_worker.log(), 30, "the worker's hard time limit log line")
    assert len(app.send_task(EMBED_TASK, args=[["after the limits"]]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1


def test_time_limits_on_a_micro_batch_fail_every_task_in_it(batching_worker):
    """Three coalesced tasks held while the child is busy go out as one batch job, which runs past the
    tasks' limits (soft 2 s, hard 3 s: Celery arms the hard limit only once the soft one fired, so a
    time_limit below the default soft limit needs its own soft_time_limit): the worker logs the hard
    limit for each of the three, each is FAILURE with a time-limit error, none runs twice, and the
    worker serves on."""
    app, redis = batching_worker.app, redis_client(batching_worker.redis_url)
    never = key("gate")  # never opened: each first attempt waits until stopped
    limits = {"soft_time_limit": 2, "time_limit": 3}
    first = app.send_task("tests.coalesced_wait", args=[["first"], key("attempts"), never], **limits)
    wait_until(lambda: started(first), RESULT_TIMEOUT_S, "the first task to run (alone: the child was idle)")
    markers = [key("attempts") for _ in range(3)]
    batch = [
        app.send_task("tests.coalesced_wait", args=[[f"text {i}"], marker, never], **limits)
        for i, marker in enumerate(markers)
    ]
    for result in [first, *batch]:
        with pytest.raises((SoftTimeLimitExceeded, TimeLimitExceeded)):
            result.get(timeout=RESULT_TIMEOUT_S)
    wait_until(lambda: "coalesced 3 tasks" in batching_worker.log(), 30, "the batch")
    for result in batch:
        hard = f"Hard time limit (3s) exceeded for tests.coalesced_wait[{result.id}]"
        wait_until(lambda hard=hard: hard in batching_worker.log(), 30, "the hard limit's log line")
    assert {result.state for result in batch} == {"FAILURE"}
    # The batch ran its tasks in order until the limits stopped it; none was requeued and run again.
    attempts = [redis.llen(marker) for marker in markers]
    assert attempts[0] == 1 and all(count <= 1 for count in attempts), attempts
    assert len(app.send_task(EMBED_TASK, args=[["served on"]]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1


def test_a_revoked_queued_task_never_runs(plain_worker):
    """A task revoked while it waits in the queue (the worker confirms the revoke) is REVOKED and never
    runs; the task sent after it runs."""
    app, redis = plain_worker.app, redis_client(plain_worker.redis_url)
    gate, order = key("gate"), key("order")
    busy = app.send_task("tests.wait_for_gate", args=[gate])
    wait_until(lambda: started(busy), RESULT_TIMEOUT_S, "the busy task to start")
    doomed = app.send_task("tests.record", args=[order, "revoked"])
    replies = app.control.revoke(doomed.id, reply=True, timeout=10, limit=1)
    assert replies and all("ok" in reply for answer in replies for reply in answer.values()), replies
    after = app.send_task("tests.record", args=[order, "after"])
    redis.rpush(gate, "open")
    assert after.get(timeout=RESULT_TIMEOUT_S) == "after"
    wait_until(lambda: doomed.state == "REVOKED", 30, "the revoked task's REVOKED state")
    assert [item.decode() for item in redis.lrange(order, 0, -1)] == ["after"]
    assert plain_worker.successes()[doomed.id] == 0


def test_revoke_terminate_stops_a_running_task(plain_worker):
    """revoke(terminate=True) with Celery's default signal stops the running task (children ignore TERM,
    so the pool sends SIGKILL): REVOKED, never SUCCESS, and the worker serves on with a new child."""
    app = plain_worker.app
    running = app.send_task("tests.wait_for_gate", args=[key("gate"), 60.0])
    wait_until(lambda: started(running), RESULT_TIMEOUT_S, "the task to start")
    pid = running.backend.get_task_meta(running.id)["result"]["pid"]
    app.control.revoke(running.id, terminate=True, reply=True, timeout=10, limit=1)
    wait_until(lambda: running.state == "REVOKED", 30, "REVOKED")
    wait_until(lambda: pid not in plain_worker.child_pids(), 30, "the child running it to be gone")
    assert len(app.send_task(EMBED_TASK, args=[["served on"]]).get(timeout=RESULT_TIMEOUT_S)["embeddings"]) == 1
    assert plain_worker.successes()[running.id] == 0


def test_revoke_terminate_of_a_batched_task_ends_its_batch_and_the_others_run_again(batching_worker):
    """A batch of three coalesced tasks is running; one is revoked with terminate: the batch's child is
    killed, the revoked task is REVOKED, and its two batch-mates (Celery would have marked them REVOKED
    too) go back to the queue, are delivered again and succeed."""
    app, redis = batching_worker.app, redis_client(batching_worker.redis_url)
    gate = key("gate")
    first = app.send_task("tests.coalesced_wait", args=[["first"], key("attempts"), gate])
    wait_until(lambda: started(first), RESULT_TIMEOUT_S, "the first task to run alone")
    markers = [key("attempts") for _ in range(3)]
    batch = [app.send_task("tests.coalesced_wait", args=[[f"t{i}"], m, gate]) for i, m in enumerate(markers)]
    # Held by the worker before the child frees, or a loaded host's child takes a batch of fewer.
    held = lambda: all(f"Task tests.coalesced_wait[{r.id}] received" in batching_worker.log() for r in batch)  # noqa: E731
    wait_until(held, RESULT_TIMEOUT_S, "the worker to hold the three tasks")
    redis.rpush(gate, "open")  # frees the first task only (one BLPOP takes it)
    assert first.get(timeout=RESULT_TIMEOUT_S)["attempt"] == 1
    # A batch's STARTED states are all written as it begins; its first task's own record of its
    # attempt says the task body is running (and waiting on the gate).
    wait_until(lambda: redis.llen(markers[0]) == 1, RESULT_TIMEOUT_S, "the batch's first task to wait on the gate")
    assert all(started(result) for result in batch)
    assert "coalesced 3 tasks" in batching_worker.log()
    app.control.revoke(batch[1].id, terminate=True, reply=True, timeout=10, limit=1)
    wait_until(lambda: batch[1].state == "REVOKED", 30, "REVOKED")
    redis.rpush(gate, "open", "open")  # a batch-mate that had not started yet waits on its first attempt
    survivors = [batch[0], batch[2]]
    outcomes = [result.get(timeout=RESULT_TIMEOUT_S) for result in survivors]
    assert outcomes[0]["attempt"] == 2  # it was running in the killed batch: its second attempt
    for result in survivors:
        assert batching_worker.log().count(f"Task tests.coalesced_wait[{result.id}] received") == 2
    assert batching_worker.successes()[batch[1].id] == 0


def test_the_solo_trainer_renews_its_lease_while_a_job_outlasts_the_visibility_timeout(start_worker):
    """A solo-pool trainer runs a job that holds its main thread until the test opens a gate, with a 3 s
    visibility timeout; a second trainer, on another queue, sweeps for expired leases every second (the
    sweep covers every queue's unacked messages): for a visibility timeout and two sweeps the lease-renewal
    thread keeps the message, so it never goes back to its queue nor runs twice."""
    leases = {"visibility_timeout_s": 3, "lease_renew_interval_s": 1}
    solo = start_worker(queues=SOLO_QUEUE, pool="solo", include=PROBES, wait_ready=False, **leases)
    sweeper = start_worker(
        queues=TRAINING_QUEUE, concurrency=1, profile="trainer", include=PROBES, redis_url=solo.redis_url,
        wait_ready=False, **leases,
    )  # fmt: skip
    solo.wait_ready()
    sweeper.wait_ready()
    marker, gate = key("attempts"), key("gate")
    job = solo.app.send_task("tests.hold_until_gate", args=[marker, gate], queue=SOLO_QUEUE)
    redis = redis_client(solo.redis_url)
    wait_until(lambda: redis.llen(marker), RESULT_TIMEOUT_S, "the job to start on the solo trainer")
    # Proven once the lease was renewed past a visibility timeout plus two sweeps from now: by then an
    # unrenewed message would have been put back on its queue (where the solo trainer, busy, leaves it).
    proven_after = time.time() + 3 + 2

    def renewed_past_the_window() -> bool:
        assert redis.llen(SOLO_QUEUE) == 0 and redis.llen(marker) == 1, "the job went back to its queue"
        leases = [score for _, score in redis.zrange(UNACKED_INDEX_KEY, 0, -1, withscores=True)]
        return bool(leases) and min(leases) >= proven_after

    wait_until(renewed_past_the_window, 30, "the job's lease to be renewed past the visibility window")
    redis.rpush(gate, "open")
    outcome = job.get(timeout=RESULT_TIMEOUT_S)
    assert outcome["attempt"] == 1 and outcome["opened"]
    assert redis.llen(marker) == 1
    ran = lambda: solo.successes()[job.id] + sweeper.successes()[job.id]  # noqa: E731
    wait_until(ran, 30, "the job's success log line")
    assert ran() == 1 and solo.successes()[job.id] == 1
